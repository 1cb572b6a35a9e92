"""Engine "compiled" of ragbatch: a container over typed buffers and C row kernels.

The container keeps ``values`` (float64) and ``offsets`` (int64) as memoryviews,
so they cost nothing to hand to the kernels in :mod:`ragbatch_compiled._kernels`,
which take any buffer (NumPy arrays too) and release the GIL while they run.
Results are written into fresh ``bytearray`` buffers that the kernels module
allocates without zeroing them (each kernel overwrites every byte of its output,
and zeroing a large buffer first would cost more than the kernel itself).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Sequence
from typing import Any

import ragbatch

import coheriq

from . import _kernels


def _doubles(n: int) -> memoryview:
    """An uninitialized buffer of ``n`` float64, for a kernel to fill."""
    return memoryview(_kernels.empty(8 * n)).cast("d")


def _int64s(n: int) -> memoryview:
    """An uninitialized buffer of ``n`` int64, for a kernel to fill."""
    return memoryview(_kernels.empty(8 * n)).cast("q")


def _copy(view: memoryview) -> memoryview:
    """A copy of a flat float64 or int64 ``view``, in a buffer of its own (one pass)."""
    copy = memoryview(_kernels.empty(view.nbytes)).cast(view.format)
    copy[:] = view
    return copy


def _as_buffer(data: Any, typecode: str) -> memoryview:
    """``data`` as a flat memoryview of float64 ('d') or int64 ('q'), copying only if needed."""
    if isinstance(data, memoryview) and data.format == typecode and data.ndim == 1:
        return data
    try:
        view = memoryview(data)
        if (
            view.ndim == 1
            and view.itemsize == 8
            and view.format.lstrip("@=<") in (("d",) if typecode == "d" else ("q", "l"))
        ):
            return view.cast("B").cast(typecode)
    except TypeError:  # not a buffer: a list or another sequence
        pass
    return memoryview(array(typecode, data))


def _flat(batch: Any) -> tuple[memoryview, memoryview]:
    return _as_buffer(batch.values, "d"), _as_buffer(batch.offsets, "q")


class CompiledBatch(ragbatch.RaggedRows):
    """ragbatch.RaggedBatch over typed buffers, for the C kernels."""

    def __init__(self, rows: Iterable[Iterable[float]]) -> None:
        values, offsets = array("d"), array("q", [0])
        for row in rows:
            values.extend(float(x) for x in row)
            offsets.append(len(values))
        self.values, self.offsets = memoryview(values), memoryview(offsets)

    @classmethod
    def from_flat(cls, values: Sequence[float], offsets: Sequence[int]) -> CompiledBatch:
        # Copies, as the reference's from_flat makes: the caller keeps its buffers.
        values_view = _copy(_as_buffer(values, "d"))
        offsets_view = _copy(_as_buffer(offsets, "q"))
        if _kernels.first_bad_offset(offsets_view, len(values_view)) >= 0:
            ragbatch.check_offsets(offsets_view.tolist(), len(values_view))  # words the error
        return cls._wrap(values_view, offsets_view)

    @classmethod
    def _wrap(cls, values: Any, offsets: Any) -> CompiledBatch:
        """A batch around trusted buffers, without checks or copies."""
        batch = cls.__new__(cls)
        batch.values = values if isinstance(values, memoryview) else memoryview(values)
        batch.offsets = _as_buffer(offsets, "q")
        return batch

    @property
    def backend(self) -> str:
        return "compiled"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ragbatch.RaggedBatch):
            return NotImplemented
        return self.offsets.tolist() == [int(o) for o in other.offsets] and (
            self.values.tolist() == [float(v) for v in other.values]
        )

    __hash__ = None  # type: ignore[assignment]


class CompiledEngine(coheriq.engine_class("ragbatch"), name="compiled"):
    """Every ragbatch function in C, over a container of typed buffers."""

    RaggedBatch = CompiledBatch

    def from_flat(self, values: Sequence[float], offsets: Sequence[int]) -> Any:
        return self.RaggedBatch.from_flat(values, offsets)

    def to_flat(self, batch: Any) -> tuple[memoryview, memoryview]:
        values, offsets = _flat(batch)
        return _copy(values), _copy(offsets)

    def softmax(self, batch: Any) -> Any:
        values, offsets = _flat(batch)
        out = _doubles(len(values))
        _kernels.softmax(values, offsets, out)
        return self.RaggedBatch._wrap(out, offsets)

    def topk(self, batch: Any, k: int) -> tuple[Any, Any]:
        ragbatch.check_k(k)
        values, offsets = _flat(batch)
        new_offsets = _int64s(len(offsets))
        total = _kernels.topk_offsets(offsets, k, new_offsets)
        indices, probabilities = _int64s(total), _doubles(total)
        _kernels.topk(values, offsets, k, new_offsets, indices, probabilities)
        wrap = self.RaggedBatch._wrap
        return wrap(indices, new_offsets), wrap(probabilities, new_offsets)

    def row_sum(self, batch: Any) -> memoryview:
        return self._reduce(batch, mean=False)

    def row_mean(self, batch: Any) -> memoryview:
        return self._reduce(batch, mean=True)

    def _reduce(self, batch: Any, *, mean: bool) -> memoryview:
        values, offsets = _flat(batch)
        out = _doubles(len(offsets) - 1)
        _kernels.row_reduce(values, offsets, out, mean)
        return out
