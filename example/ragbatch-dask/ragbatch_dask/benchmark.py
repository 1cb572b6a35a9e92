"""Dask engine throughput: ``python -m ragbatch_dask.benchmark [--values N] [--rows R]``.

Times softmax and top-k (k=5) on one batch (10^7 values in 10^5 rows by default)
under the single-machine engines and under the dask engine on a local cluster of
1 and of 2 worker processes, and prints values per second and the scaling from 1
to 2 workers. Each dask run starts its own cluster, outside the timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys

CHILD = """
import json, sys, time, statistics
import coheriq, ragbatch
from ragbatch._workload import make_batch

engine, n_values, n_rows, repeat = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
values, offsets = ragbatch.to_flat(make_batch(n_values, n_rows))
out = {}
with coheriq.using_engine("ragbatch", engine):          # starts the cluster, untimed
    batch = ragbatch.from_flat(values, offsets)
    for name, call in [("softmax", lambda: ragbatch.softmax(batch)),
                       ("topk", lambda: ragbatch.topk(batch, 5))]:
        call()  # warm up: imports and workers' first task
        samples = []
        for _ in range(repeat):
            start = time.perf_counter(); call(); samples.append(time.perf_counter() - start)
        out[name] = statistics.median(samples)
print(json.dumps(out))
"""


def run(engine: str, workers: int, args: argparse.Namespace) -> dict[str, float]:
    env = {**os.environ, "RAGBATCH_DASK_WORKERS": str(workers)}
    env.pop("RAGBATCH_DASK_SCHEDULER", None)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, engine, str(args.values), str(args.rows), str(args.repeat)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    import json

    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark ragbatch's dask engine.")
    parser.add_argument("--values", type=int, default=10**7)
    parser.add_argument("--rows", type=int, default=10**5)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    args = parser.parse_args(argv)
    import ragbatch  # noqa: F401 -- the domain, to list its engines

    import coheriq

    local = [e for e in ("numpy", "compiled") if e in coheriq.available_engines("ragbatch")]
    runs = [(e, 0) for e in local] + [("dask", 1), ("dask", 2)]
    results = {}
    for i, (engine, workers) in enumerate(runs, 1):
        label = f"{engine} ({workers} workers)" if workers else engine
        print(f"[{i}/{len(runs)}] {label} ...", file=sys.stderr, flush=True)
        results[label] = run(engine, max(workers, 1), args)
    heading = (
        f"ragbatch on {args.values:,} values in {args.rows:,} rows; Python "
        f"{platform.python_version()}, {os.cpu_count()} CPUs; values per second (median)"
    )
    print(heading)
    print(f"{'engine':<22} {'softmax':>14} {'topk k=5':>14}")
    for label, times in results.items():
        print(
            f"{label:<22} {args.values / times['softmax']:>14.3g} "
            f"{args.values / times['topk']:>14.3g}"
        )
    one, two = results["dask (1 workers)"], results["dask (2 workers)"]
    print(
        f"scaling 1 -> 2 workers: softmax {one['softmax'] / two['softmax']:.2f}x, "
        f"topk {one['topk'] / two['topk']:.2f}x"
    )
    if args.json:
        import json
        import time

        recorded = {"machine": heading, "date": time.strftime("%Y-%m-%d"), "values": args.values}
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({**recorded, "seconds": results}, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
