"""The code-swapped proxy: a marked plain function runs as its own code on the reference.

What a user sees: the marked function is a function (``inspect``, ``help()``,
pickle, methods, ``functools.wraps``); on the reference, outside blocks, a call
runs the library's own code and nothing of coheriq's (a profiler sees one
call); in every other state (an engine, a block here or in another thread, a
profile, a verification) calls run what they ran before, also while other
threads swap the code under them. Candidates that are not plain functions keep
the dispatcher, and ``explain`` says so.
"""

from __future__ import annotations

import asyncio
import dis
import functools
import importlib
import inspect
import os
import pickle
import pydoc
import sys
import threading

import pytest

import coheriq as cq
from conftest import memory_grown

pytestmark = pytest.mark.skipif(
    os.environ.get("COHERIQ_SWAP_CODE") == "0",
    reason="COHERIQ_SWAP_CODE=0: plain functions get the dispatcher in this run",
)

TIMEOUT = 60  # seconds a thread of these tests may take: a hang fails, never blocks


def halve(x):
    """Half of ``x``: a module-level candidate, so that pickle can find it."""
    return x / 2


def make_domain(name):
    """A domain with a plain-function candidate and engines 'fast' and 'slow'."""
    domain = cq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def scale(x, *, by=2):
        """Scale ``x``."""
        return ("reference", x * by)

    domain.materialize()

    class Fast(cq.engine_class(domain), name="fast"):
        def scale(self, x, *, by=2):
            return ("fast", x * by)

    class Slow(cq.engine_class(domain), name="slow"):
        def scale(self, x, *, by=2):
            return ("slow", x * by)

    return domain, scale


def calls_seen_by_a_profiler(fn, *args):
    """The code objects a profiler sees called while ``fn(*args)`` runs (Python code only)."""
    seen = []

    def hook(frame, event, arg):
        if event == "call":
            seen.append(frame.f_code)

    sys.setprofile(hook)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
    return seen[:-1] if seen and seen[-1].co_name == "setprofile" else seen


def test_on_the_reference_a_call_is_the_unmarked_call(unique):
    _, scale = make_domain(unique())
    assert scale(3) == ("reference", 6)  # the first call settles the domain
    own = scale.__wrapped__.__code__
    assert scale.__code__ is own
    assert calls_seen_by_a_profiler(scale, 3) == [own]
    assert inspect.isfunction(scale)
    assert cq.explain(scale).proxies == {"scale": "function"}


def test_a_marked_function_is_a_function_for_pythons_tools(unique):
    domain = cq.AccelerationDomain(unique())
    marked = domain.acceleration_candidate(halve, name="halved")
    domain.materialize()
    assert inspect.isfunction(marked)
    assert inspect.signature(marked) == inspect.signature(halve)
    assert inspect.getsource(marked) == inspect.getsource(halve)
    assert marked.__doc__ == halve.__doc__
    assert "function halve" in pydoc.render_doc(marked) or "halved" in pydoc.render_doc(marked)
    assert "Proxy" not in pydoc.render_doc(marked)

    class Holder:
        method = marked  # binds like any function in a class body

    bound = Holder().method
    assert inspect.ismethod(bound) and bound.__func__ is marked

    @functools.wraps(marked)
    def wrapper(*args):
        return marked(*args)

    assert wrapper.__wrapped__ is marked and wrapper.__name__ == marked.__name__
    assert wrapper(4) == 2


