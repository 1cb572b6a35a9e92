"""How a batch is cut into chunks: by bytes, at row boundaries, decided on the client.

Everything here reads offsets only (the rows' metadata, which the client keeps),
never values, so deciding how to cut or merge chunks moves no data.
"""

from __future__ import annotations

import itertools
import os

import numpy as np

CHUNK_BYTES_ENV = "RAGBATCH_DASK_CHUNK_BYTES"
DEFAULT_CHUNK_BYTES = 64 * 2**20
VALUE_BYTES = 8  # ragbatch computes in float64; indices are int64


def chunk_bytes() -> int:
    """The target size of a chunk, from ``RAGBATCH_DASK_CHUNK_BYTES`` (default 64 MiB)."""
    text = os.environ.get(CHUNK_BYTES_ENV, "").strip()
    if not text:
        return DEFAULT_CHUNK_BYTES
    try:
        size = int(text)
    except ValueError:
        size = 0
    if size < VALUE_BYTES:
        raise ValueError(
            f"{CHUNK_BYTES_ENV}={text!r} is not a size in bytes of at least {VALUE_BYTES}: set "
            f"it to a whole number of bytes, such as {DEFAULT_CHUNK_BYTES} (64 MiB), or unset it."
        )
    return size


def cut_rows(offsets: np.ndarray, target_bytes: int, workers: int = 1) -> np.ndarray:
    """Row boundaries of chunks of at most about ``target_bytes`` each, rows never split.

    Returns ``cuts``: chunk ``i`` holds rows ``cuts[i]:cuts[i + 1]``. The number of
    chunks is the fewest of at most the target, rounded up to a multiple of
    ``workers`` so that each worker gets as many; they are then of equal size. A
    chunk ends at the first row boundary at or after its share, so it may exceed
    it by less than one row; a row larger than a share is a chunk of its own.
    There is always at least one chunk (possibly of no rows).
    """
    rows, total = len(offsets) - 1, int(offsets[-1])
    per_chunk = max(1, -(-total // chunk_count(total, target_bytes, workers)))
    marks = np.arange(per_chunk, total, per_chunk)
    cuts = np.unique(np.concatenate(([0], np.searchsorted(offsets, marks, side="left"), [rows])))
    if len(cuts) == 1:  # no rows: one chunk of none
        cuts = np.array([0, 0])
    return cuts.astype(np.int64)


def chunk_count(values: int, target_bytes: int, workers: int) -> int:
    """The fewest chunks of at most ``target_bytes``, rounded up to a multiple of ``workers``."""
    count = max(1, -(-values * VALUE_BYTES // target_bytes))  # ceiling division
    return -(-count // workers) * workers


def merge_groups(sizes: list[int], target_bytes: int, workers: int = 1) -> list[range]:
    """Groups of consecutive chunks to merge, after a function shrank the rows.

    ``sizes`` are the chunks' numbers of values. If there are more chunks than
    :func:`chunk_count` wants for their values, neighbours are merged into that
    many groups of about equal size (top-k keeps at most k values a row, so its
    chunks are far smaller than the target); otherwise each chunk stays alone.
    """
    want = chunk_count(sum(sizes), target_bytes, workers)
    if len(sizes) <= want:
        return [range(i, i + 1) for i in range(len(sizes))]
    share = max(1, -(-sum(sizes) // want))
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
    group_of = np.minimum(starts // share, want - 1)
    edges = [0, *(np.flatnonzero(np.diff(group_of)) + 1).tolist(), len(sizes)]
    return [range(a, b) for a, b in itertools.pairwise(edges)]
