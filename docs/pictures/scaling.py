"""The example's engines, drawn from their recorded benchmark runs.

Left: each engine's speed-up over the reference, per function
(``python -m ragbatch.benchmark --json benchmarks/results/ragbatch.json``).
Right: the five-step pipeline under the compiled engine in one process, the
dask engine that shipped every call's data (1 and 2 workers) and the dask engine
whose rows stay on the workers (1 and 2 workers): time per step, stacked, and
the megabytes each moved (``python -m ragbatch_dask.benchmark --json
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
    axes.set_ylim(0, max(r["speedup"] for r in rows) * 1.35)  # room for the legend above
    axes.legend(fontsize=8, frameon=False, ncol=4, loc="upper center")
    axes.set_title(run["machine"].split(";")[0].replace("ragbatch benchmark: ", ""), fontsize=9)


STEP_COLOURS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3"]


def _pipeline(axes: plt.Axes) -> None:
    """The five-step pipeline: milliseconds per step, stacked, and the MB each way moved."""
    run = json.loads((RESULTS / "ragbatch_dask.json").read_text(encoding="utf-8"))
    labels = list(run["runs"])
    steps = list(run["runs"][labels[0]]["seconds"])
    for y, label in enumerate(reversed(labels)):
        figures = run["runs"][label]
        left = 0.0
        for colour, step in zip(STEP_COLOURS, steps, strict=False):
            width = figures["seconds"][step] * 1e3
            axes.barh(y, width, left=left, color=colour, label=step if y == 0 else None)
            left += width
        moved = sum(
            figures["moved"][step][way]
            for step in figures["moved"]
            for way in ("to_workers", "to_client", "between_workers")
        )
        note = f" {left:.0f} ms ({figures['end_to_end'] * 1e3:.0f} end to end)"
        if figures["moved"]:
            note += f", {moved / 1e6:.0f} MB moved"
        else:  # an earlier engine's tasks carried its data, which dask does not count
            note += ", bytes not counted" if label != "compiled" else ""
        axes.text(left, y, note, va="center", fontsize=8)
    axes.set_yticks(range(len(labels)), list(reversed(labels)), fontsize=8)
    axes.set_xlabel("milliseconds for the pipeline (median per step)")
    axes.set_xlim(0, max(sum(r["seconds"].values()) for r in run["runs"].values()) * 1e3 * 1.7)
    axes.legend(fontsize=7, frameon=False, loc="upper right")
    axes.set_title(f"the pipeline on {run['values']:,} values", fontsize=9)


def draw() -> None:
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.4))
    _speedups(left)
    _pipeline(right)
    for axes in (left, right):
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
    figure.tight_layout()


draw()
