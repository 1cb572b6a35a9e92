"""What the performance promises rest on, checked without timing anything.

The timings themselves live in benchmarks/run.py; here we only keep the suite
runnable and hold the import promise, which is not a timing.
"""

import json
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from conftest import LIBRARY, compiled_proxy_built, run_python

ROOT = Path(__file__).resolve().parent.parent


def test_import_coheriq_pulls_in_nothing_heavy():
    probe = (
        "import sys; before = set(sys.modules); import coheriq; "
        "print(' '.join(sorted(set(sys.modules) - before)))"
    )
    added = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    for heavy in ("importlib.metadata", "inspect", "typing", "threading", "asyncio"):
        assert heavy not in added
    assert all(m.startswith("coheriq") or m.startswith("_") or m == "__future__" for m in added)
    # What only some programs need loads on first use: the tools, and the machinery
    # of marked classes (with a library's first class).
    for later in ("coheriq._tools", "coheriq._call.marked", "coheriq._engines.own_class"):
        assert not [m for m in added if m.startswith(later)], later


def test_a_library_of_functions_never_loads_the_machinery_of_marked_classes():
    loaded = run_python(
        LIBRARY
        + """
import sys
assert double(4) == 8
with coheriq.using_engine("hard", "reference"):
    assert double(5) == 10
print(" ".join(sorted(m for m in sys.modules if m.startswith("coheriq"))))
"""
    )
    assert loaded.returncode == 0, loaded.stderr
    assert "coheriq._call.marked" not in loaded.stdout.split()


def test_engine_metadata_is_read_once_per_group(lib, make_dist, unique):
    import coheriq as cq
    from coheriq import discovery

    group = f"coheriq.engines.{lib.name}"
    site = make_dist(unique("d"), {}, {group: {"gpu": "gpu_mod"}})
    assert cq.available_engines(lib.name) == ("gpu",)
    late = site / "late-1.0.dist-info"  # installed after the first look
    late.mkdir()
    (late / "METADATA").write_text("Metadata-Version: 2.1\nName: late\nVersion: 1.0\n")
    (late / "entry_points.txt").write_text(f"[{group}]\nmpi = mpi_mod\n")
    assert cq.available_engines(lib.name) == ("gpu",)  # answered from the cache
    discovery.clear_cache()
    assert cq.available_engines(lib.name) == ("gpu", "mpi")


@pytest.mark.slow
def test_benchmark_suite_runs_in_quick_mode():
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    table = done.stdout
    for case in (
        "call, global engine, positional",
        "call inside using_engine",
        "construct class candidate",
        "resolve_impl",
        "mark 1000 candidates",
        "import coheriq",
    ):
        assert case in table
    assert "modules that `import coheriq` adds:" in table


@pytest.mark.slow
def test_the_proxies_comparison_runs_each_proxy_in_quick_mode(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "proxies.py"),
            "--quick",
            "--record",
            str(tmp_path),
            sys.executable,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    version = ".".join(map(str, sys.version_info[:3]))
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        version += "t"  # as a free-threaded build's column is named
    table = (tmp_path / "proxies.txt").read_text(encoding="utf-8")
    assert table == done.stdout
    # A column for each proxy this Python runs, each a run on the proxy it names
    # (proxies.py reads the proxy each run recorded).
    assert (f"{version} comp" in table) is compiled_proxy_built()
    assert (f"{version} swap " in table) is compiled_proxy_built()
    assert f"{version} swap-py" in table
    assert f"{version} pyth" in table
    assert "floor: functools.partial(impl)" in table
    assert (tmp_path / f"{version}-python" / "dispatch.json").is_file()


def test_the_threads_benchmark_runs_in_quick_mode(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "benchmarks" / "threads.py"),
            "--quick",
            "--record",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    (table,) = tmp_path.glob("threads-*.txt")
    assert table.read_text(encoding="utf-8") == done.stdout
    assert "marked, each thread in a block, each its own" in done.stdout
    assert "4 threads" in done.stdout
    (figures,) = tmp_path.glob("threads-*.json")
    rows = json.loads(figures.read_text(encoding="utf-8"))["rows"]
    assert len(rows) == 8 and all(row["1 threads"] > 0 for row in rows)
    # Each marked case against the unmarked calls, and against another record's single
    # thread (here the run's own, which its noise keeps from being exactly 1.00x).
    assert done.stdout.count(" of unmarked's; one thread ") == 6
    script = str(ROOT / "benchmarks" / "threads.py")
    again = subprocess.run(
        [sys.executable, script, "--quick", "--gil-build", str(figures)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    compared = again.stdout.split("with the GIL (time per call):\n")[1].splitlines()
    assert [line.rpartition(":")[0].strip() for line in compared] == [r["case"] for r in rows]
