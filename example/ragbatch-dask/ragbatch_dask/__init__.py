"""Engine "dask" of ragbatch: rows that live on a dask.distributed cluster, in chunks.

The engine connects to the scheduler named by ``RAGBATCH_DASK_SCHEDULER``
(``tcp://host:8786``) or, if it is not set, starts a ``LocalCluster`` of
``RAGBATCH_DASK_WORKERS`` (default 2) worker processes on 127.0.0.1, which it
closes at interpreter exit.

A batch made under this engine (``RaggedBatch(rows)``, ``from_flat``) is cut
into chunks of whole rows of about ``RAGBATCH_DASK_CHUNK_BYTES`` (default 64 MiB)
and scattered to the workers once. Every function then runs chunk by chunk on
the worker that holds the chunk, with the fastest single-machine engine
installed there (compiled, else numpy), and returns a batch whose chunks stay
there too; the client keeps only the offsets and a future per chunk. Values come
back when asked for (``to_flat``, ``batch.values``, iterating; ``row_sum`` and
``row_mean`` return one number a row). After top-k, whose rows are shorter, the
small chunks are merged back to the chunk size, worker to worker. The engine
declares its data (:data:`CONVERSIONS`): a batch of another engine is scattered
when a function first receives it, and the scattered copy reused while the batch
lives (call ``coheriq.mutated(batch)`` after changing it in place); a dask batch
is gathered once where a call falls back to another implementation.
Rows lost with a worker that left the cluster cannot be made again there:
reading such a batch raises a ``RuntimeError`` that says to make it again.

On the workers, a plugin makes "dask" the global choice too, so that code running
there that calls ragbatch runs the same engine as the client; inside a worker the
engine does not distribute again but runs the local engine directly, on local
batches.
"""

from __future__ import annotations

import atexit
import os
from typing import Any

import numpy as np
import ragbatch
from distributed import Client, LocalCluster, WorkerPlugin, get_worker

import coheriq

from . import batch as _batch
from . import parts
from .batch import DaskBatch
from .parts import local_engine

__all__ = ["DaskBatch", "DaskEngine", "local_engine"]

SCHEDULER_ENV = "RAGBATCH_DASK_SCHEDULER"
WORKERS_ENV = "RAGBATCH_DASK_WORKERS"

Numpy = coheriq.engine_class("ragbatch", "numpy")

_in_a_worker = False  # set by the worker plugin, before get_worker() knows


def _on_a_worker() -> bool:
    if _in_a_worker:
        return True
    try:
        get_worker()
    except ValueError:
        return False
    return True


class _SameEngine(WorkerPlugin):
    """Makes the client's engine choice the global choice on each worker."""

    name = "ragbatch-same-engine"

    def __init__(self, snapshot: Any) -> None:
        self.snapshot = snapshot

    def setup(self, worker: Any) -> None:
        global _in_a_worker
        _in_a_worker = True
        self.snapshot.apply()  # imports ragbatch there, and enables "dask" (run locally)


def _to_workers(batch: Any) -> DaskBatch:
    """Any engine's batch on the workers (kept here inside a worker)."""
    return DaskBatch.from_flat(np.asarray(batch.values), np.asarray(batch.offsets, np.int64))


def _gathered(batch: DaskBatch) -> ragbatch.RaggedBatch:
    """The library's batch of ``batch``'s rows, gathered (whatever engine is active)."""
    host = ragbatch.RaggedBatch.__new__(ragbatch.RaggedBatch)
    host.values, host.offsets = batch.values.tolist(), batch.offsets.tolist()
    return host


# Not pickled as the library's: a dask batch sent to a worker travels as a local one,
# which the worker's engine reads (DaskBatch.__reduce__).
CONVERSIONS = [
    coheriq.Conversion(
        ragbatch.RaggedBatch, DaskBatch, to_engine=_to_workers, to_library=_gathered, cache=True
    )
]
"""What the engine's data is: a batch scattered once, gathered once."""


class DaskEngine(Numpy, name="dask", conversions=CONVERSIONS, accepts_library_types=["to_flat"]):
    """Rows on a dask.distributed cluster, every function run where they are."""

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
        _batch.attach(self.client)
        atexit.register(self._close)

    def _close(self) -> None:
        """Close the client, and the cluster if this engine started it."""
        _batch.attach(None)
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None

    def _on_workers(self, batch: Any) -> DaskBatch | None:
        """``batch`` as a batch on the workers, or None to run here (no client)."""
        if self.client is None:
            return None
        if isinstance(batch, DaskBatch) and batch.distributed:
            return batch
        # Another engine's batch (or a local one): scattered for this call.
        values, offsets = np.asarray(batch.values), np.asarray(batch.offsets, dtype=np.int64)
        return DaskBatch.from_flat(values, offsets)

    def from_flat(self, values: Any, offsets: Any) -> DaskBatch:
        return DaskBatch.from_flat(values, offsets)

    def to_flat(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        return np.array(batch.values), np.array(batch.offsets, dtype=np.int64)

    def softmax(self, batch: Any) -> Any:
        there = self._on_workers(batch)
        if there is None:
            return super().softmax(batch)
        return there.derived(there.map_chunks(parts.softmax), there.offsets)

    def topk(self, batch: Any, k: int) -> tuple[Any, Any]:
        ragbatch.check_k(k)
        there = self._on_workers(batch)
        if there is None:
            return super().topk(batch, k)
        pairs = there.map_chunks(parts.topk, k)
        kept = np.minimum(np.diff(there.offsets), k)  # the new rows' lengths, known here
        offsets = np.concatenate(([0], np.cumsum(kept))).astype(np.int64)
        return there.split_pairs(pairs, offsets)

    def row_sum(self, batch: Any) -> np.ndarray:
        there = self._on_workers(batch)
        if there is None:
            return super().row_sum(batch)
        return there.gather_rows(there.map_chunks(parts.row_sum))

    def row_mean(self, batch: Any) -> np.ndarray:
        there = self._on_workers(batch)
        if there is None:
            return super().row_mean(batch)
        return there.gather_rows(there.map_chunks(parts.row_mean))
