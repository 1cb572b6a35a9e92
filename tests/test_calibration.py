"""Measured crossovers: ``coheriq calibrate`` times an engine against what runs instead, fits
where it starts to win, and keeps that in the user's calibrations file.

The library and engine here are written as installed packages are (in a folder on
``sys.path``, the engine with a ``__version__``), and their calls sleep, so that which side
is faster never depends on this machine: the engine costs 2 ms whatever the size, the
reference 0.25 ms per unit, so the crossover lies at 8 units.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import coheriq
from coheriq.testing import frozen_crossovers

LIBRARY = """
import time

import coheriq

domain = coheriq.AccelerationDomain("{lib}")


@domain.acceleration_candidate
def work(units):
    if units < 0:
        raise ValueError("work takes a number of units of at least 0")
    time.sleep(units * 0.00025)
    return units


@domain.acceleration_candidate(side_effects=True)
def write(units):
    return units


domain.materialize()
"""

ENGINE = """
import time

import coheriq
import {lib}

__version__ = "{version}"


def _sized(self, units):
    return units


def _inputs():
    return [(1,), (2,), (4,), (16,), (32,)]


class Slow(coheriq.engine_class("{lib}"), name="slowstart"):
    @coheriq.crossover(size=_sized, default=100, unit="units", inputs=_inputs)
    def work(self, units):
        if units < 0:
            raise ValueError("work takes a number of units of at least 0")
        time.sleep(0.002)
        return units {wrong}

    @coheriq.crossover(size=_sized, default=100, unit="units", inputs=_inputs)
    def write(self, units):
        return units
