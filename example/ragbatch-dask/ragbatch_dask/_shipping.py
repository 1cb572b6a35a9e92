"""The dask engine as it was before its data stayed on the workers: the benchmark's baseline.

Every call cut the batch into chunks on the client, shipped each chunk to a
worker inside its task, and gathered every result back. Kept, as a plain class
that is no engine, so that ``python -m ragbatch_dask.benchmark`` can measure
what keeping the data on the workers saves, on the same cluster and data.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import ragbatch
from dask.sizeof import sizeof
from ragbatch_numpy import NumpyBatch

import coheriq

from .parts import Chunk, local_engine


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


def _stitch(pieces: list[Chunk]) -> Chunk:
    """Join chunk results (values, offsets) into one flat batch."""
    values = np.concatenate([v for v, _ in pieces]) if pieces else np.empty(0)
    offsets, start = [np.zeros(1, dtype=np.int64)], 0
    for v, o in pieces:
        offsets.append(o[1:] + start)
        start += len(v)
    return values, np.concatenate(offsets)


class ShippingEngine:
    """Today's ship-every-call dask engine, on a given client; counts the bytes it ships."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.shipped_bytes = 0  # dask's sizeof of the arrays sent inside tasks

    def from_flat(self, values: Any, offsets: Any) -> NumpyBatch:
        return NumpyBatch.from_flat(values, offsets)

    def to_flat(self, batch: NumpyBatch) -> Chunk:
        return batch.values.copy(), batch.offsets.copy()

    def _distribute(self, function: str, batch: NumpyBatch, *args: Any) -> list[Any]:
        values, offsets = batch.values, batch.offsets
        workers = max(1, len(self.client.scheduler_info()["workers"]))
        futures = []
        for a, b in _chunks(offsets, 2 * workers) or [(0, len(offsets) - 1)]:
            chunk = (values[offsets[a] : offsets[b]], offsets[a : b + 1] - offsets[a])
            self.shipped_bytes += sizeof(chunk)
            futures.append(self.client.submit(_run_chunk, function, *chunk, args, pure=False))
        return self.client.gather(futures)

    def softmax(self, batch: NumpyBatch) -> NumpyBatch:
        return NumpyBatch._wrap(*_stitch(self._distribute("softmax", batch)))

    def topk(self, batch: NumpyBatch, k: int) -> tuple[NumpyBatch, NumpyBatch]:
        ragbatch.check_k(k)
        pairs = self._distribute("topk", batch, k)
        indices = NumpyBatch._wrap(*_stitch([p[0] for p in pairs]))
        return indices, NumpyBatch._wrap(*_stitch([p[1] for p in pairs]))

    def row_sum(self, batch: NumpyBatch) -> np.ndarray:
        return np.concatenate([np.empty(0), *self._distribute("row_sum", batch)])
