"""Where the example's engines start to win, drawn from their recorded calibrations.

``python benchmarks/crossover.py --record benchmarks/results`` calibrates the numpy
engine against the reference and the gpu engine (JAX, here on the CPU) against the
compiled one, as ``coheriq calibrate`` does, and keeps each calibration in
``benchmarks/results/crossover.json``; this picture draws them with
:meth:`coheriq.Calibration.draw`, the drawing ``coheriq calibrate --plot`` makes.
"""

from __future__ import annotations

import json

import matplotlib.pyplot as plt
from docs_paths import DOCS

import coheriq

RESULTS = DOCS.parent / "benchmarks" / "results" / "crossover.json"

recorded = json.loads(RESULTS.read_text(encoding="utf-8"))["calibrations"]
calibrations = [coheriq.Calibration.from_dict(data) for data in recorded]
width = max(len(c.rows) for c in calibrations)
figure, axes = plt.subplots(
    len(calibrations), width, figsize=(3.1 * width, 2.9 * len(calibrations)), squeeze=False
)
for line, calibration in zip(axes, calibrations, strict=True):
    calibration.draw(list(line[: len(calibration.rows)]))
    for ax in line[: len(calibration.rows)]:
        ax.set_title(f"{calibration.engine} against {calibration.against}: {ax.get_title()}")
    for ax in line[len(calibration.rows) :]:
        ax.set_visible(False)
figure.tight_layout()
