"""The ragbatch example: its invariant suite on every engine, its demo and its benchmark.

The example's packages are installed by the README's test command; each check runs
in a subprocess, as a user would run it. Where the example, or one of its engine
packages, is not installed (the core suite that CI runs on the oldest and newest
Pythons installs the CPU engines only), its checks are skipped, saying which
package is missing.
"""

import importlib.util
import os
import subprocess
import sys

import pytest

if importlib.util.find_spec("ragbatch") is None:
    pytest.skip(
        "the ragbatch example is not installed (the README's test command installs "
        "./example/ragbatch and its engines)",
        allow_module_level=True,
    )

# Every engine of the example, and the package that provides it.
PACKAGES = {
    "numpy": "ragbatch_numpy",
    "compiled": "ragbatch_compiled",
    "hybrid": "ragbatch_hybrid",
    "dask": "ragbatch_dask",
    "gpu": "ragbatch_gpu",
}
MISSING = {e: p for e, p in PACKAGES.items() if importlib.util.find_spec(p) is None}
ENGINES = ["reference", *(e for e in PACKAGES if e not in MISSING)]


def needs(engine):
    """Skip the case where the package of ``engine`` is not installed."""
    return pytest.mark.skipif(
        engine in MISSING,
        reason=f"the {engine} engine's package {MISSING.get(engine)} is not installed",
    )


# The gpu engine runs its programs on JAX's CPU backend here: the same code as on a
# GPU (tests/test_gpu_engine.py runs it on a GPU where there is one).
ON_THE_CPU = {**os.environ, "RAGBATCH_GPU_PLATFORM": "cpu"}


def run(*args, timeout=240, env=ON_THE_CPU):
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=env,
    )


def demo(values, rows, env=ON_THE_CPU):
    """The demo on a small batch, each engine timed once: these tests read what it says."""
    return run(
        "-m", "ragbatch.demo", "--values", str(values), "--rows", str(rows),
        "--repeat", "1", "--min-time", "0", env=env,
    )  # fmt: skip


def test_every_installed_example_engine_is_advertised():
    done = run("-c", "import coheriq, ragbatch; print(coheriq.available_engines('ragbatch'))")
    assert done.stdout.strip() == str(tuple(sorted(ENGINES[1:]))), done.stderr


