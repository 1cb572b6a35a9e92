"""The ragbatch example: its invariant suite on every engine, its demo and its benchmark.

The example's packages are installed by the README's test command; each check runs
in a subprocess, as a user would run it.
"""

import os
import subprocess
import sys

import pytest

try:
    import ragbatch  # noqa: F401 -- only to say clearly what is missing
except ImportError:  # pragma: no cover - a setup problem, reported as one
    pytest.fail(
        "The ragbatch example is not installed; use the README's test command, which "
        "installs ./example/ragbatch and its engines.",
        pytrace=False,
    )

ENGINES = ["reference", "numpy", "compiled", "hybrid", "dask", "gpu"]
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


def test_every_example_engine_is_installed():
    done = run("-c", "import coheriq, ragbatch; print(coheriq.available_engines('ragbatch'))")
    assert done.stdout.strip() == str(tuple(sorted(ENGINES[1:]))), done.stderr


@pytest.mark.parametrize("engine", ENGINES)
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
    done = run("-m", "ragbatch.demo", "--values", "20000", "--rows", "200", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    table = done.stdout.splitlines()
    for engine in ENGINES:
        (line,) = [row for row in table if row.startswith(engine + " ")]
        assert line.split()[1] == engine  # built its own container
        assert line.endswith("yes")  # and agreed with the reference
    assert f"{len(ENGINES) + 1}/{len(ENGINES) + 1}" in done.stderr  # the progress bar finished


def test_demo_lists_an_engine_that_cannot_start_here_as_skipped():
    # No JAX device of a platform that does not exist: the gpu engine cannot start.
    env = {**os.environ, "RAGBATCH_GPU_PLATFORM": "nowhere"}
    done = run("-m", "ragbatch.demo", "--values", "2000", "--rows", "20", "--repeat", "1", env=env)
    assert done.returncode == 0, done.stderr
    (line,) = [row for row in done.stdout.splitlines() if row.startswith("gpu ")]
    assert "skipped: JAX finds no nowhere device" in line
    assert "choose another engine of ragbatch" in line


def test_benchmark_runs():
    done = run("-m", "ragbatch.benchmark", "--values", "20000", "--rows", "200", "--repeat", "1")
    assert done.returncode == 0, done.stderr
    for function in ("softmax", "topk", "row_sum", "row_mean"):
        assert any(row.startswith(f"{function} ") for row in done.stdout.splitlines())
