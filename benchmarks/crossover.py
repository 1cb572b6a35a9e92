"""Mixed workloads under measured crossovers: ``python benchmarks/crossover.py``.

A program rarely calls a library at one size. Here a workload of batches of mixed sizes
runs through the ragbatch example's engines, every configuration in the same run:

* the gpu engine (JAX; on the CPU unless ``--platform gpu``) and the compiled one: 200
  batches on the host of 2^6 to 2^20 values (log-uniform, fixed seed, about 16 values a
  row), each given ``softmax``, ``row_sum`` and ``topk(k=4)``, under compiled alone, gpu
  alone (every call on the device), ``gpu,compiled`` with the gpu engine's calibration
  against compiled in force, and ``gpu,compiled`` at the declared crossover (65,536);
* the numpy engine and the reference: 200 batches of 2^2 to 2^14 values, under the
  reference alone, numpy alone (its declared crossover, 0: every call) and numpy with its
  calibration against the reference in force.

First the script calibrates both engines (:func:`coheriq.calibrate`, as ``coheriq
calibrate`` does) into a temporary ``COHERIQ_CACHE_DIR``, leaving the user's untouched.
Each total is the median of ``--repeats`` runs of the workload, interleaved (a round runs
each configuration once), after one untimed run of each (JAX compiles a program per
shape); every call is waited for.
The table gives each total and its ratio to the faster single engine, and whether the
calibrated list stays within 10% of that engine. Nothing asserts. ``--quick`` is a smoke
run (a few small batches, short calibrations on small sizes); ``--record DIR`` also writes
``DIR/crossover.txt`` and ``DIR/crossover.json``, which holds the calibrations (their
points, as :meth:`coheriq.Calibration.as_dict` gives them) that the docs draw.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import Any

import numpy as np
import ragbatch

import coheriq
from coheriq.testing import frozen_crossovers

BOUND = 1.10  # the calibrated list may take at most this times the faster single engine
CANDIDATES = ("softmax", "row_sum", "topk")  # what the workloads call on every batch
K = 4
ROW_LENGTH = 16  # values per row, on average


@dataclass
class Workload:
    """Batches of ``count`` sizes drawn log-uniformly from 2^low to 2^high values."""

    name: str
    count: int
    low: int
    high: int
    seed: int
    batches: list[Any] = field(default_factory=list)

    def build(self) -> None:
        """Make the batches on the host: the library's own (under the reference)."""
        rng = np.random.default_rng(self.seed)
        sizes = np.exp2(rng.uniform(self.low, self.high, self.count)).astype(np.int64)
        with coheriq.using_engine("ragbatch", "reference"):
            self.batches = [_batch(int(n), rng) for n in sizes]

    @property
    def largest(self) -> int:
        return max(int(batch.offsets[-1]) for batch in self.batches)

    @property
    def values(self) -> int:
        return sum(int(batch.offsets[-1]) for batch in self.batches)

    def describe(self) -> str:
        return (
            f"{self.count} batches of {2**self.low:,} to {2**self.high:,} values (log-uniform, "
            f"seed {self.seed}; {self.values:,} values in all, about {ROW_LENGTH} a row), "
            f"each given softmax, row_sum and topk(k={K})"
        )


@dataclass
class Configuration:
    """A way to run a workload: the engines chosen, and the crossovers in force."""

    name: str
    engines: str | list[str]
    crossovers: Callable[[], AbstractContextManager[Any]]
    single: bool  # one engine alone: a candidate for the faster single engine
    calibrated: bool = False  # the list under test: within BOUND of the faster single engine
    times: list[float] = field(default_factory=list)

    @property
    def total(self) -> float:
        return statistics.median(self.times)


