"""What ``COHERIQ_ACCELERATE`` adds to the start of every Python process.

``python benchmarks/startup.py [RUNS]`` (``--quick``: 3 runs, to check it works)
times ``python -c pass`` in fresh interpreters of this environment, in turns:
without the variable; with ``COHERIQ_ACCELERATE=figures:fast``, a library from
PyPI (``figures``, laid out with an engine package that declares it, in a
temporary directory that every case has on ``PYTHONPATH``), which is accelerated
when it is imported; and with ``COHERIQ_ACCELERATE=statistics:numpy``, a module
of the standard library (the guide's own case), accelerated at its import too. It
prints the medians of the wall times and of ``-X importtime``'s total, and the
modules the variable makes the interpreter import. The start-up file installed
with coheriq (``coheriq-accelerate.pth``) does the work: without it (coheriq
run from a source tree) there is nothing to measure, and it says so. Target:
at most 10 ms added for a library that is not imported; nothing here asserts.
The run the docs show is ``benchmarks/results/startup.txt``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CPYTHON = ROOT / "tests" / "cpython"
sys.path.insert(0, str(CPYTHON))
from published import publish_numpy_engine  # noqa: E402 - tests/cpython, on the path just above

TARGET_MS = 10.0
CASES = {
    "without COHERIQ_ACCELERATE": None,
    "COHERIQ_ACCELERATE=figures:fast": "figures:fast",
    "COHERIQ_ACCELERATE=statistics:numpy": "statistics:numpy",
}
DECLARATION = {
    "coheriq_declaration": 1,
    "library": "figures",
    "distribution": "figures",
    "modules": {"figures": {"functions": ["area"]}},
}


def lay_out(where: Path) -> None:
    """``figures`` and its engine package ``figures_fast`` (with its declaration), and
    statistics' NumPy engine (with its declaration), as pip would install them."""
    (where / "figures.py").write_text("def area(side):\n    return side * side\n")
    (where / "figures_fast.py").write_text(
        "import coheriq\n\n"
        "class Fast(coheriq.engine_class('figures'), name='fast'):\n"
        "    def area(self, side):\n        return side ** 2\n"
    )
    (where / "figures_fast.json").write_text(json.dumps(DECLARATION))
    for name, entry_points in (
        ("figures", ""),
        (
            "figures_fast",
            "[coheriq.engines.figures]\nfast = figures_fast\n\n"
            "[coheriq.declarations.figures]\nfast = figures_fast:figures_fast.json\n",
        ),
    ):
        info = where / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        if entry_points:
            (info / "entry_points.txt").write_text(entry_points)
    publish_numpy_engine(where, declaration=True)


def environment(where: Path, variable: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "COHERIQ_ACCELERATE"}
    env.pop("STATISTICS_ENGINE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up writes the bytecode caches
    env["PYTHONPATH"] = os.pathsep.join([str(where), *filter(None, [env.get("PYTHONPATH")])])
    if variable is not None:
        env["COHERIQ_ACCELERATE"] = variable
    return env


def run_ms(env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) milliseconds of ``python -c pass``: the CPU time, user and system, is
    the steadier figure where other processes share the machine."""
    start = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-c", "pass"], env=env)
    _, status, usage = os.wait4(child.pid, 0)
    wall = (time.perf_counter() - start) * 1e3
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise SystemExit(f"python -c pass failed with {env.get('COHERIQ_ACCELERATE')}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1e3


def import_times(env: dict[str, str]) -> tuple[float, list[str]]:
    """(-X importtime's total in ms, the modules imported)."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "pass"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    if "cannot be accelerated" in done.stderr:
        raise SystemExit(f"{env['COHERIQ_ACCELERATE']} failed: {done.stderr.strip()}")
    total, modules = 0, []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        modules.append(name.strip())
        if not name.startswith("  "):  # a top-level import: its time is not counted twice
            total += int(cumulative)
    return total / 1e3, modules


def installed(env: dict[str, str]) -> bool:
    """Whether the start-up file ran (it loads its module without the import system)."""
    code = "import sys; print('coheriq._outside.startup' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    return done.stdout.strip() == "True"


def main(argv: list[str]) -> int:
    runs = 3 if "--quick" in argv else int(next((a for a in argv if a.isdigit()), "30"))
    with tempfile.TemporaryDirectory() as scratch:
        where = Path(scratch)
        lay_out(where)
        envs = {case: environment(where, variable) for case, variable in CASES.items()}
        for env in envs.values():  # bytecode caches written, files in the page cache
            import_times(env)
        plain = set(import_times(envs["without COHERIQ_ACCELERATE"])[1])
        added = {case: sorted(set(import_times(env)[1]) - plain) for case, env in envs.items()}
        if not installed(envs["COHERIQ_ACCELERATE=statistics:numpy"]):
            print("coheriq's start-up file is not installed here: nothing to measure")
            return 0
        walls: dict[str, list[float]] = {case: [] for case in CASES}
        cpus: dict[str, list[float]] = {case: [] for case in CASES}
        imports: dict[str, list[float]] = {case: [] for case in CASES}
        for _ in range(runs):
            for case, env in envs.items():
                wall, cpu = run_ms(env)
                walls[case].append(wall)
                cpus[case].append(cpu)
                imports[case].append(import_times(env)[0])
    base = "without COHERIQ_ACCELERATE"
    print(f"Python {sys.version.split()[0]}, `python -c pass`, medians of {runs} runs (ms)")
    print(f"  {'':<38} {'wall':>7} {'added':>7} {'CPU':>7} {'added':>7} {'importtime':>11}")
    for case in CASES:
        figures = [statistics.median(walls[case]), statistics.median(cpus[case])]
        added_ms = [figures[0] - statistics.median(walls[base])]
        added_ms.append(figures[1] - statistics.median(cpus[base]))
        print(
            f"  {case:<38} {figures[0]:7.1f} {added_ms[0]:7.1f} {figures[1]:7.1f} "
            f"{added_ms[1]:7.1f} {statistics.median(imports[case]):11.1f}"
        )
    for case in list(CASES)[1:]:
        more = statistics.median(walls[case]) - statistics.median(walls[base])
        verdict = "ok" if more <= TARGET_MS else "MISSED"
        print(f"  target: at most {TARGET_MS:.0f} ms of wall time added, {case} ({verdict})")
    for case in list(CASES)[1:]:
        print(f"  modules {case} adds: {' '.join(added[case])}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
