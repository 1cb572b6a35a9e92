"""The dask engine on a real LocalCluster of two worker processes on 127.0.0.1."""

import os
import subprocess
import sys

import pytest

distributed = pytest.importorskip("distributed", reason="the dask example engine needs distributed")


CLUSTER = """
import sys
from distributed import LocalCluster

cluster = LocalCluster(
    n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1", dashboard_address=None
)
print(cluster.scheduler_address, flush=True)
sys.stdin.read()  # runs until the test closes our standard input
cluster.close()
"""


@pytest.fixture(scope="module")
def scheduler():
    """The address of a LocalCluster of two worker processes, run by a process of its own."""
    process = subprocess.Popen(
        [sys.executable, "-c", CLUSTER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        address = process.stdout.readline().strip()
        assert address.startswith("tcp://127.0.0.1:"), address
        yield address
    finally:
        process.stdin.close()
        process.wait(timeout=60)


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
        env={**os.environ, **(env or {})},
    )


def test_invariant_suite_on_a_running_cluster(scheduler):
    done = run(
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "-q",
        "--pyargs",
        "ragbatch.tests",
        "--coheriq-engine=ragbatch:dask",
        env={"RAGBATCH_DASK_SCHEDULER": scheduler},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


WORKERS = """
import coheriq, ragbatch
coheriq.enable_engine("ragbatch", "dask")
engine = coheriq.resolve_impl(ragbatch.softmax).__self__
def there():
    batch = ragbatch.softmax(ragbatch.RaggedBatch([[1.0, 2.0]]))
    return coheriq.active_implementation("ragbatch"), batch.backend
print(sorted(set(engine.client.run(there).values())))
print(len(engine.client.scheduler_info()["workers"]))
"""


def test_workers_run_the_clients_engine(scheduler):
    done = run("-c", WORKERS, env={"RAGBATCH_DASK_SCHEDULER": scheduler})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:2] == ["[('dask', 'dask')]", "2"]


def test_laptop_to_cluster_script(scheduler):
    """The script docs/scaling.rst shows, on the cluster."""
    from pathlib import Path

    script = Path(__file__).parent.parent / "example" / "ragbatch-dask" / "laptop_to_cluster.py"
    done = run(str(script), env={"RAGBATCH_DASK_SCHEDULER": scheduler})
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    expected = "top-2=[[1, 2], [], [0, 1]] mass=[0.86, 0.0, 0.995]"
    for engine, line in zip(["reference", "compiled", "dask"], lines, strict=False):
        assert line.startswith(engine) and f"container={engine}" in line and expected in line
    assert "runs on engine 'dask'" in done.stdout
    assert lines[-1] == "on the workers: [('dask', 'dask')]"
