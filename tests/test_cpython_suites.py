"""CPython's own test suites, unchanged, against standard library modules marked as domains.

Libraries that nobody here wrote, marked as the library author guide says
(``statistics``: its 20 public functions and ``NormalDist``; ``fractions``:
``Fraction``, an ABC built in ``__new__``, with ``__slots__`` and ``__reduce__``),
must pass their own suites test for test like the unmarked modules; on an
engine, ``statistics``' suite must pass except for the tests listed, with the
reason, in ``cpython/statistics_xfails.py``.

Needs a Python with CPython's ``test`` package: the interpreter named by
``COHERIQ_CPYTHON`` (CI names each newer Python it tests), else a 3.13
(``python3.13`` on ``PATH``, or pyenv's); the engine run also needs pytest and
NumPy for it, installed once per Python version into a cached virtual environment.
Without them the tests are skipped, with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from installed import give_coheriq

pytestmark = pytest.mark.slow  # CPython's own suites, run in new interpreters: minutes

HERE = Path(__file__).parent / "cpython"
sys.path.insert(0, str(HERE))
from published import publish_numpy_engine  # noqa: E402 - tests/cpython, put on the path just above

sys.path.remove(str(HERE))
ROOT = Path(__file__).parent.parent  # coheriq itself is imported from the source tree
VERSION = "3.13"  # looked for where COHERIQ_CPYTHON names none
TIMEOUT = 600  # seconds; a hang fails the test instead of stalling the run


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)  # type: ignore[call-overload, no-any-return]


def interpreters() -> list[str]:
    """Commands that may run a Python 3.13: the one named, on PATH, then pyenv's."""
    found = [os.environ.get("COHERIQ_CPYTHON", ""), shutil.which(f"python{VERSION}") or ""]
    pyenv = shutil.which("pyenv")
    if pyenv:  # pyenv's shims run only the versions selected; ask it for the others
        versions = run([pyenv, "versions", "--bare"]).stdout.split()
        for version in sorted((v for v in versions if v.startswith(f"{VERSION}.")), reverse=True):
            prefix = run([pyenv, "prefix", version]).stdout.strip()
            found.append(os.path.join(prefix, "bin", "python3") if prefix else "")
    return [command for command in found if command]


@pytest.fixture(scope="session")
def cpython() -> str:
    """A CPython 3.13 interpreter that has CPython's test_statistics."""
    tried = []
    for command in interpreters():
        probe = run(
            [
                command,
                "-c",
                "import sys, test.test_statistics, test.test_fractions; print(sys.executable)",
            ]
        )
        if probe.returncode == 0:
            return probe.stdout.strip()
        tried.append(f"{command}: {(probe.stderr.strip().splitlines() or ['?'])[-1]}")
    pytest.skip(
        f"no Python {VERSION} with CPython's test package was found (set COHERIQ_CPYTHON to "
        f"one); tried: {'; '.join(tried) or 'nothing on PATH'}"
    )


def mark(cpython: str, module: str, where: Path) -> list[str]:
    """Write the marked copy of the standard library's ``module`` into ``where``."""
    done = run([cpython, str(HERE / "mark_stdlib.py"), module, str(where)])
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