@pytest.mark.parametrize(
    "engine", [pytest.param(e, marks=needs(e)) for e in ["reference", *PACKAGES]]
)
def test_invariant_suite_passes_on(engine):
    done = run(
        "-m",
        "pytest",
        "-p",
        "no:cacheprovider",
        "--pyargs",
        "ragbatch.tests",
        f"--coheriq-engine=ragbatch:{engine}",
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert f"coheriq: ragbatch on '{engine}' (--coheriq-engine)" in done.stdout
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_demo_runs_every_engine():
    done = demo(20000, 200)
    assert done.returncode == 0, done.stderr
    table = done.stdout.splitlines()
    for engine in ENGINES:
        (line,) = [row for row in table if row.startswith(engine + " ")]
        assert line.split()[1] == engine  # built its own container
        assert line.endswith("yes")  # and agreed with the reference
    assert f"{len(ENGINES) + 1}/{len(ENGINES) + 1}" in done.stderr  # the progress bar finished


@needs("gpu")
def test_demo_lists_an_engine_that_cannot_start_here_as_skipped():
    # No JAX device of a platform that does not exist: the gpu engine cannot start.
    env = {**os.environ, "RAGBATCH_GPU_PLATFORM": "nowhere"}
    done = demo(2000, 20, env=env)
    assert done.returncode == 0, done.stderr
    (line,) = [row for row in done.stdout.splitlines() if row.startswith("gpu ")]
    assert "skipped: JAX finds no nowhere device" in line
    assert "choose another engine of ragbatch" in line


def test_benchmark_runs():
    done = run("-m", "ragbatch.benchmark", "--values", "20000", "--rows", "200", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    for function in ("softmax", "topk", "row_sum", "row_mean"):
        assert any(row.startswith(f"{function} ") for row in done.stdout.splitlines())


@needs("compiled")
def test_demo_says_what_an_ordered_choice_chose_and_passed_over():
    env = {**ON_THE_CPU, "RAGBATCH_ENGINE": "tpu,compiled"}
    done = demo(2000, 20, env=env)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "outside the blocks, this program runs on 'compiled'" in lines[-3]
    assert lines[-2:] == ["  tpu: not installed", "  compiled: chosen"]


LARGE_BATCH_CHECK = """
import numpy as np, ragbatch, coheriq
from ragbatch._workload import make_batch

# 800,000 values (6.4 MB): results this large get buffers the kernels fill without
# zeroing them first (and that are offered huge pages).
batch = make_batch(800_000, 8_000, seed=3)
values, offsets = np.asarray(batch.values), np.asarray(batch.offsets, dtype=np.int64)
results = {}
for name in ("numpy", "compiled"):
    with coheriq.using_engine("ragbatch", name):
        first = float(values[0])
        mine = ragbatch.from_flat(values, offsets)
        values[0] += 1.0
        assert float(mine.values[0]) == first, "from_flat did not copy"
        values[0] = first
        soft = ragbatch.softmax(mine)
        best, probabilities = ragbatch.topk(soft, 20)
        flat, _ = ragbatch.to_flat(soft)
        np.asarray(flat)[:] = -1.0
        assert float(soft.values[0]) > 0.0, "to_flat did not copy"
        results[name] = [np.asarray(x.values).copy() for x in (soft, best, probabilities)]
        results[name].append(np.asarray(ragbatch.row_sum(soft)))
for want, got in zip(results["numpy"], results["compiled"]):
    assert want.shape == got.shape, (want.shape, got.shape)
    assert np.allclose(got, want, rtol=1e-12, atol=1e-300), np.abs(got - want).max()
print("ok")
"""


@needs("numpy")
@needs("compiled")
def test_compiled_engine_on_a_batch_of_megabytes_agrees_with_numpy():
    done = run("-c", LARGE_BATCH_CHECK)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"]


@needs("compiled")
def test_verifying_the_compiled_engine_on_the_demo_finds_no_difference():
    done = demo(20000, 200, env={**ON_THE_CPU, "RAGBATCH_VERIFY": "compiled"})
    assert done.returncode == 0, done.stderr
    assert "verification on: calls on 'compiled' are also run on 'reference'" in done.stdout
    reports = [
        part for part in done.stderr.split("RAGBATCH_VERIFY (process") if "ragbatch." in part
    ]
    main = reports[-1]  # the demo's own process reports last (dask's workers before it)
    rows = [line.split() for line in main.splitlines() if line.startswith("ragbatch.")]
    compared = {row[0]: (int(row[2]), int(row[3])) for row in rows}
    for candidate in ("from_flat", "softmax", "topk", "row_sum", "row_mean"):
        calls, mismatches = compared[f"ragbatch.{candidate}"]
        assert calls > 0 and mismatches == 0
    assert "CoheriqVerificationWarning" not in done.stderr


TIES_LAST = """
import coheriq, ragbatch
from ragbatch import _softmax_row

class TiesLast(coheriq.engine_class("ragbatch", "compiled"), name="ties_last"):
    # A deliberate bug: equal values in index order from the last, not the first.
    def topk(self, batch, k):
        indices, probabilities, offsets = [], [], [0]
        for row in batch:
            probs = _softmax_row(row)
            best = sorted(range(len(row)), key=lambda i: (-row[i], -i))[:k]
            indices += best
            probabilities += [probs[i] for i in best]
            offsets.append(len(indices))
        make = self.RaggedBatch.from_flat
        return make(indices, offsets), make(probabilities, offsets)

batch = ragbatch.RaggedBatch([[3.0, 1.0, 2.0], [5.0, 5.0, 1.0], [0.5]])
with coheriq.verify("ragbatch", "ties_last", on_mismatch="record") as check:
    ragbatch.topk(batch, 2)
    ragbatch.softmax(batch)
print(check.ok)
for mismatch in check.mismatches:
    print(mismatch)
"""


@needs("compiled")
def test_verification_catches_an_engine_that_breaks_ties_wrongly_and_names_the_row():
    done = run("-c", TIES_LAST)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "False"
    # Row 1 (5.0, 5.0, 1.0): the engine gives indices [1, 0], the reference [0, 1];
    # result[0] is topk's first batch (the indices), [1] its row, [0] the entry.
    [mismatch] = lines[1:]
    assert mismatch.startswith("ragbatch.topk(RaggedBatch([[3.0, 1.0, 2.0]")
    assert mismatch.endswith(
        ", 2) (call 1): result[0][1][0]: 1.0 against 0 (relative difference 1, tolerance 1e-09)"
    )
