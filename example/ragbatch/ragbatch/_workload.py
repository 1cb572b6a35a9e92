"""The shared workload of ragbatch's demo and benchmark: one batch, every engine."""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import ragbatch

import coheriq


def make_batch(n_values: int, n_rows: int, seed: int = 0) -> Any:
    """A batch of ``n_values`` random floats in ``n_rows`` rows of random lengths."""
    rng = random.Random(seed)
    cuts = sorted(rng.randrange(n_values + 1) for _ in range(n_rows - 1))
    values = [rng.gauss(0.0, 3.0) for _ in range(n_values)]
    with coheriq.using_engine("ragbatch", coheriq.REFERENCE):
        return ragbatch.from_flat(values, [0, *cuts, n_values])


def engines(skipped: dict[str, str] | None = None, only: list[str] | None = None) -> list[str]:
    """The reference and every installed engine of ragbatch that starts here.

    An engine that cannot start on this machine (the gpu engine where JAX sees no
    GPU) is left out; ``skipped``, if given, gets its name and the reason. With
    ``only``, those engines alone (the reference always comes first).
    """
    names = [coheriq.REFERENCE]
    for name in only or coheriq.available_engines("ragbatch"):
        if name == coheriq.REFERENCE:
            continue
        try:
            with coheriq.using_engine("ragbatch", name):  # starts it, or says why not
                names.append(name)
        except coheriq.CoheriqEngineStartError as error:
            if skipped is not None:
                skipped[name] = str(error.__cause__ or error)
    return names


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The median seconds of ``repeat`` calls of ``fn``, and its last result.

    Each call is timed until its result is computed, also where an engine
    computes in the background (see :func:`wait_for`).
    """
    samples, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        wait_for(result)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def timed_steadily(fn: Callable[[], Any], min_runs: int, min_seconds: float) -> tuple[float, Any]:
    """The median seconds of a call of ``fn`` once it is warm, and its last result.

    ``fn`` runs once untimed first (an engine's first call may compile, allocate or
    start workers), then is timed call after call until there are at least
    ``min_runs`` calls and they took ``min_seconds`` in all: a fast engine is timed
    over many calls, so that its median does not move with the noise of a few.
    """
    wait_for(fn())  # the warm-up
    samples: list[float] = []
    result: Any = None
    while len(samples) < max(1, min_runs) or sum(samples) < min_seconds:
        start = time.perf_counter()
        result = fn()
        wait_for(result)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), result


def wait_for(result: Any) -> None:
    """Wait until ``result`` (a batch, an array, or a tuple of them) is computed.

    Engines may return before the work is done: the dask engine returns batches
    whose chunks are computed on the workers (``batch.computed()`` waits for
    them), and JAX arrays (the gpu engine's ``device_values``, its ``row_sum``)
    are computed asynchronously.
    """
    for part in result if isinstance(result, tuple) else (result,):
        if callable(getattr(part, "computed", None)):
            part.computed()
        for array in (part, getattr(part, "device_values", None)):
            if hasattr(array, "block_until_ready"):
                array.block_until_ready()


def flat_floats(result: Any) -> list[float]:
    """Every number in a result (a batch, a sequence, or a tuple of them) as floats."""
    if isinstance(result, tuple):
        return [x for part in result for x in flat_floats(part)]
    values = result.values if isinstance(result, ragbatch.RaggedBatch) else result
    return [float(x) for x in values]


def max_relative_error(got: Sequence[float], want: Sequence[float]) -> float:
    if len(got) != len(want):
        return float("inf")
    worst = 0.0
    for g, w in zip(got, want, strict=True):
        if g != w:
            worst = max(worst, abs(g - w) / max(abs(w), sys.float_info.min))
    return worst


class Progress:
    """Progress on standard error: a one-line bar on a terminal, else a line per step.

    The bar redraws itself with carriage returns, which a log or a pipe would keep
    as one long line; there each step is written as a plain line instead.
    """

    def __init__(self, total: int, width: int = 30) -> None:
        self.total, self.done, self.width = total, 0, width
        isatty = getattr(sys.stderr, "isatty", None)
        self.bar = bool(isatty and isatty())

    def step(self, label: str) -> None:
        self.done += 1
        if not self.bar:
            sys.stderr.write(f"{self.done}/{self.total} {label}\n")
            sys.stderr.flush()
            return
        filled = self.width * self.done // self.total
        bar = "#" * filled + "." * (self.width - filled)
        sys.stderr.write(f"\r[{bar}] {self.done}/{self.total} {label:<24}")
        sys.stderr.flush()
        if self.done == self.total:
            sys.stderr.write("\n")
