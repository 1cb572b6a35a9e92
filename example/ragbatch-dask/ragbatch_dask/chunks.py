"""How a batch is cut into chunks: by bytes, at row boundaries, decided on the client.

Everything here reads offsets only (the rows' metadata, which the client keeps),
never values, so deciding how to cut or merge chunks moves no data.
"""

from __future__ import annotations

import os

import numpy as np

CHUNK_BYTES_ENV = "RAGBATCH_DASK_CHUNK_BYTES"
DEFAULT_CHUNK_BYTES = 16 * 2**20
VALUE_BYTES = 8  # ragbatch computes in float64; indices are int64


def chunk_bytes() -> int:
    """The target size of a chunk, from ``RAGBATCH_DASK_CHUNK_BYTES`` (default 16 MiB)."""
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
            f"it to a whole number of bytes, such as {DEFAULT_CHUNK_BYTES} (16 MiB), or unset it."
        )
    return size


def cut_rows(offsets: np.ndarray, target_bytes: int) -> np.ndarray:
    """Row boundaries of chunks of about ``target_bytes`` each, rows never split.

    Returns ``cuts``: chunk ``i`` holds rows ``cuts[i]:cuts[i + 1]``. A chunk ends
    at the first row boundary at or after each multiple of the target, so it may
    exceed the target by less than one row; a row larger than the target is a
    chunk of its own. There is always at least one chunk (possibly of no rows).
    """
    rows = len(offsets) - 1
    per_chunk = max(1, target_bytes // VALUE_BYTES)
    marks = np.arange(per_chunk, int(offsets[-1]), per_chunk)
    cuts = np.unique(np.concatenate(([0], np.searchsorted(offsets, marks, side="left"), [rows])))
    if len(cuts) == 1:  # no rows: one chunk of none
        cuts = np.array([0, 0])
    return cuts.astype(np.int64)


def merge_groups(sizes: list[int], target_bytes: int) -> list[range]:
    """Groups of consecutive chunks to merge so each group is about ``target_bytes``.

    ``sizes`` are the chunks' numbers of values. Chunks are taken in order while
    the group stays within the target; a chunk at or over the target stays alone.
    Used after a function shrinks rows (top-k keeps at most k values a row), so
    that many small chunks become a few of the target size again.
    """
    per_chunk = max(1, target_bytes // VALUE_BYTES)
    groups: list[range] = []
    start, total = 0, 0
    for i, size in enumerate(sizes):
        if i > start and total + size > per_chunk:
            groups.append(range(start, i))
            start, total = i, 0
        total += size
    groups.append(range(start, len(sizes)))
    return groups
