"""Verification: an engine and another implementation run side by side (coheriq.verify)."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import threading
import warnings

import pytest

import coheriq


@pytest.fixture
def stats(unique):
    """A library of three function candidates and a class, and an engine 'buggy' of it."""
    name = unique("vlib")
    domain = coheriq.AccelerationDomain(name, env_prefix=name.upper())
    calls = {"draw": 0, "reference inner": 0}

    @domain.acceleration_candidate
    def mean(xs):
        return sum(xs) / len(xs)

    @domain.acceleration_candidate
    def pop_last(xs):
        return xs.pop()

    @domain.acceleration_candidate
    def inner(x):
        calls["reference inner"] += 1
        return x + 1

    @domain.acceleration_candidate
    def outer(x):
        return inner(x) * 2

    @domain.acceleration_candidate(side_effects=True)
    def draw():
        calls["draw"] += 1
        return calls["draw"]

    @domain.acceleration_candidate
    class Box:
        def __init__(self, values):
            self.values = list(values)

    @domain.acceleration_candidate
    def total(box):
        return sum(box.values)

    domain.materialize()

    class Buggy(coheriq.engine_class(name), name="buggy"):
        def mean(self, xs):
            if not xs:
                return 0.0  # the reference raises ZeroDivisionError
            return sum(xs) // len(xs)  # wrong where the mean is not whole

        def pop_last(self, xs):
            return xs.pop()  # mutates its argument, as the reference does

        def draw(self):
            calls["draw"] += 1  # as the reference does: a call with side effects
            return calls["draw"]

        def outer(self, x):
            return inner(x) * 2  # calls the library: part of this call, not verified alone

        def total(self, box):
            if len(box.values) > 2:
                raise ValueError("too many values")  # the reference does not raise
            return sum(box.values)

    class Good(coheriq.engine_class(name), name="good"):
        def mean(self, xs):
            return sum(xs) / len(xs) * (1 + 1e-12)  # within the default tolerance

    class Namespace:
        pass

    lib = Namespace()
    lib.__dict__.update(
        name=name,
        domain=domain,
        mean=mean,
        pop_last=pop_last,
        inner=inner,
        outer=outer,
        draw=draw,
        Box=Box,
        total=total,
        calls=calls,
    )
    return lib


def test_a_wrong_result_is_caught_and_the_program_gets_the_engines(stats):
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        got = stats.mean([1, 2]), stats.mean([2, 4])
    assert got == (1, 3)  # the engine's results, the wrong one included
    assert not check.ok
    [row] = check.rows
    assert (row.candidate, row.calls, row.compared, row.mismatches) == ("mean", 2, 2, 1)
    [mismatch] = check.mismatches
    assert mismatch.arguments == "([1, 2])"
    assert mismatch.difference.startswith("result: 1 against 1.5")
    assert "mean([1, 2])" in str(check) and "mismatch" in str(check)
    assert stats.mean([1, 2]) == 1.5  # after the block: the reference, not verified


def test_numbers_within_the_tolerance_agree_and_the_tolerance_is_the_users(stats):
    with coheriq.verify(stats.name, "good", on_mismatch="record") as loose:
        stats.mean([1.0, 2.0])
    with coheriq.verify(stats.name, "good", on_mismatch="record", rtol=1e-15) as strict:
        stats.mean([1.0, 2.0])
    assert loose.ok and not strict.ok


@pytest.fixture
def given(unique):
    """A domain whose one candidate returns its argument's first item, and an engine
    'second' whose override returns the second: a result is chosen by the call."""
    name = unique("glib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def pick(pair):
        return pair[0]

    domain.materialize()

    class Second(coheriq.engine_class(name), name="second"):
        def pick(self, pair):
            return pair[1]

    return name, pick


INF = float("inf")


@pytest.mark.parametrize(
    ("reference", "engine", "agree"),
    [
        (INF, 1e308, False),
        (1e308, INF, False),
        (INF, -INF, False),
        (complex(INF, 0), complex(1, 0), False),
        (INF, INF, True),
        (-INF, -INF, True),
    ],
)
def test_an_infinity_equals_only_itself(given, reference, engine, agree):
    name, pick = given
    with coheriq.verify(name, "second", on_mismatch="record") as check:
        pick((reference, engine))
    assert check.ok is agree, check.mismatches
    if not agree:
        [mismatch] = check.mismatches
        assert mismatch.difference == f"result: {engine!r} against {reference!r}"


@pytest.mark.parametrize(
    ("reference", "engine"),
    [([1, 2], (1, 2)), (range(2), [0, 1]), (1, 1.0), (True, 1), (0, False), ({"a": 1}, {"a": 1.0})],
)
def test_what_verification_treats_as_equal_on_purpose(given, reference, engine):
    # The user guide says so: sequences by their items, numbers by their value.
    name, pick = given
    with coheriq.verify(name, "second", on_mismatch="record") as check:
        pick((reference, engine))
    assert check.ok, check.mismatches


def test_an_exception_on_one_side_only_is_a_mismatch(stats):
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        assert stats.mean([]) == 0.0  # only the reference raises
        with pytest.raises(ValueError, match="too many"):  # only the engine raises
            stats.total(stats.Box([1, 2, 3]))
        assert stats.total(stats.Box([1, 2])) == 3
    differences = sorted(m.difference for m in check.mismatches)
    assert differences == [
        "only reference raised: ZeroDivisionError('division by zero')",
        "only the engine raised: ValueError('too many values')",
    ]
    assert all(m.kind == "exception" for m in check.mismatches)
    assert {r.candidate: r.one_sided for r in check.rows} == {"mean": 1, "total": 1}


def test_the_same_exception_on_both_sides_agrees(stats):
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        with pytest.raises(IndexError):
            stats.pop_last([])
    assert check.ok and check.rows[0].compared == 1


def test_neither_side_sees_what_the_other_changes(stats):
    xs = [1, 2, 3]
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        assert stats.pop_last(xs) == 3
    # Popped once, by the engine: the reference popped its own copy, taken before
    # the engine ran, so it saw [1, 2, 3] too and agreed.
    assert xs == [1, 2]
    assert check.ok and check.rows[0].compared == 1


def test_calls_inside_a_verified_call_are_part_of_it(stats):
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        assert stats.outer(1) == 4
    assert [(r.candidate, r.calls) for r in check.rows] == [("outer", 1)]
    # The reference's outer ran inner on the reference too, once.
    assert stats.calls["reference inner"] == 2  # once for each side


def test_a_candidate_with_side_effects_is_not_run_twice(stats):
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        assert [stats.draw(), stats.draw()] == [1, 2]
    assert stats.calls["draw"] == 2
    [row] = check.rows
    assert (row.calls, row.compared, row.not_compared) == (2, 0, 2)
    assert "side effects" in row.notes[0]


def test_a_candidate_with_side_effects_runs_once_where_a_verified_call_reaches_it(unique):
    name = unique("slib")
    domain = coheriq.AccelerationDomain(name)
    written = []

    @domain.acceleration_candidate(side_effects=True)
    def save(line):
        written.append(line)

    @domain.acceleration_candidate
    def report(xs):
        total = sum(xs)
        try:
            save(f"total {total}")
        except Exception:  # a library that goes on where writing fails
            pass
        return total

    domain.materialize()

    class E(coheriq.engine_class(name), name="e"):
        def report(self, xs):
            total = sum(xs)
            save(f"total {total}")
            return total

    with coheriq.verify(name, "e", on_mismatch="record") as check:
        assert report([1, 2]) == 3
    assert written == ["total 3"]  # the engine's call of save only
    [row] = check.rows
    assert (row.calls, row.compared, row.not_compared, row.mismatches) == (1, 0, 1, 0)
    assert row.notes == [
        f"the other side reached {name}.save, marked with side effects: it was stopped "
        "there, so that the candidate does not run twice, and the call was not compared"
    ]
    assert report([3]) == 3 and written == ["total 3", "total 3"]  # after: as before


def test_constructions_are_not_compared_and_objects_are_copied_by_the_librarys_rule(stats):
    made = []

    def copy_box(box):
        made.append(coheriq.active_implementation(stats.name))
        return stats.Box(box.values)  # in the other side's block: its Box

    stats.domain.register_comparison(stats.Box, copy=copy_box)
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        box = stats.Box([1, 2])
        assert stats.total(box) == 3
    assert [r.candidate for r in check.rows] == ["total"]
    assert made == ["reference"]


def test_the_librarys_conversion_and_comparison_rules(stats):
    stats.domain.register_comparison(stats.mean, compare=lambda a, b: abs(a - b) < 1)
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        stats.mean([1, 2])
    assert check.ok
    stats.domain.register_comparison(stats.mean, convert=round)
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        stats.mean([1, 2])  # 1 against round(1.5) == 2
    assert check.mismatches[0].difference == "result: 1 against 2"
    stats.domain.register_comparison("mean", rtol=0.5)
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        stats.mean([1, 2])
    assert check.ok


def test_register_comparison_refuses_what_it_cannot_use(stats, unique):
    other = coheriq.AccelerationDomain(unique("other"))

    @other.acceleration_candidate
    def elsewhere(x):
        return x

    other.materialize()
    domain = stats.domain
    with pytest.raises(coheriq.CoheriqTypeError, match="Did you mean 'mean'"):
        domain.register_comparison("maen", rtol=1e-3)
    with pytest.raises(coheriq.CoheriqTypeError, match="candidate of domain"):
        domain.register_comparison(elsewhere, rtol=1e-3)
    with pytest.raises(coheriq.CoheriqTypeError, match="rtol= is a number of at least 0"):
        domain.register_comparison(float, rtol=-1)
    with pytest.raises(coheriq.CoheriqTypeError, match="convert= takes a function"):
        domain.register_comparison(float, convert=3)
    with pytest.raises(coheriq.CoheriqTypeError, match="copy= is given per type"):
        domain.register_comparison(stats.mean, copy=list)
    with pytest.raises(coheriq.CoheriqTypeError, match="side_effects is True or False"):
        domain.acceleration_candidate(side_effects="yes")


def test_a_comparison_that_returns_something_else_is_an_error(stats):
    stats.domain.register_comparison(stats.mean, compare=lambda a, b: None)
    with coheriq.verify(stats.name, "buggy", on_mismatch="record"):
        with pytest.raises(coheriq.CoheriqTypeError, match="must return True"):
            stats.mean([1, 2])


def test_sampling_every_nth_call_and_a_time_budget(stats):
    with coheriq.verify(stats.name, "buggy", every=3, on_mismatch="record") as check:
        for _ in range(7):
            stats.mean([1, 2])
    [row] = check.rows
    assert (row.calls, row.compared, row.mismatches, row.not_compared) == (7, 3, 3, 4)
    assert row.notes == ["sampled: every 3th call is compared"]
    with coheriq.verify(stats.name, "buggy", budget=0, on_mismatch="record") as spent:
        stats.mean([1, 2])
    assert spent.rows[0].compared == 0 and "budget" in spent.rows[0].notes[0]


def test_a_mismatch_warns_at_the_callers_line_or_raises(stats):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with coheriq.verify(stats.name, "buggy"):
            stats.mean([1, 2])  # the line the warning names
    [warning] = caught
    assert warning.category is coheriq.CoheriqVerificationWarning
    assert warning.filename == __file__
    assert "mean([1, 2])" in str(warning.message)
    with coheriq.verify(stats.name, "buggy", on_mismatch="raise"):
        with pytest.raises(coheriq.CoheriqVerificationError, match=r"1 against 1\.5") as raised:
            stats.mean([1, 2])
        assert isinstance(raised.value, AssertionError)
        assert stats.mean([2, 4]) == 3  # agreeing calls go on


def test_the_options_are_checked(stats):
    for options, words in [
        ({"every": 0}, "every is a whole number"),
        ({"budget": -1}, "budget is a number of seconds"),
        ({"on_mismatch": "explode"}, "on_mismatch is 'warn', 'record' or 'raise'"),
        ({"rtol": "tight"}, "rtol is a number"),
    ]:
        with pytest.raises(coheriq.CoheriqTypeError, match=words):
            coheriq.verify(stats.name, "buggy", **options)
    with pytest.raises(coheriq.CoheriqTypeError, match="both are 'buggy'"):
        with coheriq.verify(stats.name, "buggy", against="buggy"):
            pass
    with pytest.raises(coheriq.CoheriqEngineNotFoundError, match=r"(?i)did you mean 'buggy'"):
        with coheriq.verify(stats.name, "bugy"):
            pass
    assert not coheriq.explain(stats.name).settled  # nothing was left open


def test_two_engines_compared_and_a_decorated_function(stats):
    @coheriq.verify(stats.name, "buggy", against="good", on_mismatch="record")
    def work():
        return stats.mean([1, 2])

    assert work() == 1
    assert work.__name__ == "work"


def test_explain_says_verification_is_on(stats):
    with coheriq.verify(stats.name, "buggy"):
        explained = coheriq.explain(stats.name)
    assert "compared" in explained.verification and "coheriq.verify" in explained.verification
    assert "verification: on" in str(explained)
    assert coheriq.explain(stats.name).verification is None


def test_asyncio_tasks_inherit_it_and_threads_take_it_through_a_snapshot(stats):
    async def in_a_task():
        return await asyncio.create_task(asyncio.to_thread(lambda: None)) or stats.mean([1, 2])

    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        assert asyncio.run(in_a_task()) == 1
        snap = coheriq.snapshot()
        results = []
        plain = threading.Thread(target=lambda: results.append(stats.mean([1, 2])))
        carried = threading.Thread(target=snap.wrap(lambda: results.append(stats.mean([1, 2]))))
        for thread in (plain, carried):
            thread.start()
            thread.join()
    assert results == [1.5, 1]  # a new thread starts without the block; the snapshot carries it
    assert check.rows[0].calls == 2  # the task's call and the carried thread's
    assert snap.environ() == {
        f"{stats.name.upper()}_ENGINE": "buggy",
        f"{stats.name.upper()}_VERIFY": "buggy:reference",
    }


def test_off_leaves_the_proxies_fast_path_as_it_was(stats):
    stats.mean([1])  # settles the domain

    def python_calls():
        seen = []

        def count(frame, event, arg):
            if event == "call":
                seen.append(frame.f_code.co_name)

        sys.setprofile(count)
        try:
            stats.mean([1, 2])
        finally:
            sys.setprofile(None)
        return seen

    before = python_calls()
    with coheriq.verify(stats.name, "buggy", on_mismatch="record"):
        assert len(python_calls()) > len(before)
    assert python_calls() == before


ENVLIB = """
import coheriq
lib = coheriq.AccelerationDomain("envlib", env_prefix="ENVLIB")

