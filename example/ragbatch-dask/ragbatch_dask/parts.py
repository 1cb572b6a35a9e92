"""What runs on a worker: ragbatch's functions on one chunk, with the local engine.

A chunk lives on a worker as a tuple ``(values, offsets)`` of NumPy arrays, its
offsets starting at 0. Each function here takes chunks and returns chunks (or a
small per-row result), so a pipeline's data stays where it is.

Top-k makes its indices and probabilities together, as one pair a chunk; each
of its two batches takes its half of the pair with :func:`half`, a task on the
worker that holds the pair, and until then the functions that follow read it
in the pair with :func:`on_part`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import ragbatch

import coheriq

Chunk = tuple[np.ndarray, np.ndarray]


def local_engine() -> str:
    """The fastest single-machine engine of ragbatch installed here."""
    return "compiled" if "compiled" in coheriq.available_engines("ragbatch") else "numpy"


@functools.cache
def _local_container() -> Any:
    return coheriq.engine_class("ragbatch", local_engine()).RaggedBatch


def _arrays(batch: Any) -> Chunk:
    return np.asarray(batch.values), np.asarray(batch.offsets, dtype=np.int64)


def _call(function: str, chunk: Chunk, *args: Any) -> Any:
    # The chunk's arrays were checked when its batch was made: they go into the local
    # engine's container as they are (both single-machine engines offer _wrap for
    # trusted arrays), not through from_flat, which would check and copy them again.
    with coheriq.using_engine("ragbatch", local_engine()):
        return getattr(ragbatch, function)(_local_container()._wrap(*chunk), *args)


def half(pair: tuple[Chunk, Chunk], which: int) -> Chunk:
    """The ``which``-th chunk of top-k's pair (0: indices, 1: probabilities)."""
    return pair[which]


def on_part(function: Callable[..., Any], which: int, pair: tuple[Chunk, Chunk], *args: Any) -> Any:
    """``function(pair[which], *args)``: a function of this module on a chunk of top-k's pair."""
    return function(pair[which], *args)


def softmax(chunk: Chunk) -> Chunk:
    return _arrays(_call("softmax", chunk))


def topk(chunk: Chunk, k: int) -> tuple[Chunk, Chunk]:
    indices, probabilities = _call("topk", chunk, k)
    return _arrays(indices), _arrays(probabilities)


def row_sum(chunk: Chunk) -> np.ndarray:
    return np.asarray(_call("row_sum", chunk), dtype=np.float64)


def row_mean(chunk: Chunk) -> np.ndarray:
    return np.asarray(_call("row_mean", chunk), dtype=np.float64)


def row(chunk: Chunk, index: int) -> np.ndarray:
    values, offsets = chunk
    return values[offsets[index] : offsets[index + 1]]


def join(pieces: list[Chunk]) -> Chunk:
    """One chunk of the rows of ``pieces``, in order (runs on the worker that merges)."""
    if len(pieces) == 1:
        return pieces[0]
    values = np.concatenate([v for v, _ in pieces])
    starts = np.cumsum([0] + [len(v) for v, _ in pieces[:-1]])
    offsets = [np.zeros(1, dtype=np.int64)]
    offsets += [o[1:] + start for (_, o), start in zip(pieces, starts, strict=True)]
    return values, np.concatenate(offsets).astype(np.int64)
