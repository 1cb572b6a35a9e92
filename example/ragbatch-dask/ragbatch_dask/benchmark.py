"""A five-step pipeline under each way of running it: ``python -m ragbatch_dask.benchmark``.

from_flat -> softmax -> topk -> row_sum -> to_flat, on 10^7 values in 10^5 rows
by default, run by:

- ``compiled``: the compiled engine, in this process;
- ``shipping (N workers)``: the dask engine as it was (``_shipping.py``), which
  ships every chunk to the workers inside its task and gathers every result back;
- ``dask (N workers)``: the dask engine, whose rows stay on the workers;
- with ``--earlier DIR``, ``dask at COMMIT (2 workers)``: the dask engine of an
  earlier checkout of this repository in DIR (``git worktree add DIR COMMIT``,
  then build its compiled engine in place), its packages first on the path and
  its own kernels, so that a new engine is measured against the one it replaces
  as that one was.

Each runs in a process of its own (with its own ``LocalCluster`` on 127.0.0.1)
and repeats the pipeline. ``--rounds`` runs every way that many times, one
after the other in turn (forwards, then backwards, and so on), so that a shared
machine's slow minutes fall on all of them alike; the ratio of the dask engine to
the shipping one is worked out in each round, from figures measured minutes
apart at most, and reported as the median over the rounds with their range. The
table shows each step's median time over every repetition of every round
(waiting for the step's chunks to be computed, as dask computes in the
background), the total of the steps, the median time of the pipeline end to end
(run as a program runs it, without waiting between steps), each with the fastest
and slowest repetition's, and the bytes each step moved, read from
dask's own accounting: what the workers sent (each worker's
``transfer_outgoing_log``, split into what went to the client, through the
scheduler, and what went to other workers) and what the client sent (the
``nbytes`` dask records for scattered chunks; for the shipping engine, dask's
``sizeof`` of the chunks it put inside tasks). ``--json FILE`` also writes the
figures (the documentation's chart is drawn from such a file).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Any

STEPS = ["from_flat", "softmax", "topk", "row_sum", "to_flat"]

CHILD = """
import json, sys
from ragbatch_dask.benchmark import child
print(json.dumps(child(*sys.argv[1:])))
"""

# For --earlier: this file's child, run with an earlier checkout's packages first on
# the path (its ragbatch_dask has a benchmark of its own, or none).
CHILD_OF_FILE = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("pipeline_benchmark", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(json.dumps(module.child(*sys.argv[2:])))
"""

# Where a checkout of this repository keeps the packages the pipeline imports.
CHECKOUT_PACKAGES = [
    ".",
    "example/ragbatch",
    "example/ragbatch-numpy",
    "example/ragbatch-compiled",
    "example/ragbatch-dask",
]


def _worker_log(dask_worker: Any) -> list[tuple[str | None, int]]:
    return [(entry["who"], int(entry["total"])) for entry in dask_worker.transfer_outgoing_log]