def _batch(n_values: int, rng: np.random.Generator) -> Any:
    """A batch of ``n_values`` normal floats in rows of about ``ROW_LENGTH``, from plain
    floats (under the reference: the library's own batch, as a caller makes it)."""
    rows = max(1, n_values // ROW_LENGTH)
    cuts = np.sort(rng.integers(0, n_values + 1, rows - 1))
    offsets = np.concatenate(([0], cuts, [n_values]))
    return ragbatch.from_flat(rng.normal(0.0, 3.0, n_values).tolist(), offsets.tolist())


def _wait(value: Any) -> None:
    """Wait for a result a device may still compute (JAX returns before it is done)."""
    for item in value if isinstance(value, tuple) else (value,):
        ready = getattr(item, "block_until_ready", None)
        if callable(ready):
            ready()


def run_once(workload: Workload, configuration: Configuration) -> float:
    """Seconds to run ``workload`` under ``configuration``, on new copies of its batches.

    The copies share the values: a new object only, so that an engine's upload, kept
    per batch while it lives, is paid again as on new data (made before the clock starts).
    """
    batches = [copy.copy(batch) for batch in workload.batches]
    with configuration.crossovers(), coheriq.using_engine("ragbatch", configuration.engines):
        # Settle the crossovers (read the calibrations) before the clock: a program pays
        # that once, at its first call, and switching crossovers here unsettles them.
        sample = workload.batches[0]
        for name in CANDIDATES:
            args = (sample, K) if name == "topk" else (sample,)
            coheriq.explain(getattr(ragbatch, name), *args)
        started = perf_counter()
        for batch in batches:
            _wait(ragbatch.softmax(batch))
            _wait(ragbatch.row_sum(batch))
            _wait(ragbatch.topk(batch, K))
        return perf_counter() - started


def off() -> AbstractContextManager[Any]:
    """No crossover in force: each engine runs every call (the engine alone)."""
    return frozen_crossovers("off")


def measured() -> AbstractContextManager[Any]:
    return frozen_crossovers("measured")


def declared() -> AbstractContextManager[Any]:
    return frozen_crossovers("declared")


# -- calibrations ----------------------------------------------------------------------


def quick_calls(
    module: Any, largest: int
) -> dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]]:
    """An engine module's calibration batches (``CALIBRATION_POWERS``, ``calibration_batch``)
    of at most ``largest`` values, per candidate: a short calibration for ``--quick``."""
    sizes = [1 << p for p in module.CALIBRATION_POWERS if 1 << p <= largest]
    with coheriq.using_engine("ragbatch", "reference"):
        batches = [module.calibration_batch(n) for n in sizes]
    calls: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
        name: [((batch,), {}) for batch in batches] for name in CANDIDATES
    }
    calls["topk"] = [((batch, K), {}) for batch in batches]
    return calls


def calibration(
    engine: str,
    against: str,
    budget: float,
    calls: dict[str, Any] | None,
    quick: bool,
    notes: list[str],
) -> coheriq.Calibration | None:
    """The calibration of ``engine`` against ``against``, measured now (stored in the
    calibrations folder of the run). A ``quick`` one that measured nothing is a note (a
    smoke run goes on at the declared crossovers); otherwise that ends the run."""
    print(f"calibrating {engine} against {against} ({budget:g} s) ...", file=sys.stderr)
    try:
        made = coheriq.calibrate(
            "ragbatch",
            engine,
            against=against,
            candidates=CANDIDATES,
            calls=calls,
            budget=budget,
        )
    except coheriq.CoheriqCalibrationError as error:
        if not quick:
            raise
        notes.append(f"note: {engine} is not calibrated, its declared crossovers hold: {error}")
        return None
    return coheriq.Calibration.from_dict(made.as_dict())  # without where it is stored


def prepared(
    workload: Workload, engine: str, against: str, budget: float, quick: bool, notes: list[str]
) -> list[coheriq.Calibration]:
    """Build ``workload``'s batches and calibrate ``engine`` against ``against`` for it
    (on the engine module's small batches only where ``quick``): the calibration made,
    if any, whose range :func:`check_range` checks."""
    import importlib

    workload.build()
    module = importlib.import_module(f"ragbatch_{engine}")
    calls = quick_calls(module, 1 << 10) if quick else None
    made = calibration(engine, against, budget, calls, quick, notes)
    check_range(made, workload, quick, notes)
    return [made] if made is not None else []


