"""ragbatch: ragged batches of numbers, stored flat, with per-row operations.

A :class:`RaggedBatch` holds rows of different lengths as one flat sequence of
``values`` and ``offsets`` into it (row ``i`` is ``values[offsets[i]:offsets[i+1]]``),
which is how scores per token, detections per image or neighbours per node are
kept in practice. The functions work row by row: :func:`softmax`, :func:`topk`,
:func:`row_sum`, :func:`row_mean`, and the conversions :func:`from_flat` and
:func:`to_flat`.

Everything here is plain Python, and every public name is a coheriq acceleration
candidate of the domain ``ragbatch``: install an engine (``ragbatch-numpy``,
``ragbatch-compiled``, ``ragbatch-hybrid``) and choose it with
``coheriq.enable_engine("ragbatch", "numpy")``, ``RAGBATCH_ENGINE=numpy`` or
``with coheriq.using_engine("ragbatch", "numpy"):``; the call sites stay the same.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import coheriq

__all__ = [
    "RaggedBatch",
    "RaggedRows",
    "check_offsets",
    "domain",
    "from_flat",
    "row_mean",
    "row_sum",
    "softmax",
    "to_flat",
    "topk",
]

domain = coheriq.AccelerationDomain("ragbatch", env_prefix="RAGBATCH")


def check_offsets(offsets: Sequence[int], n_values: int) -> None:
    """Raise ``ValueError`` unless ``offsets`` describe rows of ``n_values`` values.

    Offsets start at 0, never decrease, and end at ``n_values``. Every engine
    raises exactly these messages (engines with faster checks call this function to
    word the error).
    """
    if len(offsets) == 0:
        raise ValueError("offsets must not be empty: a batch of no rows has offsets [0].")
    if offsets[0] != 0:
        raise ValueError(f"offsets must start at 0, not {offsets[0]}.")
    for i in range(1, len(offsets)):
        if offsets[i] < offsets[i - 1]:
            raise ValueError(
                f"offsets must not decrease, but offsets[{i}] = {offsets[i]} is less than "
                f"offsets[{i - 1}] = {offsets[i - 1]}."
            )
    if offsets[-1] != n_values:
        raise ValueError(
            f"offsets must end at the number of values, {n_values}, not at {offsets[-1]}."
        )


def check_k(k: Any) -> int:
    """Return ``k`` if it is a positive integer, else raise ``ValueError``."""
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be a positive integer, not {k!r}.")
    return k


class RaggedRows:
    """The rows of a container of flat ``values`` and ``offsets``: length, indexing, iteration.

    :class:`RaggedBatch` inherits them, and so may an engine's container, whatever
    its storage: ``values`` need only support slicing (a list, an array, a buffer)
    and ``offsets`` indexing. A row comes back as a new list (via ``tolist()`` where
    the slice has one).
    """

    values: Any
    offsets: Any

    @property
    def backend(self) -> str:
        """The engine whose container this is."""
        raise NotImplementedError

    def row_lengths(self) -> list[int]:
        """The number of values in each row."""
        o = self.offsets
        return [int(o[i + 1]) - int(o[i]) for i in range(len(o) - 1)]

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> list[float]:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"row index {index} out of range for a batch of {n} rows")
        index %= n
        row = self.values[int(self.offsets[index]) : int(self.offsets[index + 1])]
        return row.tolist() if hasattr(row, "tolist") else list(row)

    def __iter__(self) -> Iterator[list[float]]:
        return (self[i] for i in range(len(self)))

    def __repr__(self) -> str:
        rows = ", ".join(str(r) for r in list(self)[:3])
        more = ", ..." if len(self) > 3 else ""
        return f"RaggedBatch([{rows}{more}], backend={self.backend!r})"


@domain.acceleration_candidate
class RaggedBatch(RaggedRows):
    """Rows of numbers of different lengths, stored flat as ``values`` and ``offsets``.

    Args:
        rows: The rows, each an iterable of numbers.

    ``len(batch)`` is the number of rows; ``batch[i]`` is a copy of row ``i`` as a
    list; iterating yields the rows; two batches are equal when their rows are,
    whichever engine made them.
    """

    def __init__(self, rows: Iterable[Iterable[float]]) -> None:
        self.values: list[float] = []
        self.offsets: list[int] = [0]
        for row in rows:
            self.values.extend(row)
            self.offsets.append(len(self.values))

    @classmethod
    def from_flat(cls, values: Sequence[float], offsets: Sequence[int]) -> RaggedBatch:
        """Make a batch from flat ``values`` and row ``offsets`` (both copied).

        Raises:
            ValueError: The offsets do not describe rows of these values.
        """
        values, offsets = list(values), [int(o) for o in offsets]
        check_offsets(offsets, len(values))
        batch = cls.__new__(cls)
        batch.values, batch.offsets = values, offsets
        return batch

    @property
    def backend(self) -> str:
        """The engine whose container this is."""
        return "reference"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RaggedBatch):
            return NotImplemented
        return list(self.offsets) == [int(o) for o in other.offsets] and list(self.values) == [
            float(v) for v in other.values
        ]

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value


@domain.acceleration_candidate
def from_flat(values: Sequence[float], offsets: Sequence[int]) -> RaggedBatch:
    """Make a batch from flat ``values`` and row ``offsets``; see ``RaggedBatch.from_flat``."""
    return RaggedBatch.from_flat(values, offsets)


@domain.acceleration_candidate
def to_flat(batch: RaggedBatch) -> tuple[Sequence[float], Sequence[int]]:
    """Return copies of the batch's flat ``values`` and ``offsets``."""
    return list(batch.values), list(batch.offsets)


