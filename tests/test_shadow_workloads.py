"""Shadow verification over real workloads: ragbatch's pipeline on a NumPy engine with a
classic bug, found at 1% sampling (CPython's test_statistics at 10% is in
test_cpython_suites.py)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap

import pytest

# Found, not imported: importing the engine here would import ragbatch outside the
# tests' isolated worlds, and leave it without its domain for the tests that import it.
if importlib.util.find_spec("ragbatch_numpy") is None:
    pytest.skip("the ragbatch example's numpy engine is not installed", allow_module_level=True)

TIMEOUT = 120  # seconds; the workload takes about one

WORKLOAD = """
import random, sys
import numpy as np
import coheriq, ragbatch
from ragbatch._workload import make_batch
from ragbatch.demo import pipeline

class EmptyRowsZero(coheriq.engine_class("ragbatch", "numpy"), name="numpy_buggy"):
    '''The numpy engine with a classic bug: an empty row's mean is 0.0, not NaN.'''
    def row_mean(self, batch):
        return np.nan_to_num(super().row_mean(batch), nan=0.0)

coheriq.enable_engine("ragbatch", sys.argv[2])
watcher = coheriq.shadow("ragbatch", 0.01, report=sys.argv[1])
rng = random.Random(5)
for i in range(4000):  # batches of 1 to 40 values in 1 to 12 rows: some rows are empty
    batch = make_batch(rng.randrange(1, 40), rng.randrange(1, 12), seed=i)
    pipeline(*ragbatch.to_flat(batch))
watcher.stop()
"""


def shadow_report(tmp_path, engine: str) -> tuple[dict, str]:
    script = tmp_path / "workload.py"
    script.write_text(textwrap.dedent(WORKLOAD))
    report = tmp_path / "report.json"
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(report), engine],
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the workload hung")
    assert done.returncode == 0, done.stderr
    return json.loads(report.read_text()), done.stderr


def test_a_wrong_engine_is_found_at_one_percent_over_a_real_workload(tmp_path):
    report, said = shadow_report(tmp_path, "numpy_buggy")
    rows = {row["candidate"]: row for row in report["candidates"]}
    # 4,000 pipelines make 24,000 candidate calls (to_flat, from_flat, softmax, topk,
    # row_sum, row_mean): about 240 are sampled, 40 of them row_mean's.
    assert 150 < report["totals"]["sampled"] < 350, report["totals"]
    assert rows["row_mean"]["mismatches"] > 0
    assert "0.0 against nan" in rows["row_mean"]["example"]["difference"]
    assert all(row["mismatches"] == 0 for name, row in rows.items() if name != "row_mean")
    assert report["totals"]["compared"] == report["totals"]["sampled"]  # nothing dropped
    assert said.count("disagree on row_mean (result)") == 1  # one log line for the kind


def test_the_right_engine_passes_the_same_workload(tmp_path):
    report, said = shadow_report(tmp_path, "numpy")
    assert report["totals"]["mismatches"] == 0 and report["totals"]["compared"] > 150
    assert "disagree" not in said
