"""Engine "numpy" of ragbatch: NumPy arrays and vectorized per-row kernels.

Rows are handled all at once with ``ufunc.reduceat`` over the row starts, and
values are spread back over their rows with ``np.repeat``: no Python loop over
rows anywhere. Empty rows are left out of the reductions (``reduceat`` cannot
express them) and filled in afterwards.

NumPy costs a fixed 5 to 60 microseconds a call (its temporaries, ``reduceat``), so
on batches of a few dozen values the reference's plain Python loop is faster.
Softmax, top-k and row sums declare that crossover (:func:`coheriq.crossover`, in
values): its declared default is 0, so the engine runs every call, as it always has,
until ``coheriq calibrate ragbatch numpy`` measures where it starts to win on this
machine; below that, the reference runs the call.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import ragbatch

import coheriq

# Up to this k, top-k takes k rounds of a per-row argmax; above it, it sorts rows.
_FEW = 16
# The sizes calibration times (powers of two values): around where NumPy's fixed cost
# per call stops outweighing the reference's loop (100 to 500 values on a laptop).
CALIBRATION_POWERS = range(2, 17)
CALIBRATION_ROW_LENGTH = 16  # values per row, on average, in the calibration's batches
# Above this much padding, sorting rows sorts everything at once instead of padding
# rows into a rectangle: padding wins while rows have similar lengths.
_MAX_PADDING = 4


def _flat(batch: Any) -> tuple[np.ndarray, np.ndarray]:
    """The values and offsets of any engine's batch, as arrays (no copy if possible)."""
    return np.asarray(batch.values), np.asarray(batch.offsets, dtype=np.int64)


def check_flat(values: np.ndarray, offsets: np.ndarray) -> None:
    """Raise ragbatch's ``ValueError`` unless ``offsets`` describe rows of ``values``.

    Vectorized; on failure ``ragbatch.check_offsets`` words the error as every engine does.
    """
    if not (
        offsets.ndim == 1
        and len(offsets) > 0
        and offsets[0] == 0
        and offsets[-1] == len(values)
        and bool(np.all(offsets[1:] >= offsets[:-1]))
    ):
        ragbatch.check_offsets(offsets.tolist(), len(values))


class NumpyBatch(ragbatch.RaggedRows):
    """ragbatch.RaggedBatch with NumPy arrays for ``values`` and ``offsets``."""

    def __init__(self, rows: Iterable[Iterable[float]]) -> None:
        arrays = [np.asarray(list(row), dtype=np.float64) for row in rows]
        lengths = np.array([len(a) for a in arrays], dtype=np.int64)
        self.values = np.concatenate(arrays) if arrays else np.empty(0, dtype=np.float64)
        self.offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)

    @classmethod
    def from_flat(cls, values: Sequence[float], offsets: Sequence[int]) -> NumpyBatch:
        values = np.array(values)
        offsets = np.array(offsets, dtype=np.int64)
        check_flat(values, offsets)
        return cls._wrap(values, offsets)

    @classmethod
    def _wrap(cls, values: Any, offsets: Any) -> NumpyBatch:
        """A batch around trusted arrays (any buffer), without checks or copies."""
        batch = cls.__new__(cls)
        batch.values, batch.offsets = np.asarray(values), np.asarray(offsets, dtype=np.int64)
        return batch

    @property
    def backend(self) -> str:
        return "numpy"

    def row_lengths(self) -> list[int]:
        return np.diff(self.offsets).tolist()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ragbatch.RaggedBatch):
            return NotImplemented
        values, offsets = _flat(other)
        return np.array_equal(self.offsets, offsets) and np.array_equal(self.values, values)

    __hash__ = None  # type: ignore[assignment]


def _row_ids(offsets: np.ndarray) -> np.ndarray:
    """The row of each value."""
    return np.repeat(np.arange(len(offsets) - 1), np.diff(offsets))


def _reduce(ufunc: np.ufunc, values: np.ndarray, offsets: np.ndarray, empty: float) -> np.ndarray:
    """``ufunc`` over each row; ``empty`` for rows without values."""
    lengths = np.diff(offsets)
    out = np.full(len(lengths), empty, dtype=np.float64)
    full = lengths > 0
    if values.size:
        out[full] = ufunc.reduceat(values, offsets[:-1][full])
    return out


