"""An engine declines a call with a reason: the next implementation runs, and the user sees why.

The rule: the next class along the engine's MRO that implements the candidate,
then the next engine of the user's ordered list that implements it, then the
reference. A plain exception is never a decline; declines are counted, logged
once, profiled, explained, verified and, on request, errors.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading

import pytest

import coheriq
from conftest import LIBRARY, run_python


@pytest.fixture
def ranked(unique, monkeypatch):
    """A domain with a function candidate ``topk`` and a class candidate ``Index``, and
    engines: "compiled" (declines k > 3, raising), "gpu" (declines fewer than 4 rows,
    by a check), "hybrid" (Gpu, Compiled), "plain" (never declines)."""
    name = unique("ranked")
    monkeypatch.delenv(f"{name.upper()}_ENGINE", raising=False)
    monkeypatch.delenv("COHERIQ_FAIL_ON_DECLINE", raising=False)
    domain = coheriq.AccelerationDomain(name, env_prefix=name.upper())

    @domain.acceleration_candidate
    def topk(xs, k=2):
        return ("reference", sorted(xs)[-k:])

    @domain.acceleration_candidate
    class Index:
        def __init__(self, rows):
            self.rows = rows

    domain.materialize()
    reference = coheriq.engine_class(name)

    class Compiled(reference, name="compiled"):
        @coheriq.may_decline
        def topk(self, xs, k=2):
            if k > 3:
                raise coheriq.Decline(f"k={k} is beyond the kernel's 3")
            return ("compiled", sorted(xs)[-k:])

    def too_few(self, xs, k=2):
        return f"{len(xs)} rows: below 4" if len(xs) < 4 else None

    class Gpu(reference, name="gpu"):
        @coheriq.may_decline(when=too_few)
        def topk(self, xs, k=2):
            return ("gpu", sorted(xs)[-k:])

        @coheriq.may_decline
        class Index:
            def __init__(self, rows):
                if not rows:
                    raise coheriq.Decline("no rows")
                self.rows = rows

    class Hybrid(Gpu, Compiled, name="hybrid"):
        pass

    class Plain(reference, name="plain"):
        def topk(self, xs, k=2):
            return ("plain", sorted(xs)[-k:])

    domain.topk, domain.Index = topk, Index
    return domain


FEW, MANY = [1, 2, 3], [1, 2, 3, 4, 5]


def test_a_decline_runs_the_next_implementation_along_the_mro_of_a_diamond(ranked):
    with coheriq.using_engine(ranked.name, "hybrid"):
        assert ranked.topk(MANY) == ("gpu", [4, 5])
        assert ranked.topk(FEW) == ("compiled", [2, 3])  # gpu declined, Compiled is next
        assert ranked.topk(FEW, k=5) == ("reference", FEW)  # both declined
    assert dict(ranked.state.declines) == {
        ("topk", "gpu", "3 rows: below 4"): 2,
        ("topk", "compiled", "k=5 is beyond the kernel's 3"): 1,
    }


def test_then_the_next_engine_of_the_users_list_then_the_reference(ranked):
    with coheriq.using_engine(ranked.name, ["gpu", "plain"]):
        assert ranked.topk(FEW) == ("plain", [2, 3])
    with coheriq.using_engine(ranked.name, ["gpu", "compiled"]):
        assert ranked.topk(FEW) == ("compiled", [2, 3])
        assert ranked.topk(FEW, k=5) == ("reference", FEW)
        assert ranked.topk(MANY, k=5) == ("gpu", [1, 2, 3, 4, 5])
    coheriq.enable_engine(ranked.name, ["gpu", "compiled"])
    assert ranked.topk(FEW) == ("compiled", [2, 3])


def test_the_list_in_the_environment_variable_goes_on_too(ranked, monkeypatch):
    monkeypatch.setenv(f"{ranked.name.upper()}_ENGINE", "gpu,compiled")
    assert ranked.topk(FEW) == ("compiled", [2, 3])
    assert coheriq.explain(ranked.topk).engine == "gpu"


def test_a_plain_exception_is_not_a_decline(ranked):
    class Broken(coheriq.engine_class(ranked.name), name="broken"):
        @coheriq.may_decline
        def topk(self, xs, k=2):
            raise ValueError("a bug")

    with coheriq.using_engine(ranked.name, ["broken", "plain"]):
        with pytest.raises(ValueError, match="a bug"):
            ranked.topk(FEW)
    assert not ranked.state.declines


def test_an_implementation_not_marked_cannot_decline(ranked):
    class Unmarked(coheriq.engine_class(ranked.name), name="unmarked"):
        def topk(self, xs, k=2):
            raise coheriq.Decline("not marked")

    with coheriq.using_engine(ranked.name, ["unmarked", "plain"]):
        with pytest.raises(coheriq.Decline, match="not marked"):
            ranked.topk(FEW)


def test_a_decline_inside_super_goes_on_along_the_mro(ranked):
    compiled = coheriq.engine_class(ranked.name, "compiled")

    class Around(compiled, name="around"):
        def topk(self, xs, k=2):
            return ("around", super().topk(xs, k))  # Compiled's, which may decline

    with coheriq.using_engine(ranked.name, "around"):
        assert ranked.topk(FEW) == ("around", ("compiled", [2, 3]))
        assert ranked.topk(FEW, k=5) == ("around", ("reference", FEW))
    assert ranked.state.declines[("topk", "compiled", "k=5 is beyond the kernel's 3")] == 1


def test_a_class_declines_a_construction_and_objects_stay_with_their_builder(ranked):
    with coheriq.using_engine(ranked.name, "gpu"):
        full, empty = ranked.Index([1]), ranked.Index([])
    assert type(full).__qualname__.endswith("Gpu.Index")
    assert type(empty) is ranked.Index  # the reference built it, and keeps it
    assert isinstance(full, ranked.Index) and isinstance(empty, ranked.Index)
    assert ranked.state.declines == {("Index", "gpu", "no rows"): 1}


def test_a_class_reached_through_self_declines_along_the_mro_and_stays_the_class(ranked):
    # self.Index in engine code: Gpu's Index, marked, whose construction declines for no
    # rows; the construction goes on along the MRO (Hybrid(Gpu, Compiled): Compiled has
    # none) to the reference, as a marked method reached through self does.
    hybrid = coheriq.engine_class(ranked.name, "hybrid")
    gpu = coheriq.engine_class(ranked.name, "gpu")

    def empty_rows(cls, rows):
        return "empty rows" if rows == [] else None

    class Builder(hybrid, name="builder"):
        def topk(self, xs, k=2):
            index = self.Index(xs)
            return (type(index).__qualname__, isinstance(index, self.Index), index.rows)

    class Checked(gpu, name="checked"):
        @coheriq.may_decline(when=empty_rows)
        class Index(gpu.Index):  # reached through super() too
            pass

        def topk(self, xs, k=2):
            return (type(self.Index(xs)).__qualname__, type(super().Index(xs)).__qualname__)

    with coheriq.using_engine(ranked.name, "builder"):
        assert ranked.topk([1]) == (gpu.Index.__qualname__, True, [1])
        library = ranked.Index.__qualname__
        assert ranked.topk([]) == (library, False, [])  # the reference built it
    with coheriq.using_engine(ranked.name, "checked"):
        assert ranked.topk([1]) == (Checked.Index.__qualname__, gpu.Index.__qualname__)
        assert ranked.topk([]) == (library, library)
    assert ranked.state.declines == {
        ("Index", "gpu", "no rows"): 3,
        ("Index", "checked", "empty rows"): 1,
    }
    # Read from the class, it is the class itself: no check, and a Decline reaches the caller.
    assert isinstance(gpu.Index, type) and Builder.Index is gpu.Index
    with pytest.raises(coheriq.Decline, match="no rows"):
        gpu.Index([])
    engine = Builder()
    assert engine.Index == gpu.Index and hash(engine.Index) == hash(gpu.Index)
    assert engine.Index.__name__ == "Index" and issubclass(Checked.Index, engine.Index)


def test_a_declining_class_for_a_candidate_its_module_marks_later(unique, tmp_path, monkeypatch):
    # A declared class candidate, marked when its module is imported after the engine
    # was defined: the engine's marked class is one of the candidate's classes.
    import importlib

    name = unique("lazyrank")
    (tmp_path / f"{name}.py").write_text(
        f"import coheriq\ndomain = coheriq.AccelerationDomain({name!r})\n"
        f"domain.declare({name + '_index'!r}, classes=['Index'])\ndomain.materialize()\n"
    )
    (tmp_path / f"{name}_index.py").write_text(
        f"from {name} import domain\n\n@domain.acceleration_candidate\nclass Index:\n"
        "    def __init__(self, rows):\n        self.rows = rows\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module(name)

    class Gpu(coheriq.engine_class(name), name="gpu"):
        @coheriq.may_decline
        class Index:
            def __init__(self, rows):
                if not rows:
                    raise coheriq.Decline("no rows")
                self.rows = rows

        def _build(self, rows):
            return self.Index(rows)

    library = importlib.import_module(f"{name}_index")
    with coheriq.using_engine(name, "gpu"):
        built = [library.Index([1]), library.Index([]), Gpu()._build([])]
    assert [type(obj).__qualname__ for obj in built] == [Gpu.Index.__qualname__, "Index", "Index"]
    assert all(isinstance(obj, library.Index) for obj in built)


def test_the_strict_switch_makes_a_decline_an_error(ranked, monkeypatch):
    monkeypatch.setenv(f"{ranked.name.upper()}_FAIL_ON_DECLINE", "1")
    with coheriq.using_engine(ranked.name, "hybrid"):
        assert ranked.topk(MANY) == ("gpu", [4, 5])
        with pytest.raises(coheriq.CoheriqDeclineError) as caught:
            ranked.topk(FEW)
    message = str(caught.value)
    assert "Engine 'gpu'" in message and "'topk'" in message and "3 rows: below 4." in message
    assert f"{ranked.name.upper()}_FAIL_ON_DECLINE=1" in message
    monkeypatch.delenv(f"{ranked.name.upper()}_FAIL_ON_DECLINE")
    monkeypatch.setenv("COHERIQ_FAIL_ON_DECLINE", "1")
    with coheriq.using_engine(ranked.name, "compiled"):
        with pytest.raises(coheriq.CoheriqDeclineError, match="COHERIQ_FAIL_ON_DECLINE=1"):
            ranked.topk(FEW, k=5)


def test_the_log_says_each_reason_once(ranked, caplog):
    caplog.set_level(logging.INFO, logger="coheriq")
    with coheriq.using_engine(ranked.name, "hybrid"):
        for _ in range(5):
            ranked.topk(FEW)
    lines = [r.getMessage() for r in caplog.records if "declined" in r.getMessage()]
    assert lines == [
        f"domain {ranked.name!r}: engine 'gpu' declined 'topk' (3 rows: below 4); the next "
        "implementation runs"
    ]


def test_profile_counts_declines_per_candidate_engine_and_reason(ranked):
    with coheriq.profile() as prof, coheriq.using_engine(ranked.name, "hybrid"):
        ranked.topk(FEW)
        ranked.topk(FEW)
        ranked.topk(FEW, k=5)
    rows = {(r.candidate, r.engine, r.reason): r.count for r in prof.declines}
    assert rows == {
        ("topk", "gpu", "3 rows: below 4"): 3,
        ("topk", "compiled", "k=5 is beyond the kernel's 3"): 1,
    }
    assert "topk: gpu declined 3 calls (3 rows: below 4)" in str(prof)


def test_explain_says_what_would_answer_given_arguments(ranked):
    with coheriq.using_engine(ranked.name, ["gpu", "compiled"]):
        few = coheriq.explain(ranked.topk, FEW)
        many = coheriq.explain(ranked.topk, MANY, k=2)
    assert (few.answers, few.declines) == (
        "compiled",
        ["gpu declines: 3 rows: below 4", "compiled: may decline when it runs"],
    )
    assert (many.answers, many.declines) == ("gpu", [])
    assert "with these arguments: compiled answers" in str(few)
    assert not ranked.state.declines  # explaining ran nothing
    with pytest.raises(coheriq.CoheriqTypeError, match="pass the candidate itself"):
        coheriq.explain(ranked.name, FEW)


def test_verification_says_which_implementation_answered(ranked):
    class Faithful(coheriq.engine_class(ranked.name), name="faithful"):
        @coheriq.may_decline(when=lambda self, xs, k=2: "short" if len(xs) < 4 else None)
        def topk(self, xs, k=2):
            return ("reference", sorted(xs)[-k:])

    with coheriq.verify(ranked.name, "faithful") as verification:
        ranked.topk(FEW)
        ranked.topk(MANY)
    (row,) = verification.rows
    assert row.compared == 2 and row.mismatches == 0
    assert row.answered == {"reference": 1}
    assert "1 of the calls on 'faithful' were declined and answered by 'reference'" in str(
        verification
    )


def test_threads_and_tasks_in_different_blocks_decline_independently(ranked):
    results = {}

    def run(engine, xs):
        with coheriq.using_engine(ranked.name, engine):
            results[engine] = [ranked.topk(xs) for _ in range(200)][-1]

    threads = [
        threading.Thread(target=run, args=("gpu", FEW)),
        threading.Thread(target=run, args=("compiled", FEW)),
        threading.Thread(target=run, args=("hybrid", MANY)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert results == {
        "gpu": ("reference", [2, 3]),
        "compiled": ("compiled", [2, 3]),
        "hybrid": ("gpu", [4, 5]),
    }

    async def task(engine):
        with coheriq.using_engine(ranked.name, engine):
            await asyncio.sleep(0)
            return ranked.topk(FEW)

    async def main():
        return await asyncio.gather(task("gpu"), task("hybrid"), task("plain"))

    assert asyncio.run(main()) == [
        ("reference", [2, 3]),
        ("compiled", [2, 3]),
        ("plain", [2, 3]),
    ]


def test_a_decline_needs_a_reason_and_may_decline_a_check():
    with pytest.raises(coheriq.CoheriqTypeError, match="needs a reason"):
        coheriq.Decline("")
    with pytest.raises(coheriq.CoheriqTypeError, match="returns a reason or None"):
        coheriq.may_decline(when="soon")


def test_a_check_that_returns_no_string_is_refused_clearly(ranked):
    class Odd(coheriq.engine_class(ranked.name), name="odd"):
        @coheriq.may_decline(when=lambda self, xs, k=2: True)
        def topk(self, xs, k=2):
            return ("odd", xs)

    with coheriq.using_engine(ranked.name, "odd"):
        with pytest.raises(coheriq.CoheriqTypeError, match="must return the reason"):
            ranked.topk(FEW)


def test_a_call_that_is_not_declined_runs_the_engines_own_method(ranked):
    # The fast path: an engine none of whose implementations may decline is
    # called as ever (its bound method), and so is one that may, called directly.
    with coheriq.using_engine(ranked.name, "plain"):
        assert ranked.topk(FEW) == ("plain", [2, 3])
    gpu = coheriq.engine_class(ranked.name, "gpu")
    assert gpu.topk.__name__ == "topk"  # the class attribute is the function itself


def test_an_override_of_the_decorator_form_declines_too(ranked):
    engine = coheriq.AccelerationEngine(ranked.name, "decorated")

    @engine.override("topk")
    @coheriq.may_decline(when=lambda xs, k=2: "too few" if len(xs) < 4 else None)
    def topk(xs, k=2):  # no self: the check takes the call's arguments alone
        return ("decorated", sorted(xs)[-k:])

    engine.materialize()
    with coheriq.using_engine(ranked.name, ["decorated", "compiled"]):
        assert ranked.topk(MANY) == ("decorated", [4, 5])
        assert ranked.topk(FEW) == ("compiled", [2, 3])


def test_explain_before_the_first_call_follows_the_list_in_the_environment(ranked, monkeypatch):
    monkeypatch.setenv(f"{ranked.name.upper()}_ENGINE", "gpu,compiled")
    explained = coheriq.explain(ranked.topk, FEW)
    assert explained.answers == "compiled" and not explained.settled
    assert ranked.topk(FEW) == ("compiled", [2, 3])


def test_an_implementation_is_asked_once_where_the_list_names_it_again(ranked):
    with coheriq.using_engine(ranked.name, ["hybrid", "gpu", "plain"]):
        assert ranked.topk(FEW, k=5) == ("plain", [1, 2, 3])
    assert ranked.state.declines == {
        ("topk", "gpu", "3 rows: below 4"): 1,  # Hybrid's Gpu base, not asked again
        ("topk", "compiled", "k=5 is beyond the kernel's 3"): 1,
    }


REENTRY = (
    LIBRARY
    + """
