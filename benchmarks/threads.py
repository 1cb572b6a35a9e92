"""Dispatch throughput with 1, 2 and 4 threads: calls through proxies beside direct calls.

On a free-threaded CPython (``python3.13t``) threads run Python code at once, so
calls through coheriq's proxies should scale with threads as direct calls of the
same function do; a reference count or lock that every call touches (on the
proxy, its cells, the domain's state) would make the threads queue instead. Run
``python benchmarks/threads.py [--record DIR] [--quick]``; with the GIL, no case
scales, which the table shows too.

Each case: N threads each make the same number of calls after a barrier; the
figure is the calls of all threads per second, the median of the rounds, and
its ratio to one thread's. The cases are a direct call of a function that each
thread has a copy of (what the machine allows, nothing shared), a direct call of
the implementation that all threads share, a marked candidate on the reference
and on an engine, and a call inside a ``using_engine`` block that each thread
enters. Scaling is bounded by the machine's cores, which the table names.
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
from types import FunctionType

import coheriq

THREADS = (1, 2, 4)


def make_domain(name: str, engine: str) -> tuple[Callable[[int], int], Callable[[int], int]]:
    """A domain with one candidate and an engine ``fast`` for it, on ``engine``.

    Returns the marked candidate and its reference implementation.
    """
    domain = coheriq.AccelerationDomain(name)

    @domain.acceleration_candidate
    def identity(x: int) -> int:
        return x

    domain.materialize()

    class Fast(coheriq.engine_class(domain), name="fast"):  # type: ignore[misc]
        def identity(self, x: int) -> int:
            return x

    coheriq.enable_engine(name, engine)
    return identity, identity.__wrapped__


def throughput(
    threads: int,
    calls: int,
    callee: Callable[[], Callable[[int], int]],
    block: Callable[[], object],
) -> float:
    """Calls per second of ``threads`` threads, each making ``calls`` calls in ``block()``.

    Each thread calls what ``callee()`` gives it.
    """
    barrier = threading.Barrier(threads + 1)

    def work() -> None:
        call = callee()
        with block():  # type: ignore[attr-defined]
            barrier.wait()
            for _ in range(calls):
                call(1)
            barrier.wait()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    barrier.wait()
    start = time.perf_counter()
    barrier.wait()
    elapsed = time.perf_counter() - start
    for worker in workers:
        worker.join()
    return threads * calls / elapsed


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
    calls, rounds = (2_000, 3) if args.quick else (300_000, 7)

    on_reference, impl = make_domain("threads_reference", coheriq.REFERENCE)
    on_engine, _ = make_domain("threads_engine", "fast")
    nothing = _Nothing

    def own_copy() -> Callable[[int], int]:  # what no other thread touches
        return FunctionType(impl.__code__, impl.__globals__)  # type: ignore[attr-defined]

    cases: dict[str, tuple[Callable[[], Callable[[int], int]], Callable[[], object]]] = {
        # What the machine allows: nothing shared between the threads.
        "direct call, each thread its own function": (own_copy, nothing),
        "direct call of the implementation": (lambda: impl, nothing),
        "marked, on the reference": (lambda: on_reference, nothing),
        "marked, on an engine": (lambda: on_engine, nothing),
        "marked, inside using_engine": (
            lambda: on_reference,
            lambda: coheriq.using_engine("threads_reference", "fast"),
        ),
    }
    rows = []
    for case, (callee, block) in cases.items():
        figures = {}
        for threads in THREADS:
            figures[threads] = statistics.median(
                throughput(threads, calls, callee, block) for _ in range(rounds)
            )
        rows.append({"case": case, **{f"{n} threads": figures[n] for n in THREADS}})

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
