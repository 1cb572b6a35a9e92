"""Dispatch throughput with 1, 2 and 4 threads: marked calls beside unmarked ones.

On a free-threaded CPython (``python3.13t``) threads run Python code at once, so
marked calls should scale with threads as unmarked calls of a library's functions
do; a reference count or lock that every call touches (on the proxy, the engine,
the domain's state) would make the threads queue instead. Run
``python benchmarks/threads.py [--record DIR] [--quick]``; with the GIL, no case
scales, which the table shows too.

The library is ``threadlib``, laid out as real ones are (everything at module
level: CPython treats nested functions differently). Each case: N threads each
make the same number of calls after a barrier, all calling the same function or
each its own; the figure is the calls of all threads per second, the median of
the rounds, and its ratio to one thread's. The cases: unmarked functions,
candidates on the reference, on an engine chosen globally (methods), and on the
reference with each thread inside its own ``using_engine`` block. Scaling is
bounded by the machine's cores, which the table names.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import sysconfig
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import threadlib

import coheriq

THREADS = (1, 2, 4)


def throughput(
    calls: int, callees: list[Callable[[int], int]], block: Callable[[], object]
) -> float:
    """Calls per second of one thread per item of ``callees``, each making ``calls`` calls
    of its item inside ``block()``."""
    barrier = threading.Barrier(len(callees) + 1)

    def work(call: Callable[[int], int]) -> None:
        with block():  # type: ignore[attr-defined]
            barrier.wait()
            for _ in range(calls):
                call(1)
            barrier.wait()

    workers = [threading.Thread(target=work, args=(call,)) for call in callees]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    barrier.wait()
    elapsed = time.perf_counter() - start
    for worker in workers:
        worker.join()
    return len(callees) * calls / elapsed


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def against_unmarked(rows: list[dict[str, Any]]) -> list[str]:
    """Lines: how each marked case scales from 1 to 2 threads against the unmarked calls
    that share a function as it does (or not), and its single thread's cost."""
    by_case = {row["case"]: row for row in rows}
    lines = ["2 threads / 1, against unmarked calls' (and a single thread's cost):"]
    for row in rows:
        if row["case"].startswith("unmarked"):
            continue
        shared = row["case"].rpartition(", ")[2]
        unmarked = by_case[f"unmarked, {shared}"]
        scaling = (row["2 threads"] / row["1 threads"]) / (
            unmarked["2 threads"] / unmarked["1 threads"]
        )
        cost = unmarked["1 threads"] / row["1 threads"]
        lines.append(f"  {row['case']}: {scaling:.2f} of unmarked's; one thread {cost:.2f}x")
    return lines


def against_the_gil_build(rows: list[dict[str, Any]], gil: dict[str, Any]) -> list[str]:
    """Lines: each case's single-thread cost here against the GIL build's record ``gil``."""
    theirs = {row["case"]: row["1 threads"] for row in gil["rows"]}
    lines = [f"One thread here against Python {gil['python']} with the GIL (time per call):"]
    for row in rows:
        if row["case"] in theirs:
            lines.append(f"  {row['case']}: {theirs[row['case']] / row['1 threads']:.2f}x")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, metavar="DIR", help="write threads-<python>.*")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    parser.add_argument(
        "--gil-build",
        type=Path,
        metavar="JSON",
        help="a record of the same Python with the GIL, whose single thread to compare with",
    )
    args = parser.parse_args(argv)
    calls, rounds = (2_000, 3) if args.quick else (4_000_000, 9)
    coheriq.enable_engine("threadlib_engine", "fast")

    def in_block() -> object:
        return coheriq.using_engine("threadlib_reference", "fast")

    def functions(prefix: str) -> list[Callable[[int], int]]:
        return [getattr(threadlib, f"{prefix}_{i}") for i in range(max(THREADS))]

    cases: dict[str, tuple[list[Callable[[int], int]], Callable[[], object]]] = {
        "unmarked": (functions("plain"), _Nothing),
        "marked, on the reference": (functions("ref"), _Nothing),
        "marked, on an engine (methods)": (functions("eng"), _Nothing),
        "marked, each thread in a block": (functions("ref"), in_block),
    }
    rows = []
    for case, (callees, block) in cases.items():
        for shared in (True, False):
            # Each round measures every thread count in turn, so that a slower spell of
            # the machine falls on all of them rather than on one.
            measured: dict[int, list[float]] = {n: [] for n in THREADS}
            for _ in range(rounds):
                for threads in THREADS:
                    called = [callees[0]] * threads if shared else callees[:threads]
                    measured[threads].append(throughput(calls, called, block))
            name = f"{case}, {'the same function' if shared else 'each its own'}"
            rows.append(
                {"case": name, **{f"{n} threads": statistics.median(measured[n]) for n in THREADS}}
            )

    free_threaded = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))
    gil = getattr(sys, "_is_gil_enabled", lambda: True)()
    python = f"{platform.python_version()}{'t' if free_threaded else ''}"
    title = (
        f"Python {python}, the GIL {'on' if gil else 'off'}, "
        f"{coheriq.proxy_implementation().split()[0]} proxy, {os.cpu_count()} cores; "
        f"{calls} calls per thread, median of {rounds} rounds"
    )
    width = max(len(row["case"]) for row in rows) + 2
    head = f"{'million calls/s (x one thread)':<{width}}" + "".join(
        f"{f'{n} thread' + ('s' if n > 1 else ''):>18}" for n in THREADS
    )
    lines = [title, "", head, "-" * len(head)]
    for row in rows:
        one = row["1 threads"]
        cells = "".join(
            f"{row[f'{n} threads'] / 1e6:>10.2f} ({row[f'{n} threads'] / one:.2f}x)"
            for n in THREADS
        )
        lines.append(f"{row['case']:<{width}}{cells}")
    lines += ["", *against_unmarked(rows)]
    if args.gil_build is not None:
        lines += against_the_gil_build(rows, json.loads(args.gil_build.read_text("utf-8")))
    table = "\n".join(lines)
    print(table)
    if args.record:
        args.record.mkdir(parents=True, exist_ok=True)
        (args.record / f"threads-{python}.txt").write_text(table + "\n", encoding="utf-8")
        summary = {"python": python, "gil": gil, "cores": os.cpu_count(), "rows": rows}
        (args.record / f"threads-{python}.json").write_text(
            json.dumps(summary, indent=2) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