"""

_made = iter(range(10_000))


@pytest.fixture
def packages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Write a library and its engine as packages; the calibrations file in ``tmp_path``."""

    def make(version: str = "1.0", wrong: str = "") -> tuple[str, str]:
        number = next(_made)
        lib, engine = f"callib{number}", f"calengine{number}"
        for name, text in ((lib, LIBRARY), (engine, ENGINE)):
            folder = tmp_path / "site" / name
            folder.mkdir(parents=True)
            (folder / "__init__.py").write_text(
                textwrap.dedent(text.format(lib=lib, version=version, wrong=wrong))
            )
        return lib, engine

    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("COHERIQ_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("COHERIQ_CROSSOVERS", raising=False)
    return make


def _stored(tmp_path: Path) -> list[dict]:
    return json.loads((tmp_path / "cache" / "crossovers.json").read_text())["crossovers"]


def _python(tmp_path: Path, code: str, **env: str) -> str:
    """Run ``code`` in a fresh interpreter that finds the packages and the calibrations."""
    environment = {k: v for k, v in os.environ.items() if k != "COHERIQ_CROSSOVERS"}
    # No bytecode cache: a test rewrites the engine's source within the same second.
    environment.update(
        COHERIQ_CACHE_DIR=str(tmp_path / "cache"), PYTHONDONTWRITEBYTECODE="1", **env
    )
    environment["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), *sys.path])
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_calibration_fits_the_crossover_and_the_engine_declines_below_it(packages, tmp_path):
    lib, engine = packages()
    __import__(engine)
    library = __import__(lib)
    result = coheriq.calibrate(lib, "slowstart", candidates=["work"], budget=2.0)
    (row,) = result.rows
    assert [p[0] for p in row.points] == [1, 2, 4, 16, 32]
    assert 4 < row.crossover <= 16, str(result)
    assert row.threshold == row.crossover
    assert "crossover at" in str(result) and "slowstart" in str(result)
    (entry,) = _stored(tmp_path)
    assert entry["library"] == lib and entry["candidate"] == "work"
    assert entry["against"] == "reference" and entry["threshold"] == row.crossover
    assert entry["engine_version"] == f"{engine} 1.0"
    assert entry["coheriq_version"] == coheriq.__version__
    with frozen_crossovers("measured"), coheriq.using_engine(lib, "slowstart"):
        small = coheriq.explain(library.work, 2)
        assert small.answers == "reference"
        measured = f"below the crossover measured on this machine on {result.measured}"
        assert small.declines == [
            f"slowstart should not run it: fewer than {row.crossover:,} units: {measured}"
        ]
        assert small.crossovers == [
            f"slowstart: {row.crossover:,} units, measured on this machine on "
            f"{result.measured} against reference"
        ]
        assert coheriq.explain(library.work, 32).answers == "slowstart"
        with coheriq.profile() as seen:
            assert [library.work(n) for n in (2, 2, 32)] == [2, 2, 32]
    ran = {r.engine: r.count for r in seen.rows}
    assert ran == {"reference": 2, "slowstart": 1}  # the calls on each side
    (declined,) = seen.declines
    assert declined.count == 2 and measured in declined.reason


def test_a_calibration_is_read_by_a_new_process_and_goes_stale_with_a_new_version(
    packages, tmp_path
):
    lib, engine = packages()
    ask = f"""
        import coheriq, {engine}, {lib}
        with coheriq.using_engine("{lib}", "slowstart"):
            print(coheriq.explain({lib}.work, 2).crossovers[0])
        """
    assert "declared by the engine" in _python(tmp_path, ask)  # nothing measured yet
    _python(
        tmp_path,
        f"import coheriq, {engine}; coheriq.calibrate('{lib}', 'slowstart', "
        "candidates=['work'], budget=1.0)",
    )
    assert "measured on this machine on" in _python(tmp_path, ask)
    # A new version of the engine: the calibration no longer holds.
    source = tmp_path / "site" / engine / "__init__.py"
    source.write_text(source.read_text().replace('"1.0"', '"1.1"'))
    stale = _python(tmp_path, ask)
    assert "100 units, declared by the engine (the calibration of" in stale
    assert (
        f"is stale: measured with {engine} 1.0, not {engine} 1.1; run coheriq calibrate " in stale
    )
    # So does one made with another coheriq.
    source.write_text(source.read_text().replace('"1.1"', '"1.0"'))
    assert "measured on this machine" in _python(tmp_path, ask)
    path = tmp_path / "cache" / "crossovers.json"
    data = json.loads(path.read_text())
    data["crossovers"][0]["coheriq_version"] = "0.0.9"
    path.write_text(json.dumps(data))
    assert f"measured with coheriq 0.0.9, not {coheriq.__version__}" in _python(tmp_path, ask)


def test_tests_hold_the_declared_crossover_whatever_was_measured(packages, tmp_path):
    lib, engine = packages()
    __import__(engine)
    library = __import__(lib)
    coheriq.calibrate(lib, "slowstart", candidates=["work"], budget=1.0)
    with coheriq.using_engine(lib, "slowstart"):
        # Under pytest the plugin holds every crossover at the engine's declared default.
        (held,) = coheriq.explain(library.work, 50).crossovers
        assert held.startswith("slowstart: 100 units, declared by the engine")
        assert "calibrations are off here: frozen for tests" in held
        with frozen_crossovers("measured"):
            assert "measured on this machine" in coheriq.explain(library.work, 50).crossovers[0]
        assert coheriq.explain(library.work, 50).answers == "reference"  # 50 < 100
    # Outside pytest, the variable does the same.
    ask = f"""
        import coheriq, {engine}, {lib}
        with coheriq.using_engine("{lib}", "slowstart"):
            print(coheriq.explain({lib}.work, 50).crossovers[0])
        """
    frozen = _python(tmp_path, ask, COHERIQ_CROSSOVERS="declared")
    assert (
        "declared by the engine (calibrations are off here: COHERIQ_CROSSOVERS=declared)" in frozen
    )


def test_a_pytest_run_freezes_crossovers_unless_told_to_measure(
    pytester, packages, tmp_path, monkeypatch
):
    lib, engine = packages()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "site"), *sys.path]))
    __import__(engine)
    __import__(lib)
    coheriq.calibrate(lib, "slowstart", candidates=["work"], budget=1.0)
    pytester.makepyfile(
        f"""
        import coheriq, {engine}, {lib}

        def test_origin():
            with coheriq.using_engine("{lib}", "slowstart"):
                print("ORIGIN", coheriq.explain({lib}.work, 50).crossovers[0])
        """
    )
    declared = pytester.runpytest_subprocess("-s", "-p", "no:cacheprovider")
    declared.stdout.fnmatch_lines(["*ORIGIN slowstart: 100 units, declared by the engine*"])
    measured = pytester.runpytest_subprocess(
        "-s", "-p", "no:cacheprovider", "--coheriq-crossovers=measured"
    )
    measured.stdout.fnmatch_lines(["*ORIGIN slowstart: * units, measured on this machine on *"])


def test_a_candidate_with_side_effects_is_refused(packages, tmp_path):
    lib, engine = packages()
    __import__(engine)
    __import__(lib)
    with pytest.raises(coheriq.CoheriqCalibrationError) as raised:
        coheriq.calibrate(lib, "slowstart", candidates=["write"], budget=1.0)
    message = str(raised.value)
    assert "write: refused: it is marked side_effects=True" in message
    assert "'slowstart'" in message and lib in message
    assert not (tmp_path / "cache").exists()
    # Calibrating every candidate measures the others and says why it left this one.
    result = coheriq.calibrate(lib, "slowstart", budget=1.0)
    assert [r.candidate for r in result.rows] == ["work"]
    assert "write: not measured: refused: it is marked side_effects=True" in str(result)
    assert [e["candidate"] for e in _stored(tmp_path)] == ["work"]


