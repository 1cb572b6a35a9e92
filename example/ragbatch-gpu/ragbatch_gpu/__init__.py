"""Engine "gpu" of ragbatch: the values on a GPU, each row function one compiled JAX program.

A batch keeps its values on the device and its offsets on the host (they are
small, and they fix the shapes of results). Row operations are segment
reductions over each value's row: ``jax.ops.segment_max`` and ``segment_sum``
with sorted row ids, a gather that spreads row results back over the values,
and for top-k one stable sort by (row, -value); each function is one jitted XLA
program. Softmax, the function that moves the most data, has on a GPU a Pallas
kernel of its own instead (see :mod:`ragbatch_gpu.kernel`);
``RAGBATCH_GPU_SOFTMAX=xla`` or ``=pallas`` chooses either anywhere.

XLA compiles a program per array shape, and ragged batches come in every size,
so device arrays are padded to one of eight sizes per power of two (never more
than an eighth extra, past one kernel block of slack): batches of nearby sizes
share a program. Padding belongs to no row: its row id is one past the last
row, which segment reductions drop.

The engine needs a GPU that JAX sees (``pip install -U 'jax[cuda13]'`` on a
machine with an NVIDIA GPU); without one, choosing the engine fails and says so.
``RAGBATCH_GPU_PLATFORM=cpu`` runs the same programs on JAX's CPU backend, to
test the engine where there is no GPU (the Pallas kernel is then interpreted).
Choosing the engine turns on JAX's 64-bit mode (``jax_enable_x64``), because
ragbatch computes in float64.

Uploading a batch from the host costs more than the work on small batches. The
row functions declare that crossover (:func:`coheriq.crossover`, in values): below
it a batch still on the host is declined softly, and the next implementation runs
it (the compiled engine under ``RAGBATCH_ENGINE=gpu,compiled``, else the
reference). The crossover in force is the one ``coheriq calibrate ragbatch gpu
--against compiled`` measured on this machine, else the declared
:data:`MIN_VALUES`. A batch already on the device has no upload to pay: it always
runs here. ``python -m ragbatch_gpu.benchmark --crossover`` calibrates and prints
the table.

The engine declares its data (:data:`CONVERSIONS`): any engine's batch becomes a
:class:`GpuBatch` by one upload, and a :class:`GpuBatch` the library's
``RaggedBatch`` by one download. coheriq uploads a host batch as it enters the
engine, once per batch (cached), keeps results on the device from call to call,
downloads a device batch where a call falls back to another implementation
(a decline, ``verify``), and pickles a device batch as the library's batch, which
loads where JAX is not installed.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import ragbatch
from jax import lax
from ragbatch_numpy import calibration_batch as calibration_batch  # the benchmarks' batches
from ragbatch_numpy import calibration_calls

import coheriq

from . import kernel

# Batches are built on the host by the numpy engine's container, then uploaded.
Numpy = coheriq.engine_class("ragbatch", "numpy")

PLATFORM_ENV = "RAGBATCH_GPU_PLATFORM"
MIN_VALUES = 1 << 16
"""The declared crossover: below this many values, a batch on the host is declined
(an estimate, not measured on a GPU yet: ``coheriq calibrate ragbatch gpu --against
compiled``, which ``gpu_check.sh`` runs, measures it on a machine)."""
CALIBRATION_POWERS = range(8, 23, 2)
"""The sizes a calibration times, as powers of two values: from far below the declared
crossover to a batch of 4 million values (32 MiB), a factor of 4 apart (the fit
interpolates between them; each size costs seconds of copies and uploads)."""
SOFTMAX_ENV = "RAGBATCH_GPU_SOFTMAX"
SOFTMAX_KERNELS = ("pallas", "xla")
_SMALLEST = 128  # every batch at most this big shares one program

_device: Any = None  # the device batches live on, once the engine has found it


def find_device(platform: str = "gpu") -> Any:
    """The first JAX device of ``platform``, with x64 on; raise ``RuntimeError`` if none."""
    try:
        device = jax.devices(platform)[0]
    except RuntimeError:
        present = ", ".join(sorted({d.platform for d in jax.devices()}))
        raise RuntimeError(
            f"JAX finds no {platform} device (it has: {present}). On a machine with an "
            "NVIDIA GPU, install JAX with CUDA support (pip install -U 'jax[cuda13]'); "
            f"elsewhere choose another engine of ragbatch, or set {PLATFORM_ENV}=cpu to run "
            "this engine's programs on the CPU."
        ) from None
    jax.config.update("jax_enable_x64", True)  # only once a device is found: fail cleanly
    return device


def device_platform() -> str:
    """The JAX platform asked for: ``RAGBATCH_GPU_PLATFORM``, else gpu."""
    return os.environ.get(PLATFORM_ENV, "").strip() or "gpu"


def device() -> Any:
    """The device this engine's batches live on (found on first use)."""
    global _device
    if _device is None:
        _device = find_device(device_platform())
    return _device


