"""The compiled proxy beside the pure-Python one, on each Python, from the recorded run.

Reads ``benchmarks/results/proxies/proxies.json``, which ``benchmarks/proxies.py
--record benchmarks/results/proxies PYTHON...`` writes. For three cases, the
median ratio to a direct call on each proxy and each Python, the case's target
as a dashed line, and for the calls the floor of any callable written in C
(``functools.partial(impl)``, measured in the same run) as a black tick.
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
    _, axes_row = plt.subplots(1, len(CASES), figsize=(10, 3.4), sharey=True)
    width = 0.38
    for axes, (case, title) in zip(axes_row, CASES, strict=True):
        for offset, proxy in ((-width / 2, "compiled"), (width / 2, "python")):
            for x, version in enumerate(versions):
                row = runs.get(f"{version} {proxy}", {}).get(case)
                if row is None:
                    continue
                over = row["median"] > row["target"]
                axes.bar(x + offset, row["median"], width, color=COLOURS[proxy])
                axes.text(
                    x + offset,
                    row["median"],
                    f"{row['median']:.2f}",
                    ha="center",
                    va="bottom",
                    fontsize=7,
                    color=OVER if over else "black",
                )
                floor = runs[f"{version} {proxy}"].get(FLOOR)
                if proxy == "compiled" and floor is not None and "call" in case:
                    axes.plot([x - width, x], [floor["median"]] * 2, color="black", linewidth=1.5)
        target = runs[f"{versions[0]} python"][case]["target"]
        axes.axhline(target, color=OVER, linestyle="--", linewidth=0.8)
        axes.set_title(f"{title} (target {target:g}x)", fontsize=9)
        axes.set_xticks(range(len(versions)), versions, fontsize=8)
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
    axes_row[0].set_ylabel("times a direct call (median)", fontsize=8)
    axes_row[0].legend(
        handles=[
            plt.Rectangle((0, 0), 1, 1, color=COLOURS["compiled"]),
            plt.Rectangle((0, 0), 1, 1, color=COLOURS["python"]),
            plt.Line2D([0], [0], color="black", linewidth=1.5),
            plt.Line2D([0], [0], color=OVER, linestyle="--", linewidth=0.8),
        ],
        labels=["compiled proxy", "pure-Python proxy", "functools.partial (C floor)", "target"],
        loc="upper left",
        fontsize=7,
        frameon=False,
    )
    plt.suptitle("Python version (x) and proxy: what a call costs", fontsize=9, color=MUTED)
    plt.tight_layout()


draw()