@lib.acceleration_candidate
def half(x):
    return x / 2

lib.materialize()

class Floor(coheriq.engine_class("envlib"), name="floor"):
    def half(self, x):
        return x // 2
"""

ENVIRONMENT_PROGRAM = (
    ENVLIB
    + """
print(half(3), half(4), coheriq.explain("envlib").engine)
"""
)


def test_the_environment_variable_verifies_the_whole_process_and_reports_at_exit(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(ENVIRONMENT_PROGRAM)
    done = python(str(program), timeout=60, ENVLIB_VERIFY="floor")
    assert done.returncode == 1, done.stderr  # a difference fails the process
    assert done.stdout.split() == ["1", "2", "floor"]  # the engine named runs, and its results
    assert "ENVLIB_VERIFY" in done.stderr and "'floor' against 'reference'" in done.stderr
    assert "envlib.half(3) (call 1): result: 1 against 1.5" in done.stderr
    assert "CoheriqVerificationWarning" in done.stderr


def test_a_blank_engine_in_the_environment_variable_is_an_error(tmp_path):
    program = tmp_path / "program.py"
    program.write_text(ENVIRONMENT_PROGRAM)
    done = python(str(program), timeout=60, ENVLIB_VERIFY=":floor")
    assert done.returncode == 1
    assert "ENVLIB_VERIFY=':floor' names no engine to verify" in done.stderr


EXITING_PROGRAM = (
    """