@pytest.mark.parametrize("order", ["enable, then call", "call, then a block in a thread"])
def test_every_state_runs_what_it_must(unique, order):
    domain, scale = make_domain(unique())
    if order == "enable, then call":
        cq.enable_engine(domain, "fast")
        settled = "fast"
    else:
        settled = "reference"
    assert scale(1) == (settled, 2)
    with cq.using_engine(domain, "slow"):
        assert scale(1) == ("slow", 2)
        with cq.using_engine(domain, cq.REFERENCE):
            assert scale(1) == ("reference", 2)
    assert scale(1) == (settled, 2)

    # A block open in another thread: calls here keep the global choice.
    entered, leave = threading.Event(), threading.Event()
    seen_there = []

    def in_a_block():
        with cq.using_engine(domain, "slow"):
            seen_there.append(scale(1))
            entered.set()
            leave.wait(TIMEOUT)
            seen_there.append(scale(1))

    thread = threading.Thread(target=in_a_block)
    thread.start()
    assert entered.wait(TIMEOUT)
    assert scale(1) == (settled, 2)
    leave.set()
    thread.join(TIMEOUT)
    assert not thread.is_alive()
    assert seen_there == [("slow", 2), ("slow", 2)]
    assert scale(1) == (settled, 2)  # after the last block closed

    with cq.profile() as prof:
        assert scale(1) == (settled, 2)
    assert [(r.candidate, r.engine, r.count) for r in prof.rows] == [("scale", settled, 1)]
    assert scale(1) == (settled, 2)


def specialized_calls(fn):
    """The kinds of call instruction a fresh loop of ``fn(1)`` runs once warm (``dis``)."""
    namespace = {"fn": fn}
    exec("def loop(times):\n    for _ in times:\n        fn(1)\n", namespace)  # new bytecode
    namespace["loop"](range(200))  # past the interpreter's warm-up counters
    instructions = dis.get_instructions(namespace["loop"], adaptive=True)
    return {i.opname for i in instructions if i.opname.startswith("CALL")}


@pytest.mark.skipif(
    sys.version_info < (3, 14) and not getattr(sys, "_is_gil_enabled", lambda: True)(),
    reason="the free-threaded CPython 3.13 specializes no call",
)
def test_calls_of_the_marked_function_are_specialized_on_the_reference(unique):
    """CPython specializes calls of the marked function on the reference as it does the
    unmarked one's, also after it ran an engine in a block. (From 3.13 on, only with the
    compiled part: see the performance guide.)"""
    if sys.version_info >= (3, 13) and cq.proxy_implementation() != "compiled":
        pytest.skip("without the compiled part, 3.13+ never specializes a swapped function")

    def unmarked(x):
        return x * 2

    specialized = specialized_calls(unmarked)
    assert "CALL_PY_EXACT_ARGS" in specialized  # what CPython does for the unmarked one
    domain = cq.AccelerationDomain(unique())
    double = domain.acceleration_candidate(unmarked, name="double")
    domain.materialize()

    class Fast(cq.engine_class(domain), name="fast"):
        def double(self, x):
            return -x * 2

    assert double(1) == 2  # settles on the reference
    assert specialized_calls(double) == specialized
    with cq.using_engine(domain, "fast"):
        assert double(1) == -2
        specialized_calls(double)  # calls in the block, whatever they run through
    assert double(1) == 2
    assert specialized_calls(double) == specialized  # its own code again


def test_a_profile_sees_calls_made_on_the_reference_and_after_it(unique):
    _, scale = make_domain(unique())
    scale(1)
    for _ in range(2):
        with cq.profile() as prof:
            scale(1), scale(2)
        assert [(r.candidate, r.count) for r in prof.rows] == [("scale", 2)]
        assert scale.__code__ is scale.__wrapped__.__code__  # back to its own code


def test_a_verification_sees_calls_and_leaves_the_reference_free_again(unique):
    domain, scale = make_domain(unique())
    scale(1)
    with cq.verify(domain, "fast", on_mismatch="record") as report:
        scale(3)
    assert [(row.candidate, row.calls) for row in report.rows] == [("scale", 1)]
    assert report.mismatches  # ("fast", 6) is not ("reference", 6)
    assert scale(3) == ("reference", 6)
    assert scale.__code__ is scale.__wrapped__.__code__


def test_a_swap_racing_calls_in_eight_threads(unique):
    """While threads call the function, others open and close blocks (each swap of its
    code): every call runs what its own context says, and none fails."""
    domain, scale = make_domain(unique())
    stop = threading.Event()
    wrong: list[object] = []

    def caller(i):
        engine = ("slow", "fast", None)[i % 3]
        while not stop.is_set():
            if engine is None:
                got, want = scale(i), ("reference", 2 * i)
            else:
                with cq.using_engine(domain, engine):
                    got, want = scale(i), (engine, 2 * i)
            if got != want:
                wrong.append((got, want))

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(300):
            assert scale(5) == ("reference", 10)
    finally:
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    assert wrong == []
    assert scale(5) == ("reference", 10)