def check_range(
    calibrated: coheriq.Calibration | None, workload: Workload, quick: bool, notes: list[str]
) -> None:
    """End the run where the calibration in force does not reach ``workload``'s largest
    batch (a note in a ``quick`` one): its crossovers would be guesses there."""
    if calibrated is None:
        return
    lacking = uncovered(calibrated, workload)
    if lacking:
        message = (
            f"The calibration of {calibrated.engine} in force does not reach the workload's "
            f"largest batch, {workload.largest:,} values: {'; '.join(lacking)}."
        )
        if not quick:
            raise SystemExit(f"{message} Give it a larger budget.")
        notes.append(f"note: {message}")


def uncovered(calibrated: coheriq.Calibration, workload: Workload) -> list[str]:
    """The candidates whose calibration in force does not reach ``workload``'s largest
    batch (a measured crossover holds only over the sizes measured)."""
    sample = copy.copy(workload.batches[0])
    lacking = []
    for name in CANDIDATES:
        row = next((r for r in calibrated.rows if r.candidate == name), None)
        args = (sample, K) if name == "topk" else (sample,)
        with measured(), coheriq.using_engine("ragbatch", calibrated.engine):
            crossovers = coheriq.explain(getattr(ragbatch, name), *args).crossovers
        in_force = any("measured on this machine" in line for line in crossovers)
        if row is None or not in_force or row.points[-1][0] < workload.largest:
            largest = "not measured" if row is None else f"measured up to {row.points[-1][0]:,}"
            lacking.append(f"{name} ({largest}; {'; '.join(crossovers) or 'no crossover'})")
    return lacking


# -- the run ---------------------------------------------------------------------------


def seconds(value: float) -> str:
    return f"{value * 1e3:.1f} ms" if value < 1 else f"{value:.3f} s"


def table(workload: Workload, configurations: list[Configuration]) -> tuple[str, dict[str, Any]]:
    """The workload's table, and its figures for the JSON."""
    fastest = min(c.total for c in configurations if c.single)
    width = max(len(c.name) for c in configurations) + 2
    lines = [
        f"{workload.name}: {workload.describe()}",
        f"{'configuration':<{width}} {'total':>11} {'x faster single':>16}",
    ]
    rows = []
    verdict = "fail"
    for c in configurations:
        ratio = c.total / fastest
        note = ""
        if c.calibrated:
            verdict = "pass" if ratio <= BOUND else "fail"
            note = f"  (<= {BOUND:.2f}x: {verdict})"
        lines.append(f"{c.name:<{width}} {seconds(c.total):>11} {ratio:>15.2f}x{note}")
        rows.append(
            {
                "configuration": c.name,
                "engines": c.engines,
                "total_s": c.total,
                "runs_s": c.times,
                "ratio": ratio,
            }
        )
    lines.append(f"calibrated list <= faster single engine + {BOUND - 1:.0%}: {verdict.upper()}")
    figures = {
        "workload": workload.name,
        "description": workload.describe(),
        "largest": workload.largest,
        "values": workload.values,
        "configurations": rows,
        "faster_single_s": fastest,
        "bound": BOUND,
        "verdict": verdict,
    }
    return "\n".join(lines), figures


