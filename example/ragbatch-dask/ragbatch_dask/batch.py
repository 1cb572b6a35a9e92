"""The dask engine's container: rows that stay on the workers, in chunks of whole rows.

The client keeps what is small: the offsets (one integer a row), where the
chunks are cut, and a future for each chunk. The values stay on the workers
until the user asks for them (``batch.values``, ``to_flat``, iterating, a row,
comparing, the repr of a small batch); the first such request gathers them once
and keeps them.

Where no client is attached (inside a worker, or once the engine has closed)
a batch is *local*: its arrays are here, and the engine runs the numpy engine's
kernels on them directly.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import CancelledError
from typing import Any

import numpy as np
import ragbatch
from distributed import wait
from ragbatch_numpy import NumpyBatch, check_flat

from . import chunks, parts

# Up to this many values, repr shows rows (gathering them); above, a summary.
SUMMARY_ABOVE = 1000

_client: Any = None  # the engine's distributed.Client, on the client side only


def _workers(client: Any) -> int:
    """How many workers the client's cluster has now (from the client's cached view)."""
    return len(client.scheduler_info().get("workers", ())) or 1


@contextlib.contextmanager
def _rows_must_be_there() -> Iterator[None]:
    """Says what happened, and what to do, where dask reports that a batch's chunks are lost."""
    try:
        yield
    except CancelledError as error:  # dask's FutureCancelledError, FuturesCancelledError
        detail = " ".join(str(error).split())
        raise RuntimeError(
            "Engine 'dask' of domain 'ragbatch' lost rows of this batch: a worker that held "
            f"them left the cluster (dask: {detail}). Rows scattered from the client cannot be "
            "made again on the cluster; make the batch again (ragbatch.from_flat) and run the "
            "steps from there."
        ) from error


def attach(client: Any) -> None:
    """Make new batches go to ``client``'s workers (``None``: keep them local)."""
    global _client
    _client = client