class Ledger:
    """Bytes moved since the last look, from the workers' logs and the client's count."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.seen = client.run(_worker_log)

    def moved(self, sent: int) -> dict[str, int]:
        now = self.client.run(_worker_log)
        workers = set(now)
        out = {"to_workers": sent, "to_client": 0, "between_workers": 0}
        for address, entries in now.items():
            for who, total in entries[len(self.seen.get(address, [])) :]:
                out["between_workers" if who in workers else "to_client"] += total
        self.seen = now
        return out


def _pipeline(
    engine: Any, values: Any, offsets: Any, k: int, state: dict[str, Any]
) -> list[tuple[str, Any]]:
    """The steps, as (name, thunk) pairs; each keeps its result in ``state``."""

    def step(name: str, run: Any) -> tuple[str, Any]:
        return name, lambda: state.__setitem__(name, run())

    return [
        step("from_flat", lambda: engine.from_flat(values, offsets)),
        step("softmax", lambda: engine.softmax(state["from_flat"])),
        step("topk", lambda: engine.topk(state["softmax"], k)),
        step("row_sum", lambda: engine.row_sum(state["topk"][1])),
        step("to_flat", lambda: engine.to_flat(state["topk"][1])),
    ]


def _computed(result: Any) -> None:
    """Wait until the chunks of ``result`` (a batch, or a tuple of them) are computed."""
    for batch in result if isinstance(result, tuple) else (result,):
        if callable(getattr(batch, "computed", None)):
            batch.computed()


def _scattered_bytes(client: Any, result: Any) -> int:
    futures = getattr(result, "futures", [])
    if not futures:
        return 0
    return int(sum(client.nbytes(keys=[f.key for f in futures], summary=False).values()))


def child(way: str, workers: str, n_values: str, n_rows: str, repeat: str) -> dict[str, Any]:
    """Run the pipeline ``repeat`` times one way; medians per step, bytes of the last run."""
    import numpy as np
    import ragbatch
    from ragbatch._workload import make_batch

    import coheriq

    batch = make_batch(int(n_values), int(n_rows))
    # Arrays, as data of this size comes: from_flat then measures the engines, not
    # the conversion of ten million Python floats.
    values, offsets = np.asarray(batch.values), np.asarray(batch.offsets, dtype=np.int64)
    client, engine = None, None
    if way == "compiled":
        coheriq.enable_engine("ragbatch", "compiled")
        engine = coheriq.resolve_impl(ragbatch.softmax).__self__
    elif way in ("dask", "earlier"):
        os.environ["RAGBATCH_DASK_WORKERS"] = workers
        os.environ.pop("RAGBATCH_DASK_SCHEDULER", None)
        coheriq.enable_engine("ragbatch", "dask")
        engine = coheriq.resolve_impl(ragbatch.softmax).__self__
        # An earlier engine ships its chunks inside its tasks, which dask's accounting
        # of transfers does not see: its bytes are not counted, rather than miscounted.
        client = engine.client if way == "dask" else None
    else:
        from distributed import Client, LocalCluster

        from ._shipping import ShippingEngine

        cluster = LocalCluster(
            n_workers=int(workers), threads_per_worker=1, host="127.0.0.1", dashboard_address=None
        )
        client = Client(cluster)
        engine = ShippingEngine(client)
    times: dict[str, list[float]] = {name: [] for name in STEPS}
    moved: dict[str, dict[str, int]] = {}
    for _ in range(int(repeat)):
        ledger = Ledger(client) if client is not None else None
        state: dict[str, Any] = {}
        for name, run in _pipeline(engine, values, offsets, 5, state):
            shipped_before = getattr(engine, "shipped_bytes", 0)
            start = time.perf_counter()
            run()
            _computed(state[name])  # dask computes in the background: wait, to time the step
            times[name].append(time.perf_counter() - start)
            if ledger is not None:
                sent = getattr(engine, "shipped_bytes", 0) - shipped_before
                if name == "from_flat":
                    sent += _scattered_bytes(client, state["from_flat"])
                moved[name] = ledger.moved(sent)
    # End to end: the five steps one after the other, as a program runs them, with no
    # wait between them (the last one, to_flat, brings its data back).
    whole = []
    for _ in range(int(repeat)):
        start = time.perf_counter()
        for _name, run in _pipeline(engine, values, offsets, 5, {}):
            run()
        whole.append(time.perf_counter() - start)
    return {
        "seconds": {n: statistics.median(t) for n, t in times.items()},
        "steps_all": times,
        "end_to_end": statistics.median(whole),
        # Every repetition, for the spread: this machine is shared, and a run's
        # slowest repetitions say more about it than about the engine.
        "totals": [sum(step) for step in zip(*times.values(), strict=True)],
        "end_to_end_all": whole,
        "moved": moved,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="The five-step pipeline under each engine.")
    parser.add_argument("--values", type=int, default=10**7)
    parser.add_argument("--rows", type=int, default=10**5)
    parser.add_argument("--repeat", type=int, default=3, help="repetitions a way, a round")
    parser.add_argument("--rounds", type=int, default=1, help="times to run every way, in turn")
    parser.add_argument("--json", metavar="FILE", help="also write the figures to FILE")
    parser.add_argument(
        "--earlier",
        metavar="DIR",
        help="also run the dask engine of an earlier checkout of this repository (its "
        "compiled engine built in place), on 2 workers, and compare",
    )
    args = parser.parse_args(argv)
    for name in ("repeat", "rounds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be at least 1, not {getattr(args, name)}")
    ways = [("compiled", 0), ("shipping", 1), ("shipping", 2), ("dask", 1), ("dask", 2)]
    labels = {(way, workers): _label(way, workers) for way, workers in ways}
    environments: dict[tuple[str, int], dict[str, str]] = {}
    if args.earlier is not None:
        ways.append(("earlier", 2))
        labels["earlier", 2] = f"dask at {_checkout_name(args.earlier)} (2 workers)"
        environments["earlier", 2] = _checkout_environment(parser, args.earlier)
    rounds: list[dict[str, Any]] = []
    for r in range(args.rounds):
        ordered = ways if r % 2 == 0 else ways[::-1]
        rounds.append({})
        for i, (way, workers) in enumerate(ordered, 1):
            label = labels[way, workers]
            print(
                f"[round {r + 1}/{args.rounds}, {i}/{len(ways)}] {label} ...",
                file=sys.stderr,
                flush=True,
            )
            command = [sys.executable, "-c", CHILD]
            if (way, workers) in environments:
                command = [sys.executable, "-c", CHILD_OF_FILE, os.path.abspath(__file__)]
            command += [way, str(workers), str(args.values), str(args.rows), str(args.repeat)]
            done = subprocess.run(
                command,
                capture_output=True,
                text=True,
                check=True,
                env=environments.get((way, workers)),
            )
            rounds[-1][label] = json.loads(done.stdout.strip().splitlines()[-1])
    results = {label: pooled([one[label] for one in rounds]) for label in labels.values()}
    heading = (
        f"ragbatch pipeline on {args.values:,} values in {args.rows:,} rows (top-5); Python "
        f"{platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs; "
        f"{args.rounds} round{'s' if args.rounds > 1 else ''} of {args.repeat}"
    )
    ours = labels["dask", 2]
    ratios = {
        labels[base]: [ratio(one, labels[base], ours) for one in rounds]
        for base in [("shipping", 2), ("earlier", 2)]
        if base in labels
    }
    print(heading)
    print(render(results, ratios))
    if args.json:
        recorded = {"machine": heading, "date": time.strftime("%Y-%m-%d"), "values": args.values}
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({**recorded, "runs": results, "ratios": ratios}, out, indent=2)
    return 0


def _label(way: str, workers: int) -> str:
    return f"{way} ({workers} worker{'s' if workers > 1 else ''})" if workers else way


def pooled(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """One way's figures over every round: medians of all the repetitions, the last bytes."""
    times = {name: [t for run in runs for t in run["steps_all"][name]] for name in STEPS}
    whole = [t for run in runs for t in run["end_to_end_all"]]
    return {
        "seconds": {name: statistics.median(t) for name, t in times.items()},
        "end_to_end": statistics.median(whole),
        "totals": [total for run in runs for total in run["totals"]],
        "end_to_end_all": whole,
        "moved": runs[-1]["moved"],  # the same in every round: dask's accounting of bytes
    }


