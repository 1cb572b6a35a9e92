"""A library from PyPI written against the array API standard, run on JAX from the outside.

array-api-extra never adopted coheriq. Its own test suite, from its source distribution,
run with NumPy inputs (the tests whose backend is NumPy or read-only NumPy, and those
without a backend; the others are deselected, the same in every run), must pass test for
test as shipped, marked from the outside with no engine chosen, and on the engine
``example/array-api-extra-jax``: coheriq's conversions alone, which run the library's own
code on JAX arrays and give NumPy back (the suite's assertions check that a result has
its input's namespace). The engine must have converted arrays both ways.

Needs the package index (``pip download``) once: the suite and a virtual environment with
array-api-extra and JAX are kept in the temporary directory between runs. Without them
the tests are skipped, with the reason.
"""

from __future__ import annotations

import collections
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
VERSION = "0.11.5"  # the declaration covers >=0.11,<0.12
TIMEOUT = 600
# A download and a virtual environment with JAX the first time: the README's first check
# leaves this file out.
pytestmark = pytest.mark.slow
HOME = Path(tempfile.gettempdir()) / (
    f"coheriq-array-api-extra-{VERSION}-py{sys.version_info[0]}.{sys.version_info[1]}"
)
ENGINE = ROOT / "example" / "array-api-extra-jax"

# Keeps the tests with NumPy inputs: every Backend among a test's parameters is NumPy's.
NUMPY_ONLY = """\
def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        backends = [v for v in params.values() if type(v).__name__ == "Backend"]
        numpy = all(b.value in ("numpy", "numpy:readonly") for b in backends)
        (keep if numpy else drop).append(item)
    items[:] = keep
    config.hook.pytest_deselected(items=drop)
"""
# Writes the arrays the engine converted, each way, at the session's end.
COUNT = """\
import os, sys

def pytest_sessionfinish(session):
    engine = sys.modules.get("array_api_extra_jax")
    counted = engine.converted if engine else {}
    with open(os.environ["AAE_JAX_COUNT"], "w") as out:
        out.write(f"{counted.get('to_jax', 0)} {counted.get('to_numpy', 0)}")
"""


def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, timeout=TIMEOUT, **kwargs)  # type: ignore[call-overload, no-any-return]


@pytest.fixture(scope="session")
def suite() -> Path:
    """array-api-extra's own tests, from its source distribution."""
    root = HOME / f"array_api_extra-{VERSION}"
    if (root / "tests" / "main").is_dir():
        return root
    HOME.mkdir(parents=True, exist_ok=True)
    # Source of array-api-extra only: its build requirements may come as wheels.
    pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary"]
    done = run([*pip, "array-api-extra", f"array-api-extra=={VERSION}", "-d", str(HOME)])
    archive = HOME / f"array_api_extra-{VERSION}.tar.gz"
    if done.returncode != 0 or not archive.exists():
        why = done.stderr[-300:]
        pytest.skip(f"array-api-extra {VERSION}'s source could not be downloaded: {why}")
    with tarfile.open(archive) as sdist:
        if hasattr(tarfile, "data_filter"):  # 3.12, and the security releases before it
            sdist.extractall(HOME, filter="data")
        else:
            sdist.extractall(HOME)
    return root


@pytest.fixture(scope="session")
def python() -> str:
    """A virtual environment with the suite's needs, JAX and the engine (coheriq: this tree)."""
    home = HOME / "venv"
    python = home / "bin" / "python"
    check = [str(python), "-c", "import pytest, hypothesis, jax, array_api_extra_jax"]
    if python.exists() and run(check).returncode == 0:
        # The engine as this tree has it (it is small): reinstalled each session.
        run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(ENGINE)])
        give_coheriq(str(python))  # coheriq run needs its start-up file
        return str(python)
    shutil.rmtree(home, ignore_errors=True)
    made = run([sys.executable, "-m", "venv", str(home)])
    if made.returncode == 0:
        pip = [str(python), "-m", "pip", "install", "-q"]
        wanted = [f"array-api-extra=={VERSION}", "array-api-compat>=1.15,<2", "numpy", "jax"]
        made = run([*pip, "pytest>=7,<9", "hypothesis", "typing_extensions", *wanted])
    if made.returncode == 0:
        made = run([*pip, "--no-deps", str(ENGINE)])
    if made.returncode != 0:
        pytest.skip(f"could not install array-api-extra {VERSION} and JAX: {made.stderr[-300:]}")
    give_coheriq(str(python))  # coheriq run needs its start-up file
    return str(python)


