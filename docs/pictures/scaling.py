"""The example's engines, drawn from their recorded benchmark runs.

Left: each engine's speed-up over the reference, per function
(``python -m ragbatch.benchmark --json benchmarks/results/ragbatch.json``).
Right: values per second of the dask engine on one and two workers beside the
single-process engines (``python -m ragbatch_dask.benchmark --json
benchmarks/results/ragbatch_dask.json``). Both files are committed with the run
the scaling page quotes, so the chart and the numbers in the text are one run.
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
from docs_paths import DOCS
from drawing import MUTED

RESULTS = DOCS.parent / "benchmarks" / "results"
COLOURS = {"numpy": "#4c72b0", "compiled": "#dd8452", "hybrid": "#55a868", "dask": "#8172b3"}


def _speedups(axes: plt.Axes) -> None:
    run = json.loads((RESULTS / "ragbatch.json").read_text(encoding="utf-8"))
    rows = [row for row in run["rows"] if row["engine"] != "reference"]
    functions = list(dict.fromkeys(row["function"] for row in rows))
    engines = list(dict.fromkeys(row["engine"] for row in rows))
    width = 0.8 / len(engines)
    for e, engine in enumerate(engines):
        for f, function in enumerate(functions):
            (row,) = [r for r in rows if r["engine"] == engine and r["function"] == function]
            x = f + (e - (len(engines) - 1) / 2) * width
            axes.bar(
                x,
                row["speedup"],
                width,
                color=COLOURS.get(engine, MUTED),
                label=engine if f == 0 else None,
            )
            axes.text(
                x,
                row["speedup"],
                f"{row['speedup']:.0f}" if row["speedup"] >= 10 else f"{row['speedup']:.1f}",
                ha="center",
                va="bottom",
                fontsize=7,
            )
    axes.axhline(1, color=MUTED, linewidth=0.8, linestyle="--")
    axes.set_xticks(range(len(functions)), functions)
    axes.set_ylabel("times faster than the reference")
    axes.set_ylim(0, max(r["speedup"] for r in rows) * 1.15)
    axes.legend(fontsize=8, frameon=False, ncol=2)
    axes.set_title(run["machine"].split(";")[0].replace("ragbatch benchmark: ", ""), fontsize=9)


def _dask(axes: plt.Axes) -> None:
    run = json.loads((RESULTS / "ragbatch_dask.json").read_text(encoding="utf-8"))
    labels = list(run["seconds"])
    functions = ["softmax", "topk"]
    width = 0.38
    for f, function in enumerate(functions):
        rates = [run["values"] / run["seconds"][label][function] / 1e6 for label in labels]
        xs = [i + (f - 0.5) * width for i in range(len(labels))]
        bars = axes.bar(xs, rates, width, label=function, color=["#4c72b0", "#dd8452"][f])
        axes.bar_label(bars, fmt="%.0f", fontsize=7)
    one, two = run["seconds"]["dask (1 workers)"], run["seconds"]["dask (2 workers)"]
    scaling = ", ".join(f"{name} {one[name] / two[name]:.2f}x" for name in functions)
    axes.set_xticks(
        range(len(labels)), [label.replace(" (", "\n(") for label in labels], fontsize=8
    )
    axes.set_ylabel("million values per second")
    axes.legend(fontsize=8, frameon=False)
    axes.set_title(f"{run['values']:,} values; 1 -> 2 workers: {scaling}", fontsize=9)


def draw() -> None:
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    _speedups(left)
    _dask(right)
    for axes in (left, right):
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
    figure.tight_layout()


draw()
