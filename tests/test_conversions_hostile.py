"""Conversions under stress: threads, tasks, fork, signals, GC, odd objects, odd exceptions.

Each test asserts what a user sees (results, exceptions, objects freed), with a timeout
wherever a lock could hang it.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import pickle
import signal
import sys
import threading
import time
import weakref

import pytest

import coheriq
from conftest import run_in_child


class Vec:
    """The library's type."""

    def __init__(self, xs):
        self.xs = list(xs)

    def __eq__(self, other):
        return type(other) is Vec and other.xs == self.xs


class Dev:
    """The engine's type."""

    def __init__(self, xs):
        self.data = tuple(xs)

    def __eq__(self, other):
        return isinstance(other, Dev) and other.data == self.data


class KwVec:
    """A library type built from keyword-only arguments (``__getnewargs_ex__``)."""

    def __new__(cls, *, xs):
        made = object.__new__(cls)
        made.xs = list(xs)
        return made

    def __getnewargs_ex__(self):
        return (), {"xs": self.xs}


class KwDev(Dev):
    pass


class World:
    """Domain ``name`` (candidates total and double), its conversions counted in ``made``."""

    def __init__(self, name):
        self.name, self.made = name, []
        self.domain = domain = coheriq.AccelerationDomain(name, env_prefix=name.upper())

        @domain.acceleration_candidate
        def total(v):
            return sum(v.xs)

        @domain.acceleration_candidate
        def double(v):
            return type(v)([2 * x for x in v.xs])

        domain.materialize()
        self.total, self.double = total, double

    def up(self, v):
        self.made.append("up")
        return Dev(v.xs)

    def down(self, d):
        self.made.append("down")
        return Vec(d.data)

    def conversion(self, up=None, **options):
        options.setdefault("cache", True)
        return coheriq.Conversion(
            Vec, Dev, to_engine=up or self.up, to_library=self.down, **options
        )

    def engine(self, name, conversion=None):
        """Engine ``name`` converting by ``conversion`` (default: the world's, cached),
        its double the engine's own (returns a Dev)."""

        class Engine(
            coheriq.engine_class(self.name),
            name=name,
            conversions=[conversion or self.conversion()],
        ):
            def double(self, v):
                return Dev([2 * x for x in v.data])

        return Engine

    def using(self, engine):
        return coheriq.using_engine(self.name, engine)


@pytest.fixture
def world(unique, monkeypatch):
    """A World with engine "fast" (converts, caches, pickles as the library's) and
    "plain" (converts nothing, doubles into a Vec)."""
    made = World(unique("hostile"))
    for variable in ("COHERIQ_FAIL_ON_CONVERT", f"{made.name.upper()}_FAIL_ON_CONVERT"):
        monkeypatch.delenv(variable, raising=False)
    made.engine("fast", made.conversion(pickle_as_library=True))

    class Plain(coheriq.engine_class(made.name), name="plain"):
        def double(self, v):
            return Vec([2 * x for x in v.xs])

    return made