def _softmax(values: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    lengths = np.diff(offsets)
    shifted = values - np.repeat(_reduce(np.maximum, values, offsets, 0.0), lengths)
    exps = np.exp(shifted)
    return exps / np.repeat(_reduce(np.add, exps, offsets, 1.0), lengths)


def _topk_order(values: np.ndarray, offsets: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Flat positions of each row's top ``k`` (best first), and the new offsets."""
    lengths = np.diff(offsets)
    kept = np.minimum(lengths, k)
    new_offsets = np.concatenate(([0], np.cumsum(kept))).astype(np.int64)
    top = _top_few if k <= _FEW else _top_many
    return top(values, offsets, k), new_offsets


def _top_few(values: np.ndarray, offsets: np.ndarray, k: int) -> np.ndarray:
    """Top ``k`` by ``k`` rounds of a per-row argmax over all rows at once."""
    lengths = np.diff(offsets)
    full = lengths > 0
    starts, spread = offsets[:-1][full], lengths[full]
    row_of = np.repeat(np.arange(len(starts)), spread)
    work = values.copy()
    rounds = np.empty((len(starts), k), dtype=np.int64)
    for j in range(k):  # a loop over k, never over rows
        best = np.maximum.reduceat(work, starts)
        hits = np.flatnonzero(work == best[row_of])
        # The first hit of each row: equal values come in index order.
        first = hits[np.flatnonzero(np.diff(row_of[hits], prepend=-1))]
        rounds[:, j] = first
        work[first] = -np.inf
    keep = np.arange(k) < np.minimum(spread, k)[:, None]
    return rounds[keep]


def _top_many(values: np.ndarray, offsets: np.ndarray, k: int) -> np.ndarray:
    """Top ``k`` by sorting each row (padded into a rectangle when rows are even)."""
    lengths = np.diff(offsets)
    kept = np.minimum(lengths, k)
    rows, widest = len(lengths), int(lengths.max()) if len(lengths) else 0
    if rows * widest <= _MAX_PADDING * max(values.size, 1):
        # A stable argsort of the negated values puts larger values first and
        # equal values in index order; padding (+inf) sorts last.
        grid = np.full((rows, widest), np.inf)
        columns = np.arange(values.size) - np.repeat(offsets[:-1], lengths)
        grid[_row_ids(offsets), columns] = -values
        order = np.argsort(grid, axis=1, kind="stable")[:, : min(k, widest)]
        keep = np.arange(order.shape[1]) < kept[:, None]
        return (order + offsets[:-1, None])[keep]
    # Very uneven rows: sort all values by (row, -value, index) at once.
    order = np.lexsort((-values, _row_ids(offsets)))
    rank = np.arange(values.size) - np.repeat(offsets[:-1], lengths)
    return order[rank < np.repeat(kept, lengths)]


def values_in(engine: Any, batch: Any, *_: Any) -> int | None:
    """How big a call on ``batch`` (any engine's) is, in values, for the crossover: cheap
    (it reads the last offset); None for an argument that is no batch (the call runs, and
    fails as it would have)."""
    offsets = getattr(batch, "offsets", None)
    if offsets is None:
        return None
    return int(offsets[-1]) if len(offsets) else 0


def calibration_batch(n_values: int, seed: int = 0) -> Any:
    """A batch of ``n_values`` normal floats in rows of about
    :data:`CALIBRATION_ROW_LENGTH` (at least one row), made by ``ragbatch.from_flat`` with
    plain floats: under the reference, the library's own batch."""
    rng = np.random.default_rng(seed)
    rows = max(1, n_values // CALIBRATION_ROW_LENGTH)
    cuts = np.sort(rng.integers(0, n_values + 1, rows - 1))
    offsets = np.concatenate(([0], cuts, [n_values]))
    return ragbatch.from_flat(rng.normal(0.0, 3.0, n_values).tolist(), offsets.tolist())


def calibration_calls(powers: Iterable[int], *more: Any) -> list[tuple[Any, ...]]:
    """The calls a calibration times: for each power ``p`` of ``powers``, a batch of 2**p
    values (:func:`calibration_batch`), then ``more`` (topk's k)."""
    return [(calibration_batch(1 << power), *more) for power in powers]


def _measured_crossover(*more: Any) -> Any:
    """A crossover declared at 0 values (every call runs here until a calibration on the
    machine says otherwise), calibrated on batches of 2**p values for each p of
    :data:`CALIBRATION_POWERS`, each given ``more`` (topk's k) after it."""
    return coheriq.crossover(
        size=values_in, default=0, inputs=lambda: calibration_calls(CALIBRATION_POWERS, *more)
    )


class NumpyEngine(coheriq.engine_class("ragbatch"), name="numpy"):
    """Every ragbatch function vectorized with NumPy: no Python loop over rows."""

    RaggedBatch = NumpyBatch

    def from_flat(self, values: Sequence[float], offsets: Sequence[int]) -> Any:
        return self.RaggedBatch.from_flat(values, offsets)

    def to_flat(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        values, offsets = _flat(batch)
        return values.copy(), offsets.copy()

    @_measured_crossover()
    def softmax(self, batch: Any) -> Any:
        values, offsets = _flat(batch)
        return self.RaggedBatch._wrap(_softmax(values.astype(np.float64), offsets), offsets)

    @_measured_crossover(4)
    def topk(self, batch: Any, k: int) -> tuple[Any, Any]:
        ragbatch.check_k(k)
        values, offsets = _flat(batch)
        values = values.astype(np.float64)
        positions, new_offsets = _topk_order(values, offsets, k)
        lengths, kept = np.diff(offsets), np.diff(new_offsets)
        indices = positions - np.repeat(offsets[:-1], kept)
        # Softmax at the kept positions only: the row maxima and sums are all it needs.
        exps = np.exp(values - np.repeat(_reduce(np.maximum, values, offsets, 0.0), lengths))
        probabilities = exps[positions] / np.repeat(_reduce(np.add, exps, offsets, 1.0), kept)
        wrap = self.RaggedBatch._wrap
        return wrap(indices, new_offsets), wrap(probabilities, new_offsets)

    @_measured_crossover()
    def row_sum(self, batch: Any) -> np.ndarray:
        values, offsets = _flat(batch)
        return _reduce(np.add, values.astype(np.float64), offsets, 0.0)

    def row_mean(self, batch: Any) -> np.ndarray:
        values, offsets = _flat(batch)
        lengths = np.diff(offsets)
        with np.errstate(invalid="ignore", divide="ignore"):
            return _reduce(np.add, values.astype(np.float64), offsets, np.nan) / lengths
