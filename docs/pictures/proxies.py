"""coheriq's proxies on each Python, from the recorded run.

Reads ``benchmarks/results/proxies/proxies.json``, which ``benchmarks/proxies.py
--record benchmarks/results/proxies PYTHON...`` writes. For four cases, the
median ratio to a direct call on each proxy (the code-swapped function with the
compiled part and without it, the compiled proxy, the pure-Python proxy) and
each Python, and across each
Python's bars the case's target on that Python as a dashed line: for a call on
the reference where no block ever opened, 1.05 times the unmarked function; for
the others, a multiple of the floor of any callable written in C
(``functools.partial(impl)``, drawn as a black tick), measured in the same run
(``benchmarks/targets.py``), the compiled proxy's run's where there is one. A
median over its target is labelled in red; a Python recorded before a case or a
proxy existed has no bar for it.
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
from docs_paths import DOCS
from drawing import MUTED, OVER

RECORDED = DOCS.parent / "benchmarks" / "results" / "proxies" / "proxies.json"
PROXIES = {
    "swapped": ("#1b7f4b", "code-swapped function"),
    "swapped-pure": ("#8fcfa8", "code-swapped function, no compiled part"),
    "compiled": ("#2e6da4", "compiled proxy"),
    "python": ("#b8c4d0", "pure-Python proxy"),
}
CASES = [
    ("call, reference, no block ever", "a call on the reference,\nno block ever"),
    ("call, global engine, positional", "a call on an engine"),
    ("call inside using_engine", "a call inside using_engine"),
    ("construct class candidate", "constructing a class candidate\n(classes: compiled proxy)"),
]
FLOOR = "floor: functools.partial(impl)"


def draw() -> None:
    runs = json.loads(RECORDED.read_text(encoding="utf-8"))
    versions = sorted(
        {label.split()[0] for label in runs},
        key=lambda v: tuple(int(part.rstrip("t")) for part in v.split(".")),  # 3.13.15t
    )
    _, axes_row = plt.subplots(1, len(CASES), figsize=(16, 4.2), sharey=True)
    width = 0.21
    offsets = {"swapped": -1.5 * width, "swapped-pure": -0.5 * width}
    offsets |= {"compiled": 0.5 * width, "python": 1.5 * width}
    for axes, (case, title) in zip(axes_row, CASES, strict=True):
        rule = ""
        for x, version in enumerate(versions):
            for proxy, (colour, _) in PROXIES.items():
                row = runs.get(f"{version} {proxy}", {}).get(case)
                if row is None:
                    continue
                axes.bar(x + offsets[proxy], row["median"], width, color=colour)
                axes.text(
                    x + offsets[proxy],
                    row["median"],
                    f"{row['median']:.2f}",
                    ha="center",
                    va="bottom",
                    fontsize=5,
                    color=OVER if row["verdict"] == "MISSED" else "black",
                )
            # The floor and the target of one run of this Python (the compiled
            # proxy's, as the pages' prose quotes them), across its bars.
            order = ("compiled", "swapped", "swapped-pure", "python")
            found = [runs[f"{version} {p}"] for p in order if f"{version} {p}" in runs]
            run = next((r for r in found if case in r), None)
            if run is None:
                continue
            span = [x - 2 * width, x + 2 * width]
            if case != CASES[0][0]:
                axes.plot(span, [run[FLOOR]["median"]] * 2, color="black", linewidth=1.5)
            if run[case]["target"] is not None:
                axes.plot(span, [run[case]["target"]] * 2, color=OVER, linestyle="--", lw=0.9)
                rule = run[case]["rule"] or f"{run[case]['target']:g}x"
        axes.set_title(f"{title}\n(target: {rule}, on each Python)", fontsize=8.5)
        axes.set_xticks(range(len(versions)), versions, fontsize=7.5)
        for side in ("top", "right"):
            axes.spines[side].set_visible(False)
    axes_row[0].set_ylabel("times a direct call (median)", fontsize=8)
    axes_row[0].legend(
        handles=[
            *(plt.Rectangle((0, 0), 1, 1, color=colour) for colour, _ in PROXIES.values()),
            plt.Line2D([0], [0], color="black", linewidth=1.5),
            plt.Line2D([0], [0], color=OVER, linestyle="--", linewidth=0.9),
        ],
        labels=[
            *(label for _, label in PROXIES.values()),
            "floor: functools.partial",
            "target",
        ],
        loc="upper left",
        fontsize=6.5,
        frameon=False,
    )
    plt.suptitle("Python version (x) and proxy: what a call costs", fontsize=9, color=MUTED)
    plt.tight_layout()


draw()
