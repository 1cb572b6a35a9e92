"""Benchmark ragbatch's engines: ``python -m ragbatch.benchmark [--values N] [--rows R]``.

Each function runs on the same batch (10^6 values in 10^4 rows by default) under
every installed engine, through the same call sites; the table shows the median
time, the speed-up over the reference and the largest relative difference from
the reference's result. Targets: compiled at least 30x the reference for softmax
and topk, numpy at least 10x, all within 1e-12. ``--json FILE`` also writes the
figures to FILE (the documentation's charts are drawn from such a file).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import time

import ragbatch

import coheriq

from ._workload import Progress, engines, flat_floats, make_batch, max_relative_error, timed

TARGETS = {
    ("compiled", "softmax"): 30,
    ("compiled", "topk"): 30,
    ("numpy", "softmax"): 10,
    ("numpy", "topk"): 10,
}


def _topk(batch, *, k):
    return ragbatch.topk(batch, k)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark ragbatch's engines.")
    parser.add_argument("--values", type=int, default=10**6)
    parser.add_argument("--rows", type=int, default=10**4)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args(argv)
    batch = make_batch(args.values, args.rows)
    functions = {
        "softmax": ragbatch.softmax,
        "topk": functools.partial(_topk, k=args.k),
        "row_sum": ragbatch.row_sum,
        "row_mean": ragbatch.row_mean,
    }
    skipped: dict[str, str] = {}
    names = engines(skipped)
    progress = Progress(len(names) * len(functions))
    times: dict[tuple[str, str], float] = {}
    results: dict[tuple[str, str], list[float]] = {}
    for engine in names:
        with coheriq.using_engine("ragbatch", engine):
            local = ragbatch.from_flat(*ragbatch.to_flat(batch))  # in the engine's container
            for name, function in functions.items():
                # The reference is slow and steady: three runs give its median.
                repeat = min(3, args.repeat) if engine == coheriq.REFERENCE else args.repeat
                times[engine, name], result = timed(functools.partial(function, local), repeat)
                results[engine, name] = flat_floats(result)
                progress.step(f"{engine} {name}")
    heading = (
        f"ragbatch benchmark: {args.values:,} values in {args.rows:,} rows, k={args.k}; "
        f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(heading)
    figures: list[dict[str, object]] = []
    print(
        f"{'function':<9} {'engine':<10} {'median':>10} {'speed-up':>9} {'target':>7} "
        f"{'max rel. diff':>14}"
    )
    for name in functions:
        base = times[coheriq.REFERENCE, name]
        want = results[coheriq.REFERENCE, name]
        for engine in names:
            speedup = base / times[engine, name]
            target = TARGETS.get((engine, name))
            target_text = f">={target}x" if target else ""
            diff = max_relative_error(results[engine, name], want)
            figures.append(
                {"function": name, "engine": engine, "seconds": times[engine, name]}
                | {"speedup": speedup, "target": target, "max_rel_diff": diff}
            )
            print(
                f"{name:<9} {engine:<10} {times[engine, name] * 1e3:>8.2f}ms "
                f"{speedup:>8.1f}x {target_text:>7} {diff:>14.1e}"
            )
    for engine, reason in skipped.items():
        print(f"{engine} skipped: {reason}")
    if args.json:
        run = {"machine": heading, "date": time.strftime("%Y-%m-%d"), "rows": figures}
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({**run, "skipped": skipped}, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