def padded_size(n: int) -> int:
    """``n`` rounded up to one of eight sizes per power of two, and to at least 128."""
    if n <= _SMALLEST:
        return _SMALLEST
    step = 1 << (n.bit_length() - 4)
    return -(-n // step) * step


def value_slots(n: int) -> int:
    """The length of the device array that holds ``n`` values.

    At least one of the kernel's blocks longer than ``n``: the last block of a row
    may reach past the row's end, and so must stay inside the array.
    """
    return padded_size(n + kernel.BLOCK)


def choose_softmax_kernel(platform: str) -> str:
    """The softmax kernel to use: ``RAGBATCH_GPU_SOFTMAX``, else pallas on a GPU, else xla."""
    chosen = os.environ.get(SOFTMAX_ENV, "").strip()
    if not chosen:
        return "pallas" if platform == "gpu" else "xla"
    if chosen not in SOFTMAX_KERNELS:
        raise RuntimeError(
            f"{SOFTMAX_ENV}={chosen!r} names no softmax kernel of the gpu engine; use one "
            f"of {', '.join(SOFTMAX_KERNELS)}, or unset it."
        )
    return chosen


# -- the programs (every argument after the arrays is static: a shape) ------------------


@functools.partial(jax.jit, static_argnums=1)
def _row_ids(offsets: jax.Array, size: int) -> jax.Array:
    """The row of each of ``size`` values: how many row ends are at or before it.

    ``offsets`` is padded with its last value to ``rows + 1`` entries, so a value
    past the end gets row id ``rows``: no row.
    """
    ends = jnp.zeros(size, offsets.dtype).at[offsets[1:]].add(1, mode="drop")
    return jnp.cumsum(ends, dtype=offsets.dtype)


def _spread(per_row: jax.Array, rows: jax.Array, fill: float = 0.0) -> jax.Array:
    """Each value's row's entry of ``per_row`` (``fill`` for padding)."""
    return per_row.at[rows].get(mode="fill", fill_value=fill)


def _exps(values: jax.Array, rows: jax.Array, count: int) -> tuple[jax.Array, jax.Array]:
    """``exp(value - its row's max)`` of each value, and each row's sum of those."""
    top = jax.ops.segment_max(values, rows, count, indices_are_sorted=True)
    exps = jnp.exp(values - _spread(top, rows))
    return exps, jax.ops.segment_sum(exps, rows, count, indices_are_sorted=True)


@functools.partial(jax.jit, static_argnums=2)
def _softmax(values: jax.Array, rows: jax.Array, count: int) -> jax.Array:
    exps, total = _exps(values, rows, count)
    return exps / _spread(total, rows, 1.0)


@functools.partial(jax.jit, static_argnums=2)
def _row_sum(values: jax.Array, rows: jax.Array, count: int) -> jax.Array:
    return jax.ops.segment_sum(values, rows, count, indices_are_sorted=True)


@functools.partial(jax.jit, static_argnums=(4, 5))
def _topk(
    values: jax.Array,
    rows: jax.Array,
    offsets: jax.Array,
    kept_offsets: jax.Array,
    count: int,
    kept_size: int,
) -> tuple[jax.Array, jax.Array]:
    """Each row's best entries (indices in the row, probabilities) in ``kept_size`` slots."""
    positions = jnp.arange(values.shape[0], dtype=rows.dtype)
    # Sorted by row, then larger values first; the sort is stable, so equal values
    # stay in index order. Row r's values now fill offsets[r]:offsets[r+1], best first.
    order = lax.sort((rows, -values, positions), num_keys=2, is_stable=True)[2]
    slot_rows = _row_ids(kept_offsets, kept_size)
    start = _spread(offsets, slot_rows)
    rank = jnp.arange(kept_size, dtype=rows.dtype) - _spread(kept_offsets, slot_rows)
    best = order.at[start + rank].get(mode="fill", fill_value=0)
    exps, total = _exps(values, rows, count)
    probabilities = exps.at[best].get(mode="fill", fill_value=0.0) / _spread(total, slot_rows, 1.0)
    return (best - start).astype(jnp.int64), probabilities


# -- the container -------------------------------------------------------------------


class Rows:
    """The rows of a batch: offsets on the host, and what the programs need on the device.

    The device copies are made on first use and kept; batches with the same rows
    (a softmax and its input) share one ``Rows``.
    """

    def __init__(self, offsets: Any) -> None:
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.size = int(self.offsets[-1])  # the number of values
        self.slots = value_slots(self.size)  # the length of the arrays that hold them
        self.count = padded_size(len(self.offsets) - 1)  # the rows the programs see
        self._device_offsets: jax.Array | None = None
        self._ids: jax.Array | None = None

    def device_offsets(self) -> jax.Array:
        """The offsets on the device, padded with their last value to ``count + 1``."""
        if self._device_offsets is None:
            padded = self.padded(self.offsets)
            self._device_offsets = jax.device_put(padded.astype(self.index_dtype()), device())
        return self._device_offsets

    def ids(self) -> jax.Array:
        """The row of each value slot (``count`` for the padding)."""
        if self._ids is None:
            self._ids = _row_ids(self.device_offsets(), self.slots)
        return self._ids

    def padded(self, offsets: np.ndarray) -> np.ndarray:
        """Offsets of these rows (or of as many others) padded to ``count + 1`` entries."""
        return np.pad(offsets, (0, self.count + 1 - len(offsets)), mode="edge")

    def index_dtype(self) -> Any:
        return np.int32 if self.slots < 2**31 else np.int64


class GpuBatch(ragbatch.RaggedRows):
    """ragbatch.RaggedBatch with its values on the device.

    ``values`` is a read-only NumPy copy on the host, made when first read;
    ``device_values`` is the array on the device, for JAX code that goes on from here.
    """

    def __init__(self, rows: Iterable[Iterable[float]]) -> None:
        host = Numpy.RaggedBatch(rows)
        self._adopt(*_upload(host.values, host.offsets))

    @classmethod
    def from_flat(cls, values: Sequence[float], offsets: Sequence[int]) -> GpuBatch:
        host = Numpy.RaggedBatch.from_flat(values, offsets)  # copies, and checks the offsets
        values = host.values if host.values.dtype.kind in "iuf" else host.values.astype(float)
        return cls._wrap(*_upload(values, host.offsets))

    @classmethod
    def _wrap(cls, data: jax.Array, layout: Rows) -> GpuBatch:
        """A batch around trusted device ``data`` laid out as ``layout`` says."""
        batch = cls.__new__(cls)
        batch._adopt(data, layout)
        return batch

    def _adopt(self, data: jax.Array, layout: Rows) -> None:
        self._data, self._layout = data, layout
        self._host: np.ndarray | None = None

    @property
    def offsets(self) -> np.ndarray:
        return self._layout.offsets

    @property
    def values(self) -> np.ndarray:
        if self._host is None:
            self._host = np.asarray(self.device_values)
            self._host.flags.writeable = False  # a copy: writing to it would change nothing
        return self._host

    @property
    def device_values(self) -> jax.Array:
        """The values as a JAX array on the device (no padding)."""
        return self._data[: self._layout.size]

    @property
    def backend(self) -> str:
        return "gpu"

    def block_until_ready(self) -> GpuBatch:
        """Wait until the device has computed this batch's values; return the batch.

        JAX runs device work asynchronously: time a call up to this, not up to its return.
        """
        self._data.block_until_ready()
        return self

    def row_lengths(self) -> list[int]:
        return np.diff(self.offsets).tolist()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ragbatch.RaggedBatch):
            return NotImplemented
        offsets = np.asarray(other.offsets, dtype=np.int64)
        return np.array_equal(self.offsets, offsets) and np.array_equal(
            self.values, np.asarray(other.values)
        )

    __hash__ = None  # type: ignore[assignment]