def run_threads(targets, timeout=30.0):
    """Run each of ``targets`` in a thread; fail on a hang or on any exception raised."""
    errors = []

    def guarded(target):
        def run():
            try:
                target()
            except BaseException as error:  # reported below
                errors.append(error)

        return run

    threads = [threading.Thread(target=guarded(t), daemon=True) for t in targets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert errors == []


def test_threads_converting_the_same_and_different_objects_all_get_correct_results(world):
    shared = [Vec([i, i + 1]) for i in range(4)]

    def work(n):
        def run():
            with world.using("fast"):
                for i in range(150):
                    s = shared[i % 4]
                    assert coheriq.to_engine(s, world.name, "fast") == Dev(s.xs)
                    assert world.double(s) == Dev([2 * x for x in s.xs])
                    assert world.double(Vec([n, i])) == Dev([2 * n, 2 * i])
                    assert world.total(Dev([n, i])) == n + i  # falls back: to_library

        return run

    run_threads([work(n) for n in range(6)])
    converted = len(world.made)
    for s in shared:  # every thread is done: the cache answers
        assert coheriq.to_engine(s, world.name, "fast") == Dev(s.xs)
    assert len(world.made) == converted


def test_mutated_racing_with_conversions_never_gives_a_wrong_result(world):
    shared = [Vec([i]) for i in range(3)]
    stop = threading.Event()

    def convert():
        with world.using("fast"):
            for i in range(300):
                s = shared[i % 3]
                assert world.double(s) == Dev([2 * s.xs[0]])
                assert coheriq.to_engine(s, world.name, "fast") == Dev(s.xs)
                assert coheriq.to_library(Dev(s.xs)) == s
        stop.set()

    def mutate():
        while not stop.is_set():
            coheriq.mutated(*shared)
            coheriq.mutated(coheriq.to_engine(shared[0], world.name, "fast"))

    run_threads([convert, convert, mutate])


def test_engine_blocks_in_threads_and_tasks_stay_in_their_own_context(world):
    v = Vec([1, 2])

    def in_thread(engine, kind):
        def run():
            with world.using(engine):
                for _ in range(100):
                    assert type(world.double(v)) is kind

        return run

    run_threads([in_thread("fast", Dev), in_thread("plain", Vec)] * 3)

    async def task(engine, kind):
        with world.using(engine):
            for _ in range(30):
                assert type(world.double(v)) is kind
                await asyncio.sleep(0)  # the other tasks run here, in their own blocks
                if kind is Dev:
                    assert world.total(Dev([1, 2])) == 3  # a fallback, converting

    async def all_tasks():
        jobs = [task("fast", Dev), task("plain", Vec)] * 3
        await asyncio.wait_for(asyncio.gather(*jobs), timeout=20)

    asyncio.run(all_tasks())


class Blocking(Dev):
    """An engine object whose freeing waits for ``release``: freed while coheriq holds the
    cache's lock, it keeps the lock held in its thread."""

    inside, release = threading.Event(), threading.Event()

    def __del__(self):
        Blocking.inside.set()
        Blocking.release.wait(10)


def test_a_forked_child_converts_while_a_parent_thread_held_the_lock(world):
    blocking = coheriq.Conversion(
        Vec, Blocking, to_engine=lambda v: Blocking(v.xs), to_library=world.down, cache=True
    )
    world.engine("blocking", blocking)
    v, kept = Vec([1]), Vec([5])
    coheriq.to_engine(v, world.name, "blocking")  # freed first when v's entries go
    coheriq.to_engine(v, world.name, "fast")
    coheriq.to_engine(kept, world.name, "fast")
    Blocking.inside.clear(), Blocking.release.clear()
    holder = threading.Thread(target=coheriq.mutated, args=(v,), daemon=True)
    holder.start()
    try:
        assert Blocking.inside.wait(10)
        before = len(world.made)

        def child():
            assert coheriq.to_engine(kept, world.name, "fast") == Dev([5])
            assert len(world.made) == before  # the parent's cache came along
            coheriq.mutated(kept)
            assert coheriq.to_engine(kept, world.name, "fast") == Dev([5])
            assert coheriq.to_engine(v, world.name, "fast") == Dev([1])
            with world.using("fast"):
                assert world.total(Dev([2, 3])) == 5
            run_threads([lambda: coheriq.to_engine(Vec([7]), world.name, "fast")] * 2, 5)
            return len(world.made) == before + 5

        assert run_in_child(child, timeout=20) == 0
    finally:
        Blocking.release.set()
        holder.join(10)
    assert not holder.is_alive()


@pytest.mark.parametrize("raised", [KeyboardInterrupt, SystemExit, GeneratorExit])
def test_a_base_exception_in_a_conversion_propagates_and_is_not_remembered(world, raised):
    calls = []

    def up(v):
        calls.append(v)
        if len(calls) == 1:
            raise raised()
        return Dev(v.xs)

    world.engine("touchy", world.conversion(up))
    v = Vec([3])
    with world.using("touchy"):
        with pytest.raises(raised):
            world.double(v)
        assert world.double(v) == Dev([6])  # tried again, not "failed before"
    calls.clear()  # the first call raises again
    with pytest.raises(raised):
        coheriq.to_engine(Vec([1]), world.name, "touchy")
    assert coheriq.to_engine(Vec([1]), world.name, "touchy") == Dev([1])


def test_a_conversion_to_none_is_cached_as_a_value(world):
    calls = []

    class Nothing(
        coheriq.engine_class(world.name),
        name="nothing",
        conversions=[world.conversion(lambda v: calls.append(v))],
    ):
        def double(self, v):
            return ("got", v)

    v = Vec([1])
    with world.using("nothing"):
        assert world.double(v) == ("got", None)
        assert world.double(v) == ("got", None)
    assert coheriq.to_engine(v, world.name, "nothing") is None
    assert calls == [v]
    coheriq.mutated(v)
    assert coheriq.to_engine(v, world.name, "nothing") is None
    assert calls == [v, v]


def test_a_slow_conversion_and_another_thread_on_the_same_object(world):
    entered = threading.Event()

    def slow(v):
        entered.set()
        time.sleep(0.1)
        return world.up(v)

    world.engine("slow", world.conversion(slow))
    v = Vec([1, 2])
    got = []
    first = threading.Thread(target=lambda: got.append(coheriq.to_engine(v, world.name, "slow")))
    first.start()
    assert entered.wait(10)
    run_threads([lambda: got.append(coheriq.to_engine(v, world.name, "slow"))], 10)
    first.join(10)
    assert not first.is_alive() and got == [Dev([1, 2])] * 2
    converted = len(world.made)
    assert coheriq.to_engine(v, world.name, "slow") == Dev([1, 2])
    assert len(world.made) == converted <= 2  # cached now
    held = [weakref.ref(g) for g in got]
    got[:], v = [], None
    gc.collect()
    assert [h() for h in held] == [None, None]


def test_a_conversion_that_converts_and_calls_candidates_itself(world):
    def nested(v):
        inner = coheriq.to_engine(Vec(v.xs), world.name, "fast")  # another conversion
        with world.using("fast"):
            assert world.double(Vec([1])) == Dev([2])
            assert world.total(Dev([4])) == 4  # a fallback, converting, inside a conversion
        assert coheriq.to_library(Dev([3]), world.name) == Vec([3])
        return Dev(inner.data)

    world.engine("nested", world.conversion(nested))
    v = Vec([1, 2])
    with world.using("nested"):
        assert world.double(v) == Dev([2, 4])
        assert world.double(v) == Dev([2, 4])
    selfish = world.conversion(lambda v: coheriq.to_engine(v, world.name, "selfish"))
    world.engine("selfish", selfish)
    with pytest.raises(coheriq.CoheriqConversionError) as raised:
        coheriq.to_engine(v, world.name, "selfish")  # converts itself: recurses, then fails
    causes = [raised.value]
    while causes[-1].__cause__ is not None:
        causes.append(causes[-1].__cause__)
    assert isinstance(causes[-1], RecursionError)
    with pytest.raises(coheriq.CoheriqConversionError, match="not tried again"):
        coheriq.to_engine(v, world.name, "selfish")


class Reentrant(Dev):
    """An engine object whose freeing (under the cache's lock, where its original's entries
    go) declares a mutation and converts: what it saw goes to ``seen``."""

    seen: list = []
    domain = ""

    def __del__(self):
        try:
            coheriq.mutated(Vec([0]))
            Reentrant.seen.append(coheriq.to_engine(Vec([9]), Reentrant.domain, "fast"))
        except BaseException as error:  # a finalizer's errors would only be printed
            Reentrant.seen.append(error)


def test_gc_and_weakref_callbacks_inside_the_cache_lock(world):
    Reentrant.seen, Reentrant.domain = [], world.name
    reentrant = coheriq.Conversion(
        Vec, Reentrant, to_engine=lambda v: Reentrant(v.xs), to_library=Vec, cache=True
    )
    world.engine("reentrant", reentrant)

    def churn():
        for i in range(100):
            cyclic = Vec([i])
            cyclic.me = cyclic  # freed by the collector, its weakref callback then
            coheriq.to_engine(cyclic, world.name, "fast")
            for freed_or_mutated in (Vec([i]), Vec([i])):  # Reentrant's entry goes first
                coheriq.to_engine(freed_or_mutated, world.name, "reentrant")
                coheriq.to_engine(freed_or_mutated, world.name, "fast")
            coheriq.mutated(freed_or_mutated)
            del cyclic, freed_or_mutated
            assert coheriq.to_engine(Vec([i, 1]), world.name, "fast") == Dev([i, 1])

    threshold = gc.get_threshold()
    gc.set_threshold(1)  # a collection at nearly every allocation, the cache's included
    try:
        run_threads([churn, churn])
    finally:
        gc.set_threshold(*threshold)
    gc.collect()
    assert len(Reentrant.seen) == 400 and all(s == Dev([9]) for s in Reentrant.seen)


class Pair(tuple):
    """A library type that cannot be referred to weakly."""

    __slots__ = ()


class Touchy(Vec):
    """A library object that cannot be compared nor hashed."""

    __hash__ = None

    def __eq__(self, other):
        raise RuntimeError("do not compare me")


def test_objects_without_weak_references_convert_at_every_crossing(world):
    counted = []

    def up(value):
        counted.append(value)
        return Dev(list(value) if isinstance(value, (tuple, list)) else [value])

    for library, name in [(Pair, "pairs"), (int, "ints"), (list, "lists")]:
        conversion = coheriq.Conversion(library, Dev, to_engine=up, to_library=Vec, cache=True)
        world.engine(name, conversion)
    for i in range(300):  # temporaries: their ids are reused
        assert coheriq.to_engine(Pair((i, 1)), world.name, "pairs") == Dev([i, 1])
        assert coheriq.to_engine(i * 1000, world.name, "ints") == Dev([i * 1000])
        assert coheriq.to_engine([i], world.name, "lists") == Dev([i])
    assert len(counted) == 900
    with world.using("pairs"):
        assert world.double(Pair((1, 2))) == Dev([2, 4])
        assert world.double(Pair((1, 2))) == Dev([2, 4])
    assert len(counted) == 902


def test_objects_that_refuse_comparison_and_hashing_convert_and_cache(world):
    t = Touchy([1, 2])
    first = coheriq.to_engine(t, world.name, "fast")
    assert first.data == (1, 2) and coheriq.to_engine(t, world.name, "fast") is first
    with world.using("fast"):
        assert world.double(t).data == (2, 4)
    coheriq.mutated(t)
    assert coheriq.to_engine(t, world.name, "fast") is not first
    assert world.made == ["up", "up"]
    held = weakref.ref(coheriq.to_engine(t, world.name, "fast"))
    del t, first
    gc.collect()
    assert held() is None


def test_cached_conversions_are_freed_with_their_originals(world):
    v = Vec([1])
    held = weakref.ref(coheriq.to_engine(v, world.name, "fast"))
    gc.collect()
    assert held() is not None  # the cache keeps it while v lives
    del v
    gc.collect()
    assert held() is None
    refs, received = [], []

    class Keeping(world.engine("keeping"), name="keeping_sub"):
        def double(self, v):
            received.append(weakref.ref(v))
            return 0

    with world.using("keeping_sub"):
        for i in range(5000):
            refs.append(weakref.ref(coheriq.to_engine(Vec([i]), world.name, "fast")))
            world.double(Vec([i]))
    gc.collect()
    assert len(refs) == len(received) == 5000
    assert not any(r() for r in refs) and not any(r() for r in received)


def test_the_strict_switch_is_read_at_each_fallback(world, monkeypatch):
    d, v = Dev([1, 2]), Vec([1])
    variables = ("COHERIQ_FAIL_ON_CONVERT", f"{world.name.upper()}_FAIL_ON_CONVERT")
    with world.using("fast"):
        for variable, value, expected in [
            (variables[0], None, None),
            (variables[0], "1", coheriq.CoheriqConversionError),
            (variables[0], "0", None),
            (variables[0], " Yes ", coheriq.CoheriqConversionError),
            (variables[0], "maybe", coheriq.CoheriqTypeError),
            (variables[0], None, None),
            (variables[1], "ON", coheriq.CoheriqConversionError),
            (variables[1], "2", coheriq.CoheriqTypeError),
            (variables[1], "off", None),
        ]:
            if value is None:
                monkeypatch.delenv(variable, raising=False)
            else:
                monkeypatch.setenv(variable, value)
            if expected is None:
                assert world.total(d) == 3
                assert world.double(v) == Dev([2])  # into the engine: never an error
            else:
                with pytest.raises(expected, match=variable):
                    world.total(d)
    assert world.made == ["down", "up"]  # refusals remembered nothing, the cache still answers


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="no interval timers")
def test_a_signal_handler_converting_in_the_middle_of_conversions(world):
    shared, handled = Vec([1, 2]), []

    def handler(signum, frame):  # maybe while the main thread enters or leaves its block
        with world.using("fast"):
            assert world.total(Dev([1, 2])) == 3
        with world.using("plain"):
            assert world.double(shared) == Vec([2, 4])
        assert coheriq.to_engine(shared, world.name, "fast") == Dev([1, 2])
        handled.append(signum)

    handler(None, None)  # coheriq imports parts lazily: not in a handler, mid-import
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.002, 0.002)
        deadline = time.monotonic() + 0.5
        while time.monotonic() < deadline or not handled:
            with world.using("fast"):
                assert world.double(shared) == Dev([2, 4])
                assert world.double(Vec([3])) == Dev([6])
                assert world.total(Dev([5])) == 5
                coheriq.mutated(shared)
            assert time.monotonic() < deadline + 1, "no signal arrived"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert len(handled) > 1