def available(engine: str) -> bool:
    return engine in coheriq.available_engines("ragbatch")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Mixed workloads under measured crossovers.")
    parser.add_argument("--quick", action="store_true", help="a smoke run: small and short")
    parser.add_argument("--repeats", type=int, default=None, help="timed runs of each (5)")
    parser.add_argument("--gpu-budget", type=float, default=None, help="seconds (180)")
    parser.add_argument("--numpy-budget", type=float, default=None, help="seconds (60)")
    parser.add_argument("--platform", default=None, help="the gpu engine's JAX platform (cpu)")
    parser.add_argument(
        "--record", type=Path, metavar="DIR", help="also write crossover.txt and .json here"
    )
    args = parser.parse_args(argv)
    quick = args.quick
    repeats = args.repeats or (3 if quick else 5)
    if args.platform or not os.environ.get("RAGBATCH_GPU_PLATFORM"):
        os.environ["RAGBATCH_GPU_PLATFORM"] = args.platform or "cpu"  # read as the engine starts
    folder = tempfile.TemporaryDirectory(prefix="coheriq-crossover-")
    os.environ["COHERIQ_CACHE_DIR"] = folder.name  # the user's calibrations stay as they are

    with_gpu = available("gpu") and available("compiled")
    jax_line = ""
    if with_gpu:
        import jax

        jax_line = f"; JAX {jax.__version__} on {os.environ['RAGBATCH_GPU_PLATFORM']}"
    heading = (
        f"crossover benchmark: coheriq {coheriq.__version__}, Python "
        f"{platform.python_version()} ({platform.python_implementation()}), "
        f"{platform.machine()}, {os.cpu_count()} CPUs{jax_line}"
        f"{', --quick' if quick else ''}; median of {repeats} interleaved runs"
    )
    print(heading)

    gpu_load = Workload("gpu and compiled", 12 if quick else 200, 6, 10 if quick else 20, 0)
    numpy_load = Workload("numpy and reference", 12 if quick else 200, 2, 10 if quick else 14, 1)
    plans: list[tuple[Workload, list[Configuration]]] = []
    calibrated: list[coheriq.Calibration] = []
    lines: list[str] = []
    with folder:
        if available("numpy"):
            budget = args.numpy_budget or (4.5 if quick else 60.0)
            calibrated += prepared(numpy_load, "numpy", "reference", budget, quick, lines)
            plans.append(
                (
                    numpy_load,
                    [
                        Configuration("reference alone", "reference", declared, True),
                        Configuration("numpy alone (declared: 0)", "numpy", declared, True),
                        Configuration("numpy, calibrated", "numpy", measured, False, True),
                    ],
                )
            )
        else:
            lines.append("numpy and reference: not run, the numpy engine is not installed")
        if with_gpu:
            import ragbatch_gpu

            budget = args.gpu_budget or (9.0 if quick else 180.0)
            calibrated += prepared(gpu_load, "gpu", "compiled", budget, quick, lines)
            both = ["gpu", "compiled"]
            default = f"{ragbatch_gpu.MIN_VALUES:,}"
            plans.append(
                (
                    gpu_load,
                    [
                        Configuration("compiled alone", "compiled", declared, True),
                        Configuration("gpu alone", "gpu", off, True),
                        Configuration("gpu,compiled, calibrated", both, measured, False, True),
                        Configuration(f"gpu,compiled, declared ({default})", both, declared, False),
                    ],
                )
            )
        else:
            lines.append(
                "gpu and compiled: not run, the gpu engine (JAX) or the compiled engine is "
                "not installed"
            )
        for workload, configurations in plans:  # one untimed run of each: JAX compiles
            for configuration in configurations:
                run_once(workload, configuration)
        for round_ in range(repeats):
            print(f"round {round_ + 1}/{repeats} ...", file=sys.stderr, flush=True)
            for workload, configurations in plans:
                for configuration in configurations:
                    configuration.times.append(run_once(workload, configuration))

    figures = []
    for workload, configurations in plans:
        text, numbers = table(workload, configurations)
        lines += ["", text]
        figures.append(numbers)
    lines += ["", "calibrations in force (measured in this run):"]
    for made in calibrated:
        lines += ["", str(made)]
    report = "\n".join(lines)
    print(report)
    if args.record:
        args.record.mkdir(parents=True, exist_ok=True)
        text_file = args.record / "crossover.txt"
        text_file.write_text(f"{heading}\n{report}\n", encoding="utf-8")
        data = {
            "machine": heading,
            "date": time.strftime("%Y-%m-%d"),
            "quick": quick,
            "repeats": repeats,
            "workloads": figures,
            "calibrations": [made.as_dict() for made in calibrated],
        }
        (args.record / "crossover.json").write_text(
            json.dumps(data, indent=1) + "\n", encoding="utf-8"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