import sys

class Picky(coheriq.engine_class("hard"), name="picky"):
    @coheriq.may_decline(when=lambda self, x: "odd" if x % 2 else None)
    def double(self, x):
        return -x

inside = []

def hook(frame, event, arg):
    # Runs between the steps of coheriq's code, as a signal handler may: once, while a
    # decline is being counted, a call that is declined too.
    if event == "c_call" and frame.f_code.co_name == "record" and not inside:
        inside.append(True)
        assert double(3) == 6

coheriq.enable_engine("hard", "picky")
sys.setprofile(hook)
assert double(1) == 2
sys.setprofile(None)
print(inside, dict(domain.state.declines))
"""
)


def test_a_decline_counted_while_another_is_being_counted_does_not_deadlock():
    done = run_python(REENTRY, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[True] {('double', 'picky', 'odd'): 2}"


def test_an_engines_own_self_call_declines_along_its_mro_each_time(ranked):
    compiled = coheriq.engine_class(ranked.name, "compiled")

    class Caller(compiled, name="caller"):
        def _both(self, xs):
            return [self.topk(xs, k=2), self.topk(xs, k=5)]  # the second is declined

    engine = Caller()
    for _ in range(3):
        assert engine._both(FEW) == [("compiled", [2, 3]), ("reference", FEW)]
    assert ranked.state.declines == {("topk", "compiled", "k=5 is beyond the kernel's 3"): 3}


@pytest.fixture
def later(unique):
    """A domain whose candidates run later than their call: ``fetch`` (async def),
    ``walk`` (a generator function) and ``stream`` (an async generator function)."""
    domain = coheriq.AccelerationDomain(unique("later"))

    @domain.acceleration_candidate
    async def fetch(n):
        return ("reference", n)

    @domain.acceleration_candidate
    def walk(n):
        yield from ("reference",) * n

    @domain.acceleration_candidate
    async def stream(n):
        for _ in range(n):
            yield "reference"

    domain.materialize()
    domain.fetch, domain.walk, domain.stream = fetch, walk, stream
    return domain


def test_a_generator_or_async_implementation_may_not_decline_by_raising(later):
    # Its body runs when the call is awaited or iterated, after the call has returned:
    # too late to pass it on, so a bare mark is refused where the class is made.
    with pytest.raises(coheriq.CoheriqTypeError, match=r"async def .*fetch.*when="):

        class Fetching(coheriq.engine_class(later.name), name="fetching"):
            @coheriq.may_decline
            async def fetch(self, n):
                raise coheriq.Decline("never")

    with pytest.raises(coheriq.CoheriqTypeError, match=r"generator .*walk.*when="):

        class Walking(coheriq.engine_class(later.name), name="walking"):
            @coheriq.may_decline
            def walk(self, n):
                raise coheriq.Decline("never")
                yield

    with pytest.raises(coheriq.CoheriqTypeError, match=r"async generator .*stream.*when="):

        class Streaming(coheriq.engine_class(later.name), name="streaming"):
            @coheriq.may_decline
            @staticmethod
            async def stream(n):
                raise coheriq.Decline("never")
                yield

    assert coheriq.available_engines(later.name) == ()  # none of them was made


def test_a_generator_or_async_implementation_declines_by_its_check(later):
    def odd(self, n):
        return "odd counts" if n % 2 else None

    class Even(coheriq.engine_class(later.name), name="even"):
        @coheriq.may_decline(when=odd)
        async def fetch(self, n):
            return ("even", n)

        @coheriq.may_decline(when=odd)
        def walk(self, n):
            yield from ("even",) * n

        @coheriq.may_decline(when=odd)
        async def stream(self, n):
            for _ in range(n):
                yield "even"

    async def collect(n):
        return [item async for item in later.stream(n)]

    with coheriq.using_engine(later.name, "even"), coheriq.profile() as prof:
        assert asyncio.run(later.fetch(2)) == ("even", 2)
        assert asyncio.run(later.fetch(1)) == ("reference", 1)
        assert list(later.walk(2)) == ["even", "even"] and list(later.walk(1)) == ["reference"]
        assert asyncio.run(collect(2)) == ["even"] * 2 and asyncio.run(collect(1)) == ["reference"]
    assert {(r.candidate, r.count) for r in prof.declines} == {
        ("fetch", 1),
        ("walk", 1),
        ("stream", 1),
    }


@pytest.mark.parametrize("returned", [False, 0, [], "", "   ", b"short", True])
def test_a_check_answers_none_or_a_reason_and_nothing_else_everywhere(ranked, returned):
    class Odd(coheriq.engine_class(ranked.name), name="odd"):
        @coheriq.may_decline(when=lambda self, xs, k=2: returned)
        def topk(self, xs, k=2):
            return ("odd", xs)

    said = rf"engine 'odd'.*'topk'.*returned {re.escape(repr(returned))}.*must return the reason"
    for engines in ("odd", ["odd", "plain"], ["gpu", "odd", "plain"]):
        with coheriq.using_engine(ranked.name, engines):
            with pytest.raises(coheriq.CoheriqTypeError, match=said):
                ranked.topk(FEW)  # the first implementation asked, or a later one
            with pytest.raises(coheriq.CoheriqTypeError, match=said):
                coheriq.explain(ranked.topk, FEW)
    assert ("topk", "odd", "") not in ranked.state.declines


@pytest.mark.parametrize("value", ["1", "true", "TRUE", " yes ", "On"])
def test_the_strict_switch_takes_the_usual_spellings_of_yes(ranked, monkeypatch, value):
    for variable in ("COHERIQ_FAIL_ON_DECLINE", f"{ranked.name.upper()}_FAIL_ON_DECLINE"):
        monkeypatch.setenv(variable, value)
        with coheriq.using_engine(ranked.name, "compiled"):
            with pytest.raises(coheriq.CoheriqDeclineError, match=f"{variable}="):
                ranked.topk(FEW, k=5)
        monkeypatch.delenv(variable)


@pytest.mark.parametrize("value", ["0", "false", "No", " off", ""])
def test_the_strict_switch_takes_the_usual_spellings_of_no(ranked, monkeypatch, value):
    monkeypatch.setenv("COHERIQ_FAIL_ON_DECLINE", value)
    monkeypatch.setenv(f"{ranked.name.upper()}_FAIL_ON_DECLINE", value)
    with coheriq.using_engine(ranked.name, "compiled"):
        assert ranked.topk(FEW, k=5) == ("reference", FEW)


def test_the_strict_switch_refuses_a_value_it_cannot_read(ranked, monkeypatch):
    for variable in ("COHERIQ_FAIL_ON_DECLINE", f"{ranked.name.upper()}_FAIL_ON_DECLINE"):
        monkeypatch.setenv(variable, "perhaps")
        with coheriq.using_engine(ranked.name, "compiled"):
            with pytest.raises(coheriq.CoheriqTypeError, match=f"{variable} is 'perhaps'"):
                ranked.topk(FEW, k=5)
        monkeypatch.delenv(variable)
    assert not ranked.state.declines  # refused before anything was counted


def test_a_decline_of_an_unmarked_implementation_it_calls_reaches_the_caller(ranked):
    ran = []

    class Nested(coheriq.engine_class(ranked.name), name="nested"):
        @coheriq.may_decline
        def topk(self, xs, k=2):
            ran.append("engine half")
            return ("nested", ranked.Index(xs))  # the candidate: Nested.Index below

        class Index:  # not marked: a Decline here is an error, even called from topk
            def __init__(self, rows):
                raise coheriq.Decline("not marked")

    class Helped(coheriq.engine_class(ranked.name), name="helped"):
        @coheriq.may_decline
        def topk(self, xs, k=2):
            return self._too_many(k) or ("helped", xs)

        def _too_many(self, k):  # not a candidate: part of topk's own code
            if k > 3:
                raise coheriq.Decline("k above 3")

    with coheriq.using_engine(ranked.name, "nested"):
        with pytest.raises(coheriq.Decline, match="not marked"):
            ranked.topk(FEW)
    assert ran == ["engine half"] and not ranked.state.declines
    engine = coheriq.engine_class(ranked.name, "nested")()
    with coheriq.using_engine(ranked.name, "nested"):
        with pytest.raises(coheriq.Decline, match="not marked"):
            engine.topk(FEW)  # an engine's own call of the method, as a proxy's
    with coheriq.using_engine(ranked.name, "helped"):
        assert ranked.topk(FEW, k=5) == ("reference", FEW)
    assert ranked.state.declines == {("topk", "helped", "k above 3"): 1}


PICKLED = (
    LIBRARY
    + """
