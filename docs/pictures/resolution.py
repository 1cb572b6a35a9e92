"""The resolution rule as a flowchart: which engine a call of a candidate runs.

The answers in the green boxes are not typed here: the script builds a small
library with one engine and asks :func:`coheriq.explain` for its reason in each
situation, so the picture says what ``explain`` says.
"""

from __future__ import annotations

import os

from drawing import MUTED, NOTE, QUESTION, arrow, box, canvas

import coheriq
from coheriq.testing import isolated


def _world() -> object:
    domain = coheriq.AccelerationDomain("mylib", env_prefix="MYLIB")

    @domain.acceleration_candidate
    def normalize(xs):
        return xs

    domain.materialize()

    class Fast(coheriq.engine_class("mylib"), name="fast"):
        def normalize(self, xs):
            return xs

    return normalize


def _reason(explanation: coheriq.Explanation) -> str:
    """The reason without its note on settling, which the chart shows by its shape."""
    return explanation.reason.split(";")[0].split(", settled by")[0]


def reasons() -> dict[str, str]:
    """What explain says in each branch of the rule."""
    found = {}
    with isolated():
        candidate = _world()
        with coheriq.using_engine("mylib", "fast"):
            found["block"] = _reason(coheriq.explain(candidate))
        found["reference"] = _reason(coheriq.explain(candidate))
    with isolated():
        candidate = _world()
        coheriq.enable_engine("mylib", "fast")
        found["enable"] = _reason(coheriq.explain(candidate))
    before = os.environ.get("MYLIB_ENGINE")
    os.environ["MYLIB_ENGINE"] = "fast"
    try:
        with isolated():
            found["variable"] = _reason(coheriq.explain(_world()))
    finally:
        if before is None:
            del os.environ["MYLIB_ENGINE"]
        else:
            os.environ["MYLIB_ENGINE"] = before
    return found


def draw() -> None:
    said = reasons()
    axes = canvas(8.6, 6.6)
    left, right = 2.25, 6.55
    width, answer_width, height = 4.0, 3.8, 0.75

    def question(y: float, text: str):
        return box(axes, left, y, text, width=width, height=height, colour=QUESTION)

    def answer(y: float, what: str, reason: str):
        text = f"{what}\nexplain: \u201c{reason}\u201d"
        return box(axes, right, y, text, width=answer_width, height=height, size=8.5)

    start = box(axes, left, 6.2, "a call: mylib.normalize(xs)", width=2.6, height=0.45, colour=NOTE)
    scoped = question(5.2, "Is a using_engine block of mylib\nopen in this context (thread, task)?")
    made = question(
        3.95, "Has the global choice of mylib been made?\n(by enable_engine, or by an earlier call)"
    )
    variable = question(2.7, "It is made now, once.\nIs MYLIB_ENGINE set (non-empty)?")
    block_answer = answer(
        5.2, "the innermost block's engine (for this context only)", said["block"]
    )
    made_answer = answer(3.95, "that engine, for the rest of the process", said["enable"])
    variable_answer = answer(
        2.7, "the engine it names (a list: the first that starts)", said["variable"]
    )
    reference = box(
        axes,
        4.3,
        1.3,
        f"the library's own code\nexplain: \u201c{said['reference']}\u201d",
        width=6.0,
        height=height,
        size=8.5,
    )
    arrow(axes, start.bottom(), scoped.top())
    for question_box, answer_box in (
        (scoped, block_answer),
        (made, made_answer),
        (variable, variable_answer),
    ):
        arrow(axes, question_box.right(), answer_box.left(), "yes", label_side="above")
    arrow(axes, scoped.bottom(), made.top(), "no")
    arrow(axes, made.bottom(), variable.top(), "no")
    arrow(axes, variable.bottom(), (left, reference.top()[1]), "no")
    axes.text(
        4.3,
        0.45,
        "enable_engine makes the global choice at once; enabling another engine after it is made "
        "raises CoheriqEngineSettledError.",
        ha="center",
        va="center",
        fontsize=8,
        color=MUTED,
    )


draw()