def _rows(batch: RaggedBatch) -> Iterator[list[float]]:
    # Lists, whatever engine's container this is (an array engine's rows are arrays).
    values, offsets = list(batch.values), [int(o) for o in batch.offsets]
    return (values[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1))


def _softmax_row(row: Sequence[float]) -> list[float]:
    if not row:
        return []
    top = max(row)
    exps = [math.exp(x - top) for x in row]
    total = sum(exps)
    return [e / total for e in exps]


@domain.acceleration_candidate
def softmax(batch: RaggedBatch) -> RaggedBatch:
    """Per-row softmax: ``exp(x - max(row)) / sum(exp(row - max(row)))``; empty rows stay empty."""
    values = [p for row in _rows(batch) for p in _softmax_row(row)]
    return RaggedBatch.from_flat(values, batch.offsets)


@domain.acceleration_candidate
def topk(batch: RaggedBatch, k: int) -> tuple[RaggedBatch, RaggedBatch]:
    """The ``k`` largest values of each row: their indices and their softmax probabilities.

    Rows shorter than ``k`` give all their entries. Within a row, larger values come
    first and equal values in index order.

    Returns:
        ``(indices, probabilities)``, two batches with ``min(k, len(row))`` entries per row.

    Raises:
        ValueError: ``k`` is not a positive integer.
    """
    check_k(k)
    indices: list[int] = []
    probabilities: list[float] = []
    offsets = [0]
    for row in _rows(batch):
        probs = _softmax_row(row)
        best = sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]
        indices.extend(best)
        probabilities.extend(probs[i] for i in best)
        offsets.append(len(indices))
    return RaggedBatch.from_flat(indices, offsets), RaggedBatch.from_flat(probabilities, offsets)


@domain.acceleration_candidate
def row_sum(batch: RaggedBatch) -> Sequence[float]:
    """The sum of each row (0.0 for an empty row)."""
    return [math.fsum(row) for row in _rows(batch)]


@domain.acceleration_candidate
def row_mean(batch: RaggedBatch) -> Sequence[float]:
    """The mean of each row (NaN for an empty row)."""
    return [math.fsum(row) / len(row) if row else math.nan for row in _rows(batch)]


domain.materialize()

# How coheriq.verify compares engines (RAGBATCH_VERIFY=compiled, say): a batch, whichever
# engine made it, by its rows; the other side gets its own batch, made by its from_flat.
domain.register_comparison(RaggedBatch, convert=list, copy=lambda batch: from_flat(*to_flat(batch)))
