"""The diamond of docs/examples/hybrid_stats.py: its classes, its MRO, who supplies what.

Everything drawn is read from the live classes: the boxes list the candidates
each class defines itself, the numbers are the hybrid's ``__mro__``, and the
table is what :func:`coheriq.explain` says supplies each candidate under the
hybrid.
"""

from __future__ import annotations

import runpy

from docs_paths import EXAMPLES
from drawing import MUTED, NOTE, QUESTION, arrow, box, canvas

import coheriq
from coheriq.testing import isolated

EXAMPLE = EXAMPLES / "hybrid_stats.py"


def _label(klass: type, candidates: list[str]) -> str:
    own = [name for name in candidates if name in vars(klass)]
    engine = "the reference class" if klass.__name__ == "reference" else f"class {klass.__name__}"
    return f"{engine}\ndefines: {', '.join(own) or 'nothing'}"


def draw() -> None:
    with isolated():
        example = runpy.run_path(str(EXAMPLE))
        hybrid = example["Hybrid"]
        candidates = list(example["stats"].candidate_kinds)
        with coheriq.using_engine("stats", "hybrid"):
            suppliers = coheriq.explain("stats").suppliers
    mro = [klass for klass in hybrid.__mro__ if klass is not object]
    order = {klass: position for position, klass in enumerate(mro, 1)}
    reference, gpu, mpi = mro[-1], *hybrid.__bases__

    axes = canvas(9.4, 4.6)
    where = {reference: (3.0, 4.0), gpu: (1.6, 2.5), mpi: (4.4, 2.5), hybrid: (3.0, 1.0)}
    boxes = {}
    for klass, (x, y) in where.items():
        colour = NOTE if klass is hybrid else QUESTION
        boxes[klass] = box(
            axes, x, y, _label(klass, candidates), width=2.4, height=0.7, colour=colour
        )
        axes.text(
            x - 1.2,
            y + 0.35,
            f" {order[klass]} ",
            ha="center",
            va="center",
            fontsize=9,
            fontweight="bold",
            color="white",
            bbox={"boxstyle": "circle,pad=0.2", "facecolor": "#34495e", "edgecolor": "none"},
        )
    for klass in (gpu, mpi, hybrid):
        for base in klass.__bases__:
            arrow(axes, boxes[klass].top(), boxes[base].bottom())

    x = 6.2
    axes.text(x, 4.25, "under using_engine('stats', 'hybrid'):", fontsize=9, fontweight="bold")
    for row, (candidate, engine) in enumerate(suppliers.items()):
        line = f"{candidate:<10}  from {engine!r}"
        axes.text(x, 3.8 - 0.35 * row, line, fontsize=9, family="monospace")
    axes.text(
        x,
        2.6,
        "numbers: the hybrid's MRO, the order\nin which Python looks a candidate up;\n"
        "arrows point from a class to its bases",
        fontsize=8,
        color=MUTED,
        va="top",
    )
    axes.text(
        0.4,
        0.2,
        "Hybrid.__mro__ = " + " \u2192 ".join(klass.__name__ for klass in hybrid.__mro__),
        fontsize=8.5,
        family="monospace",
    )


draw()