import atexit, sys
atexit.register(print, "exit handler registered before coheriq")
"""
    + ENVLIB
    + """
atexit.register(print, "exit handler registered after")
left_open = open(sys.argv[1], "w")
left_open.write("written, never closed")
print(half(int(sys.argv[2])))
if sys.argv[3:] == ["interrupt"]:
    raise KeyboardInterrupt
"""
)


def test_a_difference_found_by_the_environment_variable_fails_the_process(tmp_path):
    program, written = tmp_path / "program.py", tmp_path / "out.txt"
    program.write_text(EXITING_PROGRAM)

    def run(*args, **variables):
        return python(str(program), str(written), *args, timeout=60, **variables)

    agreed, differed = run("4", ENVLIB_VERIFY="floor"), run("3", ENVLIB_VERIFY="floor")
    assert agreed.returncode == 0, agreed.stderr
    assert differed.returncode == 1, differed.stderr
    assert "envlib.half(3) (call 1): result: 1 against 1.5" in differed.stderr
    # The program's exit handlers ran, once each and in their order, and its files
    # were written out, as without verification.
    for done in (agreed, differed):
        assert done.stdout.splitlines()[1:] == [
            "exit handler registered after",
            "exit handler registered before coheriq",
        ]
    assert written.read_text() == "written, never closed"
    # A program that fails already keeps its own status.
    interrupted = run("3", "interrupt", ENVLIB_VERIFY="floor")
    assert "envlib.half(3) (call 1)" in interrupted.stderr
    assert interrupted.returncode == run("3", "interrupt").returncode != 0


WRONG_RAGBATCH_ENGINE = """
import coheriq, ragbatch

class OffByOne(coheriq.engine_class("ragbatch"), name="off_by_one"):
    # A deliberately wrong engine: each row's sum is one too many.
    def row_sum(self, batch):
        return [sum(row) + 1.0 for row in batch]

