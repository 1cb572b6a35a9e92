"""A library from PyPI that nobody here wrote, accelerated from the outside: cachetools.

cachetools (classes: ``Cache`` and its subclasses, defined in one module; the
``cached`` decorators; key functions in a submodule) never adopted coheriq. Its
own test suite, from its source distribution, must pass test for test as
shipped, marked from the outside with no engine chosen, and on the engine
``example/cachetools-onedict``, both through ``python -m coheriq run`` and
through the pytest plugin's ``--coheriq-engine``; and the engine must have
constructed the suite's FIFO caches.

Needs the package index (``pip download``) once: the suite and a virtual
environment with cachetools are kept in the temporary directory between runs.
Without them the tests are skipped, with the reason.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest
from installed import give_coheriq

ROOT = Path(__file__).resolve().parent.parent
# The release whose suite is run (the declaration covers >=5.3,<9): the newest.
VERSION = "8.0.2"
TIMEOUT = 600
# A download and a virtual environment the first time: the README's first check leaves
# this file out.
pytestmark = pytest.mark.slow
HOME = Path(tempfile.gettempdir()) / (
    f"coheriq-cachetools-{VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
)


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="session")
def suite() -> Path:
    """cachetools' own tests, from its source distribution."""
    tests = HOME / f"cachetools-{VERSION}" / "tests"
    if tests.is_dir():
        return tests.parent
    HOME.mkdir(parents=True, exist_ok=True)
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
    done = run([*pip, f"cachetools=={VERSION}", "-d", str(HOME)])
    archive = HOME / f"cachetools-{VERSION}.tar.gz"
    if done.returncode != 0 or not archive.exists():
        pytest.skip(f"cachetools {VERSION}'s source could not be downloaded: {done.stderr[-300:]}")
    with tarfile.open(archive) as sdist:
        if hasattr(tarfile, "data_filter"):  # 3.12, and the security releases before it
            sdist.extractall(HOME, filter="data")
        else:
            sdist.extractall(HOME)
    return tests.parent


@pytest.fixture(scope="session")
def python() -> str:
    """A virtual environment with pytest, cachetools and the engine (coheriq: this tree)."""
    home = HOME / "venv"
    python = home / "bin" / "python"
    check = [str(python), "-c", "import pytest, cachetools, cachetools_onedict"]
    engine = ROOT / "example" / "cachetools-onedict"
    if python.exists() and run(check).returncode == 0:
        # The engine as this tree has it (it is small): reinstalled each session.
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(engine)])
        give_coheriq(str(python))  # coheriq run needs its start-up file
        return str(python)
    shutil.rmtree(home, ignore_errors=True)
    made = run([sys.executable, "-m", "venv", str(home)])
    if made.returncode == 0:
        pip = [str(python), "-m", "pip", "install", "-q"]
        made = run([*pip, "pytest>=7,<9", f"cachetools=={VERSION}"])
    if made.returncode == 0:
        made = run([*pip, "--no-deps", str(engine)])
    if made.returncode != 0:
        pytest.skip(f"could not install cachetools {VERSION} and pytest: {made.stderr[-300:]}")
    give_coheriq(str(python))  # coheriq run needs its start-up file
    return str(python)


def outcomes(report: Path) -> dict[str, str]:
    """Test id -> passed, failed, error or skipped, from a JUnit XML report."""
    found = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        found[f"{case.get('classname')}::{case.get('name')}"] = kinds.pop() if kinds else "passed"
    return found


def run_suite(python: str, suite: Path, tmp_path: Path, label: str, *how: str):
    """Run the suite (``how`` before pytest's own arguments); its outcomes and engine count."""
    (tmp_path / "count_onedict.py").write_text(
        "import os, sys\n\n"
        "def pytest_sessionfinish(session):\n"
        "    engine = sys.modules.get('cachetools_onedict')\n"
        "    with open(os.environ['ONEDICT_COUNT'], 'w') as out:\n"
        "        out.write(str(engine.constructed[0] if engine else 0))\n"
    )
    report, count = tmp_path / f"{label}.xml", tmp_path / f"{label}.count"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("COHERIQ", "CACHETOOLS"))},
        "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]),
        "ONEDICT_COUNT": str(count),
    }
    pytest_args = ["-p", "no:cacheprovider", "-p", "count_onedict", f"--junitxml={report}"]
    done = run([python, *how, *pytest_args, "tests"], env=env, cwd=suite)
    assert done.returncode == 0, f"{label}: {done.stdout[-3000:]}{done.stderr[-2000:]}"
    return outcomes(report), int(count.read_text()), done.stdout


def test_cachetools_suite_passes_test_for_test_marked_and_on_an_engine(python, suite, tmp_path):
    runner = ["-m", "coheriq", "run"]
    shipped, _, _ = run_suite(python, suite, tmp_path, "shipped", "-m", "pytest")
    marked, none, _ = run_suite(
        python, suite, tmp_path, "marked", *runner, "--engine", "cachetools", "-m", "pytest"
    )
    on_engine, made, _ = run_suite(
        python, suite, tmp_path, "runner", *runner, "--engine", "cachetools:onedict",
        "-m", "pytest",
    )  # fmt: skip
    plugin, made_too, out = run_suite(
        python, suite, tmp_path, "plugin", "-m", "pytest", "-p", "coheriq.pytest_plugin",
        "--coheriq-engine=cachetools:onedict",
    )  # fmt: skip
    assert len(shipped) > 400 and set(shipped.values()) <= {"passed", "skipped"}
    assert marked == shipped and on_engine == shipped and plugin == shipped
    assert none == 0  # no engine chosen: the library's own FIFOCache
    assert made > 10 and made == made_too  # the engine built the suite's FIFO caches
    assert "cachetools on 'onedict' (--coheriq-engine)" in out
    print(f"\ncachetools {VERSION}: {len(shipped)} tests, shipped, marked and on onedict ({made})")


def test_the_guides_cachetools_example_prints_what_the_page_shows(python, suite):
    examples = ROOT / "docs" / "examples" / "outside"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("COHERIQ", "CACHETOOLS"))},
        "PYTHONPATH": str(ROOT),
    }
    done = run([python, "fifo.py"], env=env, cwd=examples)
    assert done.returncode == 0, done.stderr
    shown = done.stdout.replace(f"{examples}{os.sep}", "")
    assert shown == (examples / "fifo.out").read_text()
