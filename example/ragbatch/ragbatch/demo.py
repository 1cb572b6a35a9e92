"""The ragbatch demo: one pipeline, the same call sites, every installed engine.

``python -m ragbatch.demo`` builds a batch of 10^6 scores in 10^4 rows of
different lengths, then runs :func:`pipeline` once under each engine of ragbatch
(the reference and each installed engine that can start here; the gpu engine
needs a GPU, and without one it is listed as skipped, with the reason), choosing
the engine with ``coheriq.using_engine`` around the unchanged calls, and prints
the time of each and its speed-up over the reference.

Each engine runs the pipeline once untimed (its first call may compile, allocate
or start workers), then is timed call after call, at least ``--repeat`` calls and
at least ``--min-time`` seconds in all; the time shown is the median call. A fast
engine is so timed over many calls, and the table stays the same from one run of
the demo to the next.
"""

from __future__ import annotations

import argparse
import functools
from array import array

import ragbatch

import coheriq

from ._workload import (
    Progress,
    engines,
    flat_floats,
    make_batch,
    max_relative_error,
    timed_steadily,
)


def pipeline(values, offsets):
    """Flat scores -> the 5 most likely entries of each row, their mass, and the row means."""
    batch = ragbatch.from_flat(values, offsets)
    probabilities = ragbatch.softmax(batch)
    best, best_probabilities = ragbatch.topk(batch, 5)
    return best, ragbatch.row_sum(best_probabilities), ragbatch.row_mean(probabilities), batch


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run ragbatch under every installed engine.")
    parser.add_argument("--values", type=int, default=10**6)
    parser.add_argument("--rows", type=int, default=10**4)
    parser.add_argument(
        "--repeat", type=int, default=3, help="time at least this many calls per engine (3)"
    )
    parser.add_argument(
        "--min-time",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="and time calls until they took this long in all, per engine (1.0)",
    )
    parser.add_argument(
        "--engine",
        action="append",
        metavar="NAME",
        help="run this engine (repeatable; default: every installed engine)",
    )
    args = parser.parse_args(argv)
    skipped: dict[str, str] = {}
    names = engines(skipped, only=args.engine)
    progress = Progress(1 + len(names))
    flat_values, flat_offsets = ragbatch.to_flat(make_batch(args.values, args.rows))
    values, offsets = array("d", flat_values), array("q", flat_offsets)  # flat buffers
    progress.step("made the batch")
    rows = []
    for engine in names:
        with coheriq.using_engine("ragbatch", engine):
            call = functools.partial(pipeline, values, offsets)
            seconds, result = timed_steadily(call, args.repeat, args.min_time)
        rows.append((engine, seconds, result))
        progress.step(engine)

    base_seconds, base_result = rows[0][1], rows[0][2]
    print(
        f"ragbatch pipeline on {args.values:,} values in {args.rows:,} rows "
        "(from_flat, softmax, topk k=5, row_sum, row_mean); same call sites under each engine"
    )
    print(f"{'engine':<10} {'container':<10} {'time':>10} {'speed-up':>9} {'same result':>12}")
    for engine, seconds, result in rows:
        same = max_relative_error(flat_floats(result[:3]), flat_floats(base_result[:3])) <= 1e-12
        print(
            f"{engine:<10} {coheriq.engine_of(result[3]):<10} {seconds * 1e3:>8.1f}ms "
            f"{base_seconds / seconds:>8.1f}x {'yes' if same else 'NO':>12}"
        )
    for engine, reason in skipped.items():
        print(f"{engine:<10} skipped: {reason}")
    verifying = coheriq.explain("ragbatch").verification
    if verifying:  # RAGBATCH_VERIFY: the report comes at exit, on standard error
        print(f"verification {verifying}; the times above include it")
    _say_what_the_program_runs_on()
    return 0


def _say_what_the_program_runs_on() -> None:
    """The global choice outside the blocks above: RAGBATCH_ENGINE, e.g. ``gpu,compiled``.

    A list is an ordered choice, the first of its engines that starts here; on a
    machine without a GPU, ``gpu,compiled`` runs on compiled and says why. On one
    with a GPU, a small batch that the gpu engine declines runs on compiled, and
    the demo says so.
    """
    ragbatch.row_sum(ragbatch.RaggedBatch([[1.0]]))  # the first call outside a block chooses
    explained = coheriq.explain("ragbatch")
    why = explained.reason.split(", settled by")[0]  # not where: a path of this machine's
    print(f"outside the blocks, this program runs on {explained.engine!r} ({why})")
    for engine, outcome in explained.tried:
        print(f"  {engine}: {outcome}")
    # An engine may decline a call it would lose (the gpu engine, a small batch on the
    # host): the next implementation runs it, the next engine of the list first.
    with coheriq.using_engine("ragbatch", coheriq.REFERENCE):
        small = ragbatch.RaggedBatch([[1.0, 2.0], [3.0]])  # on the host
    with coheriq.profile() as profile:
        ragbatch.softmax(small)
    answered = coheriq.explain(ragbatch.softmax, small).answers
    for row in profile.declines:
        print(f"  a batch of 3 values: {row.engine} declined it ({row.reason}); {answered} ran it")


if __name__ == "__main__":
    raise SystemExit(main())