@pytest.fixture(scope="session")
def marked(cpython: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory with the marked statistics and fractions, statistics' numpy engine
    (advertised through an entry point), and the plugin that runs its suite on it."""
    where = tmp_path_factory.mktemp("marked_stdlib")
    assert len(mark(cpython, "statistics", where)) == 21  # NormalDist, 20 functions
    assert mark(cpython, "fractions", where) == ["Fraction"]
    publish_numpy_engine(where, declaration=False, extra=("statistics_xfails.py",))
    return where


def version_of(cpython: str) -> str:
    """``3.13``, say, or ``3.13t`` for a free-threaded build: what ``cpython`` is."""
    code = (
        "import sys, sysconfig; print('%d.%d%s' % (*sys.version_info[:2], "
        "'t' if sysconfig.get_config_var('Py_GIL_DISABLED') else ''))"
    )
    return run([cpython, "-c", code]).stdout.strip()


@pytest.fixture(scope="session")
def cpython_with_numpy(cpython: str) -> str:
    """That interpreter's virtual environment with pytest and NumPy, built once and kept."""
    home = Path(tempfile.gettempdir()) / f"coheriq-cpython{version_of(cpython)}-pytest-numpy"
    python = home / "bin" / "python"
    check = [str(python), "-c", "import pytest, numpy"]
    if not (python.exists() and run(check).returncode == 0):
        shutil.rmtree(home, ignore_errors=True)
        made = run([cpython, "-m", "venv", str(home)])
        if made.returncode == 0:
            pip = [str(python), "-m", "pip", "install", "-q", "--prefer-binary"]
            made = run([*pip, "pytest>=7,<9", "numpy"])
        if made.returncode != 0:
            why = made.stderr[-300:]
            pytest.skip(f"could not install pytest and NumPy for {cpython}: {why}")
    give_coheriq(str(python))  # coheriq run needs its start-up file
    return str(python)


@pytest.fixture(scope="session")
def cpython_venv(cpython: str) -> str:
    """That interpreter's virtual environment with this tree installed (its start-up
    file too, which ``coheriq run`` needs), made once and kept."""
    home = Path(tempfile.gettempdir()) / f"coheriq-cpython{version_of(cpython)}-venv"
    python = home / "bin" / "python"
    if not python.exists():
        made = run([cpython, "-m", "venv", "--without-pip", str(home)])
        assert made.returncode == 0, made.stderr
    give_coheriq(str(python))
    return str(python)


@pytest.mark.parametrize("module", ["statistics", "fractions"])
def test_the_suite_passes_test_for_test_like_the_unmarked_module(cpython, marked, module):
    runs = {}
    for label, path in {"unmarked": [ROOT], "marked": [marked, ROOT]}.items():
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, path))}
        command = [cpython, str(HERE / "run_suite.py"), module]
        runs[label] = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    reports = {}
    for label, process in runs.items():
        out, _ = process.communicate(timeout=TIMEOUT)
        reports[label] = json.loads(out)
        assert process.returncode == 0, f"CPython's suite failed on the {label} {module}"
    unmarked, marked_report = reports["unmarked"], reports["marked"]
    assert not unmarked["marked"] and marked_report["marked"]  # each ran the module it should
    assert marked_report["file"] == str(marked / f"{module}.py")
    assert marked_report["outcomes"] == unmarked["outcomes"]  # the same tests, the same results
    assert set(marked_report["outcomes"].values()) == {"passed"}
    if module == "statistics":
        outcomes = marked_report["outcomes"]
        imported = [t for t in outcomes if ".TestNormalDistImported." in t]
        assert len(imported) == 19 and "statistics.NormalDist.overlap" in outcomes  # a doctest
    version = version_of(cpython)
    print(f"\nCPython {version} test_{module}: {marked_report['ran']} tests, unmarked and marked")


def test_the_suite_passes_test_for_test_on_an_engine_that_declines_every_other_call(
    cpython, marked
):
    shutil.copy(HERE / "declining_engine.py", marked / "declining_engine.py")
    reports = {}
    for label, path, extra in (
        ("unmarked", [ROOT], []),
        ("declining", [marked, ROOT], ["--declining"]),
    ):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(map(str, path))}
        done = run([cpython, str(HERE / "run_suite.py"), "statistics", *extra], env=env)
        assert done.returncode == 0, f"the {label} run failed: {done.stderr[-3000:]}"
        reports[label] = json.loads(done.stdout)
    declining = reports["declining"]
    assert declining["outcomes"] == reports["unmarked"]["outcomes"]
    declines = declining["declines"]
    assert len(declines) >= 15, declines  # most of the 20 functions were called, and declined
    assert all(key.endswith(": every other call") and n > 0 for key, n in declines.items())
    print(
        f"\nCPython {version_of(cpython)} test_statistics, every other call declined: "
        f"{declining['ran']} tests passed, {sum(declines.values())} calls declined"
    )


