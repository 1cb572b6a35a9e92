"""Engine "dask" of ragbatch: rows split into chunks, each run on a dask.distributed worker.

The engine connects to the scheduler named by ``RAGBATCH_DASK_SCHEDULER``
(``tcp://host:8786``) or, if it is not set, starts a ``LocalCluster`` of
``RAGBATCH_DASK_WORKERS`` (default 2) worker processes on 127.0.0.1, which it
closes at interpreter exit. A call splits the batch into chunks of whole rows of
about equal size, runs each chunk on a worker with the fastest single-machine
engine installed there (compiled, else numpy) and gathers the results into this
engine's ``RaggedBatch`` (NumPy arrays, as the numpy engine it derives from).

On the workers, a plugin makes "dask" the global choice too, so that code running
there that calls ragbatch runs the same engine as the client; inside a worker the
engine does not distribute again but runs the local engine directly.
"""

from __future__ import annotations

import atexit
import itertools
import os
from typing import Any

import numpy as np
import ragbatch
from distributed import Client, LocalCluster, WorkerPlugin, get_worker

import coheriq

SCHEDULER_ENV = "RAGBATCH_DASK_SCHEDULER"
WORKERS_ENV = "RAGBATCH_DASK_WORKERS"

Numpy = coheriq.engine_class("ragbatch", "numpy")


def local_engine() -> str:
    """The fastest single-machine engine of ragbatch installed here."""
    return "compiled" if "compiled" in coheriq.available_engines("ragbatch") else "numpy"


_in_a_worker = False  # set by the worker plugin, before get_worker() knows


def _on_a_worker() -> bool:
    if _in_a_worker:
        return True
    try:
        get_worker()
    except ValueError:
        return False
    return True


def _run_chunk(function: str, values: np.ndarray, offsets: np.ndarray, args: tuple) -> Any:
    """On a worker: run ``ragbatch.<function>`` on one chunk with the local engine."""
    with coheriq.using_engine("ragbatch", local_engine()):
        result = getattr(ragbatch, function)(ragbatch.from_flat(values, offsets), *args)
    return _to_arrays(result)


def _to_arrays(result: Any) -> Any:
    """Results as NumPy arrays, whatever container the local engine made."""
    if isinstance(result, tuple):
        return tuple(_to_arrays(part) for part in result)
    if isinstance(result, ragbatch.RaggedBatch):
        return np.asarray(result.values), np.asarray(result.offsets, dtype=np.int64)
    return np.asarray(result)


def _chunks(offsets: np.ndarray, count: int) -> list[tuple[int, int]]:
    """Row ranges ``(first, stop)`` of about equal numbers of values, at least one row each."""
    rows = len(offsets) - 1
    targets = np.linspace(0, offsets[-1], count + 1)[1:-1]
    cuts = np.unique(np.concatenate(([0], np.searchsorted(offsets, targets), [rows])))
    return [(int(a), int(b)) for a, b in itertools.pairwise(cuts) if b > a]


def _stitch(parts: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """Join chunk results (values, offsets) into one flat batch."""
    values = np.concatenate([v for v, _ in parts]) if parts else np.empty(0)
    offsets, start = [np.zeros(1, dtype=np.int64)], 0
    for v, o in parts:
        offsets.append(o[1:] + start)
        start += len(v)
    return values, np.concatenate(offsets)


class DaskBatch(Numpy.RaggedBatch):
    """ragbatch.RaggedBatch for the dask engine: NumPy arrays on the client."""

    @property
    def backend(self) -> str:
        return "dask"


class _SameEngine(WorkerPlugin):
    """Makes the client's engine choice the global choice on each worker."""

    name = "ragbatch-same-engine"

    def __init__(self, snapshot: Any) -> None:
        self.snapshot = snapshot

    def setup(self, worker: Any) -> None:
        global _in_a_worker
        _in_a_worker = True
        self.snapshot.apply()  # imports ragbatch there, and enables "dask" (run locally)


class DaskEngine(Numpy, name="dask"):
    """Engine "dask": every row function distributed over a dask.distributed cluster."""

    RaggedBatch = DaskBatch

    def __init__(self) -> None:
        self.client: Client | None = None
        self._cluster: LocalCluster | None = None
        if _on_a_worker():
            return  # inside a worker: run locally, never distribute again
        address = os.environ.get(SCHEDULER_ENV, "").strip()
        if address:
            self.client = Client(address)
        else:
            workers = int(os.environ.get(WORKERS_ENV, "2"))
            self._cluster = LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,
            )
            self.client = Client(self._cluster)
        snapshot = coheriq.snapshot()
        snapshot.engines = {"ragbatch": "dask"}
        self.client.register_plugin(_SameEngine(snapshot))
        atexit.register(self._close)

    def _close(self) -> None:
        """Close the client, and the cluster if this engine started it."""
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def _distribute(self, function: str, batch: Any, *args: Any) -> list[Any]:
        values, offsets = np.asarray(batch.values), np.asarray(batch.offsets, dtype=np.int64)
        if self.client is None:  # on a worker
            return [_run_chunk(function, values, offsets, args)]
        workers = max(1, len(self.client.scheduler_info()["workers"]))
        futures = [
            self.client.submit(
                _run_chunk,
                function,
                values[offsets[a] : offsets[b]],
                offsets[a : b + 1] - offsets[a],
                args,
                pure=False,
            )
            for a, b in _chunks(offsets, 2 * workers)
        ] or [self.client.submit(_run_chunk, function, values, offsets, args, pure=False)]
        return self.client.gather(futures)

    def softmax(self, batch: Any) -> Any:
        return self.RaggedBatch._wrap(*_stitch(self._distribute("softmax", batch)))

    def topk(self, batch: Any, k: int) -> tuple[Any, Any]:
        ragbatch.check_k(k)
        parts = self._distribute("topk", batch, k)
        indices = _stitch([p[0] for p in parts])
        probabilities = _stitch([p[1] for p in parts])
        return self.RaggedBatch._wrap(*indices), self.RaggedBatch._wrap(*probabilities)

    def row_sum(self, batch: Any) -> np.ndarray:
        return np.concatenate([np.empty(0), *self._distribute("row_sum", batch)])

    def row_mean(self, batch: Any) -> np.ndarray:
        return np.concatenate([np.empty(0), *self._distribute("row_mean", batch)])
