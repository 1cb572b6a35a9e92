"""Boxes and arrows for the docs' pictures, drawn with matplotlib at build time.

Each picture of the site is a script in this folder, run by the ``.. plot::``
directive of every docs build, so it is drawn from the code it shows and cannot
go stale. This module holds what they share: a figure in data coordinates, a box
with text, an arrow with a label, and the site's few colours.
"""

from __future__ import annotations

from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

# Colours that read on the light and the dark theme.
QUESTION = "#e8eef7"
ANSWER = "#e6f2e6"
NOTE = "#f7f1e3"
OVER = "#c0392b"
MUTED = "#555555"
EDGE = "#333333"


@dataclass
class Box:
    """A box drawn on the axes: its centre and half sizes, for arrows to meet."""

    x: float
    y: float
    half_width: float
    half_height: float

    def top(self) -> tuple[float, float]:
        return self.x, self.y + self.half_height

    def bottom(self) -> tuple[float, float]:
        return self.x, self.y - self.half_height

    def left(self) -> tuple[float, float]:
        return self.x - self.half_width, self.y

    def right(self) -> tuple[float, float]:
        return self.x + self.half_width, self.y


def canvas(width: float, height: float) -> Axes:
    """A figure of ``width`` x ``height`` inches whose data units are inches."""
    figure = plt.figure(figsize=(width, height))
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, width)
    axes.set_ylim(0, height)
    axes.axis("off")
    return axes


def box(
    axes: Axes,
    x: float,
    y: float,
    text: str,
    *,
    width: float,
    height: float,
    colour: str = ANSWER,
    bold: bool = False,
    size: float = 9,
) -> Box:
    """A rounded box centred on (x, y), ``width`` x ``height``, with ``text`` in it."""
    axes.add_patch(
        FancyBboxPatch(
            (x - width / 2, y - height / 2),
            width,
            height,
            boxstyle="round,pad=0.02,rounding_size=0.08",
            facecolor=colour,
            edgecolor=EDGE,
            linewidth=1,
        )
    )
    axes.text(
        x,
        y,
        text,
        ha="center",
        va="center",
        fontsize=size,
        fontweight="bold" if bold else "normal",
        wrap=False,
    )
    return Box(x, y, width / 2, height / 2)


def arrow(
    axes: Axes,
    start: tuple[float, float],
    end: tuple[float, float],
    label: str = "",
    *,
    label_at: float = 0.5,
    label_side: str = "right",
    colour: str = EDGE,
) -> None:
    """An arrow from ``start`` to ``end``, with ``label`` beside its middle."""
    axes.add_patch(
        FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=colour, linewidth=1)
    )
    if label:
        x = start[0] + (end[0] - start[0]) * label_at
        y = start[1] + (end[1] - start[1]) * label_at
        # Beside a vertical arrow ("right", "left") or over a horizontal one ("above").
        dx = {"right": 0.06, "left": -0.06, "above": 0.0}[label_side]
        dy = 0.06 if label_side == "above" else 0.0
        axes.text(
            x + dx,
            y + dy,
            label,
            ha={"right": "left", "left": "right", "above": "center"}[label_side],
            va="bottom" if label_side == "above" else "center",
            fontsize=8,
            color=MUTED,
            style="italic",
        )