def test_the_suite_on_a_numpy_engine_differs_only_where_listed(cpython_with_numpy, marked):
    test_file = run(
        [cpython_with_numpy, "-c", "import test.test_statistics as t; print(t.__file__)"]
    ).stdout.strip()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(marked), str(ROOT)])}
    done = run(
        [
            cpython_with_numpy,
            "-m",
            "pytest",
            "-p",
            "no:cacheprovider",
            "--import-mode=append",
            "-p",
            "coheriq.pytest_plugin",
            "-p",
            "statistics_xfails",
            "--coheriq-engine=statistics:numpy",
            "-rx",
            test_file,
        ],
        env=env,
        cwd=marked,
    )
    summary = done.stdout.strip().splitlines()[-1]
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    # The plugin writes a line per domain (fractions, imported at start-up, has one too).
    lines = [line for line in done.stdout.splitlines() if line.startswith("coheriq: statistics")]
    assert lines and "statistics on 'numpy' (--coheriq-engine)" in lines[0], done.stdout[:3000]
    sys.path.insert(0, str(HERE))
    try:
        from statistics_xfails import KNOWN
    finally:
        sys.path.remove(str(HERE))
    assert f"{len(KNOWN)} xfailed" in summary and " failed" not in summary, summary
    xfailed = [line for line in done.stdout.splitlines() if line.startswith("XFAIL ")]
    for test in KNOWN:
        assert any(f"test_statistics.py::{test} - " in line for line in xfailed), test
    version = version_of(cpython_with_numpy)
    print(f"\nCPython {version} test_statistics on engine numpy: {summary}")


# -- statistics accelerated from the outside: the module as installed, unmodified ------------


@pytest.fixture(scope="session")
def outside(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The numpy engine published with a declaration of statistics: the stdlib's module
    itself is marked, from the outside, when it is imported (see docs/outside.rst)."""
    where = tmp_path_factory.mktemp("statistics_outside")
    publish_numpy_engine(where, declaration=True, extra=("statistics_xfails.py",))
    return where


def outside_report(python: str, outside: Path, *runner: str) -> dict:
    """run_suite.py's report of statistics, with ``runner`` (coheriq run ...) in front."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(outside), str(ROOT)])}
    env.pop("COHERIQ_ACCELERATE", None)
    done = run([python, *runner, str(HERE / "run_suite.py"), "statistics"], env=env)
    assert done.stdout, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_statistics_accelerated_from_the_outside_passes_test_for_test(cpython_venv, outside):
    unmarked = outside_report(cpython_venv, outside)
    accelerated = outside_report(
        cpython_venv, outside, "-m", "coheriq", "run", "--engine", "statistics"
    )
    assert not unmarked["marked"] and accelerated["marked"]
    assert accelerated["file"] == unmarked["file"]  # the standard library's own file
    assert accelerated["outcomes"] == unmarked["outcomes"]
    assert set(accelerated["outcomes"].values()) == {"passed"}
    print(
        f"\nCPython {version_of(cpython_venv)} test_statistics, statistics accelerated from the "
        f"outside: {accelerated['ran']} tests, as unmarked"
    )


def test_statistics_from_the_outside_on_numpy_differs_only_where_listed(
    cpython_with_numpy, outside
):
    unmarked = outside_report(cpython_with_numpy, outside)
    on_numpy = outside_report(
        cpython_with_numpy, outside, "-m", "coheriq", "run", "--engine", "statistics:numpy"
    )
    sys.path.insert(0, str(HERE))
    try:
        from statistics_xfails import KNOWN
    finally:
        sys.path.remove(str(HERE))
    known = {"." + key.replace("::", ".") for key in KNOWN}
    differ = {
        t for t, outcome in on_numpy["outcomes"].items() if outcome != unmarked["outcomes"][t]
    }
    assert {t for t in differ if not t.endswith(tuple(known))} == set()
    assert len(differ) == len(KNOWN) and on_numpy["outcomes"].keys() == unmarked["outcomes"].keys()


def test_coheriq_verify_finds_no_difference_on_statistics_from_the_outside(
    cpython_with_numpy, outside
):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(outside), str(ROOT)])}
    env.pop("COHERIQ_ACCELERATE", None)
    done = run(
        [cpython_with_numpy, "-m", "coheriq", "--json", "verify", "statistics", "numpy",
         "-m", "test.test_statistics"],
        env=env,
    )  # fmt: skip
    report = json.loads(done.stdout)
    compared = {row["candidate"]: row["compared"] for row in report["candidates"]}
    assert report["ok"] and all(row["mismatches"] == 0 for row in report["candidates"])
    # The engine's five overrides, and only they (the others run the reference on both
    # sides: nothing to compare), each compared on many calls.
    overrides = {"correlation", "fmean", "geometric_mean", "pstdev", "pvariance"}
    assert compared.keys() == overrides and min(compared.values()) >= 10, compared


