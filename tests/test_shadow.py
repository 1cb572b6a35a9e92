"""Shadow verification: a sample of an engine's calls run again on the reference, off the
caller's path (coheriq.shadow, COHERIQ_SHADOW, coheriq shadow report)."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import coheriq

TIMEOUT = 60  # seconds for a child process; a hang fails the test


@pytest.fixture(autouse=True)
def _no_shadow_left():
    """Stop every shadow a test started (their reports go to the test's folder)."""
    yield
    for running in coheriq.shadows():
        running.stop(timeout=5)


@pytest.fixture
def reports(tmp_path, monkeypatch):
    """The folder where reports go in this test."""
    folder = tmp_path / "reports"
    monkeypatch.setenv("COHERIQ_SHADOW_REPORT", str(folder))
    return folder


@pytest.fixture
def lib(unique, reports):
    """A library with a pure function, one with side effects, a class and a generator, and
    engines 'wrong' (mean is floor division) and 'right' (agrees), run by enable_engine."""
    name = unique("shadowlib")
    domain = coheriq.AccelerationDomain(name)
    calls = {"reference side effect": 0, "reference mean": 0}

    @domain.acceleration_candidate
    def mean(xs, scale=1):
        calls["reference mean"] += 1
        return sum(xs) / len(xs) * scale

    @domain.acceleration_candidate
    def slow(x):
        time.sleep(calls.get("delay", 0.0))
        return x + 1

    @domain.acceleration_candidate(side_effects=True)
    def record(x):
        calls["reference side effect"] += 1
        return x

    @domain.acceleration_candidate
    def fails(x):
        raise ValueError(f"bad {x}")

    @domain.acceleration_candidate
    def count_up(n):
        yield from range(n)

    domain.materialize()

    class Wrong(coheriq.engine_class(name), name="wrong"):
        def mean(self, xs, scale=1):
            return sum(xs) // len(xs) * scale

        def slow(self, x):
            return x + 1

        def record(self, x):
            return x

        def fails(self, x):
            return x  # the reference raises

        def count_up(self, n):
            yield from range(n + 1)

    class Right(coheriq.engine_class(name), name="right"):
        def mean(self, xs, scale=1):
            return math.fsum(xs) / len(xs) * scale

        def slow(self, x):
            return x + 1

        def fails(self, x):
            raise ValueError(f"also bad {x}")

    proxies = {"mean": mean, "slow": slow, "record": record, "fails": fails, "count_up": count_up}
    return name, domain, calls, proxies


def test_a_wrong_engine_is_found_and_the_program_gets_the_engines_results(lib):
    name, _, _, f = lib
    coheriq.enable_engine(name, "wrong")
    watcher = coheriq.shadow(name, 1.0, seed=1)
    results = [f["mean"]([1, 2, i]) for i in range(20)]
    assert results == [(3 + i) // 3 for i in range(20)]  # the engine's, unchanged
    assert watcher.flush(10)
    row = next(r for r in watcher.rows if r.candidate == "mean")
    assert row.sampled == row.compared == 20
    differ = [i for i in range(20) if (3 + i) % 3]
    assert row.mismatches == len(differ) and not watcher.ok
    assert row.example["kind"] == "result" and row.example["arguments"].startswith("([1, 2, ")
    assert row.worst == pytest.approx(max(1 - ((3 + i) // 3) / ((3 + i) / 3) for i in differ), 1e-3)
    assert watcher.compared == 20


def test_the_sampling_rate_is_honoured_within_statistical_bounds(lib):
    name, _, _, f = lib
    coheriq.enable_engine(name, "right")
    calls, rate = 20_000, 0.05
    watcher = coheriq.shadow(name, rate, queue=calls)  # no seed: the draw of a real run
    for i in range(calls):
        f["slow"](i)
    assert watcher.flush(30)
    (row,) = watcher.rows
    mean, sd = calls * rate, math.sqrt(calls * rate * (1 - rate))
    assert abs(row.sampled - mean) < 5 * sd, (row.sampled, mean, sd)  # 1 in 1.7 million
    assert row.compared + row.dropped + row.over_budget == row.sampled
    assert row.mismatches == 0


def test_a_slow_reference_does_not_slow_the_caller(lib):
    name, _, calls, f = lib
    coheriq.enable_engine(name, "right")
    calls["delay"] = 0.2  # the reference: 0.2 s a call
    watcher = coheriq.shadow(name, 1.0, queue=100, budget=60)
    times = []
    for i in range(10):
        started = time.perf_counter()
        assert f["slow"](i) == i + 1
        times.append(time.perf_counter() - started)
    # Every call sampled: the reference would take 2 s in all; the caller spent far less
    # (copies and a queue), however busy the machine is.
    assert sum(times) < 0.5, times
    assert max(times) < 0.15, times
    assert watcher.flush(30)
    (row,) = watcher.rows
    assert row.compared == 10 and row.other_time >= 10 * 0.2 * 0.9


def test_the_queue_drops_when_full_and_says_how_many(lib, caplog):
    name, _, calls, f = lib
    coheriq.enable_engine(name, "right")
    calls["delay"] = 0.05
    watcher = coheriq.shadow(name, 1.0, queue=2, budget=60)
    with caplog.at_level(logging.WARNING, logger="coheriq"):
        for i in range(30):
            f["slow"](i)
        assert watcher.flush(30)
    (row,) = watcher.rows
    assert row.dropped >= 20 and row.compared >= 2
    assert row.sampled == row.compared + row.dropped == 30
    text = str(watcher)
    assert f"{row.dropped} sampled calls were dropped: the queue of 2 calls was full" in text
    drops = [r for r in caplog.records if "dropped a sampled call" in r.getMessage()]
    assert len(drops) == 1  # said once; the report counts them


def test_the_time_budget_holds_back_the_sampled_calls(lib):
    name, _, calls, f = lib
    coheriq.enable_engine(name, "right")
    calls["delay"] = 0.05
    watcher = coheriq.shadow(name, 1.0, queue=1000, budget=0.1)  # 0.1 s a minute
    for i in range(40):
        f["slow"](i)
        time.sleep(0.005)
    assert watcher.flush(30)
    (row,) = watcher.rows
    assert row.over_budget > 0 and 2 <= row.compared <= 4
    assert row.sampled == row.compared + row.over_budget + row.dropped


def test_candidates_with_side_effects_are_never_sampled(lib):
    name, _, calls, f = lib
    coheriq.enable_engine(name, "wrong")
    watcher = coheriq.shadow(name, 1.0)
    for i in range(50):
        assert f["record"](i) == i
    assert watcher.flush(10)
    assert calls["reference side effect"] == 0
    assert [r.candidate for r in watcher.rows] == []


def test_the_same_exception_on_both_sides_agrees(lib):
    name, _, _, f = lib
    coheriq.enable_engine(name, "right")
    watcher = coheriq.shadow(name, 1.0)
    with pytest.raises(ValueError, match="also bad 3"):
        f["fails"](3)  # both raise ValueError: they agree
    assert watcher.flush(10)
    (row,) = watcher.rows
    assert (row.candidate, row.compared, row.mismatches) == ("fails", 1, 0)


def test_generators_are_not_sampled(lib):
    name, _, _, f = lib
    coheriq.enable_engine(name, "wrong")
    watcher = coheriq.shadow(name, 1.0)
    assert list(f["count_up"](3)) == [0, 1, 2, 3]  # the engine's
    assert watcher.flush(10)
    assert watcher.rows == []


def test_an_exception_on_one_side_only_is_a_mismatch_of_its_own_kind(lib, caplog):
    name, _, _, f = lib
    coheriq.enable_engine(name, "wrong")
    watcher = coheriq.shadow(name, 1.0)
    with caplog.at_level(logging.WARNING, logger="coheriq"):
        assert f["fails"](1) == 1
        assert f["fails"](2) == 2
        assert f["mean"]([1, 2]) == 1
        assert watcher.flush(10)
    rows = {r.candidate: r for r in watcher.rows}
    assert rows["fails"].one_sided == rows["fails"].mismatches == 2
    assert rows["fails"].example["kind"] == "exception"
    assert "only reference raised: ValueError('bad 1')" in rows["fails"].example["difference"]
    logged = [r.getMessage() for r in caplog.records if "disagree on" in r.getMessage()]
    # One line per new kind of mismatch: fails (exception) once, mean (result) once.
    assert len(logged) == 2, logged
    assert any("disagree on fails (exception)" in line for line in logged)
    assert any("disagree on mean (result)" in line for line in logged)


def test_the_reference_engine_has_nothing_to_compare(lib):
    name, _, calls, f = lib
    watcher = coheriq.shadow(name, 1.0)
    assert f["mean"]([1, 2]) == 1.5
    assert calls["reference mean"] == 1  # run once: not again in the background
    assert watcher.rows == []
    assert "nothing to compare" in str(watcher)


def test_a_shadow_started_before_the_choice_watches_it_once_made(lib):
    name, _, _, f = lib
    watcher = coheriq.shadow(name, 1.0)
    assert watcher.engine is None and "waiting" in repr(watcher)
    coheriq.enable_engine(name, "wrong")
    f["mean"]([1, 2])
    assert watcher.flush(10)
    assert watcher.engine == "wrong" and not watcher.ok


def test_stop_writes_the_report_and_calls_run_the_engine_alone(lib, reports):
    name, _, calls, f = lib
    coheriq.enable_engine(name, "wrong")
    watcher = coheriq.shadow(name, 1.0)
    f["mean"]([1, 2])
    watcher.stop()
    (written,) = reports.glob("*.json")
    assert written.name == f"shadow-{name}-{os.getpid()}.json"
    assert json.loads(written.read_text())["totals"]["mismatches"] == 1
    before = calls["reference mean"]
    f["mean"]([1, 2])
    time.sleep(0.05)
    assert calls["reference mean"] == before  # not sampled any more
    assert coheriq.shadows() == []
    assert coheriq.explain(f["mean"], [1, 2]).engine == "wrong"


def test_the_report_follows_its_json_schema(lib, tmp_path):
    name, _, _, f = lib
    coheriq.enable_engine(name, "wrong")
    target = tmp_path / "mine.json"
    watcher = coheriq.shadow(name, 1.0, report=target)
    f["mean"]([1, 2])
    f["mean"]([3, 3])
    assert watcher.flush(10)
    path = watcher.write()
    assert path == target
    report = json.loads(target.read_text())
    assert report["schema"] == "coheriq.shadow/1"
    assert {
        "coheriq", "domain", "engine", "against", "rate", "budget", "queue", "pid", "python",
        "started", "written", "totals", "notes", "candidates",
    } <= report.keys()  # fmt: skip
    assert (report["domain"], report["engine"], report["against"]) == (name, "wrong", "reference")
    counts = ("sampled", "compared", "mismatches", "one_sided", "not_comparable", "dropped")
    (row,) = report["candidates"]
    assert all(isinstance(row[c], int) for c in counts)
    assert (row["candidate"], row["sampled"], row["compared"], row["mismatches"]) == (
        "mean", 2, 2, 1,
    )  # fmt: skip
    assert set(row["example"]) == {"arguments", "difference", "kind"}
    assert isinstance(row["worst"], float) and isinstance(row["engine_time"], float)
    assert report["totals"]["compared"] == 2 and report["totals"]["queued"] == 0


def test_coheriq_shadow_report_merges_processes_and_fails_on_a_difference(lib, tmp_path):
    name, _, _, f = lib
    coheriq.enable_engine(name, "wrong")
    watcher = coheriq.shadow(name, 1.0, report=tmp_path / "a.json")
    f["mean"]([1, 2])
    watcher.stop()
    data = json.loads((tmp_path / "a.json").read_text())
    data["pid"] += 1  # another process's report of the same library
    (tmp_path / "b.json").write_text(json.dumps(data))
    command = [sys.executable, "-m", "coheriq", "shadow", "report", str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 1, done.stderr
    assert "2 processes: 2 compared, 2 differed" in done.stdout
    done = subprocess.run([*command, "--json"], capture_output=True, text=True, timeout=TIMEOUT)
    (merged,) = json.loads(done.stdout)["reports"]
    assert merged["totals"]["compared"] == 2 and merged["candidates"][0]["mismatches"] == 2
    (tmp_path / "other.json").write_text("{}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT)
    assert done.returncode == 2 and "is not a shadow verification report" in done.stderr


def test_a_right_engine_reports_no_difference_and_the_report_exits_0(lib, tmp_path):
    name, _, _, f = lib
    coheriq.enable_engine(name, "right")
    watcher = coheriq.shadow(name, 1.0, report=tmp_path / "r.json")
    for i in range(1, 20):
        f["mean"](list(range(i)))
    watcher.stop()
    done = subprocess.run(
        [sys.executable, "-m", "coheriq", "shadow", "report", str(tmp_path / "r.json")],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert done.returncode == 0 and "19 compared, 0 differed" in done.stdout


@pytest.mark.parametrize(
    ("options", "says"),
    [
        ({"rate": 0}, "rate is a share of calls above 0 and at most 1, not 0"),
        ({"rate": 1.5}, "not 1.5"),
        ({"rate": "1%"}, "not '1%'"),
        ({"queue": 0}, "queue is a whole number of calls of at least 1, not 0"),
        ({"budget": -1}, "budget is seconds per minute above 0, not -1"),
        ({"rtol": -1}, "rtol is a number of at least 0"),
    ],
)
def test_bad_options_are_refused_and_nothing_starts(lib, options, says):
    name = lib[0]
    with pytest.raises(coheriq.CoheriqTypeError, match=rf"coheriq.shadow\({name!r}\): .*{says}"):
        coheriq.shadow(name, **options)
    assert coheriq.shadows() == []


def test_a_second_shadow_of_a_domain_is_refused(lib):
    name = lib[0]
    first = coheriq.shadow(name, 0.5)
    with pytest.raises(coheriq.CoheriqUserError, match="has a shadow verification on already"):
        coheriq.shadow(name, 0.1)
    assert coheriq.shadows() == [first]


def test_an_unwritable_report_says_which_option_to_change(lib, tmp_path):
    name = lib[0]
    blocker = tmp_path / "file"
    blocker.write_text("")
    watcher = coheriq.shadow(name, 0.5, report=blocker / "sub")
    with pytest.raises(coheriq.CoheriqUserError, match=r"could not write its report .*report="):
        watcher.write()
    watcher.report = tmp_path  # where its last report, at the end of the test, can go


def test_threads_are_sampled_and_compared(lib):
    name, _, _, f = lib
    coheriq.enable_engine(name, "wrong")
    watcher = coheriq.shadow(name, 1.0, queue=1000)

    def work():
        for i in range(50):
            f["mean"]([1, i])

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(TIMEOUT)
    assert watcher.flush(30)
    (row,) = watcher.rows
    assert row.sampled == 200 and row.compared == 200
    assert row.mismatches == 200 - 4 * 25  # [1, i] with odd 1 + i differs


def test_a_profile_counts_the_calls_once_and_not_the_other_side(lib):
    name, _, _, f = lib
    coheriq.enable_engine(name, "wrong")
    watcher = coheriq.shadow(name, 1.0)
    with coheriq.profile() as prof:
        for i in range(5):
            f["mean"]([1, i])
        assert watcher.flush(10)
    counts = {(r.candidate, r.engine): r.count for r in prof.rows}
    assert counts == {("mean", "wrong"): 5}
    assert watcher.rows[0].compared == 5


def test_conversions_are_applied_before_comparing(unique, reports):
    name = unique("shadowconv")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def scaled(values, k):
        return [k * v for v in values]

    domain.materialize()

    class Boxed:  # the engine's own container
        def __init__(self, items):
            self.items = tuple(items)

    to_library = coheriq.Conversion(list, Boxed, to_engine=Boxed, to_library=lambda b: [*b.items])

    class Engine(coheriq.engine_class(name), name="boxed", conversions=[to_library]):
        def scaled(self, values, k):
            items = values.items if isinstance(values, Boxed) else values
            return Boxed(k * v for v in items)

    coheriq.enable_engine(name, "boxed")
    watcher = coheriq.shadow(name, 1.0)
    result = scaled([1, 2], 3)
    assert isinstance(result, Boxed)  # the program gets the engine's object
    assert watcher.flush(10)
    (row,) = watcher.rows
    assert (row.compared, row.mismatches, row.not_comparable) == (1, 0, 0), str(watcher)


def test_a_call_the_engine_passes_to_the_reference_is_not_compared(unique, reports):
    name = unique("shadowdecl")
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def total(xs):
        return sum(xs)

    domain.materialize()

    class Picky(coheriq.engine_class(name), name="picky"):
        @coheriq.may_decline(when=lambda self, xs: "short" if len(xs) < 3 else None)
        def total(self, xs):
            return sum(xs) + 1  # wrong, where it runs

    coheriq.enable_engine(name, "picky")
    watcher = coheriq.shadow(name, 1.0)
    assert total([1]) == 1 and total([1, 2, 3]) == 7
    assert watcher.flush(10)
    (row,) = watcher.rows
    assert (row.sampled, row.compared, row.mismatches, row.not_compared) == (2, 1, 1, 1)
    assert any("declined" in note for note in row.notes)


# -- the whole process: COHERIQ_SHADOW ----------------------------------------------------

PROGRAM = """
import coheriq

domain = coheriq.AccelerationDomain("envshadow", env_prefix="ENVSHADOW")

@domain.acceleration_candidate
def half(x):
    return x / 2

domain.materialize()

class Floor(coheriq.engine_class("envshadow"), name="floor"):
    def half(self, x):
        return x // 2

print(sum(half(i) for i in range(2000)))
"""


def run_program(tmp_path, ending=None, hang="the program hung", **env):
    """Run PROGRAM on engine floor with ``env``, its last line replaced by ``ending``."""
    code = textwrap.dedent(PROGRAM)
    if ending is not None:
        code = code.replace("print(sum(half(i) for i in range(2000)))", textwrap.dedent(ending))
    script = tmp_path / "program.py"
    script.write_text(code)
    environ = {**os.environ, "ENVSHADOW_ENGINE": "floor", **env}
    try:
        return subprocess.run(
            [sys.executable, str(script)],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            env=environ,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(hang)


def test_the_environment_variable_shadows_a_whole_program_and_writes_its_report(tmp_path):
    folder = tmp_path / "out"
    done = run_program(tmp_path, COHERIQ_SHADOW="envshadow:0.1", COHERIQ_SHADOW_REPORT=str(folder))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(sum(i // 2 for i in range(2000)))  # the engine's
    (written,) = folder.glob("shadow-envshadow-*.json")
    report = json.loads(written.read_text())
    (row,) = report["candidates"]
    assert report["rate"] == 0.1 and 100 < row["sampled"] < 320  # 200 expected
    assert row["mismatches"] > 0 and row["compared"] > 0
    assert "disagree on half (result)" in done.stderr  # logged once, as a warning
    assert done.stderr.count("disagree on half") == 1


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("COHERIQ_SHADOW", "envshadow:lots", "is not LIB or LIB:RATE"),
        ("COHERIQ_SHADOW", "envshadow:0", "is not LIB or LIB:RATE"),
        ("COHERIQ_SHADOW_BUDGET", "none", "is not a number of seconds per minute above 0"),
    ],
)
def test_a_bad_environment_variable_is_one_clear_error(tmp_path, variable, value, says):
    env = {"COHERIQ_SHADOW": "envshadow:0.5", variable: value}
    done = run_program(tmp_path, **env, COHERIQ_SHADOW_REPORT=str(tmp_path))
    assert done.returncode == 1 and says in done.stderr, done.stderr


def test_a_forked_child_reports_its_own_calls(tmp_path):
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    folder = tmp_path / "out"
    ending = """
        import os
        half(1)
        pid = os.fork()
        if pid == 0:
            for i in range(10):
                half(i)
            coheriq.shadows()[0].flush(10)
            coheriq.shadows()[0].write()
            os._exit(0)
        os.waitpid(pid, 0)
        """
    done = run_program(
        tmp_path, ending, COHERIQ_SHADOW="envshadow:1", COHERIQ_SHADOW_REPORT=str(folder)
    )
    assert done.returncode == 0, done.stderr
    sampled = sorted(json.loads(p.read_text())["totals"]["sampled"] for p in folder.glob("*.json"))
    assert sampled == [1, 10]  # the parent's call, and the child's ten, each reported once


def test_a_signal_handler_calling_a_sampled_candidate_does_not_deadlock(tmp_path):
    if not hasattr(__import__("signal"), "setitimer"):
        pytest.skip("no interval timer here")
    ending = """
        import signal
        handled = []
        signal.signal(signal.SIGALRM, lambda *_: handled.append(half(3)))
        signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
        for i in range(20000):
            half(i)
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        coheriq.shadows()[0].flush(10)
        print(len(handled) > 0, coheriq.shadows()[0].rows[0].sampled >= 20000)
        """
    done = run_program(
        tmp_path,
        ending,
        hang="a signal handler's call of a sampled candidate deadlocked",
        COHERIQ_SHADOW="envshadow:1",
        COHERIQ_SHADOW_REPORT=str(tmp_path),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]


def test_explain_says_a_shadow_is_on(lib):
    name, _, _, f = lib
    coheriq.enable_engine(name, "wrong")
    assert coheriq.explain(f["mean"]).shadow is None
    watcher = coheriq.shadow(name, 0.25)
    explained = coheriq.explain(f["mean"], [1, 2])
    assert explained.answers == "wrong"
    assert "0.25 of the calls on 'wrong' outside using_engine blocks" in explained.shadow
    assert "shadow verification: on: 0.25" in str(explained)
    watcher.stop()
    assert coheriq.explain(f["mean"]).shadow is None


def test_a_copy_rule_that_calls_the_library_is_not_sampled_itself(unique, reports):
    # As ragbatch's: a batch is copied by from_flat(*to_flat(batch)), two candidates that
    # the engine implements. The copies are made as the reference makes its own, so the
    # rule's calls neither sample themselves (without end) nor build the engine's objects.
    name = unique("shadowcopy")
    domain = coheriq.AccelerationDomain(name)

    class Batch:
        def __init__(self, values):
            self.values = list(values)

        def __eq__(self, other):
            return self.values == other.values

    @domain.acceleration_candidate
    def make(values):
        return Batch(values)

    @domain.acceleration_candidate
    def flat(batch):
        return list(batch.values)

    @domain.acceleration_candidate
    def total(batch):
        return sum(batch.values)

    domain.materialize()
    domain.register_comparison(Batch, copy=lambda batch: make(flat(batch)))
    made_by_engine = []

    class Fast(coheriq.engine_class(name), name="fast"):
        def make(self, values):
            made_by_engine.append(values)
            return Batch(values)

        def flat(self, batch):
            return list(batch.values)

        def total(self, batch):
            return sum(batch.values)

    coheriq.enable_engine(name, "fast")
    batch = make([1, 2, 3])
    watcher = coheriq.shadow(name, 1.0)
    assert [total(batch) for _ in range(5)] == [6] * 5
    assert watcher.flush(10)
    (row,) = watcher.rows
    assert (row.sampled, row.compared, row.notes) == (5, 5, [])
    assert made_by_engine == [[1, 2, 3]]  # the program's own call only: no copy is the engine's
