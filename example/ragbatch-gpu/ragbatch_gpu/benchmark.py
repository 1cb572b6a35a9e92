"""GPU engine benchmark: ``python -m ragbatch_gpu.benchmark [--values N] [--rows R]``.

Segmented softmax over 10^8 float64 values in 10^5 rows of random lengths (by
default), through the same call site under the gpu engine and under the compiled
CPU engine (numpy if compiled is not installed) on the same machine. It prints the
median time per call, the memory bandwidth the gpu engine achieves (the bytes a
softmax must move, one read and one write of each value, over the time) as a
fraction of the device's peak, the speed-up over the CPU engine, and the largest
relative difference between their results. Targets: at least 50% of peak, and at
least 20x the compiled engine.

``--crossover`` measures instead where the gpu engine starts to win on batches
on the host (each call uploads its batch, as a call the engine may decline does):
it runs :func:`coheriq.calibrate` of the gpu engine against the CPU engine on the
engine's calibration batches (``--largest N`` keeps those of at most N values,
``--candidate NAME`` one function; ``--budget`` seconds in all), prints the table
and, per function, the size from which the gpu engine is faster. It keeps nothing
unless ``--store`` is given, which puts the crossovers in force on this machine
(as ``coheriq calibrate ragbatch gpu --against compiled`` does).

The device's peak bandwidth comes from a table of known GPUs, or ``--peak-gbs``.
``--platform cpu`` runs the gpu engine's programs on JAX's CPU backend (a smoke
test; there is no peak to compare with), and ``--softmax pallas|xla`` chooses the
engine's softmax kernel (by default pallas on a GPU, xla elsewhere).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
import ragbatch
from ragbatch._workload import timed

import coheriq
import ragbatch_gpu

# Peak memory bandwidth in GB/s, by a part of the name JAX gives the device.
PEAK_GBS = {
    "H200": 4800,
    "H100 PCIe": 2000,
    "H100": 3350,
    "A100-SXM4-80GB": 2039,
    "A100 80GB PCIe": 1935,
    "A100": 1555,
    "L40S": 864,
    "L4": 300,
    "V100": 900,
}
BANDWIDTH_TARGET = 0.5
SPEEDUP_TARGET = 20


def peak_gbs(device_kind: str) -> float | None:
    for name, peak in PEAK_GBS.items():  # the more specific names come first
        if name in device_kind:
            return float(peak)
    return None


def warm_then_timed(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """One untimed call (compiles, starts the engine), then ragbatch's ``timed``."""
    call()
    return timed(call, repeat)


