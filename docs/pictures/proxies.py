"""The compiled proxy beside the pure-Python one, on each Python, from the recorded run.

Reads ``benchmarks/results/proxies/proxies.json``, which ``benchmarks/proxies.py
--record benchmarks/results/proxies PYTHON...`` writes. For three cases, the
median ratio to a direct call on each proxy and each Python, and across each
Python's pair of bars the floor of any callable written in C
(``functools.partial(impl)``, measured in the compiled proxy's run) as a black
tick and the case's target on that Python, stated in that floor
(``benchmarks/targets.py``), as a dashed line. A median over its target is
labelled in red.
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
from docs_paths import DOCS
from drawing import MUTED, OVER

RECORDED = DOCS.parent / "benchmarks" / "results" / "proxies" / "proxies.json"
COLOURS = {"compiled": "#2e6da4", "python": "#b8c4d0"}
CASES = [
    ("call, global engine, positional", "a call"),
    ("call inside using_engine", "a call inside using_engine"),
    ("construct class candidate", "constructing a class candidate"),
]
FLOOR = "floor: functools.partial(impl)"


def draw() -> None:
    runs = json.loads(RECORDED.read_text(encoding="utf-8"))
    versions = sorted(
        {label.split()[0] for label in runs}, key=lambda v: tuple(map(int, v.split(".")))
    )
    _, axes_row = plt.subplots(1, len(CASES), figsize=(11, 3.6), sharey=True)
    width = 0.38
    for axes, (case, title) in zip(axes_row, CASES, strict=True):
        rule = ""
        for x, version in enumerate(versions):
            for offset, proxy in ((-width / 2, "compiled"), (width / 2, "python")):
                row = runs.get(f"{version} {proxy}", {}).get(case)
                if row is None:
                    continue
                axes.bar(x + offset, row["median"], width, color=COLOURS[proxy])
                axes.text(
                    x + offset,
                    row["median"],
                    f"{row['median']:.2f}",
                    ha="center",
                    va="bottom",
                    fontsize=6.5,
                    color=OVER if row["verdict"] == "MISSED" else "black",
                )
            # The floor and the target of the compiled proxy's run, across both bars.
            run = runs.get(f"{version} compiled") or runs[f"{version} python"]
            span = [x - width, x + width]
            axes.plot(span, [run[FLOOR]["median"]] * 2, color="black", linewidth=1.5)
            if run[case]["target"] is not None:
                axes.plot(span, [run[case]["target"]] * 2, color=OVER, linestyle="--", lw=0.9)
                rule = run[case]["rule"]
        axes.set_title(f"{title}\n(target: {rule}, on each Python)", fontsize=9)
        axes.set_xticks(range(len(versions)), versions, fontsize=8)
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
    axes_row[0].set_ylabel("times a direct call (median)", fontsize=8)
    axes_row[0].legend(
        handles=[
            plt.Rectangle((0, 0), 1, 1, color=COLOURS["compiled"]),
            plt.Rectangle((0, 0), 1, 1, color=COLOURS["python"]),
            plt.Line2D([0], [0], color="black", linewidth=1.5),
            plt.Line2D([0], [0], color=OVER, linestyle="--", linewidth=0.9),
        ],
        labels=[
            "compiled proxy",
            "pure-Python proxy",
            "floor: functools.partial",
            "target (in the floor)",
        ],
        loc="upper left",
        fontsize=7,
        frameon=False,
    )
    plt.suptitle("Python version (x) and proxy: what a call costs", fontsize=9, color=MUTED)
    plt.tight_layout()


draw()