def _upload(values: np.ndarray, offsets: Any) -> tuple[jax.Array, Rows]:
    """Host ``values`` on the device, padded with zeros, and the layout of their rows."""
    layout = Rows(offsets)
    padded = np.zeros(layout.slots, dtype=values.dtype)
    padded[: len(values)] = values
    return jax.device_put(padded, device()), layout


def _on_device(batch: Any, dtype: Any = np.float64) -> GpuBatch:
    """Any engine's batch as a GpuBatch of ``dtype`` (no copy if it is one already)."""
    if not isinstance(batch, GpuBatch):
        return GpuBatch._wrap(*_upload(np.asarray(batch.values, dtype=dtype), batch.offsets))
    if batch._data.dtype != dtype:
        return GpuBatch._wrap(batch._data.astype(dtype), batch._layout)
    return batch


def _download(batch: GpuBatch) -> ragbatch.RaggedBatch:
    """The library's batch of ``batch``'s rows, on the host (whatever engine is active)."""
    host = ragbatch.RaggedBatch.__new__(ragbatch.RaggedBatch)
    host.values, host.offsets = batch.values.tolist(), batch.offsets.tolist()
    return host


CONVERSIONS = [
    coheriq.Conversion(
        ragbatch.RaggedBatch,  # any engine's batch: isinstance says so of each
        GpuBatch,
        to_engine=_on_device,
        to_library=_download,
        cache=True,  # neither copy refers to the other
        pickle_as_library=True,
    )
]
"""What the engine's data is: a batch uploaded once, downloaded once, pickled on the host."""