def make_flat(n_values: int, n_rows: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n_values`` normal floats (sd 3) in ``n_rows`` rows cut at random places."""
    rng = np.random.default_rng(seed)
    cuts = np.sort(rng.integers(0, n_values + 1, n_rows - 1))
    return rng.normal(0.0, 3.0, n_values), np.concatenate(([0], cuts, [n_values]))


def calibration_calls(
    largest: int | None,
) -> dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]]:
    """The gpu engine's calibration calls (its crossover's inputs) on batches of at most
    ``largest`` values (all of them for None), per function, made under the reference."""
    sizes = [1 << p for p in ragbatch_gpu.CALIBRATION_POWERS]
    kept = [n for n in sizes if largest is None or n <= largest]
    with coheriq.using_engine("ragbatch", "reference"):
        batches = [ragbatch_gpu.calibration_batch(n) for n in kept]
    calls: dict[str, list[tuple[tuple[Any, ...], dict[str, Any]]]] = {
        name: [((batch,), {}) for batch in batches] for name in ("softmax", "row_sum", "row_mean")
    }
    calls["topk"] = [((batch, 4), {}) for batch in batches]
    return calls


def crossover(
    cpu: str,
    budget: float,
    largest: int | None = None,
    candidates: list[str] | None = None,
    store: bool = False,
) -> int:
    """Calibrate the gpu engine against ``cpu`` on host batches; print the table and where
    the gpu engine starts to win, per function."""
    calibration = coheriq.calibrate(
        "ragbatch",
        "gpu",
        against=cpu,
        candidates=candidates,
        calls=calibration_calls(largest),
        budget=budget,
        store=store,
    )
    print(calibration)
    for row in calibration.rows:
        if row.crossover is not None:
            where = f"from {row.crossover:,} values"
        elif row.threshold == 0:
            where = f"at every size measured, from {row.points[0][0]:,} values"
        else:
            where = f"at no size measured, up to {row.points[-1][0]:,} values"
        print(
            f"{row.candidate}: the gpu engine (uploading each batch) is faster than the "
            f"{cpu} engine {where}"
        )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark ragbatch's gpu engine.")
    parser.add_argument("--values", type=int, default=10**8)
    parser.add_argument("--rows", type=int, default=10**5)
    parser.add_argument("--repeat", type=int, default=20, help="timed calls on the device")
    parser.add_argument("--cpu-repeat", type=int, default=3, help="timed calls on the CPU")
    parser.add_argument("--platform", default=None, help="a JAX platform (default: gpu)")
    parser.add_argument("--peak-gbs", type=float, default=None, help="the device's peak GB/s")
    parser.add_argument(
        "--softmax", choices=["pallas", "xla"], default=None, help="the gpu engine's kernel"
    )
    parser.add_argument(
        "--crossover", action="store_true", help="where the gpu engine starts to win"
    )
    parser.add_argument(
        "--budget", type=float, default=120.0, help="--crossover: seconds to measure, in all"
    )
    parser.add_argument(
        "--largest", type=int, default=None, help="--crossover: batches of at most N values"
    )
    parser.add_argument(
        "--candidate",
        action="append",
        default=None,
        help="--crossover: only this function (repeatable; default: every one)",
    )
    parser.add_argument(
        "--store", action="store_true", help="--crossover: keep the crossovers measured"
    )
    args = parser.parse_args(argv)
    # Read when the engine starts, at the first using_engine below.
    if args.platform:
        os.environ["RAGBATCH_GPU_PLATFORM"] = args.platform
    if args.softmax:
        os.environ["RAGBATCH_GPU_SOFTMAX"] = args.softmax
    if args.crossover:
        cpu = "compiled" if "compiled" in coheriq.available_engines("ragbatch") else "numpy"
        return crossover(cpu, args.budget, args.largest, args.candidate, args.store)

    values, offsets = make_flat(args.values, args.rows)
    print(f"[1/2] gpu engine, {args.repeat} calls ...", file=sys.stderr, flush=True)
    with coheriq.using_engine("ragbatch", "gpu"):
        engine = coheriq.resolve_impl(ragbatch.softmax).__self__
        batch = ragbatch.from_flat(values, offsets)  # uploaded once, outside the timing
        gpu_seconds, gpu_result = warm_then_timed(
            lambda: ragbatch.softmax(batch).block_until_ready(), args.repeat
        )
    cpu = "compiled" if "compiled" in coheriq.available_engines("ragbatch") else "numpy"
    print(f"[2/2] {cpu} engine, {args.cpu_repeat} calls ...", file=sys.stderr, flush=True)
    with coheriq.using_engine("ragbatch", cpu):
        batch = ragbatch.from_flat(values, offsets)
        cpu_seconds, cpu_result = warm_then_timed(lambda: ragbatch.softmax(batch), args.cpu_repeat)

    got, want = np.asarray(gpu_result.values), np.asarray(cpu_result.values, dtype=np.float64)
    difference = float(np.max(np.abs(got - want) / np.maximum(np.abs(want), 1e-300)))
    moved = 2 * 8 * args.values  # read each float64 once, write each once
    gbs = moved / gpu_seconds / 1e9
    kind = engine.device.device_kind
    peak = args.peak_gbs
    if peak is None and engine.device.platform == "gpu":
        peak = peak_gbs(kind)
    speedup = cpu_seconds / gpu_seconds

    print(
        f"segmented softmax over {args.values:,} float64 values in {args.rows:,} rows; "
        f"JAX {jax.__version__} on {kind} ({engine.device.platform}), "
        f"{engine.softmax_kernel} softmax kernel; "
        f"{os.cpu_count()} CPUs; median of {args.repeat} calls on the device, "
        f"{args.cpu_repeat} on the CPU"
    )
    print(f"{'':<17} {'time per call':>14} {'values/s':>10} {'bandwidth':>12}")
    for label, seconds in [("gpu engine", gpu_seconds), (f"{cpu} engine", cpu_seconds)]:
        print(
            f"{label:<17} {seconds * 1e3:>11.3f} ms {args.values / seconds:>10.3g} "
            f"{moved / seconds / 1e9:>8.1f} GB/s"
        )
    if peak:
        verdict = "met" if gbs / peak >= BANDWIDTH_TARGET else "MISSED"
        print(
            f"gpu engine bandwidth: {gbs:.0f} GB/s = {gbs / peak:.1%} of the peak {peak:.0f} "
            f"GB/s (target >= {BANDWIDTH_TARGET:.0%}: {verdict})"
        )
    else:
        print(f"gpu engine bandwidth: {gbs:.1f} GB/s (no known peak for {kind}; see --peak-gbs)")
    verdict = "met" if speedup >= SPEEDUP_TARGET else "MISSED"
    target = f"target >= {SPEEDUP_TARGET}x: {verdict}" if cpu == "compiled" else "no target"
    print(f"speed-up of the gpu engine over the {cpu} engine: {speedup:.1f}x ({target})")
    print(f"max relative difference from the {cpu} engine: {difference:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