def test_an_engine_that_disagrees_stops_calibration_with_the_verification_report(
    packages, tmp_path
):
    lib, engine = packages(wrong="+ 1")
    __import__(engine)
    __import__(lib)
    with pytest.raises(coheriq.CoheriqCalibrationError) as raised:
        coheriq.calibrate(lib, "slowstart", candidates=["work"], budget=1.0)
    message = str(raised.value)
    assert f"Calibrating engine 'slowstart' of {lib!r} stopped: on 'work' it disagrees" in message
    assert "nothing was stored" in message
    assert "result: 2 against 1" in message  # the verification's report
    assert not (tmp_path / "cache").exists()


def test_nothing_is_measured_on_import_or_on_a_call(packages, tmp_path):
    lib, engine = packages()
    out = _python(
        tmp_path,
        f"""
        import coheriq, {engine}, {lib}
        coheriq.enable_engine("{lib}", "slowstart")
        print({lib}.work(2), {lib}.work(200))
        """,
    )
    assert out.split() == ["2", "200"]
    assert not (tmp_path / "cache").exists()


def test_the_budget_bounds_the_sizes_measured_and_the_report_says_so(packages, tmp_path):
    lib, engine = packages()
    __import__(engine)
    __import__(lib)
    # Each size takes some 40 ms of calls at least here: 0.1 s cannot measure all five.
    try:
        result = coheriq.calibrate(lib, "slowstart", candidates=["work"], budget=0.1)
    except coheriq.CoheriqCalibrationError as error:  # one size only, on a slow day
        assert "work: the budget was spent: sizes from" in str(error)
    else:
        assert len(result.rows[0].points) < 5
        assert result.skipped["work"].startswith("the budget was spent: sizes from")
        assert "work: not measured: the budget was spent" in str(result)


@pytest.mark.parametrize(
    ("points", "crossover", "threshold", "verdict"),
    [
        (
            # twice as slow at 10, twice as fast at 100: on a log scale, half-way
            [(10, 2.0, 1.0), (100, 2.0, 4.0), (1000, 2.0, 40.0)],
            32,
            32,
            "crossover at 32 units: slower at 10, faster from 100 on",
        ),
        (
            [(10, 2.0, 1.0), (100, 3.0, 2.0)],
            None,
            101,
            "no crossover: the engine was slower at every size measured from 10 units up "
            "to the largest, 100",
        ),
        (
            [(10, 1.0, 2.0), (100, 1.0, 4.0)],
            None,
            0,
            "no crossover: the engine was faster at every size measured, from 10 units",
        ),
        (  # faster at a small size by chance, then slower: the larger sizes decide
            [(10, 1.0, 2.0), (100, 3.0, 2.0), (1000, 2.0, 8.0)],
            169,
            169,
            "crossover at 169 units: slower at 100, faster from 1,000 on",
        ),
        (
            [(10, 1.0, 2.0), (100, 3.0, 2.0)],
            None,
            101,
            "no crossover: the engine was slower at the largest size measured, 100 units",
        ),
    ],
)
def test_the_fit(points, crossover, threshold, verdict):
    row = coheriq.CrossoverRow("f", "units", points)
    assert (row.crossover, row.threshold, row.verdict) == (crossover, threshold, verdict)


def test_wrong_requests_are_refused_before_anything_runs(packages, tmp_path):
    lib, engine = packages()
    __import__(engine)
    __import__(lib)
    cases = [
        ({"engine": "reference"}, "the reference runs every call itself: name an engine"),
        ({"against": "slowstart"}, "against another implementation, not itself"),
        ({"candidates": ["nope"]}, "'nope' names no candidate of"),
        ({"budget": 0}, "takes the seconds measuring may take, a number above 0"),
    ]
    for options, message in cases:
        options = {"engine": "slowstart", **options}
        with pytest.raises(coheriq.CoheriqTypeError, match=message):
            coheriq.calibrate(lib, **options)
    with pytest.raises(coheriq.CoheriqEngineNotFoundError):
        coheriq.calibrate(lib, "nosuch")
    assert not (tmp_path / "cache").exists()


def test_a_damaged_calibrations_file_leaves_the_declared_default_and_calibrate_says_so(
    packages, tmp_path
):
    lib, engine = packages()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "crossovers.json").write_text("{not json")
    out = _python(
        tmp_path,
        f"""
        import coheriq, {engine}, {lib}
        with coheriq.using_engine("{lib}", "slowstart"):
            print({lib}.work(2))
            print(coheriq.explain({lib}.work, 2).crossovers[0])
        try:
            coheriq.calibrate("{lib}", "slowstart", candidates=["work"], budget=0.5)
        except coheriq.CoheriqCalibrationError as error:
            print("ERROR", error)
        """,
    )
    assert "100 units, declared by the engine (the calibrations cannot be read:" in out
    assert "is not one coheriq wrote" in out and "ERROR" in out and "Delete it" in out


