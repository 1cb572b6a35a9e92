"""explain, coverage, the profiler and logging: seeing what runs, choosing nothing."""

import inspect
import logging
import os
import threading

import pytest

import coheriq as cq
from conftest import LIBRARY, run_python


def test_explain_gives_engine_reason_and_suppliers(lib, two_engines, monkeypatch):
    report = cq.explain(lib.domain)
    assert (report.engine, report.settled) == (cq.REFERENCE, False)
    assert "by default" in report.reason and "not settled" in report.reason
    assert report.suppliers == {
        "normalize": "reference",
        "total": "reference",
        "Batch": "reference",
    }
    assert not cq.explain(lib.name).settled  # explaining chose nothing

    monkeypatch.setenv(lib.env_var, "fast")
    report = cq.explain(lib.total)
    assert (report.candidate, report.engine) == ("total", "fast")
    assert f"{lib.env_var}='fast'" in report.reason
    assert report.suppliers == {"total": "fast"}

    with cq.using_engine(lib.name, "slow"):
        report = cq.explain(lib.name)
        assert report.engine == "slow" and "using_engine" in report.reason
        assert report.suppliers["total"] == "slow" and report.suppliers["Batch"] == "reference"

    line = inspect.currentframe().f_lineno + 1
    lib.total([1])  # settles the domain, here
    report = cq.explain(lib.domain)
    assert report.settled and report.engine == "fast"
    assert f"settled by a call at {__file__}:{line}" in report.reason
    text = str(report)
    assert "runs on engine 'fast'" in text and "supplied by:" in text
    assert report.as_dict()["engine"] == "fast"


def test_explain_names_enable_engine_and_bad_variables(lib, two_engines, monkeypatch):
    monkeypatch.setenv(lib.env_var, "fsat")
    report = cq.explain(lib.domain)
    assert report.engine is None and "names no engine" in report.reason
    cq.enable_engine(lib.name, "slow")
    assert "enable_engine" in cq.explain(lib.domain).reason
    with pytest.raises(cq.CoheriqTypeError, match="explain takes"):
        cq.explain(42)


def test_coverage_table(lib, two_engines):
    fast, _ = two_engines

    class Hybrid(fast, cq.engine_class(lib.name, "slow"), name="hybrid"):
        pass

    table = cq.coverage(lib.name)
    assert table.engines == ["reference", "fast", "hybrid", "slow"]
    assert table.rows["total"] == {
        "reference": "reference",
        "fast": "own",
        "hybrid": "from fast",
        "slow": "own",
    }
    assert table.rows["Batch"]["hybrid"] == "from fast"
    assert table.rows["normalize"]["slow"] == "reference"
    lines = str(table).splitlines()
    assert lines[0].split() == ["candidate", "reference", "fast", "hybrid", "slow"]
    assert not cq.explain(lib.name).settled


def test_coverage_can_load_advertised_engines(lib, make_dist, unique):
    module = unique("cov_mod")
    make_dist(
        unique("covdist"),
        {
            module: (
                "import coheriq\n"
                f"class Gpu(coheriq.engine_class({lib.name!r}), name='gpu'):\n"
                "    def total(self, xs):\n        return 'gpu'\n"
            )
        },
        {f"coheriq.engines.{lib.name}": {"gpu": module}},
    )
    assert cq.coverage(lib.name).engines == ["reference"]  # registered only: imports nothing
    assert cq.coverage(lib.name, advertised=True).rows["total"]["gpu"] == "own"


def test_profile_counts_calls_per_candidate_and_engine(lib, two_engines):
    lib.total([1])  # before the block: not recorded
    with cq.profile() as prof:
        for _ in range(3):
            lib.total([1])
        with cq.using_engine(lib.name, "fast"):
            lib.total([1])
            lib.Batch([1])
        with cq.profile() as inner:
            lib.normalize([1.0])
    lib.total([1])  # after: not recorded
    rows = {(r.candidate, r.engine): r for r in prof.rows}
    assert {k: r.count for k, r in rows.items()} == {
        ("total", "reference"): 3,
        ("total", "fast"): 1,
        ("Batch", "fast"): 1,
        ("normalize", "reference"): 1,
    }
    assert [(r.candidate, r.count) for r in inner.rows] == [("normalize", 1)]
    assert all(r.total > 0 and r.mean == r.total / r.count for r in prof.rows)
    totals = [r.total for r in prof.rows]
    assert totals == sorted(totals, reverse=True)
    assert "calls" in str(prof) and f"{lib.name}.total" in str(prof)
    assert "no calls" in str(cq.profile())