def test_swaps_of_the_code_racing_calls_in_eight_threads(unique):
    """Each profile swaps every function's code to the looking trampoline and back to
    its own: eight threads calling meanwhile get the reference's result every time."""
    _, scale = make_domain(unique())
    scale(0)
    stop = threading.Event()
    calls, wrong = [0] * 8, []

    def caller(i):
        while not stop.is_set():
            got = scale(i)
            calls[i] += 1
            if got != ("reference", 2 * i):
                wrong.append(got)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    try:
        codes = set()
        for _ in range(200):
            with cq.profile():
                codes.add(scale.__code__)
            codes.add(scale.__code__)
    finally:
        stop.set()
        for thread in threads:
            thread.join(TIMEOUT)
    assert not any(thread.is_alive() for thread in threads)
    assert wrong == [] and all(calls)
    assert len(codes) == 2  # its own code, and the looking trampoline's
    assert scale.__code__ is scale.__wrapped__.__code__


def test_the_first_calls_race_the_settling_in_eight_threads(unique):
    _, scale = make_domain(unique())
    barrier = threading.Barrier(8)
    results = []

    def first_call(i):
        barrier.wait(TIMEOUT)
        results.append(scale(i))

    threads = [threading.Thread(target=first_call, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert sorted(results) == [("reference", 2 * i) for i in range(8)]
    assert scale.__code__ is scale.__wrapped__.__code__


def test_every_way_of_calling_reaches_what_the_state_runs(unique):
    """Positional, keyword, star-args, a method bound in a class body, functools.partial
    and map reach the engine in a block and on the reference outside it, whatever the
    function's calls go through (a trampoline, or the compiled proxy from C)."""
    domain, scale = make_domain(unique())

    class Number(int):
        method = scale  # binds: Number(3).method() is scale(Number(3))

    def ways():
        return [
            scale(3),
            scale(3, by=2),
            scale(*[3], **{"by": 2}),
            functools.partial(scale, by=2)(3),
            next(map(scale, [3])),
            Number(3).method(),
            Number.method(3),
        ]

    assert ways() == [("reference", 6)] * 7
    with cq.using_engine(domain, "fast"):
        assert ways() == [("fast", 6)] * 7
        with pytest.raises(TypeError):
            Number(3).method(4)  # one positional argument too many, as unmarked
    assert ways() == [("reference", 6)] * 7


def test_a_code_assigned_by_hand_runs_in_every_state(unique):
    """A user who assigns the marked function's ``__code__`` gets that code's calls,
    also while the domain would dispatch (the compiled part then runs it as CPython
    would), until the domain's next swap (the adoption guide says so)."""
    domain, scale = make_domain(unique())
    assert scale(1) == ("reference", 2)

    def replacement(x, *, by=2):
        return ("by hand", x * by)

    with cq.using_engine(domain, "fast"):
        scale.__code__ = replacement.__code__
        assert scale(1) == ("by hand", 2)
        assert scale(1, by=3) == ("by hand", 3)
    assert scale(1) == ("reference", 2)  # the block's end swapped the function's own code in


def test_a_block_whose_swaps_an_interrupt_stopped_swaps_them_next_time(unique, monkeypatch):
    """Ctrl-C between two functions' swaps as a block opens: the block does not open,
    and the next one swaps every function, so each runs the block's engine."""
    from coheriq._call import swapped

    domain = cq.AccelerationDomain(unique())
    names = ("one", "two", "three")
    marked = {n: domain.acceleration_candidate(lambda x: ("reference", x), name=n) for n in names}
    domain.materialize()
    fast = {n: (lambda self, x: ("fast", x)) for n in names}
    type(cq.engine_class(domain))("Fast", (cq.engine_class(domain),), fast, name="fast")
    assert [f(1) for f in marked.values()] == [("reference", 1)] * 3  # settled

    swaps = []

    def interrupted(real):
        def swap(function, code):
            swaps.append(function)
            if len(swaps) == 2:  # as a signal would, between the first and second
                raise KeyboardInterrupt
            real(function, code)

        return swap

    def assign(function, code):  # the swap without the compiled part
        function.__code__ = code

    monkeypatch.setattr(swapped, "set_code", interrupted(swapped.set_code or assign))
    if swapped.set_dispatcher is not None:
        monkeypatch.setattr(swapped, "set_dispatcher", interrupted(swapped.set_dispatcher))
    with pytest.raises(KeyboardInterrupt):
        with cq.using_engine(domain, "fast"):
            pass
    monkeypatch.undo()
    assert [f(1) for f in marked.values()] == [("reference", 1)] * 3
    with cq.using_engine(domain, "fast"):
        assert [f(1) for f in marked.values()] == [("fast", 1)] * 3
    assert [f(1) for f in marked.values()] == [("reference", 1)] * 3


def test_candidates_that_are_not_plain_functions_keep_the_dispatcher(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    @functools.cache
    def cached(x):
        return x + 1

    @domain.acceleration_candidate
    def numbers(n):
        yield from range(n)

    @domain.acceleration_candidate
    async def later(x):
        return x

    @domain.acceleration_candidate
    def plain(x):
        return x

    domain.materialize()
    kinds = cq.explain(domain).proxies
    assert kinds["plain"] == "function"
    dispatcher = cq.proxy_implementation().split()[0]
    assert {kinds["cached"], kinds["numbers"], kinds["later"]} == {dispatcher}
    assert "cached (" in str(cq.explain(domain)) and "plain (" not in str(cq.explain(domain))
    assert cached(1) == 2 and cached.cache_info().hits == 0
    assert list(numbers(3)) == [0, 1, 2]
    assert asyncio.run(later(5)) == 5
    assert plain(4) == 4 and plain.__code__ is plain.__wrapped__.__code__


def test_a_closure_and_super_are_kept(unique):
    domain = cq.AccelerationDomain(unique())

    def make():
        offset = 10

        class Base:
            def value(self):
                return 1

        class Child(Base):
            def value(self):
                return super().value() + offset

        return Child

    Child = make()
    marked = domain.acceleration_candidate(Child.value, name="value")
    domain.materialize()

    class Fast(cq.engine_class(domain), name="fast"):
        def value(engine, self):  # noqa: N805 - the candidate's self comes second
            return -1

    assert marked(Child()) == 11
    assert marked.__closure__ == Child.value.__closure__
    with cq.using_engine(domain, "fast"):
        assert marked(Child()) == -1
    assert marked(Child()) == 11


PICKLED = """
import coheriq

domain = coheriq.AccelerationDomain(__name__)


@domain.acceleration_candidate
def double(x):
    return 2 * x


domain.materialize()
"""


def test_pickling_finds_the_marked_function_by_reference(write_module, unique):
    name = unique("pickled")
    write_module(name, PICKLED)
    module = importlib.import_module(name)
    assert pickle.loads(pickle.dumps(module.double)) is module.double
    module.double(1)  # on its own code now: the same object all the same
    assert pickle.loads(pickle.dumps(module.double)) is module.double


def test_pickled_by_value_it_is_the_librarys_function_or_a_clear_error(write_module, unique):
    """cloudpickle pickles a function of __main__ (or of a module registered with it) by
    value: on the reference that is an unmarked copy of the library's function; in any
    other state its code is coheriq's, and pickling says so (the adoption guide too)."""
    cloudpickle = pytest.importorskip("cloudpickle")
    name = unique("by_value")
    write_module(name, PICKLED)
    module = importlib.import_module(name)
    cloudpickle.register_pickle_by_value(module)
    try:
        with pytest.raises(TypeError, match="pickled by value"):
            cloudpickle.dumps(module.double)  # before the domain settles, it looks
        assert module.double(2) == 4  # settles on the reference
        copy = pickle.loads(cloudpickle.dumps(module.double))
        assert copy is not module.double and copy(3) == 6
        with pytest.raises(cq.CoheriqError):
            cq.explain(copy)  # a copy of the library's function: not a candidate
        with cq.using_engine(module.domain, cq.REFERENCE):
            with pytest.raises(TypeError, match="pickled by value"):
                cloudpickle.dumps(module.double)
    finally:
        cloudpickle.unregister_pickle_by_value(module)


MODULE_V1 = """
from {dom} import domain

@domain.acceleration_candidate
def area(r):
    return 3 * r * r
"""

MODULE_V2 = """
from {dom} import domain

@domain.acceleration_candidate
def area(r, unit=1):
    return 3.14 * r * r * unit
"""


def marked_again(write_module, unique, first, then, name, before=lambda held: None):
    """A module marking ``name`` on a domain of another module, run again as ``then``.

    ``first`` and ``then`` are sources with ``{dom}`` for the domain's module;
    ``before(held)`` runs on the first run's candidate before the module runs again.
    Returns the module and the candidate held from its first run.
    """
    dom, funcs = unique("dom"), unique("funcs")
    write_module(dom, "import coheriq\ndomain = coheriq.AccelerationDomain(__name__)\n")
    write_module(funcs, first.format(dom=dom))
    module = importlib.import_module(funcs)
    held = getattr(module, name)
    importlib.import_module(dom).domain.materialize()
    before(held)
    with open(module.__file__, "w") as file:  # longer: the cached bytecode is stale
        file.write(then.format(dom=dom))
    importlib.reload(module)
    return module, held


def test_a_module_that_runs_again_updates_the_function_in_place(write_module, unique):
    def first_call(held):
        assert held(1) == 3

    module, held = marked_again(write_module, unique, MODULE_V1, MODULE_V2, "area", first_call)
    assert module.area is held
    assert held(1) == 3.14 and held(1, unit=2) == 6.28
    assert inspect.signature(held).parameters["unit"].default == 1
    assert held.__code__ is held.__wrapped__.__code__


ASYNC_V1 = """
from {dom} import domain

@domain.acceleration_candidate
async def fetch(x):
    return x
"""


def test_an_async_candidate_marked_again_is_still_a_coroutine_function(write_module, unique):
    doubled = ASYNC_V1.replace("return x", "return 2 * x")
    module, held = marked_again(write_module, unique, ASYNC_V1, doubled, "fetch")
    assert module.fetch is held
    assert asyncio.run(held(2)) == 4
    if sys.version_info >= (3, 12):
        assert inspect.iscoroutinefunction(held)
    else:  # asyncio's marker; asyncio.iscoroutinefunction is deprecated from 3.14
        assert asyncio.iscoroutinefunction(held)


def make_powers(name):
    """A domain whose plain-function candidate has positional and keyword-only defaults."""
    domain = cq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def power(x, n=2, *, scale=1):
        return ("reference", x**n * scale)

    domain.materialize()

    class Fast(cq.engine_class(domain), name="fast"):
        def power(self, x, n=2, *, scale=1):
            return ("fast", x**n * scale)

    return domain, power


def new_defaults(power, how):
    """Change ``power``'s defaults as a user may: n=3 and scale=10, in ``how``'s way."""
    if how == "assigned":
        power.__defaults__ = (3,)
        power.__kwdefaults__ = {"scale": 10}
    else:  # the tuple can only be assigned; the dict can be changed in place
        power.__defaults__ = (3,)
        power.__kwdefaults__["scale"] = 10


@pytest.mark.parametrize("how", ["assigned", "changed in place"])
@pytest.mark.parametrize("settled", ["reference", "fast"])
def test_calls_follow_the_defaults_the_function_has_now(unique, how, settled):
    """As for an unmarked function, the function's current ``__defaults__`` and
    ``__kwdefaults__`` fill what a call leaves out: on the first call, on its own code,
    on an engine, in a block, in a profile (whatever the calls go through there)."""
    domain, power = make_powers(unique())
    if settled == "fast":
        cq.enable_engine(domain, "fast")
    new_defaults(power, how)
    assert power(2) == (settled, 80)  # the first call, which settles the domain
    assert power(2) == (settled, 80)
    assert power(2, 1) == (settled, 20) and power(2, scale=1) == (settled, 8)
    for _ in range(10):  # past the blocks after which the function keeps looking
        with cq.using_engine(domain, "fast"):
            assert power(2) == ("fast", 80)
        with cq.using_engine(domain, cq.REFERENCE):
            assert power(2) == ("reference", 80)
        assert power(2) == (settled, 80)
    with cq.profile():
        assert power(2) == (settled, 80)


def test_defaults_changed_in_a_block_fill_its_next_calls(unique):
    domain, power = make_powers(unique())
    assert power(2) == ("reference", 4)
    with cq.using_engine(domain, "fast"):
        assert power(2) == ("fast", 4)
        power.__defaults__ = (3,)
        assert power(2) == ("fast", 8)
        power.__defaults__ = None  # n is required now, as it would be unmarked
        with pytest.raises(TypeError, match="missing"):
            power(2)
        assert power(2, 2) == ("fast", 4)
        power.__defaults__ = (2,)  # an equal tuple: as before
        assert power(2) == ("fast", 4)
    with pytest.raises(TypeError, match="missing"):
        power.__kwdefaults__ = None
        power(2)
    assert power(2, scale=1) == ("reference", 4)


ENGINE_MODULE = """
import __main__
import coheriq


class Fast(coheriq.engine_class(__main__.domain), name="fast"):
    def double(self, x):
        return ("fast", 2 * x)
"""

BY_VALUE = """
import pickle, sys
sys.path.insert(0, {path!r})
import cloudpickle
import coheriq

domain = coheriq.AccelerationDomain("by_value_main")


@domain.acceleration_candidate
def double(x):
    return ("reference", 2 * x)


domain.materialize()
{engine}
coheriq.enable_engine(domain, "fast")
assert double(1) == ("fast", 2)


def pickled():
    try:
        return pickle.loads(cloudpickle.dumps(double))(1)
    except TypeError as error:
        return str(error)


print(repr(pickled()))
with coheriq.using_engine(domain, "fast"):
    print(repr(pickled()))
"""

ENGINE_IN_MAIN = """
class Fast(coheriq.engine_class(domain), name="fast"):
    def double(self, x):
        return ("fast", 2 * x)
"""


@pytest.mark.parametrize("where", ["an importable module", "__main__"])
def test_pickled_by_value_on_an_engine_it_is_refused_saying_why(tmp_path, unique, where):
    """A marked function of __main__ (which cloudpickle pickles by value) on an engine
    is refused with coheriq's TypeError, never copied with a private engine, wherever
    the engine class is defined (a class of __main__ is pickled by value too)."""
    pytest.importorskip("cloudpickle")
    from conftest import run_python

    module = unique("engine_module")
    (tmp_path / f"{module}.py").write_text(ENGINE_MODULE)
    engine = f"import {module}" if where == "an importable module" else ENGINE_IN_MAIN
    done = run_python(BY_VALUE.format(path=str(tmp_path), engine=engine))
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 2, done.stdout
    for line in lines:
        assert "pickled by value" in line, line


def test_swapping_for_ever_keeps_each_code_once(unique, monkeypatch):
    """On a free-threaded build a function keeps every code it ran (a thread may still
    read the old one): each distinct code once, so that memory stays flat however many
    times profiles swap the code. (The same bookkeeping, turned on here.)"""
    from coheriq._call import swapped

    monkeypatch.setattr(swapped, "_FREE_THREADED", True)
    domain = cq.AccelerationDomain(unique())
    marked = [domain.acceleration_candidate(halve, name=f"halve{i}") for i in range(20)]
    domain.materialize()
    assert [f(2) for f in marked] == [1] * 20  # settled: each on its own code

    def profiles(times):
        for _ in range(times):
            with cq.profile():  # each swaps every function to looking, and back
                pass

    # 20 functions x 2 codes x 1000 profiles would be 320 kB.
    assert memory_grown(profiles) < 50_000
    assert [f(2) for f in marked] == [1] * 20