def test_the_command_line_prints_the_table_stores_and_draws(packages, tmp_path):
    lib, engine = packages()
    command = f"""
        import sys, coheriq.cli, {engine}
        sys.exit(coheriq.cli.main(sys.argv[1:]))
        """
    environment = {**os.environ, "COHERIQ_CACHE_DIR": str(tmp_path / "cache")}
    environment["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), *sys.path])
    arguments = ["calibrate", lib, "slowstart", "--candidate", "work", "--budget", "1"]
    plot = tmp_path / "table.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        plot = None
    if plot is not None:
        arguments += ["--plot", str(plot)]
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(command), *arguments],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert f"{lib}: engine 'slowstart' against 'reference'" in done.stdout
    assert "work (units)" in done.stdout and "crossover at" in done.stdout
    assert "stored in" in done.stdout
    if plot is not None:
        assert plot.read_bytes()[:4] == b"\x89PNG"
    as_json = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(command), "--json", *arguments[:7], "--no-store"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["stored"] is None and data["rows"][0]["candidate"] == "work"
    program = tmp_path / "workload.py"
    program.write_text(f"import {lib}\nfor n in (1, 2, 4, 16, 32):\n    {lib}.work(n)\n")
    recording = ["--no-store", "--run", str(program)]
    recorded = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(command), *arguments[:7], *recording],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert recorded.returncode == 0, recorded.stderr
    assert "recorded <Recording of" in recorded.stderr and "crossover at" in recorded.stdout
    bad = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(command), *arguments[:5], "--budget", "-1"],
        capture_output=True,
        text=True,
        env=environment,
        timeout=120,
    )
    assert bad.returncode == 2 and "--budget takes seconds above 0" in bad.stderr


def test_calls_recorded_from_a_run_are_calibrated_on(packages, tmp_path):
    lib, engine = packages()
    __import__(engine)
    library = __import__(lib)
    with coheriq.record_calls(lib, "slowstart", per_size=1) as recording:
        for units in (1, 1, 2, 3):
            assert library.work(units) == units
        # Calls from other threads are the run's calls too, whatever engine runs them.
        worker = threading.Thread(target=lambda: [library.work(n) for n in (16, 17, 32)])
        with coheriq.using_engine(lib, "slowstart"):
            worker.start()
            worker.join(timeout=60)
    library.work(64)  # after the block: not recorded
    kept = recording.calls["work"]
    assert [args for args, _ in kept] == [(1,), (2,), (16,), (32,)]  # one per power of two
    assert "write" not in recording.calls  # never called
    result = coheriq.calibrate(
        lib, "slowstart", candidates=["work"], calls=recording.calls, budget=2.0
    )
    assert [p[0] for p in result.rows[0].points] == [1, 2, 16, 32]
    assert 2 < result.rows[0].crossover <= 16
    with pytest.raises(coheriq.CoheriqTypeError, match="a whole number of at least 1"):
        coheriq.record_calls(lib, "slowstart", per_size=0)
    with pytest.raises(coheriq.CoheriqScopeError, match="exited more often than it was entered"):
        recording.__exit__(None, None, None)


def test_a_call_that_fails_on_both_sides_is_left_out_and_said(packages, tmp_path):
    lib, engine = packages()
    __import__(engine)
    __import__(lib)
    calls = {"work": [((-1,), {}), ((1,), {}), ((32,), {})]}
    result = coheriq.calibrate(lib, "slowstart", candidates=["work"], calls=calls, budget=1.0)
    assert [p[0] for p in result.rows[0].points] == [1, 32]
    note = "work: a call of -1 units raised ValueError on both sides, and was not timed"
    assert result.notes == [note] and note in str(result)


def test_a_decline_that_goes_on_along_the_mro_is_timed_against_what_runs_it(packages, tmp_path):
    lib, engine = packages()
    module = __import__(engine)
    __import__(lib)

    class Wrapped(module.Slow, name="wrapped"):
        @coheriq.crossover(size=module._sized, default=10, unit="units", inputs=module._inputs)
        def work(self, units):
            return super().work(units)

    with pytest.raises(coheriq.CoheriqTypeError) as raised:
        coheriq.calibrate(lib, "wrapped", candidates=["work"], budget=1.0)
    assert (
        f"a call of 'work' that engine 'wrapped' of {lib!r} declines runs the implementation "
        "of 'slowstart', next along its MRO, not that of 'reference': calibrate it against "
        "that one (against='slowstart')"
    ) in str(raised.value)
    assert not (tmp_path / "cache").exists()
