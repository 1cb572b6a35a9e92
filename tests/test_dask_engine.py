"""The dask engine on a real LocalCluster of two worker processes on 127.0.0.1."""

import json
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


def report_of(tmp_path, source, env):
    """Run the script ``source`` with ``env``; what it printed last, read as JSON."""
    script = tmp_path / "script.py"
    script.write_text(source)
    done = run(str(script), env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


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


# -- data that stays on the workers -------------------------------------------------

STAYS = """
import json, os, pickle
import numpy as np
from distributed import wait
import coheriq, ragbatch

def to_client(dask_worker):
    # dask's own accounting: what each worker sent, and to whom (None: the
    # scheduler gathering for the client; a worker's address: worker to worker)
    return [(entry["who"], entry["total"]) for entry in dask_worker.transfer_outgoing_log]

def moved(client, before):
    now = client.run(to_client)
    workers = set(now)
    out = {"client": 0, "workers": 0}
    for address, entries in now.items():
        for who, total in entries[len(before.get(address, [])):]:
            out["workers" if who in workers else "client"] += total
    return out, now

def main():
    coheriq.enable_engine("ragbatch", "dask")
    client = coheriq.resolve_impl(ragbatch.softmax).__self__.client
    rng = np.random.default_rng(1)
    offsets = np.concatenate(([0], np.cumsum(rng.integers(0, 40, 5000)))).astype(np.int64)
    values = rng.normal(size=int(offsets[-1]))
    report = {"bytes": int(values.nbytes)}
    log = client.run(to_client)

    batch = ragbatch.from_flat(values, offsets)
    report["repr"] = repr(batch)
    report["chunks"] = batch.chunk_count
    probabilities = ragbatch.softmax(batch)
    indices, top = ragbatch.topk(probabilities, 3)
    report["chunks_after_topk"] = top.chunk_count
    sums = ragbatch.row_sum(top)
    report["between"], log = moved(client, log)

    flat_values, flat_offsets = ragbatch.to_flat(top)
    report["to_flat"], log = moved(client, log)

    with coheriq.using_engine("ragbatch", "numpy"):
        want_i, want_p = ragbatch.topk(ragbatch.softmax(ragbatch.from_flat(values, offsets)), 3)
        want_sums = ragbatch.row_sum(want_p)
        foreign = ragbatch.from_flat(values, offsets)
    report["same"] = bool(
        np.allclose(flat_values, want_p.values, rtol=1e-12)
        and np.array_equal(flat_offsets, want_p.offsets)
        and np.array_equal(ragbatch.to_flat(indices)[0], want_i.values)
        and np.allclose(sums, want_sums, rtol=1e-12)
    )
    with coheriq.profile() as prof:
        mixed = ragbatch.softmax(foreign)  # another engine's batch: scattered once
        ragbatch.row_sum(foreign)  # the scattered copy reused
        gathered = coheriq.to_library(top)  # the library's batch, gathered once
    report["mixed"] = [mixed.backend, bool(np.allclose(mixed.values, probabilities.values))]
    report["converted"] = sorted((r.candidate, r.pair, r.count) for r in prof.conversions)
    report["gathered"] = [type(gathered).__name__, gathered.backend, gathered == top]
    copy = pickle.loads(pickle.dumps(top))
    report["pickled"] = [copy.backend, copy == top, copy.distributed]
    report["row"] = [indices[7], [int(i) for i in want_i[7]]]

    # Chunks large enough that top-k's are not merged: what follows top-k reads each
    # chunk inside top-k's pair, before (or while) the batch takes it out.
    os.environ["RAGBATCH_DASK_CHUNK_BYTES"] = str(2**30)
    whole = ragbatch.from_flat(values, offsets)
    i2, p2 = ragbatch.topk(whole, 4)
    again = ragbatch.softmax(p2)  # a batch of its own, from the pairs
    sums2 = ragbatch.row_sum(p2)
    with coheriq.using_engine("ragbatch", "numpy"):
        want_i2, want_p2 = ragbatch.topk(ragbatch.from_flat(values, offsets), 4)
        want_again = ragbatch.softmax(want_p2)
    report["in_pairs"] = [
        [whole.chunk_count, p2.chunk_count],
        bool(np.allclose(ragbatch.row_sum(again), ragbatch.row_sum(want_again), rtol=1e-12)),
        bool(np.allclose(again.values, want_again.values, rtol=1e-12)),
        bool(np.allclose(sums2, ragbatch.row_sum(want_p2), rtol=1e-12)),
        bool(np.array_equal(i2.values, want_i2.values)),
        # the batch's own chunks, taken out of the pairs in the background
        all(f.status == "finished" for f in wait(p2.computed().futures).done),
    ]
    print(json.dumps(report))

if __name__ == "__main__":
    main()
"""


def test_data_stays_on_the_workers_between_steps(scheduler, tmp_path):
    report = report_of(
        tmp_path,
        STAYS,
        {"RAGBATCH_DASK_SCHEDULER": scheduler, "RAGBATCH_DASK_CHUNK_BYTES": str(64 * 1024)},
    )
    data = report["bytes"]  # about 800 KB of values
    # cut by bytes: 64 KiB chunks of whole rows, about data / 64 KiB of them
    assert data // (64 * 1024) <= report["chunks"] <= data // (64 * 1024) + 2
    assert "chunks on the workers>" in report["repr"]  # a summary, nothing gathered
    # top-k keeps 3 values a row: its chunks were merged back towards 64 KiB
    assert report["chunks_after_topk"] < report["chunks"] / 3
    # from_flat -> softmax -> topk -> row_sum: only the row sums came back
    assert report["between"]["client"] < 0.1 * data, report
    # to_flat of the top-k probabilities: those values, and only them, come back
    assert report["to_flat"]["client"] >= 5000 * 8 * 0.5
    assert report["to_flat"]["client"] < 0.5 * data
    assert report["same"] is True
    assert report["mixed"] == ["dask", True]
    assert report["converted"] == [
        ["coheriq.to_library", "DaskBatch -> RaggedBatch", 1],
        ["softmax", "RaggedBatch -> DaskBatch", 1],
    ]
    assert report["gathered"] == ["RaggedBatch", "reference", True]
    assert report["pickled"] == ["dask", True, False]  # a local copy, equal
    assert [int(i) for i in report["row"][0]] == report["row"][1]
    chunk_counts, *same = report["in_pairs"]
    assert chunk_counts[0] == chunk_counts[1]  # nothing merged: read in the pairs
    assert same == [True] * len(same)


SHARED = """
import json, os, sys, threading
import numpy as np
import coheriq, ragbatch

def main():
    coheriq.enable_engine("ragbatch", "dask")
    rng = np.random.default_rng(2)
    offsets = np.concatenate(([0], np.cumsum(rng.integers(0, 30, 3000)))).astype(np.int64)
    values = rng.normal(size=int(offsets[-1]))
    with coheriq.using_engine("ragbatch", "numpy"):
        _, want_p = ragbatch.topk(ragbatch.from_flat(values, offsets), 3)
        want_sums = ragbatch.row_sum(want_p)
        want_soft = ragbatch.softmax(want_p).values
    # One top-k batch shared by threads, each calling functions on it while its chunks
    # are still read inside top-k's pairs, and after the batch lets go of them.
    _, top = ragbatch.topk(ragbatch.from_flat(values, offsets), 3)
    failures = []

    def use():
        try:
            for _ in range(15):
                ok = np.allclose(ragbatch.row_sum(top), want_sums, rtol=1e-12)
                ok = ok and np.allclose(ragbatch.softmax(top).values, want_soft, rtol=1e-12)
                if not ok:
                    failures.append("a wrong result")
        except Exception as error:  # noqa: BLE001 - reported to the test
            failures.append(repr(error))

    threads = [threading.Thread(target=use) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    print(json.dumps({"alive": sum(t.is_alive() for t in threads), "failures": failures[:3]}))
    sys.stdout.flush()  # os._exit does not: to a pipe, without PYTHONUNBUFFERED, it is lost
    os._exit(0)  # a thread still hanging must not keep the process

if __name__ == "__main__":
    main()
"""


def test_threads_share_a_top_k_batch(scheduler, tmp_path):
    report = report_of(
        tmp_path,
        SHARED,
        {"RAGBATCH_DASK_SCHEDULER": scheduler, "RAGBATCH_DASK_CHUNK_BYTES": str(2**30)},
    )
    assert report == {"alive": 0, "failures": []}


LOST = """
import json, os, signal, time
import numpy as np
import coheriq, ragbatch

def main():
    coheriq.enable_engine("ragbatch", "dask")  # a LocalCluster of its own: a worker dies here
    client = coheriq.resolve_impl(ragbatch.softmax).__self__.client
    rng = np.random.default_rng(3)
    offsets = np.concatenate(([0], np.cumsum(rng.integers(0, 30, 3000)))).astype(np.int64)
    values = rng.normal(size=int(offsets[-1]))
    batch = ragbatch.from_flat(values, offsets)
    os.kill(next(iter(client.run(os.getpid).values())), signal.SIGKILL)
    while len(client.scheduler_info()["workers"]) == 2:  # until the scheduler knows
        time.sleep(0.05)
    said = {}
    calls = {
        "computed": lambda: ragbatch.softmax(batch).computed(),
        "row_sum": lambda: ragbatch.row_sum(ragbatch.softmax(batch)),
        "to_flat": lambda: ragbatch.to_flat(ragbatch.topk(batch, 3)[1]),
        "row": lambda: batch[5],
    }
    for name, call in calls.items():
        try:
            call()
            said[name] = "no error"
        except RuntimeError as error:
            said[name] = str(error)
    client.wait_for_workers(2, timeout=60)  # the nanny starts another worker
    again = ragbatch.from_flat(values, offsets)
    with coheriq.using_engine("ragbatch", "numpy"):
        want = ragbatch.row_sum(ragbatch.from_flat(values, offsets))
    said["again"] = bool(np.allclose(ragbatch.row_sum(again), want, rtol=1e-12))
    print(json.dumps(said))

if __name__ == "__main__":
    main()
"""


def test_rows_lost_with_a_worker_are_said_to_be_lost(tmp_path):
    said = report_of(tmp_path, LOST, {"RAGBATCH_DASK_WORKERS": "2", "RAGBATCH_DASK_SCHEDULER": ""})
    assert said.pop("again") is True  # a batch made again runs on the workers there are
    for name, message in said.items():
        assert message.startswith("Engine 'dask' of domain 'ragbatch' lost rows of this batch"), (
            name,
            message,
        )
        assert "make the batch again (ragbatch.from_flat)" in message


# -- cutting and merging chunks: decided from the offsets alone ---------------------


def test_chunks_are_cut_by_bytes_at_row_boundaries():
    np = pytest.importorskip("numpy")
    from ragbatch_dask.chunks import cut_rows

    offsets = np.concatenate(([0], np.cumsum([10] * 100))).astype(np.int64)  # 1000 values
    cuts = cut_rows(offsets, target_bytes=8 * 100)  # 100 values a chunk
    assert cuts.tolist() == list(range(0, 101, 10))
    # a row larger than the target is a chunk of its own; rows are never split
    offsets = np.array([0, 5, 505, 510, 515], dtype=np.int64)
    assert cut_rows(offsets, target_bytes=8 * 100).tolist() == [0, 2, 4]
    # nothing to cut: one chunk, even of no rows
    assert cut_rows(np.array([0], dtype=np.int64), 1024).tolist() == [0, 0]
    assert cut_rows(np.array([0, 0, 0], dtype=np.int64), 1024).tolist() == [0, 2]


def test_small_chunks_are_merged_back_to_the_target():
    from ragbatch_dask.chunks import merge_groups

    # 150 values where 100 fit a chunk: two groups of about 75
    assert merge_groups([30, 30, 30, 30, 30], 8 * 100) == [range(0, 3), range(3, 5)]
    # three workers: a multiple of three groups, each worker as many
    assert merge_groups([30, 30, 30, 30, 30, 30], 8 * 100, workers=3) == [
        range(0, 2),
        range(2, 4),
        range(4, 6),
    ]
    # chunks that did not shrink stay as they are
    assert merge_groups([100, 100], 8 * 100, workers=2) == [range(0, 1), range(1, 2)]


def test_chunks_are_as_many_as_a_multiple_of_the_workers():
    np = pytest.importorskip("numpy")
    from ragbatch_dask.chunks import cut_rows

    offsets = np.arange(0, 1001, dtype=np.int64)  # 1000 rows of one value
    # 1000 values, at most 400 a chunk: 3 chunks, rounded up to 4 for 2 workers
    assert cut_rows(offsets, 8 * 400, workers=2).tolist() == [0, 250, 500, 750, 1000]


def test_a_bad_chunk_size_says_what_to_set(monkeypatch):
    from ragbatch_dask.chunks import CHUNK_BYTES_ENV, chunk_bytes

    monkeypatch.setenv(CHUNK_BYTES_ENV, "lots")
    with pytest.raises(ValueError, match="RAGBATCH_DASK_CHUNK_BYTES='lots' is not a size"):
        chunk_bytes()
    monkeypatch.setenv(CHUNK_BYTES_ENV, "4096")
    assert chunk_bytes() == 4096


def test_the_pipeline_benchmark_measures_time_and_bytes(tmp_path):
    """python -m ragbatch_dask.benchmark, on a small batch: each way, each step."""
    figures = tmp_path / "pipeline.json"
    # An "earlier checkout" with no packages of its own: its way runs what is installed.
    earlier = tmp_path / "earlier"
    (earlier / "coheriq").mkdir(parents=True)
    done = run(
        "-m",
        "ragbatch_dask.benchmark",
        "--values",
        "20000",
        "--rows",
        "200",
        "--repeat",
        "1",
        "--rounds",
        "2",
        "--earlier",
        str(earlier),
        "--json",
        str(figures),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dask against shipping, 2 workers:" in done.stdout
    assert "dask against dask at earlier, 2 workers:" in done.stdout
    assert "medians of 2 rounds" in done.stdout
    recorded = json.loads(figures.read_text())
    runs = recorded["runs"]
    assert list(runs) == [
        "compiled",
        "shipping (1 worker)",
        "shipping (2 workers)",
        "dask (1 worker)",
        "dask (2 workers)",
        "dask at earlier (2 workers)",
    ]
    assert [len(r) for r in recorded["ratios"].values()] == [2, 2]  # one ratio a round
    assert runs["dask at earlier (2 workers)"]["moved"] == {}  # not seen by dask: not counted
    steps = ["from_flat", "softmax", "topk", "row_sum", "to_flat"]
    for run_ in runs.values():
        assert list(run_["seconds"]) == steps
        assert len(run_["totals"]) == len(run_["end_to_end_all"]) == 2  # each repetition
    dask = runs["dask (2 workers)"]["moved"]
    data = 20000 * 8
    assert dask["from_flat"]["to_workers"] >= data  # the one scatter
    for step in ("softmax", "topk", "row_sum"):  # then no row data, either way
        assert dask[step]["to_workers"] == 0
        assert dask[step]["to_client"] < data / 10
    shipping = runs["shipping (2 workers)"]["moved"]
    assert shipping["softmax"]["to_workers"] >= data and shipping["softmax"]["to_client"] >= data


@pytest.mark.parametrize(
    ("layout", "complaint"),
    [
        ([], "not a checkout of this repository"),
        (["coheriq", "example/ragbatch-compiled/ragbatch_compiled"], "build it in place first"),
    ],
)
def test_the_pipeline_benchmark_refuses_an_earlier_checkout_it_cannot_run(
    tmp_path, layout, complaint
):
    for folder in layout:
        (tmp_path / folder).mkdir(parents=True)
    done = run("-m", "ragbatch_dask.benchmark", "--earlier", str(tmp_path))
    assert done.returncode == 2
    assert complaint in done.stderr
    assert "Traceback" not in done.stderr