def outcomes(report: Path) -> dict[str, str]:
    """Test id -> passed, failed, error or skipped, from a JUnit XML report."""
    found = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        found[f"{case.get('classname')}::{case.get('name')}"] = kinds.pop() if kinds else "passed"
    return found


def environment(*paths: Path, **more: str) -> dict[str, str]:
    own = ("COHERIQ", "ARRAY_API_EXTRA", "JAX_")
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith(own)},
        "PYTHONPATH": os.pathsep.join(map(str, [*paths, ROOT])),
        **more,
    }


def run_suite(python: str, suite: Path, tmp_path: Path, label: str, *how: str):
    """Run the suite with NumPy inputs (``how`` before pytest's own arguments): its
    outcomes, and the arrays the engine converted to JAX and back."""
    (tmp_path / "aae_numpy_only.py").write_text(NUMPY_ONLY)
    (tmp_path / "aae_jax_count.py").write_text(COUNT)
    report, count = tmp_path / f"{label}.xml", tmp_path / f"{label}.count"
    env = environment(tmp_path, AAE_JAX_COUNT=str(count))
    pytest_args = ["-p", "no:cacheprovider", "-p", "aae_numpy_only", "-p", "aae_jax_count"]
    # tests/main: the library's tests (tests/vendoring needs a build's vendored copy).
    command = [python, *how, *pytest_args, f"--junitxml={report}", "tests/main"]
    done = run(command, env=env, cwd=suite)
    assert done.returncode == 0, f"{label}: {done.stdout[-3000:]}{done.stderr[-2000:]}"
    to_jax, to_numpy = map(int, count.read_text().split())
    return outcomes(report), (to_jax, to_numpy)


def test_array_api_extra_suite_passes_test_for_test_marked_and_on_jax(python, suite, tmp_path):
    runner = ["-m", "coheriq", "run", "--engine"]
    shipped, _ = run_suite(python, suite, tmp_path, "shipped", "-m", "pytest")
    marked, none = run_suite(
        python, suite, tmp_path, "marked", *runner, "array_api_extra", "-m", "pytest"
    )
    on_jax, (to_jax, to_numpy) = run_suite(
        python, suite, tmp_path, "jax", *runner, "array_api_extra:jax", "-m", "pytest"
    )
    counts = collections.Counter(shipped.values())
    assert len(shipped) > 2000 and set(counts) <= {"passed", "skipped"}, counts
    assert marked == shipped
    assert on_jax == shipped
    assert none == (0, 0)  # no engine chosen: the library's own code, on NumPy
    assert to_jax > 1000 and to_numpy > 500  # the engine ran the suite's calls on JAX
    print(
        f"\narray-api-extra {VERSION} with NumPy inputs: {len(shipped)} tests "
        f"({counts['passed']} passed, {counts['skipped']} skipped), the same shipped, "
        f"marked and on jax ({to_jax} arrays to JAX, {to_numpy} back to NumPy)"
    )


def test_a_call_on_jax_gives_the_caller_numpy(python, tmp_path):
    program = (
        "import numpy as np, coheriq, array_api_extra as xpx\n"
        "result = xpx.kron(np.eye(2), np.ones((2, 2)))\n"
        "print(type(result).__name__, result.dtype, result.flags.writeable, result.sum())\n"
        "print(coheriq.explain(xpx.kron, np.eye(2), np.eye(2)).engine)\n"
    )
    runner = ["-m", "coheriq", "run", "--engine", "array_api_extra:jax", "-c", program]
    done = run([python, *runner], env=environment(), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ndarray", "float64", "True", "8.0", "jax"]
