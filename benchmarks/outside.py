"""What accelerating a library from the outside costs at import, against marking it.

``python benchmarks/outside.py [ROUNDS]`` lays out, in a temporary directory,
CPython's ``statistics`` twice: marked by its own code, as the library author
guide says (``tests/cpython/mark_stdlib.py``), and declared from the outside
(``tests/cpython/statistics.coheriq-declaration.json``, published with the test
suite's NumPy engine). Each measurement is a fresh interpreter; the cases run in
turns, and the medians are printed:

* ``import statistics``: unmarked, marked by its own code, accelerated from the
  outside (every module it imports is imported before the clock starts, so that
  only the module's own run, and its marking, is timed);
* a set of standard-library modules that nothing declares, imported with the
  finder installed (``coheriq.accelerate("statistics")``) and without it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPYTHON = ROOT / "tests" / "cpython"
sys.path.insert(0, str(CPYTHON))
from published import publish_numpy_engine  # noqa: E402 - tests/cpython, on the path just above

# Imported before the clock starts in every case: what statistics imports, and
# what coheriq.accelerate imports.
BEFORE = (
    "import coheriq, importlib.metadata, json, fractions, decimal, random, bisect, "
    "collections, itertools, math, numbers, operator, functools, re, warnings, inspect"
)
TIMED = "import time; t = time.perf_counter(); {imports}; print((time.perf_counter() - t) * 1e3)"
UNDECLARED = (
    "import asyncio, unittest, email.mime.text, http.client, xml.dom.minidom, "
    "logging.handlers, argparse, csv, sqlite3, zipfile, tarfile, difflib, pprint, ast, "
    "dataclasses, enum, typing"
)


def lay_out(where: Path) -> tuple[Path, Path]:
    """(a directory with the marked copy, one with the engine and its declaration)."""
    marked, outside = where / "marked", where / "outside"
    marked.mkdir()
    outside.mkdir()
    subprocess.run(
        [sys.executable, str(CPYTHON / "mark_stdlib.py"), "statistics", str(marked)],
        check=True,
        capture_output=True,
    )
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(marked)], check=True)
    publish_numpy_engine(outside, declaration=True)
    return marked, outside


def milliseconds(code: str, path: list[Path]) -> float:
    env = {k: v for k, v in os.environ.items() if k != "COHERIQ_ACCELERATE"}
    env["PYTHONPATH"] = os.pathsep.join(map(str, [*path, ROOT]))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return float(done.stdout)


def main(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        marked, outside = lay_out(Path(scratch))
        accelerate = "coheriq.accelerate('statistics')"
        cases = {
            "import statistics, unmarked": (
                f"{BEFORE}; " + TIMED.format(imports="import statistics"),
                [],
            ),
            "import statistics, marked by its own code": (
                f"{BEFORE}; " + TIMED.format(imports="import statistics"),
                [marked],
            ),
            "import statistics, accelerated from the outside": (
                f"{BEFORE}; {accelerate}; " + TIMED.format(imports="import statistics"),
                [outside],
            ),
            "undeclared modules, no finder": (
                f"{BEFORE}; " + TIMED.format(imports=UNDECLARED),
                [outside],
            ),
            "undeclared modules, finder installed": (
                f"{BEFORE}; {accelerate}; " + TIMED.format(imports=UNDECLARED),
                [outside],
            ),
        }
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(rounds):
            for name, (code, path) in cases.items():
                times[name].append(milliseconds(code, path))
    print(f"Python {sys.version.split()[0]}, {rounds} rounds, medians (fresh interpreters)")
    for name, values in times.items():
        print(f"  {name:<50} {statistics.median(values):7.3f} ms")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 21)