batch = ragbatch.RaggedBatch([[1.0, 2.0], [3.0]])
print(ragbatch.row_sum(batch), ragbatch.row_mean(batch))
"""


def test_ragbatch_verify_with_a_wrong_engine_exits_non_zero(tmp_path):
    pytest.importorskip("ragbatch", reason="the ragbatch example is not installed")
    program = tmp_path / "program.py"
    program.write_text(WRONG_RAGBATCH_ENGINE)
    done = python(str(program), timeout=120, RAGBATCH_VERIFY="off_by_one")
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines() == ["[4.0, 4.0] [1.5, 3.0]"]  # the engine's results
    [mismatch] = [line for line in done.stderr.splitlines() if line.startswith("mismatch:")]
    assert mismatch.startswith("mismatch: ragbatch.row_sum(RaggedBatch(")
    assert "(call 1): result[0]: 4.0 against 3.0" in mismatch


LIBRARY = """
import coheriq

lib = coheriq.AccelerationDomain("suitelib")

@lib.acceleration_candidate
def half(x):
    return x / 2

lib.materialize()

class Floor(coheriq.engine_class("suitelib"), name="floor"):
    def half(self, x):
        return x // 2
"""

SUITE = """
from suitelib import half

def test_even():
    assert half(4) == 2

def test_odd():
    half(3)