def test_profile_covers_its_own_thread_only(lib, two_engines):
    done = threading.Event()

    def other():
        for _ in range(5):
            lib.total([1])
        done.set()

    with cq.profile() as prof:
        thread = threading.Thread(target=other)
        thread.start()
        done.wait()
        thread.join()
        lib.total([1])
    assert [(r.candidate, r.count) for r in prof.rows] == [("total", 1)]


def test_profiling_nested_candidates_and_errors(unique):
    domain = cq.AccelerationDomain(unique())

    @domain.acceleration_candidate
    def inner(x):
        if x < 0:
            raise ValueError("negative")
        return x

    @domain.acceleration_candidate
    def outer(x):
        return inner(x) + 1

    domain.materialize()
    with cq.profile() as prof:
        assert outer(1) == 2
        with pytest.raises(ValueError):
            outer(-1)
    assert sorted((r.candidate, r.count) for r in prof.rows) == [("inner", 2), ("outer", 2)]


def test_logging_says_what_was_chosen_and_loaded_but_nothing_per_call(
    lib, two_engines, make_dist, unique, caplog
):
    caplog.set_level(logging.DEBUG, logger="coheriq")
    module = unique("logged_mod")
    make_dist(
        unique("loggeddist"),
        {
            module: (
                "import coheriq\n"
                f"class Gpu(coheriq.engine_class({lib.name!r}), name='gpu'):\n    pass\n"
            )
        },
        {f"coheriq.engines.{lib.name}": {"gpu": module}},
    )
    with cq.using_engine(lib.name, "gpu"):
        pass
    cq.enable_engine(lib.name, "fast")
    messages = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert any(
        level == "INFO" and "loaded engine 'gpu'" in text and "loggeddist" in text and " ms" in text
        for level, text in messages
    )
    assert ("DEBUG", f"domain {lib.name!r}: entering a scope of engine 'gpu'") in messages
    assert ("DEBUG", f"domain {lib.name!r}: leaving the scope of engine 'gpu'") in messages
    assert any(
        level == "INFO" and f"domain {lib.name!r} runs on engine 'fast' (enable_engine)" in text
        for level, text in messages
    )
    count = len(caplog.records)
    for _ in range(10):
        lib.total([1])
    assert len(caplog.records) == count


def test_log_records_name_the_code_that_logged_and_blocks_log_in_pairs(lib, two_engines, caplog):
    caplog.set_level(logging.DEBUG, logger="coheriq")
    with cq.using_engine(lib.name, "fast"):  # its first use starts the engine
        pass
    cq.enable_engine(lib.name, "slow")
    sources = {os.path.basename(r.pathname) for r in caplog.records}
    assert sources and not sources & {"_stdlib.py", "__init__.py"}, sources
    messages = [r.getMessage() for r in caplog.records]
    entered = [m for m in messages if "entering a scope" in m]
    left = [m for m in messages if "leaving the scope" in m]
    assert len(entered) == len(left) == 1, messages


# -- the same profile entered twice, nested ------------------------------------------------


def test_a_profile_entered_twice_nested_counts_each_call_once():
    done = run_python(
        LIBRARY
        + """
prof = coheriq.profile()
with prof:
    double(1)
    with prof:
        double(2)
    double(3)
print([(r.candidate, r.count) for r in prof.rows])
"""
    )
    assert done.stdout.strip() == "[('double', 3)]", done.stderr


# -- an extra Profile.__exit__ is refused --------------------------------------------------


def test_a_profile_exited_twice_raises_and_later_profiles_still_record(unique):
    with cq.testing.isolated():
        domain = cq.AccelerationDomain(unique())

        @domain.acceleration_candidate
        def double(x):
            return 2 * x

        domain.materialize()
        profile = cq.profile()
        with profile:
            double(1)
        with pytest.raises(cq.CoheriqScopeError, match="exited more often than it was entered"):
            profile.__exit__(None, None, None)
        with cq.profile() as later:
            double(2)
        assert [row.count for row in later.rows] == [1]