import copy, pickle

class Picky(coheriq.engine_class("hard"), name="picky"):
    def __init__(self):
        self.scale = 3

    @coheriq.may_decline(when=lambda self, x: "odd" if x % 2 else None)
    def double(self, x):
        return self.scale * x

    def _kernel(self, x):
        return self.double(x)  # reads the method that may decline, as engines do

engine = Picky()
assert engine._kernel(2) == 6 and engine._kernel(1) == 2
for made in (pickle.loads(pickle.dumps(engine)), copy.copy(engine), copy.deepcopy(engine)):
    assert type(made) is Picky and vars(made) == {"scale": 3} and made is not engine
    made.scale = 5
    assert made._kernel(2) == 10 and made.double.__self__ is made and engine._kernel(2) == 6
kernel = pickle.loads(pickle.dumps(engine._kernel))
assert kernel(4) == 12 and kernel(1) == 2
assert pickle.loads(pickle.dumps(engine.double))(4) == 12
coheriq.enable_engine("hard", "picky")
assert double(2) == 6 and double(1) == 2
print(vars(engine), dict(domain.state.declines))
"""
)


def test_an_engine_whose_methods_may_decline_pickles_and_copies_as_any_object():
    done = run_python(PICKLED, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "{'scale': 3} {('double', 'picky', 'odd'): 3}"


# -- a soft decline: an implementation that should not run a call, rather than cannot ------
# may_decline(when=check, soft=True) (NetworkX's should_run): the call goes on to the next
# implementation without objection, the reference at the latest; coheriq.crossover
# declares such a check from the size of a call.


@pytest.fixture
def sized(ranked):
    """``ranked``, and engines "soft" (should not run fewer than 4 rows), "kernel" (cannot
    run k > 3: a check, which explain can ask) and "softhybrid" (Soft, Kernel)."""

    def small(self, xs, k=2):
        return f"{len(xs)} rows: the transfer costs more" if len(xs) < 4 else None

    def beyond(self, xs, k=2):
        return f"k={k} is beyond the kernel's 3" if k > 3 else None

    reference = coheriq.engine_class(ranked.name)

    class Soft(reference, name="soft"):
        @coheriq.may_decline(when=small, soft=True)
        def topk(self, xs, k=2):
            return ("soft", sorted(xs)[-k:])

    class Kernel(reference, name="kernel"):
        @coheriq.may_decline(when=beyond)
        def topk(self, xs, k=2):
            return ("kernel", sorted(xs)[-k:])

    class SoftHybrid(Soft, Kernel, name="softhybrid"):
        pass

    return ranked


SMALL = "3 rows: the transfer costs more"


@pytest.mark.parametrize("engines", ["softhybrid", ["soft", "kernel"]], ids=["hybrid", "list"])
def test_a_soft_decline_goes_to_the_next_implementation_without_objection(sized, engines):
    with coheriq.using_engine(sized.name, engines):
        assert sized.topk(MANY) == ("soft", [4, 5])  # no objection
        assert sized.topk(FEW) == ("kernel", [2, 3])  # soft should not: kernel takes it
        assert sized.topk(MANY, k=5) == ("soft", MANY)
        # soft should not, kernel cannot: the reference, which takes every call.
        assert sized.topk(FEW, k=5) == ("reference", FEW)
    assert dict(sized.state.declines) == {
        ("topk", "soft", SMALL): 2,
        ("topk", "kernel", "k=5 is beyond the kernel's 3"): 1,
    }


def test_a_soft_decline_alone_or_before_a_raised_one_ends_on_the_reference(sized):
    with coheriq.using_engine(sized.name, "soft"):
        assert sized.topk(FEW) == ("reference", [2, 3])
    with coheriq.using_engine(sized.name, ["soft", "compiled", "plain"]):
        assert sized.topk(FEW, k=5) == ("plain", FEW)  # compiled raised its decline
    with coheriq.using_engine(sized.name, ["kernel", "soft"]):  # the soft one later
        assert sized.topk(FEW, k=5) == ("reference", FEW)
        assert sized.topk(MANY, k=5) == ("soft", MANY)


def test_a_soft_decline_through_self_goes_on_along_the_mro(sized):
    # The hybrid's own method, as its code reaches it (self.topk): along its MRO only.
    hybrid = coheriq.engine_class(sized.name, "softhybrid")()
    assert hybrid.topk(FEW) == ("kernel", [2, 3])
    assert hybrid.topk(FEW, k=5) == ("reference", FEW)


def test_explain_and_profile_say_a_soft_decline_as_a_decline(sized):
    with coheriq.using_engine(sized.name, ["soft", "kernel"]):
        few = coheriq.explain(sized.topk, FEW)
        stuck = coheriq.explain(sized.topk, FEW, k=5)
        with coheriq.profile() as prof:
            sized.topk(FEW)
    assert (few.answers, few.declines) == ("kernel", [f"soft should not run it: {SMALL}"])
    assert (stuck.answers, stuck.declines) == (
        "reference",
        [f"soft should not run it: {SMALL}", "kernel declines: k=5 is beyond the kernel's 3"],
    )
    rows = {(r.candidate, r.engine, r.reason): r.count for r in prof.declines}
    assert rows == {("topk", "soft", SMALL): 1}


def test_a_soft_decline_needs_a_check():
    with pytest.raises(coheriq.CoheriqTypeError, match=r"soft=True\) needs a check"):
        coheriq.may_decline(soft=True)
    with pytest.raises(coheriq.CoheriqTypeError, match=r"soft=True\) needs a check"):
        coheriq.may_decline(lambda self: None, soft=True)
    with pytest.raises(coheriq.CoheriqTypeError, match=r"soft=True\) needs a check"):
        coheriq.may_decline(when=lambda self: None, soft="yes")


def test_a_declared_crossover_declines_smaller_calls_softly_and_says_so(sized):
    rows = coheriq.crossover(size=lambda self, xs, k=2: len(xs), default=4, unit="rows")

    class Declared(coheriq.engine_class(sized.name), name="declared"):
        @rows
        def topk(self, xs, k=2):
            return ("declared", sorted(xs)[-k:])

    reason = "fewer than 4 rows: below the crossover declared by the engine, not measured here"
    with coheriq.using_engine(sized.name, ["declared", "kernel"]):
        assert sized.topk(MANY) == ("declared", [4, 5])
        assert sized.topk(FEW) == ("kernel", [2, 3])
        assert sized.topk(FEW, k=5) == ("reference", FEW)  # kernel cannot
        assert coheriq.explain(sized.topk, FEW).declines == [
            f"declared should not run it: {reason}"
        ]
    assert sized.state.declines[("topk", "declared", reason)] == 2


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"size": 3, "default": 4}, r"crossover\(size=...\) takes a function"),
        ({"size": len, "default": -1}, r"crossover\(default=...\) takes the size"),
        ({"size": len, "default": True}, r"crossover\(default=...\) takes the size"),
        ({"size": len, "default": 4, "unit": " "}, r"crossover\(unit=...\) takes what"),
    ],
)
def test_a_crossover_is_declared_with_a_size_function_a_count_and_a_unit(options, message):
    with pytest.raises(coheriq.CoheriqTypeError, match=message):
        coheriq.crossover(**options)