"""


@pytest.mark.slow
def test_the_pytest_option_fails_the_test_whose_calls_disagree(tmp_path):
    (tmp_path / "suitelib.py").write_text(LIBRARY)
    (tmp_path / "test_suite.py").write_text(SUITE)
    done = python(
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "test_suite.py",
        "--coheriq-verify=suitelib:floor",
        "-q",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "1 failed, 1 passed" in done.stdout
    assert "FAILED test_suite.py::test_odd" in done.stdout
    assert "suitelib.half(3) (call 2): result: 1 against 1.5" in done.stdout
    assert "coheriq verification" in done.stdout  # the summary table


def test_the_pytest_option_checks_its_value(tmp_path):
    (tmp_path / "suitelib.py").write_text(LIBRARY)
    (tmp_path / "test_suite.py").write_text(SUITE)
    done = python(
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "test_suite.py",
        "--coheriq-verify=suitelib",
        cwd=tmp_path,
    )
    assert done.returncode == 4
    assert "is not DOMAIN:ENGINE or DOMAIN:ENGINE:AGAINST" in done.stderr


def python(*args, cwd=None, timeout=120, **variables):
    """Run this Python with ``args``, in an environment with no engine or verification set."""
    import os

    environ = {k: v for k, v in os.environ.items() if not k.endswith(("_VERIFY", "_ENGINE"))}
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**environ, **variables},
    )


@pytest.fixture
def async_lib(unique):
    """A domain with an ``async def`` candidate and a generator candidate, and an
    engine "off" whose results differ from the reference's."""
    name = unique("alib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    async def fetch(x):
        await asyncio.sleep(0)
        return x * 2

    @domain.acceleration_candidate
    def count(n):
        yield from range(n)

    domain.materialize()

    class Off(coheriq.engine_class(name), name="off"):
        async def fetch(self, x):
            await asyncio.sleep(0)
            return x * 2 + 1

        def count(self, n):
            yield from range(n + 1)

    return name, fetch, count


def test_async_candidates_are_awaited_on_both_sides_and_generators_are_not_compared(async_lib):
    name, fetch, count = async_lib

    async def main():
        with coheriq.verify(name, "off", on_mismatch="record") as check:
            got = await fetch(1)
            items = list(count(2))
        return check, got, items

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a coroutine never awaited would warn
        check, got, items = asyncio.run(main())
    assert (got, items) == (3, [0, 1, 2])
    [mismatch] = check.mismatches
    assert mismatch.difference == "result: 3 against 2"
    rows = {row.candidate: row for row in check.rows}
    assert rows["count"].not_compared == 1
    assert rows["count"].notes == ["a generator function: what it yields is not compared"]


def test_an_interrupted_engine_call_leaves_later_calls_verified(stats, unique):
    name = unique("klib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def work(x):
        return x

    domain.materialize()

    class Stops(coheriq.engine_class(name), name="stops"):
        def work(self, x):
            if x == 0:
                raise KeyboardInterrupt
            return x + 1

    with coheriq.verify(name, "stops", on_mismatch="record") as check:
        with pytest.raises(KeyboardInterrupt):
            work(0)
        work(1)
    [row] = check.rows
    assert (row.calls, row.compared, row.mismatches) == (2, 1, 1)


PROGRAM = """
from suitelib import half
print("halves", half(4), half(3))
"""


@pytest.mark.slow
def test_the_command_runs_a_program_verified_and_reports_after_its_output(tmp_path):
    (tmp_path / "suitelib.py").write_text(LIBRARY)
    (tmp_path / "program.py").write_text(PROGRAM)

    def verify(*args):
        return python("-m", "coheriq", *args, cwd=tmp_path, PYTHONPATH=str(tmp_path))

    done = verify("verify", "suitelib", "floor", "program.py")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "halves 2 1"  # the program's output, with the engine's results
    assert lines[1] == "verification of 'suitelib': 'floor' against 'reference'"
    assert "suitelib.half(3) (call 2): result: 1 against 1.5" in done.stdout
    as_json = verify("--json", "verify", "suitelib", "floor", "-m", "program")
    report = json.loads(as_json.stdout.split("\n", 1)[1])
    assert report["ok"] is False and report["candidates"][0]["mismatches"] == 1
    nothing = verify("verify", "suitelib", "floor")
    assert nothing.returncode == 2 and "verify needs a program to run" in nothing.stderr


# -- from a hostile pass ------------------------------------------------------------------


@pytest.fixture
def inplace(unique):
    """A library of functions that work on their arguments, and an engine 'e' of it."""
    name = unique("ilib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def push_and_count(xs, ys):
        xs.append(1)
        return len(ys)

    @domain.acceleration_candidate
    def take(xs):
        return xs.pop()

    @domain.acceleration_candidate
    def scale(xs, k):
        for i, x in enumerate(xs):
            xs[i] = x * k

    domain.materialize()

    class E(coheriq.engine_class(name), name="e"):
        def push_and_count(self, xs, ys):
            xs.append(1)
            return len(ys)

        def take(self, xs):
            return xs.pop(0)  # the first, not the last

        def scale(self, xs, k):
            for i, x in enumerate(xs):
                xs[i] = x + k  # adds instead: returns None, as the reference does

    return name, push_and_count, take, scale


def test_arguments_that_alias_each_other_alias_in_the_copy_too(inplace):
    name, push_and_count, _, _ = inplace
    with coheriq.verify(name, "e", on_mismatch="record") as check:
        a = []
        assert push_and_count(a, a) == 1
    assert check.ok, check.mismatches


def test_a_mismatch_shows_the_arguments_as_the_call_was_made(inplace):
    name, _, take, _ = inplace
    with coheriq.verify(name, "e", on_mismatch="record") as check:
        take([1, 2, 3])
    [mismatch] = check.mismatches
    assert mismatch.arguments == "([1, 2, 3])"
    assert mismatch.difference == "result: 1 against 3"


def test_what_a_function_leaves_in_its_arguments_is_compared(inplace):
    name, _, _, scale = inplace
    xs = [1, 2, 3]
    with coheriq.verify(name, "e", on_mismatch="record") as check:
        assert scale(xs, 10) is None
    assert xs == [11, 12, 13]  # what the engine left
    [mismatch] = check.mismatches
    assert mismatch.difference == "argument 0 after the call[0]: 11 against 10"


def test_objects_compared_by_identity_are_not_a_difference_after_the_call(unique):
    name = unique("olib")
    domain = coheriq.AccelerationDomain(name)

    class Settings:  # no __eq__: a copy never equals its original
        pass

    @domain.acceleration_candidate
    def run(settings, x):
        return x

    domain.materialize()

    class E(coheriq.engine_class(name), name="e"):
        def run(self, settings, x):
            return x

    with coheriq.verify(name, "e", on_mismatch="record") as check:
        run(Settings(), 1)
    assert check.ok


class Mask:
    """What a NumPy-style ``==`` answers: one bool per item, and no single truth."""

    def __init__(self, bits):
        self.bits = bits

    def __bool__(self):
        raise ValueError("the truth value of a mask of more than one bit is ambiguous")

    def all(self):
        return all(self.bits)


class Grid:
    """A container whose ``==`` is elementwise (NumPy style), with no ``tolist()``."""

    def __init__(self, values):
        self.values = list(values)

    def __eq__(self, other):
        return Mask([a == b for a, b in zip(self.values, other.values, strict=True)])

    def __repr__(self):
        return f"{type(self).__name__}({self.values})"


class Row(Grid):
    """A container whose elementwise ``==`` answers with a plain list of bools."""

    def __eq__(self, other):
        return [a == b for a, b in zip(self.values, other.values, strict=True)]


@pytest.mark.parametrize("kind", [Grid, Row])
def test_arguments_whose_eq_is_elementwise_are_compared_by_their_items(unique, kind):
    name = unique("elib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def total(grid):
        return sum(grid.values)

    @domain.acceleration_candidate
    def clear(grid):
        grid.values[0] = 0

    domain.materialize()

    class E(coheriq.engine_class(name), name="e"):
        def total(self, grid):
            return sum(grid.values)  # leaves the grid as it was

        def clear(self, grid):
            grid.values[:] = [0] * len(grid.values)  # clears every item, not the first

    with coheriq.verify(name, "e", on_mismatch="record") as check:
        assert total(kind([1, 2])) == 3
        clear(kind([1, 2]))
    rows = {row.candidate: row for row in check.rows}
    assert (rows["total"].compared, rows["total"].mismatches) == (1, 0)
    [mismatch] = check.mismatches
    kind = kind.__name__
    assert (
        mismatch.difference == f"argument 0 after the call: {kind}([0, 0]) against {kind}([0, 2])"
    )


def test_a_comparison_of_the_arguments_that_raises_is_reported_not_raised(stats):
    # The library's rule cannot read an empty box; the call itself is fine.
    stats.domain.register_comparison(stats.Box, convert=lambda box: box.values[0])
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        assert stats.total(stats.Box([])) == 0  # the engine's result, not an IndexError
    [mismatch] = check.mismatches
    assert mismatch.difference == (
        "comparing the arguments after the call raised IndexError('list index out of range')"
    )


def test_one_verification_entered_by_two_threads_ends_each_threads_own_block(stats):
    check = coheriq.verify(stats.name, "buggy", on_mismatch="record")
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()

    @check
    def job_a():
        a_in.set()
        b_in.wait(5)
        return stats.mean([1, 2])

    @check
    def job_b():
        b_in.set()
        a_out.wait(5)
        return stats.mean([1, 2])

    seen = {}

    def run_a():
        seen["a"] = (job_a(), stats.mean([1, 2]))
        a_out.set()

    def run_b():
        a_in.wait(5)
        seen["b"] = (job_b(), stats.mean([1, 2]))

    threads = [threading.Thread(target=run_a), threading.Thread(target=run_b)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    # Each job ran on the engine, verified; after its own block, each thread is back.
    assert seen == {"a": (1, 1.5), "b": (1, 1.5)}
    assert check.rows[0].calls == 2


def test_calls_into_another_domain_from_a_verified_call_are_verified_there(stats, unique):
    other = unique("blib")
    domain = coheriq.AccelerationDomain(other)

    @domain.acceleration_candidate
    def double(x):
        return 2 * x

    domain.materialize()

    class Wrong(coheriq.engine_class(other), name="wrong"):
        def double(self, x):
            return 2 * x + 1

    class UsesOther(coheriq.engine_class(stats.name), name="uses_other"):
        def inner(self, x):
            return double(x)

    with (
        coheriq.verify(stats.name, "uses_other", on_mismatch="record") as outer,
        coheriq.verify(other, "wrong", on_mismatch="record") as inner,
    ):
        stats.inner(1)
    assert [r.calls for r in inner.rows] == [1] and not inner.ok
    assert [r.calls for r in outer.rows] == [1]


def test_a_compare_may_answer_with_a_numpy_style_bool(stats):
    class bool_:  # named as NumPy's is
        def __init__(self, value):
            self.value = value

        def __bool__(self):
            return self.value

    stats.domain.register_comparison(stats.mean, compare=lambda a, b: bool_(abs(a - b) < 1))
    with coheriq.verify(stats.name, "buggy", on_mismatch="record") as check:
        stats.mean([1, 2])
    assert check.ok


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("reference", "compares 'reference' with itself"),
        ("floor:floor", "compares 'floor' with itself"),
        ("floor,other", "names more than two implementations"),
        ("floor:reference:other", "names more than two implementations"),
    ],
)
def test_an_environment_variable_that_compares_nothing_is_an_error(tmp_path, value, said):
    program = tmp_path / "program.py"
    program.write_text(ENVIRONMENT_PROGRAM)
    done = python(str(program), timeout=60, ENVLIB_VERIFY=value)
    assert done.returncode == 1
    assert f"ENVLIB_VERIFY={value!r} {said}" in done.stderr


ISOLATED_SUITE = """
import coheriq
from suitelib import half

def test_in_a_world_of_its_own(coheriq_isolated):
    lib = coheriq.AccelerationDomain("own")

    @lib.acceleration_candidate
    def one():
        return 1

    lib.materialize()
    assert one() == 1

def test_odd():
    half(3)
"""


@pytest.mark.slow
def test_the_pytest_option_and_isolated_tests_and_one_verification_per_domain(tmp_path):
    (tmp_path / "suitelib.py").write_text(LIBRARY)
    (tmp_path / "test_suite.py").write_text(ISOLATED_SUITE)

    def pytest_run(*options):
        return python(
            "-m", "pytest", "-p", "no:cacheprovider", "test_suite.py", *options, cwd=tmp_path
        )

    done = pytest_run("--coheriq-verify=suitelib:floor", "-q")
    assert "1 failed, 1 passed" in done.stdout, done.stdout  # only test_odd disagrees
    twice = pytest_run("--coheriq-verify=suitelib:floor", "--coheriq-verify=suitelib:floor:x")
    assert twice.returncode == 4 and "names domain 'suitelib' more than once" in twice.stderr


SCRIPTS = {
    "raises.py": "from suitelib import half\nhalf(3)\nraise ValueError('the program failed')\n",
    "exits.py": "from suitelib import half\nhalf(4)\nimport sys\nsys.exit('fatal: stopped')\n",
    "sibling.py": "import helper\nprint('helper says', helper.WORD)\n",
    "helper.py": "WORD = 'hello'\n",
}


@pytest.mark.slow
def test_the_command_runs_programs_as_python_does_and_always_reports(tmp_path):
    (tmp_path / "suitelib.py").write_text(LIBRARY)
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    for file, text in SCRIPTS.items():
        (scripts / file).write_text(text)

    def verify(*args):
        return python(
            "-m",
            "coheriq",
            "verify",
            "suitelib",
            "floor",
            *args,
            cwd=tmp_path,
            PYTHONPATH=str(tmp_path),
        )

    raised = verify("scripts/raises.py")
    assert raised.returncode == 1
    assert "ValueError: the program failed" in raised.stderr
    assert "suitelib.half(3) (call 1)" in raised.stdout  # the report, all the same
    exited = verify("scripts/exits.py")
    assert exited.returncode == 1 and "fatal: stopped" in exited.stderr
    assert "verification of 'suitelib'" in exited.stdout
    sibling = verify("scripts/sibling.py")  # its own directory is sys.path[0]
    assert sibling.returncode == 0 and "helper says hello" in sibling.stdout
    after = verify("--against", "reference", "--every", "2", "scripts/raises.py")
    assert "suitelib.half(3)" in after.stdout
    missing = verify("scripts/nothing.py")
    assert missing.returncode == 2 and "there is no script 'scripts/nothing.py'" in missing.stderr


def test_results_that_compare_by_identity_only_are_noted_not_mismatched(unique):
    # CPython's statistics.kde returns a function: each side's is another object.
    name = unique("flib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def make_adder(n):
        return lambda x: x + n

    domain.materialize()

    class E(coheriq.engine_class(name), name="e"):
        def make_adder(self, n):
            return lambda x: x + n

    with coheriq.verify(name, "e", on_mismatch="record") as check:
        assert make_adder(1)(1) == 2
    [row] = check.rows
    assert (row.compared, row.not_comparable, row.mismatches) == (0, 1, 0)
    assert row.notes == [
        "results of type 'function' compare by identity only and were not compared "
        "(counted as not comparable): the library, or the engine's author, can register a "
        "comparison for the type"
    ]


def test_an_engine_that_returns_nothing_is_a_mismatch(unique):
    # A forgotten return: None, whose type compares by identity only, against the
    # reference's result, whatever it is. Only two such objects of one kind are noted.
    name = unique("rlib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def mean(xs):
        return sum(xs) / len(xs)

    @domain.acceleration_candidate
    def make_adder(n):
        return lambda x: x + n

    @domain.acceleration_candidate
    def log(message):
        return None

    domain.materialize()

    class Forgot(coheriq.engine_class(name), name="forgot"):
        def mean(self, xs):
            sum(xs) / len(xs)

        def make_adder(self, n):
            lambda x: x + n

        def log(self, message):
            return None

    with coheriq.verify(name, "forgot", on_mismatch="raise"):
        with pytest.raises(coheriq.CoheriqVerificationError, match=r"result: None against 1\.5"):
            mean([1, 2])
        with pytest.raises(
            coheriq.CoheriqVerificationError, match="result: None against <function"
        ):
            make_adder(1)
    with coheriq.verify(name, "forgot", on_mismatch="record") as check:
        log("both return None")
    assert check.ok and check.rows[0].notes == []


def test_objects_of_the_librarys_class_and_an_engines_own_class_for_it_are_noted(unique):
    # Two objects of one kind that compare by identity only: the engine's own class
    # for the library's class is a subclass of it.
    name = unique("klib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    class Box:
        def __init__(self, value):
            self.value = value

    @domain.acceleration_candidate
    def make(value):
        return Box(value)

    domain.materialize()

    class E(coheriq.engine_class(name), name="e"):
        class Box(coheriq.engine_class(name).Box):
            pass

        def make(self, value):
            return self.Box(value)

    with coheriq.verify(name, "e", on_mismatch="record") as check:
        assert type(make(1)).__qualname__.endswith("E.Box")
    [row] = check.rows
    assert (row.compared, row.not_comparable, row.mismatches) == (0, 1, 0)
    [note] = row.notes
    assert note.startswith("results of type ") and "E.Box' compare by identity only" in note


def test_decorating_a_marked_candidate_reads_what_its_code_is(async_lib):
    # A candidate's proxy is a plain function whatever the candidate is: the
    # decorators read the candidate's own code. verify refuses a marked generator
    # function as it refuses an unmarked one (it wrapped it as a plain function
    # before), and wraps a marked coroutine function as a coroutine function.
    name, fetch, count = async_lib
    check = coheriq.verify(name, "off", on_mismatch="record")
    verified_fetch = check(fetch)
    assert inspect.iscoroutinefunction(verified_fetch)
    assert asyncio.run(verified_fetch(1)) == 3  # the block spans the whole await
    [mismatch] = check.mismatches
    assert mismatch.difference == "result: 3 against 2"
    with pytest.raises(coheriq.CoheriqTypeError, match="generator function"):
        check(count)
    scoped_fetch = coheriq.using_engine(name, "off")(fetch)
    assert asyncio.run(scoped_fetch(1)) == 3


# -- issue 50: what a verified call declined, what it did not materialize, what it compares


@pytest.fixture
def nested(unique):
    """A domain whose ``outer`` calls ``inner`` (and ``fib`` itself) through the library,
    and an engine "fast" whose ``inner`` declines small numbers (the reference answers)
    while its ``outer`` and ``fib`` answer every call themselves."""
    name = unique("nlib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def inner(x):
        return x + 1

    @domain.acceleration_candidate
    def outer(x):
        return inner(x) * 2

    @domain.acceleration_candidate
    def by_self(x):
        return inner(x) * 3

    @domain.acceleration_candidate
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    domain.materialize()

    def small(self, x):
        return "small" if x < 10 else None

    class Fast(coheriq.engine_class(name), name="fast"):
        @coheriq.may_decline(when=small)
        def inner(self, x):
            return x + 1

        def outer(self, x):
            return inner(x) * 2  # the library's inner: the engine's, which declines

        def by_self(self, x):
            return self.inner(x) * 3  # the engine's own, which declines

        @coheriq.may_decline(when=small)
        def fib(self, n):
            return fib(n - 1) + fib(n - 2)  # the first call answers; the nested decline

    return name, {"outer": outer, "by_self": by_self, "fib": fib}


@pytest.mark.parametrize(("candidate", "argument"), [("outer", 1), ("by_self", 1), ("fib", 12)])
def test_a_decline_inside_a_verified_call_is_not_the_calls_own(nested, candidate, argument):
    name, functions = nested
    with coheriq.verify(name, "fast", on_mismatch="record") as check:
        functions[candidate](argument)
    [row] = check.rows
    assert (row.candidate, row.compared, row.mismatches) == (candidate, 1, 0)
    assert row.answered == {}  # the engine answered the verified call itself
    assert "declined" not in str(check)


def test_a_declined_async_call_says_which_implementation_answered(unique):
    name = unique("adlib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    async def fetch(x):
        return x * 2

    domain.materialize()

    class Picky(coheriq.engine_class(name), name="picky"):
        @coheriq.may_decline(when=lambda self, x: "odd" if x % 2 else None)
        async def fetch(self, x):
            return x * 2

    async def main():
        with coheriq.verify(name, "picky", on_mismatch="record") as check:
            assert (await fetch(1), await fetch(2)) == (2, 4)
        return check

    check = asyncio.run(main())
    [row] = check.rows
    assert (row.compared, row.mismatches, row.answered) == (2, 0, {"reference": 1})
    assert "1 of the calls on 'picky' were declined and answered by 'reference'" in str(check)


LAZY_PROGRAM = """
import itertools, resource, sys
import coheriq

# A bound on memory: a list of a billion items (8 GB of pointers alone) cannot be made
# here. Not less: a free-threaded build reserves gigabytes of address space for its
# allocator, and could not load an extension module under 1 GiB.
limit = 6 << 30
resource.setrlimit(resource.RLIMIT_AS, (limit, resource.getrlimit(resource.RLIMIT_AS)[1]))

lazy = coheriq.AccelerationDomain("lazylib")

@lazy.acceleration_candidate
def concat(seqs):
    return itertools.chain.from_iterable(seqs)

@lazy.acceleration_candidate
def span(n):
    return range(n)

@lazy.acceleration_candidate
def first(items):
    return next(iter(items))

lazy.materialize()

class Fast(coheriq.engine_class("lazylib"), name="fast"):
    def concat(self, seqs):
        return itertools.chain.from_iterable(seqs)

    def span(self, n):
        return range(n)

    def first(self, items):
        for item in items:
            return item

with coheriq.verify("lazylib", "fast", on_mismatch="raise") as check:
    print(list(itertools.islice(concat([[1, 2], range(10**9)]), 4)))
    print(len(span(10**9)))
    print(first(itertools.count(7)))
    print(first(range(3, 10**9)))
print(check.ok, [(r.candidate, r.compared, r.mismatches) for r in check.rows])
"""


@pytest.mark.skipif(sys.platform == "win32", reason="the memory bound is set with resource")
def test_verification_never_materializes_what_the_call_did_not(tmp_path):
    # toolz's concat([..., range(10**9)]) under --coheriq-verify was killed for memory:
    # comparing the arguments after the call turned the range into a list.
    program = tmp_path / "lazy.py"
    program.write_text(LAZY_PROGRAM)
    done = python(str(program), timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[:4] == ["[1, 2, 0, 1]", "1000000000", "7", "3"]
    # Python 3.14 took copying away from itertools' iterators: there the count cannot be
    # copied for the other side, and that call runs on the engine alone, not compared.
    first = 2 if sys.version_info < (3, 14) else 1
    assert done.stdout.splitlines()[4] == (
        f"True [('concat', 0, 0), ('span', 1, 0), ('first', {first}, 0)]"
    )


def test_only_calls_that_ran_two_implementations_are_compared(unique):
    # toolz's compose, merge: the engine does not override them, the reference ran on
    # both sides, and results holding deep copies of the arguments differed.
    import functools

    name = unique("clib")
    domain = coheriq.AccelerationDomain(name)

    class Composed:
        def __init__(self, functions):
            self.functions = functions

        def __eq__(self, other):
            return isinstance(other, Composed) and self.functions == other.functions

        __hash__ = None

    @domain.acceleration_candidate
    def compose(*functions):
        return Composed(functions)

    @domain.acceleration_candidate
    def double(x):
        return 2 * x

    domain.materialize()

    class Fast(coheriq.engine_class(name), name="fast"):
        def double(self, x):
            return x + x

    class Faster(Fast, name="faster"):
        pass  # runs Fast's double: one implementation

    add_one = functools.partial(lambda a, b: a + b, 1)
    with coheriq.verify(name, "fast", on_mismatch="record") as check:
        assert compose(add_one).functions == (add_one,)
        assert double(2) == 4
    assert check.ok, check.mismatches
    assert [(r.candidate, r.calls, r.compared) for r in check.rows] == [("double", 1, 1)]
    with coheriq.verify(name, "faster", "fast", on_mismatch="record") as same:
        assert double(3) == 6
    assert same.rows == [] and same.ok


def test_results_that_compare_by_identity_only_are_counted_apart(unique):
    import itertools

    name = unique("zlib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def pairs(a, b):
        return zip(a, b, strict=False)

    @domain.acceleration_candidate
    def head(xs, n):
        return (len(xs), itertools.islice(xs, n))

    domain.materialize()

    class Fast(coheriq.engine_class(name), name="fast"):
        def pairs(self, a, b):
            return zip(a, b, strict=False)

        def head(self, xs, n):
            return (len(xs), itertools.islice(xs, n))

    with coheriq.verify(name, "fast", on_mismatch="record") as check:
        list(pairs([1], [2]))
        list(head([1, 2, 3], 2)[1])
    rows = {r.candidate: r for r in check.rows}
    for row in rows.values():
        assert (row.calls, row.compared, row.not_comparable, row.mismatches) == (1, 0, 1, 0)
    assert rows["pairs"].as_dict()["not_comparable"] == 1
    header, first = str(check).splitlines()[1:3]
    assert "not comparable" in header
    assert first.split()[:6] == [f"{name}.pairs", "1", "0", "0", "0", "1"]


def test_an_engine_author_registers_a_comparison_for_a_type(unique):
    # An engine for a library that never adopted coheriq (nothing there calls
    # register_comparison): its author says how values of a type compare.
    name = unique("olib")
    domain = coheriq.AccelerationDomain(name)

    class Handle:  # compares by identity: each side's is another object
        def __init__(self, value):
            self.value = value

    @domain.acceleration_candidate
    def make(value):
        return Handle(value)

    domain.materialize()

    class Fast(coheriq.engine_class(name), name="fast"):
        def make(self, value):
            return Handle(value + 1)

    coheriq.register_comparison(name, Handle, convert=lambda handle: handle.value)
    with coheriq.verify(name, "fast", on_mismatch="record") as check:
        make(1)
    [mismatch] = check.mismatches
    assert mismatch.difference.startswith("result: 2 against 1")
    with pytest.raises(coheriq.CoheriqDomainNotFoundError):
        coheriq.register_comparison(unique("nowhere"), Handle, convert=str)
    with pytest.raises(coheriq.CoheriqTypeError, match="takes a function"):
        coheriq.register_comparison(name, Handle, compare=3)


def test_a_variable_that_merely_ends_in_verify_loads_no_verification():
    program = "import coheriq, sys; print('coheriq._tools.verification' in sys.modules)"
    assert python("-c", program, GIT_SSL_NO_VERIFY="1").stdout.split() == ["False"]


def test_an_iterator_that_may_share_its_source_is_read_by_the_engine_only(unique):
    # iter(function, sentinel)'s deepcopy shares the function: the other side read the
    # program's next item. Only iterators known to copy apart (a list's, map over a
    # range) are copied; the others, wherever they are in the arguments, leave the
    # call to the engine alone, not compared, with the reason in the report.
    import collections

    name = unique("flib")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def first(xs):
        return next(iter(xs))

    domain.materialize()

    class Fast(coheriq.engine_class(name), name="fast"):
        def first(self, xs):
            return next(iter(xs))

    class Countdown:  # an iterator of the program's own: copies apart, once said so
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return self

        def __next__(self):
            self.n -= 1
            return self.n

    queue = collections.deque(range(1, 7))

    def take():
        return queue.popleft() if queue else None

    def numbers():
        yield from (7, 8)

    fed, generated = iter(take, None), numbers()
    with coheriq.verify(name, "fast", on_mismatch="record") as check:
        shared = [first(fed), next(first([fed])), next(first([map(int, fed)])), first(generated)]
        apart = [first(iter([1, 2])), first(map(str, range(3))), first(Countdown(3))]
    assert (shared, apart) == ([1, 2, 3, 7], [1, "0", 2])
    assert (list(fed), list(generated)) == ([4, 5, 6], [8])  # nothing taken by the other side
    [row] = check.rows
    assert (row.calls, row.compared, row.not_compared, row.mismatches) == (7, 2, 5, 0)
    notes = [note for note in row.notes if "may share its source" in note]
    assert [note.split(":")[0] for note in notes] == [
        "an argument is an iterator that may share its source with a copy (callable_iterator)",
        "an argument is an iterator that may share its source with a copy (generator)",
        "an argument is an iterator that may share its source with a copy (Countdown)",
    ]
    assert "was not compared" in notes[0] and "register_comparison" in notes[0]

    coheriq.register_comparison(name, Countdown, copy=lambda it: Countdown(it.n))
    with coheriq.verify(name, "fast", on_mismatch="record") as check:
        assert first(Countdown(3)) == 2
    assert (check.rows[0].compared, check.ok) == (1, True)