def test_engine_objects_pickle_as_the_librarys_at_every_protocol_and_copy_as_the_engines(world):
    d = Dev([1, 2])
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(d, protocol)) == Vec([1, 2])
        in_python = pickle._dumps([d, {"k": d}], protocol)  # the pure-Python pickler too
        assert pickle.loads(in_python) == [Vec([1, 2]), {"k": Vec([1, 2])}]
    assert copy.copy(d) == d and type(copy.copy(d)) is Dev
    assert copy.deepcopy({"k": [d]}) == {"k": [d]} and type(copy.deepcopy([d])[0]) is Dev


def test_an_engine_object_whose_library_type_takes_keywords_pickles(world):
    coheriq.Conversion(
        KwVec,
        KwDev,
        to_engine=lambda k: KwDev(k.xs),
        to_library=lambda d: KwVec(xs=d.data),
        pickle_as_library=True,
    )
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        assert pickle.loads(pickle.dumps(KwDev([1]), protocol)).xs == [1]  # C: passes on 3.11
        assert pickle.loads(pickle._dumps(KwDev([1]), protocol)).xs == [1]


def test_a_converting_engine_that_fails_to_start_leaves_no_half_state(unique, monkeypatch):
    fresh = World(unique("hostile"))
    monkeypatch.delenv("COHERIQ_FAIL_ON_CONVERT", raising=False)

    class Broken(  # the domain's first engine, and first converting one
        coheriq.engine_class(fresh.name), name="broken", conversions=[fresh.conversion()]
    ):
        def __init__(self):
            raise RuntimeError("no device")

        def double(self, v):
            return v

    v, d = Vec([1]), Dev([1, 2])
    for _ in range(2):
        with pytest.raises(coheriq.CoheriqEngineStartError, match="no device"):
            with fresh.using("broken"):  # starts the engine, or else its first call
                fresh.double(v)
    assert fresh.made == []
    fresh.engine("fast")
    with fresh.using("fast"):
        assert fresh.double(v) == Dev([2])
        assert fresh.total(d) == 3
    with fresh.using(coheriq.REFERENCE):
        assert fresh.double(v) == Vec([2])  # the library's objects, as they are
    assert fresh.made == ["up", "down"]
    with pytest.raises(coheriq.CoheriqEngineStartError), fresh.using("broken"):
        fresh.total(d)


def test_mutated_between_watching_and_storing_still_frees_the_conversion(world):
    v = Vec([1])
    racing = [v]

    def another_thread_declares_mutated(frame, event, arg):
        if event == "return" and frame.f_code.co_name == "_watch" and racing:
            coheriq.mutated(racing.pop())  # as a thread switch there would

    sys.setprofile(another_thread_declares_mutated)
    try:
        held = weakref.ref(coheriq.to_engine(v, world.name, "fast"))
    finally:
        sys.setprofile(None)
    del v
    gc.collect()
    assert held() is None


def test_argument_classes_made_at_run_time_are_freed(world):
    def made(passed):
        kind = type("Made", (), {})
        obj = kind()
        if passed:
            assert coheriq.to_library(obj, world.name) is obj
        return weakref.ref(kind)

    control, held = made(passed=False), made(passed=True)
    gc.collect()
    if control() is not None:
        # Seen on free-threaded 3.13 late in a run: "freed as without coheriq" is all the
        # contract says, and there nothing is.
        pytest.skip("this interpreter keeps even a class made at run time that coheriq never saw")
    assert held() is None