def test_shadow_verification_at_ten_percent_finds_no_difference_on_statistics(
    cpython_with_numpy, outside, tmp_path
):
    """CPython's test_statistics on the numpy engine, a tenth of its calls shadowed."""
    report_file = tmp_path / "shadow.json"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(outside), str(ROOT)]),
        "COHERIQ_SHADOW": "statistics:0.1",
        "COHERIQ_SHADOW_REPORT": str(report_file),
        "COHERIQ_SHADOW_BUDGET": "60",  # the suite, not production: compare all it samples
    }
    env.pop("COHERIQ_ACCELERATE", None)
    runner = [cpython_with_numpy, "-m", "coheriq", "run", "--engine", "statistics:numpy"]
    done = run([*runner, str(HERE / "run_suite.py"), "statistics"], env=env)
    outcomes = json.loads(done.stdout)["outcomes"]
    sys.path.insert(0, str(HERE))
    try:
        from statistics_xfails import KNOWN
    finally:
        sys.path.remove(str(HERE))
    failed = {test for test, outcome in outcomes.items() if outcome != "passed"}
    known = tuple("." + key.replace("::", ".") for key in KNOWN)
    assert {test for test in failed if not test.endswith(known)} == set()
    report = json.loads(report_file.read_text())
    totals = report["totals"]
    # The documented rounding cases differ from the reference by less than the
    # tolerance (1e-9): the suite's exact checks fail there, the shadow finds nothing.
    assert report["engine"] == "numpy" and totals["mismatches"] == 0, report
    # About 250 calls of the engine's five overrides (coheriq verify compares them all):
    # a tenth of them sampled, each compared, but those given an iterator that may share
    # its source with a copy (a generator), which run on the engine alone, noted.
    assert totals["compared"] >= 10 and totals["dropped"] + totals["over_budget"] == 0, totals
    assert totals["compared"] + totals["not_compared"] == totals["sampled"], totals
    notes = [note for row in report["candidates"] for note in row["notes"]]
    assert all(note.startswith("an argument is an iterator") for note in notes), notes
    sampled = {row["candidate"] for row in report["candidates"]}
    assert sampled <= {"correlation", "fmean", "geometric_mean", "pstdev", "pvariance"}
    print(
        f"\nCPython {version_of(cpython_with_numpy)} test_statistics on numpy, shadowed at "
        f"10%: {totals['sampled']} sampled, {totals['compared']} compared, no difference"
    )


def test_the_guides_example_of_names_bound_before_prints_what_the_page_shows(outside):
    pytest.importorskip("numpy")
    examples = ROOT / "docs" / "examples" / "outside"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(outside), str(ROOT)])}
    env.pop("COHERIQ_ACCELERATE", None)
    done = run([sys.executable, "late.py"], env=env, cwd=examples)
    assert done.returncode == 0, done.stderr
    shown = done.stdout.replace(f"{examples}{os.sep}", "")
    assert shown == (examples / "late.out").read_text()