class DaskBatch(ragbatch.RaggedRows):
    """ragbatch.RaggedBatch of the dask engine: rows on the workers, gathered on request."""

    _client: Any
    _chunks: list[Any] | None  # a future per chunk, or None for a local batch
    # Top-k's batches, until their own chunks exist: the future of each chunk's pair
    # (indices, probabilities) and which element is this batch's, for tasks to read
    # it there (see derived). Read it once where it is used: another thread may set
    # it to None meanwhile.
    _in_pairs: tuple[list[Any], int] | None = None
    _cuts: np.ndarray  # chunk i holds rows _cuts[i]:_cuts[i + 1]
    _offsets: np.ndarray
    _values: np.ndarray | None  # gathered (or local) values

    def __init__(self, rows: Iterable[Iterable[float]]) -> None:
        local = NumpyBatch(rows)
        self._place(local.values, local.offsets)

    # -- making batches ---------------------------------------------------------------

    @classmethod
    def _wrap(cls, values: Any, offsets: Any) -> DaskBatch:
        """A local batch around trusted arrays (what the numpy kernels return)."""
        batch = cls.__new__(cls)
        batch._client, batch._chunks = None, None
        batch._offsets = np.asarray(offsets, dtype=np.int64)
        batch._values = np.asarray(values)
        batch._cuts = np.array([0, len(batch._offsets) - 1], dtype=np.int64)
        return batch

    @classmethod
    def from_flat(cls, values: Any, offsets: Any) -> DaskBatch:
        values, offsets = np.asarray(values), np.array(offsets, dtype=np.int64)
        check_flat(values, offsets)  # no copy of the values yet: see below
        batch = cls.__new__(cls)
        # Scattering sends a copy; a batch kept here copies, as from_flat promises.
        batch._place(values if _client is not None else values.copy(), offsets)
        return batch

    def _place(self, values: np.ndarray, offsets: np.ndarray) -> None:
        """Scatter ``values`` to the workers in chunks of whole rows (or keep them local)."""
        self._client, self._offsets = _client, offsets
        self._values = values if _client is None else None
        if _client is None:
            self._chunks, self._cuts = None, np.array([0, len(offsets) - 1], dtype=np.int64)
            return
        self._cuts = chunks.cut_rows(offsets, chunks.chunk_bytes(), _workers(_client))
        pieces = [
            (values[offsets[a] : offsets[b]], offsets[a : b + 1] - offsets[a])
            for a, b in zip(self._cuts[:-1], self._cuts[1:], strict=True)
        ]
        # hash=False: a key of its own for each chunk, even of equal data (a shared key
        # could be released by another batch while this one is being made). direct:
        # straight to the workers, not through the scheduler (half the bytes sent).
        self._chunks = _client.scatter(pieces, hash=False, direct=True)

    # -- running ragbatch's functions where the chunks are ------------------------------

    @property
    def distributed(self) -> bool:
        """Whether the rows are on the workers (else they are here)."""
        return self._chunks is not None

    @property
    def futures(self) -> list[Any]:
        """The futures of the chunks (``(values, offsets)`` each), for dask code to go on with.

        Empty for a local batch.
        """
        return list(self._chunks or [])

    def computed(self) -> DaskBatch:
        """Wait until the rows are computed on the workers (dask computes in the background).

        Returns the batch. Nothing moves to the client. For top-k's two batches,
        that is once top-k has run: each then takes its chunks out of top-k's
        results in the background (see :attr:`futures`).
        """
        if self._chunks is not None:
            in_pairs = self._in_pairs
            with _rows_must_be_there():
                wait(in_pairs[0] if in_pairs is not None else self._chunks)
        return self

    @property
    def chunk_count(self) -> int:
        """How many chunks the rows are cut into."""
        return len(self._cuts) - 1

    def map_chunks(self, function: Callable[..., Any], *args: Any) -> list[Any]:
        """Futures of ``function(chunk, *args)``, run on the worker of each chunk."""
        assert self._chunks is not None
        columns = [[a] * len(self._chunks) for a in args]
        in_pairs = self._in_pairs
        if in_pairs is not None and all(f.done() for f in self._chunks):
            self._in_pairs = in_pairs = None  # the chunks are there on their own: let go
        if in_pairs is None:
            return self._map(function, self._chunks, *columns)
        # Read each chunk in its pair: no wait for the task that takes it out.
        pairs, part = in_pairs
        return self._map(functools.partial(parts.on_part, function, part), pairs, *columns)

    def _map(self, function: Callable[..., Any], *columns: list[Any]) -> list[Any]:
        """Futures of ``function`` on each row of ``columns``, sent as one message.

        One ``client.map``, not a ``submit`` a task: a dask client sends a batch of
        messages at most every 10 ms, so a message right after another waits.
        """
        return list(self._client.map(function, *columns, pure=False))

    def derived(
        self, results: list[Any], offsets: np.ndarray, part: int | None = None
    ) -> DaskBatch:
        """The batch whose chunks are ``results`` (one a chunk of this batch), rows ``offsets``.

        With ``part``, each result is top-k's pair of chunks, and the batch's chunk
        is its element ``part`` (0: indices, 1: probabilities). A small task on the
        pair's worker takes it out, for the batch's own futures; tasks of the
        functions that follow read it in the pair meanwhile, so that they need not
        wait for that task (dask takes a round trip through the scheduler for each
        layer of tasks that waits for another).

        Where rows shrank (top-k keeps at most k values a row), neighbouring chunks
        are merged back to the chunk size; a merge runs on a worker and pulls the
        other chunks of its group from their workers: worker to worker, never
        through the client.
        """
        own = results if part is None else self._map(parts.half, results, [part] * len(results))
        sizes = np.diff(offsets[self._cuts]).tolist()
        groups = chunks.merge_groups(sizes, chunks.chunk_bytes(), _workers(self._client))
        batch = type(self).__new__(type(self))
        batch._client, batch._values, batch._offsets = self._client, None, offsets
        if len(groups) == len(sizes):  # nothing to merge: the results are the chunks
            batch._chunks, batch._cuts = own, self._cuts
            if part is not None:
                batch._in_pairs = results, part
            return batch
        batch._chunks = self._map(parts.join, [own[g.start : g.stop] for g in groups])
        batch._cuts = np.array([self._cuts[g.start] for g in groups] + [self._cuts[-1]])
        return batch

    def split_pairs(self, pairs: list[Any], offsets: np.ndarray) -> tuple[DaskBatch, DaskBatch]:
        """Top-k's two batches, from ``pairs`` (a future a chunk of this batch) and ``offsets``."""
        return self.derived(pairs, offsets, part=0), self.derived(pairs, offsets, part=1)

    def gather_rows(self, chunk_futures: list[Any]) -> np.ndarray:
        """One small result per row from the chunks' futures, joined in row order."""
        with _rows_must_be_there():
            pieces = self._client.gather(chunk_futures, direct=True)
        return np.concatenate([np.empty(0), *pieces])

    # -- what the user reads: gathered on request --------------------------------------

    @property
    def offsets(self) -> np.ndarray:
        return self._offsets

    @property
    def values(self) -> np.ndarray:
        """The values, gathered from the workers the first time they are read."""
        if self._values is None:
            assert self._chunks is not None
            # Straight from the workers; the chunks' own offsets come along (one
            # integer a row), which costs less than a task per chunk to leave them.
            with _rows_must_be_there():
                pieces = self._client.gather(self._chunks, direct=True)
            self._values = np.concatenate([v for v, _ in pieces])  # keeps their dtype
        return self._values

    @property
    def backend(self) -> str:
        return "dask"

    def row_lengths(self) -> list[int]:
        return np.diff(self._offsets).tolist()

    def __getitem__(self, index: int) -> list[float]:
        if self._values is not None:
            return super().__getitem__(index)
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"row index {index} out of range for a batch of {n} rows")
        index %= n
        c = int(np.searchsorted(self._cuts, index, side="right")) - 1
        local = index - int(self._cuts[c])
        assert self._chunks is not None
        chunk = self._chunks[c]
        with _rows_must_be_there():
            return self._client.submit(parts.row, chunk, local).result().tolist()

    def __iter__(self) -> Iterator[list[float]]:
        values, offsets = self.values, self._offsets  # one gather for all the rows
        return (values[offsets[i] : offsets[i + 1]].tolist() for i in range(len(self)))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ragbatch.RaggedBatch):
            return NotImplemented
        offsets = np.asarray(other.offsets, dtype=np.int64)
        if not np.array_equal(self._offsets, offsets):
            return False
        return np.array_equal(self.values, np.asarray(other.values))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        if self._values is not None or int(self._offsets[-1]) <= SUMMARY_ABOVE:
            return super().__repr__()
        return (
            f"RaggedBatch(<{len(self):,} rows, {int(self._offsets[-1]):,} values in "
            f"{self.chunk_count} chunks on the workers>, backend='dask')"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled (sent to a worker, say), a batch travels as a local one: futures
        # belong to this client.
        return (type(self)._wrap, (self.values, self._offsets))