def values_on_the_host(engine: GpuEngine, batch: Any, *_: Any) -> int | None:
    """How big a call on ``batch`` is for the crossover: its number of values while it is
    on the host (the upload a call pays); None for a batch on the device, which runs here
    whatever its size, or for an argument that is no batch (the call fails as it would)."""
    if isinstance(batch, GpuBatch):
        return None
    offsets = getattr(batch, "offsets", None)
    if offsets is None:
        return None
    return int(offsets[-1]) if len(offsets) else 0


def _below_the_crossover(*more: Any) -> Any:
    """The engine's crossover on a row function: declared :data:`MIN_VALUES`, sized by
    :func:`values_on_the_host`, calibrated on host batches of 2**p values for each p of
    :data:`CALIBRATION_POWERS`, each given ``more`` (topk's k) after it."""
    return coheriq.crossover(
        size=values_on_the_host,
        default=MIN_VALUES,
        unit="values",
        inputs=lambda: calibration_calls(CALIBRATION_POWERS, *more),
    )


class GpuEngine(
    coheriq.engine_class("ragbatch"),
    name="gpu",
    conversions=CONVERSIONS,
    accepts_library_types=["to_flat"],  # copies to the host: no upload first
):
    """ragbatch's rows on a GPU, each function one compiled JAX program."""

    RaggedBatch = GpuBatch

    def __init__(self) -> None:
        self.softmax_kernel = choose_softmax_kernel(device_platform())
        self.device = device()  # no GPU: the error says so, and the engine is not chosen

    def from_flat(self, values: Sequence[float], offsets: Sequence[int]) -> GpuBatch:
        return self.RaggedBatch.from_flat(values, offsets)

    def to_flat(self, batch: Any) -> tuple[np.ndarray, np.ndarray]:
        """Copies of the values and offsets, on the host."""
        return np.array(batch.values), np.array(batch.offsets, dtype=np.int64)

    @_below_the_crossover()
    def softmax(self, batch: Any) -> GpuBatch:
        batch = _on_device(batch)
        rows = batch._layout
        if self.softmax_kernel == "pallas":
            interpret = self.device.platform != "gpu"  # how it runs without a GPU: slowly
            out = kernel.softmax(batch._data, rows.device_offsets(), rows.count, interpret)
        else:
            out = _softmax(batch._data, rows.ids(), rows.count)
        return self.RaggedBatch._wrap(out, rows)

    @_below_the_crossover(4)
    def topk(self, batch: Any, k: int) -> tuple[GpuBatch, GpuBatch]:
        ragbatch.check_k(k)
        batch = _on_device(batch)
        rows = batch._layout
        kept = Rows(np.concatenate(([0], np.cumsum(np.minimum(np.diff(rows.offsets), k)))))
        # The kept entries of each row, in a layout of as many (padded) rows as the input.
        kept_offsets = rows.padded(kept.offsets).astype(kept.index_dtype())
        indices, probabilities = _topk(
            batch._data,
            rows.ids(),
            rows.device_offsets(),
            jax.device_put(kept_offsets, device()),
            rows.count,
            kept.slots,
        )
        return self.RaggedBatch._wrap(indices, kept), self.RaggedBatch._wrap(probabilities, kept)

    @_below_the_crossover()
    def row_sum(self, batch: Any) -> jax.Array:
        """The sum of each row, as a JAX array on the device."""
        batch = _on_device(batch)
        rows = batch._layout
        return _row_sum(batch._data, rows.ids(), rows.count)[: len(batch)]

    @_below_the_crossover()
    def row_mean(self, batch: Any) -> jax.Array:
        """The mean of each row (NaN for an empty row), as a JAX array on the device."""
        batch = _on_device(batch)
        lengths = jax.device_put(np.diff(batch.offsets).astype(np.float64), device())
        return self.row_sum(batch) / lengths
