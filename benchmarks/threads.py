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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--record", type=Path, metavar="DIR", help="write threads-<python>.*")
    parser.add_argument("--quick", action="store_true", help="a smoke run")
    args = parser.parse_args(argv)
    calls, rounds = (2_000, 3) if args.quick else (2_000_000, 7)
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
            figures = {}
            for threads in THREADS:
                called = [callees[0]] * threads if shared else callees[:threads]
                figures[threads] = statistics.median(
                    throughput(calls, called, block) for _ in range(rounds)
                )
            name = f"{case}, {'the same function' if shared else 'each its own'}"
            rows.append({"case": name, **{f"{n} threads": figures[n] for n in THREADS}})

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