def _checkout_name(folder: str) -> str:
    """The commit checked out in ``folder`` (short), or the folder's name."""
    done = subprocess.run(
        ["git", "-C", folder, "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return (
        done.stdout.strip() if done.returncode == 0 else os.path.basename(os.path.abspath(folder))
    )


def _checkout_environment(parser: argparse.ArgumentParser, folder: str) -> dict[str, str]:
    """This environment, with the packages of the checkout in ``folder`` first on the path."""
    if not os.path.isdir(os.path.join(folder, "coheriq")):
        parser.error(f"--earlier {folder}: not a checkout of this repository (no coheriq/ in it)")
    compiled = os.path.join(folder, "example", "ragbatch-compiled", "ragbatch_compiled")
    if os.path.isdir(compiled) and not any(
        n.startswith("_kernels.") and not n.endswith(".c") for n in os.listdir(compiled)
    ):
        parser.error(
            f"--earlier {folder}: its compiled engine is not built; build it in place first: "
            f"(cd {os.path.dirname(compiled)} && python setup.py build_ext --inplace)"
        )
    paths = [os.path.abspath(os.path.join(folder, p)) for p in CHECKOUT_PACKAGES]
    paths = [p for p in paths if os.path.isdir(p)]
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


def ratio(one_round: dict[str, Any], base_label: str, ours_label: str) -> dict[str, float]:
    """How many times faster ``ours_label`` ran than ``base_label`` in one round."""
    base, ours = one_round[base_label], one_round[ours_label]
    return {
        "step_by_step": sum(base["seconds"].values()) / sum(ours["seconds"].values()),
        "end_to_end": base["end_to_end"] / ours["end_to_end"],
    }


def _mb(n: int) -> str:
    return f"{n / 1e6:.1f}"


def _spread(seconds: list[float]) -> str:
    """The fastest and slowest repetition, in milliseconds."""
    return f"(runs {min(seconds) * 1e3:.0f}-{max(seconds) * 1e3:.0f})"


def render(results: dict[str, Any], ratios: dict[str, list[dict[str, float]]]) -> str:
    """The table: per way, each step's milliseconds and MB moved (to workers / back / between).

    Then the dask engine against each baseline (``ratios``, by its label): the
    median of the rounds' ratios, with their range where there are several.
    """
    width = max(22, *(len(label) for label in results))
    lines = [
        f"{'engine':<{width}} {'step':<10} {'ms':>9}  {'MB to workers':>13} {'MB back':>8} "
        f"{'MB between':>10}"
    ]
    for label, run in results.items():
        for name in STEPS:
            moved = run["moved"].get(name)
            figures = (
                f"{_mb(moved['to_workers']):>13} {_mb(moved['to_client']):>8} "
                f"{_mb(moved['between_workers']):>10}"
                if moved
                else f"{'-':>13} {'-':>8} {'-':>10}"
            )
            lines.append(
                f"{label:<{width}} {name:<10} {run['seconds'][name] * 1e3:>9.1f}  {figures}"
            )
        total = sum(run["seconds"].values())
        lines.append(
            f"{label:<{width}} {'total':<10} {total * 1e3:>9.1f}  {_spread(run['totals'])}"
        )
        lines.append(
            f"{label:<{width}} {'end to end':<10} {run['end_to_end'] * 1e3:>9.1f}  "
            f"{_spread(run['end_to_end_all'])}"
        )
    for base, each_round in ratios.items():
        said = []
        for kind, words in (("step_by_step", "faster step by step"), ("end_to_end", "end to end")):
            each = [r[kind] for r in each_round]
            said.append(f"{statistics.median(each):.1f}x {words}")
            if len(each) > 1:
                said[-1] += f" (rounds {min(each):.1f}x-{max(each):.1f}x)"
        rounds = f"; medians of {len(each_round)} rounds" if len(each_round) > 1 else ""
        lines.append(
            f"dask against {base.replace(' (2 workers)', '')}, 2 workers: {', '.join(said)}{rounds}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
