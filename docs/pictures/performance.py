"""What a call costs through coheriq, drawn from the recorded benchmark run.

Reads ``benchmarks/results/dispatch.json``, which ``benchmarks/run.py --record
benchmarks/results`` writes, so the chart and the table beside it on the page
are the same run. For each case measured against a baseline: nanoseconds per
call of the baseline (a direct call of the same implementation, or constructing
the implementing class directly) and through coheriq (median, with the min-max
of the rounds), labelled with the ratio and its target; a case whose median
ratio is over its target is drawn in red and marked MISSED. The floors
(``functools.partial``, a class with its own metaclass) are not coheriq but what
the targets are stated in (``benchmarks/targets.py``): they are drawn in grey,
with no target.
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
from docs_paths import DOCS
from drawing import MUTED, OVER

RECORDED = DOCS.parent / "benchmarks" / "results" / "dispatch.json"
THROUGH = "#2e6da4"
BASELINE = "#b8c4d0"
FLOOR = "#8c8c8c"


def draw() -> None:
    run = json.loads(RECORDED.read_text(encoding="utf-8"))
    # The cases with a target, and the floors; a declined call (no target: it costs
    # what the decline and the next implementation cost) is in the table only.
    rows = [row for row in run["rows"] if row["ns"] is not None and row["verdict"] != "-"]
    _, axes = plt.subplots(figsize=(9, 0.55 * len(rows) + 1.2))
    positions = range(len(rows))[::-1]
    height = 0.38
    for y, row in zip(positions, rows, strict=True):
        missed = row["verdict"] == "MISSED"
        floor = row["verdict"] == "floor"
        axes.barh(y + height / 2, row["baseline_ns"], height, color=BASELINE)
        axes.barh(
            y - height / 2,
            row["ns"],
            height,
            color=OVER if missed else FLOOR if floor else THROUGH,
            xerr=[[row["ns"] - row["ns_low"]], [row["ns_high"] - row["ns"]]],
            error_kw={"ecolor": MUTED, "capsize": 2, "linewidth": 0.8},
        )
        label = f" {row['ns']:.0f} ns: {row['median']:.2f}x"
        if floor:
            label += " (a reference: no target)"
        elif row["target"] is not None:
            rule = f": {row['rule']}" if row.get("rule") else ""
            label += f" (target <={row['target']:.2f}x{rule})"
        axes.text(
            row["ns_high"],
            y - height / 2,
            label + ("  MISSED" if missed else ""),
            va="center",
            fontsize=8,
            color=OVER if missed else MUTED if floor else "black",
            fontweight="bold" if missed else "normal",
        )
        axes.text(
            row["baseline_ns"],
            y + height / 2,
            f" {row['baseline_ns']:.0f} ns",
            va="center",
            fontsize=8,
            color=MUTED,
        )
    axes.set_yticks(list(positions), [row["case"] for row in rows], fontsize=8.5)
    axes.set_xlabel("nanoseconds per call (median of the rounds; whiskers: min-max)")
    axes.set_xlim(0, max(row["ns_high"] for row in rows) * 1.9)
    axes.legend(
        handles=[
            plt.Rectangle((0, 0), 1, 1, color=BASELINE),
            plt.Rectangle((0, 0), 1, 1, color=THROUGH),
            plt.Rectangle((0, 0), 1, 1, color=FLOOR),
        ],
        labels=[
            "baseline: the implementation called directly",
            "through coheriq",
            "a floor: not coheriq, what the targets are stated in",
        ],
        loc="lower right",
        fontsize=8,
        frameon=False,
    )
    axes.set_title(f"{run['machine']}, {run['date']}", fontsize=9, color=MUTED)
    for side in ("top", "right"):
        axes.spines[side].set_visible(False)


draw()
