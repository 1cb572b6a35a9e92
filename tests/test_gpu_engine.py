"""The gpu engine of the ragbatch example: on a GPU where there is one, else skipped.

The engine's programs also run on JAX's CPU backend (``RAGBATCH_GPU_PLATFORM=cpu``),
which tests/test_example.py uses for the invariant suite; these tests are about the
device itself, and what a user without one sees.
"""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("jax") is None:
    pytest.skip("the gpu example engine needs JAX", allow_module_level=True)


PROBE = """
import jax
try:
    print(len(jax.devices("gpu")))
except RuntimeError:
    print(0)
"""


def count_gpus() -> int:
    """How many GPUs JAX sees, asked in a child process.

    JAX starts threads when it is imported, and this test process forks (under
    ``pytest --forked``, and in tests of fork safety): so JAX stays out of it.
    """
    done = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300, check=True
    )
    return int(done.stdout.strip())


GPUS = count_gpus()
needs_a_gpu = pytest.mark.skipif(
    GPUS == 0, reason="JAX sees no GPU here: the gpu engine's device tests need one"
)
needs_no_gpu = pytest.mark.skipif(
    GPUS > 0, reason="JAX sees a GPU here: there is no missing GPU to report"
)


def run(*args, **env):
    """Run Python in a child process without this environment's gpu engine settings, and
    with crossovers held at the engines' declared defaults (as under pytest), unless
    ``env`` says otherwise: no check depends on what was calibrated on the machine."""
    ours = ("RAGBATCH_GPU_PLATFORM", "RAGBATCH_GPU_SOFTMAX", "COHERIQ_CROSSOVERS")
    environ = {k: v for k, v in os.environ.items() if k not in ours}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**environ, "COHERIQ_CROSSOVERS": "declared", **env},
    )


@needs_a_gpu
def test_invariant_suite_on_the_gpu():
    done = run("-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "ragbatch.tests",
               "--coheriq-engine=ragbatch:gpu")  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


ON_THE_DEVICE = """
import coheriq, jax, ragbatch
coheriq.enable_engine("ragbatch", "gpu")
batch = ragbatch.from_flat([1.0, 2.0, 3.0, 5.0], [0, 3, 3, 4])
probabilities = ragbatch.softmax(batch)
sums = ragbatch.row_sum(probabilities)
engine = coheriq.resolve_impl(ragbatch.softmax).__self__
print(probabilities.device_values.devices() == {engine.device})
print(isinstance(sums, jax.Array), [round(float(s), 12) for s in sums])
print(probabilities.device_values.devices().pop().platform)
"""


@needs_a_gpu
def test_results_stay_on_the_gpu():
    done = run("-c", ON_THE_DEVICE)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True", "[1.0,", "0.0,", "1.0]", "gpu"]


def test_the_same_results_stay_on_the_device_jax_was_given():
    """The check above, on the CPU backend: it runs everywhere."""
    done = run("-c", ON_THE_DEVICE, RAGBATCH_GPU_PLATFORM="cpu")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True", "[1.0,", "0.0,", "1.0]", "cpu"]


NO_GPU = """
import coheriq, ragbatch, jax
try:
    coheriq.enable_engine("ragbatch", "gpu")
except coheriq.CoheriqEngineError as error:
    print(error)
print(coheriq.explain("ragbatch").settled, jax.config.jax_enable_x64)
"""


@needs_no_gpu
def test_without_a_gpu_choosing_the_engine_says_why_and_changes_nothing():
    done = run("-c", NO_GPU)
    assert done.returncode == 0, done.stderr[-2000:]
    message, state = done.stdout.strip().splitlines()
    assert message.startswith("Engine 'gpu' of domain 'ragbatch' failed to start")
    assert "JAX finds no gpu device (it has: cpu)" in message
    assert "pip install -U 'jax[cuda13]'" in message
    assert "RAGBATCH_GPU_PLATFORM=cpu" in message
    assert state == "False False"  # no engine chosen, JAX's settings untouched


def test_pallas_softmax_kernel_on_the_invariant_suite():
    """The kernel a GPU runs for softmax, interpreted on the CPU: the suite's softmax cases."""
    done = run("-m", "pytest", "-p", "no:cacheprovider", "--pyargs", "ragbatch.tests",
               "--coheriq-engine=ragbatch:gpu", "-k", "softmax or million or another_engine",
               RAGBATCH_GPU_PLATFORM="cpu", RAGBATCH_GPU_SOFTMAX="pallas")  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


EDGES = """
import math, random, coheriq, ragbatch
rng = random.Random(3)
inf = math.inf
rows = [[rng.gauss(0, 5) for _ in range(n)] for n in (0, 1, 1023, 1024, 1025, 2048, 2049, 3000)]
rows += [[-inf] * 1500 + [1.0, 2.0], [-inf, -inf], [3.0, -inf, 3.0]]
coheriq.enable_engine("ragbatch", "gpu")
engine = coheriq.resolve_impl(ragbatch.softmax).__self__
got = ragbatch.softmax(ragbatch.RaggedBatch(rows)).values
with coheriq.using_engine("ragbatch", "reference"):
    want = ragbatch.softmax(ragbatch.RaggedBatch(rows)).values
assert len(got) == len(want)
for g, w in zip(got, want):
    assert (math.isnan(g) and math.isnan(w)) or abs(g - w) <= 1e-12 * abs(w), (g, w)
print(engine.softmax_kernel, engine.device.platform, len(got))
"""


@pytest.mark.parametrize(
    "platform", ["cpu", pytest.param("gpu", marks=needs_a_gpu)], ids=["interpreted", "on-a-gpu"]
)
def test_pallas_softmax_kernel_at_block_edges(platform):
    """Rows of one block, just under, just over, several; -inf values; rows of only -inf."""
    done = run("-c", EDGES, RAGBATCH_GPU_PLATFORM=platform, RAGBATCH_GPU_SOFTMAX="pallas")
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["pallas", platform, "11677"]


def test_an_unknown_softmax_kernel_is_refused_clearly():
    done = run("-c", NO_GPU, RAGBATCH_GPU_PLATFORM="cpu", RAGBATCH_GPU_SOFTMAX="cuda")
    assert done.returncode == 0, done.stderr[-2000:]
    message, state = done.stdout.strip().splitlines()
    assert "RAGBATCH_GPU_SOFTMAX='cuda' names no softmax kernel of the gpu engine" in message
    assert "use one of pallas, xla, or unset it" in message
    assert state == "False False"


def test_benchmark_runs_small():
    """The GPU benchmark script, at a tiny size on the CPU backend (it runs on a GPU too)."""
    done = run("-m", "ragbatch_gpu.benchmark", "--values", "20000", "--rows", "20",
               "--repeat", "2", "--platform", "cpu")  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    assert "segmented softmax over 20,000 float64 values in 20 rows" in out
    # Measured against the compiled engine, or the numpy engine where that is absent.
    baseline = "compiled" if importlib.util.find_spec("ragbatch_compiled") else "numpy"
    assert "gpu engine" in out and f"{baseline} engine" in out
    assert f"max relative difference from the {baseline} engine" in out


DECLINES = """
import coheriq, ragbatch
cpu = "compiled" if "compiled" in coheriq.available_engines("ragbatch") else "numpy"
small = ragbatch.RaggedBatch([[1.0, 2.0], [3.0]])
large = ragbatch.from_flat([0.5] * 65_536, [0, 30_000, 65_536])  # the declared crossover
with coheriq.profile() as prof, coheriq.using_engine("ragbatch", ["gpu", cpu]):
    on_host = ragbatch.softmax(small)
    on_device = ragbatch.from_flat([1.0, 2.0, 3.0], [0, 2, 3])  # not declined: no upload
    again = ragbatch.softmax(on_device)
    explained = coheriq.explain(ragbatch.softmax, small)
    answers = [
        coheriq.explain(ragbatch.topk, small, 4).answers,
        coheriq.explain(ragbatch.row_sum, small).answers,
        coheriq.explain(ragbatch.row_mean, small).answers,
        coheriq.explain(ragbatch.softmax, large).answers,
        coheriq.explain(ragbatch.softmax, on_device).answers,
        coheriq.explain(ragbatch.softmax, on_device).declines,
    ]
print(coheriq.engine_of(on_host) == cpu, coheriq.engine_of(again))
print(explained.answers == cpu, explained.declines)
print(explained.crossovers)
print(answers == [cpu, cpu, cpu, "gpu", "gpu", []], answers)
print([(r.candidate, r.engine, r.count) for r in prof.declines])
"""


def test_a_small_batch_on_the_host_is_declined_below_the_declared_crossover():
    """65,536 values, the engine's declared default: a smaller batch on the host runs on the
    next engine; one on the device, whatever its size, runs on the device."""
    done = run("-c", DECLINES, RAGBATCH_GPU_PLATFORM="cpu")
    assert done.returncode == 0, done.stderr[-3000:]
    ran, explained, crossovers, answers, counted = done.stdout.strip().splitlines()
    assert ran == "True gpu"
    reason = (
        "fewer than 65,536 values: below the crossover declared by the engine, not measured here"
    )
    assert explained == f"True ['gpu should not run it: {reason}']"
    assert crossovers == (
        "['gpu: 65,536 values, declared by the engine (calibrations are off here: "
        "COHERIQ_CROSSOVERS=declared)']"
    )
    assert answers.startswith("True "), answers
    assert counted == "[('softmax', 'gpu', 1)]"


MEASURED = """
import json, sys, coheriq, ragbatch
from coheriq.testing import frozen_crossovers
cpu = "compiled" if "compiled" in coheriq.available_engines("ragbatch") else "numpy"


def batch(n):
    return ragbatch.from_flat([float(i % 7) for i in range(n)], [0, n // 2, n])


calls = {"softmax": [((batch(n),), {}) for n in (16, 32)]}
result = coheriq.calibrate(
    "ragbatch", "gpu", against=cpu, candidates=["softmax"], calls=calls, budget=2.0
)
(row,) = result.rows
threshold = row.threshold
seen = {"threshold": threshold, "measured": result.measured, "cpu": cpu}
at, below = batch(threshold), batch(max(threshold - 1, 0))  # on the host: made outside
with frozen_crossovers("measured"), coheriq.using_engine("ragbatch", ["gpu", cpu]):
    explained = coheriq.explain(ragbatch.softmax, at)
    seen["at"] = [explained.answers, explained.crossovers]
    explained = coheriq.explain(ragbatch.softmax, below)
    seen["below"] = [explained.answers, explained.declines]
    seen["topk"] = coheriq.explain(ragbatch.topk, at, 4).crossovers
with frozen_crossovers("declared"), coheriq.using_engine("ragbatch", ["gpu", cpu]):
    seen["declared"] = coheriq.explain(ragbatch.softmax, at).crossovers
print(json.dumps(seen))
"""


def test_a_calibration_puts_the_measured_crossover_in_force(tmp_path):
    """What ``coheriq calibrate`` measured holds where crossovers follow the measurement,
    whatever it measured (the test asserts no timing: the threshold comes from the run)."""
    done = run("-c", MEASURED, RAGBATCH_GPU_PLATFORM="cpu", COHERIQ_CACHE_DIR=str(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout)
    threshold, cpu, when = seen["threshold"], seen["cpu"], seen["measured"]
    assert 0 <= threshold <= 33  # the crossover, 0, or one past the largest size measured
    stored = json.loads((tmp_path / "crossovers.json").read_text())["crossovers"]
    assert [(e["engine"], e["candidate"], e["threshold"]) for e in stored] == [
        ("gpu", "softmax", threshold)
    ]
    assert seen["at"] == [
        "gpu",
        [f"gpu: {threshold:,} values, measured on this machine on {when} against {cpu}"],
    ]
    if threshold > 0:
        answers, declines = seen["below"]
        assert answers == cpu
        assert len(declines) == 1 and f"fewer than {threshold:,} values" in declines[0]
        assert f"measured on this machine on {when}" in declines[0]
    # What was not calibrated, and everything while crossovers are frozen, is declared.
    (topk,) = seen["topk"]
    assert topk.startswith("gpu: 65,536 values, declared by the engine")
    (declared,) = seen["declared"]
    assert declared.startswith("gpu: 65,536 values, declared by the engine")


def test_the_crossover_benchmark_runs_small(tmp_path):
    """``--crossover`` calibrates (on a few small batches here) and prints the table; it keeps
    nothing unless told to."""
    done = run("-m", "ragbatch_gpu.benchmark", "--crossover", "--candidate", "softmax",
               "--largest", "1024", "--budget", "6", "--platform", "cpu",
               COHERIQ_CACHE_DIR=str(tmp_path))  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "softmax (values)" in done.stdout and "ratio" in done.stdout
    assert "softmax: the gpu engine (uploading each batch) is faster than the" in done.stdout
    assert not (tmp_path / "crossovers.json").exists()


CROSSING = """
import pickle, sys, coheriq, ragbatch
cpu = "compiled" if "compiled" in coheriq.available_engines("ragbatch") else "numpy"
# 66,000 values: above the declared crossover, so the host batch goes to the device.
host = ragbatch.RaggedBatch([[float(i % 50), 2.0, 3.0] for i in range(22_000)])
with coheriq.profile() as prof, coheriq.using_engine("ragbatch", ["gpu", cpu]):
    first = ragbatch.softmax(host)  # uploaded as it enters the engine
    again = ragbatch.softmax(host)  # the upload reused
    indices, best = ragbatch.topk(first, 2)  # stays on the device: no conversion
    smaller = ragbatch.softmax(best)  # 44,000 values, but on the device: not declined
    sums = ragbatch.row_sum(best)
    explained = coheriq.explain(ragbatch.softmax, best)
kinds = [type(first), type(again), type(best), type(smaller)]
print(*(kind.__name__ for kind in kinds), coheriq.engine_of(smaller), len(sums))
print(sorted((r.candidate, r.pair, r.count) for r in prof.conversions))
print(explained.answers, explained.declines, explained.conversions)
with coheriq.profile() as checking:
    with coheriq.verify("ragbatch", "gpu", on_mismatch="raise") as checked:
        ragbatch.softmax(ragbatch.topk(ragbatch.softmax(host), 2)[1])
print(checked.ok, [(r.candidate, r.compared) for r in checked.rows])
print(sorted({(r.candidate, r.pair) for r in checking.conversions}))
sys.stdout.flush()
open(sys.argv[1], "wb").write(pickle.dumps(first))
"""

LOAD = """
import pickle, sys
loaded = pickle.load(open(sys.argv[1], "rb"))
print(type(loaded).__module__, type(loaded).__name__, len(loaded), "jax" in sys.modules)
"""


def test_device_batches_cross_implementations_by_the_engines_declared_conversions(tmp_path):
    pickled = str(tmp_path / "batch.pickle")
    done = run("-c", CROSSING, pickled, RAGBATCH_GPU_PLATFORM="cpu")
    assert done.returncode == 0, done.stderr[-3000:]
    kinds, converted, explained, verified, downloaded = done.stdout.strip().splitlines()
    assert kinds == "GpuBatch GpuBatch GpuBatch GpuBatch gpu 22000"
    assert converted == "[('softmax', 'RaggedBatch -> GpuBatch', 1)]"  # one upload, reused
    assert explained == "gpu [] []"
    assert verified == "True [('softmax', 2), ('topk', 1)]"
    # The reference, run beside the engine, takes the device batch downloaded.
    assert "('softmax', 'GpuBatch -> RaggedBatch')" in downloaded
    loaded = run("-c", LOAD, pickled)  # a plain interpreter: the library's batch, no JAX
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.split() == ["ragbatch", "RaggedBatch", "22000", "False"]


BENCHMARK = Path(__file__).resolve().parent.parent / "benchmarks" / "crossover.py"


def test_the_mixed_workload_benchmark_runs_quick(tmp_path):
    """``benchmarks/crossover.py --quick``: it calibrates (into a folder of its own), times
    its workloads and prints its tables; which configuration wins is not asserted."""
    cache = tmp_path / "cache"
    done = run(str(BENCHMARK), "--quick", "--record", str(tmp_path), COHERIQ_CACHE_DIR=str(cache))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    out = done.stdout
    configurations = ["reference alone", "numpy alone (declared: 0)", "numpy, calibrated"]
    workloads = 1
    if importlib.util.find_spec("ragbatch_compiled"):
        workloads += 1
        configurations += [
            "compiled alone",
            "gpu alone",
            "gpu,compiled, calibrated",
            "gpu,compiled, declared (65,536)",
        ]
    assert out.startswith("crossover benchmark: ") and " CPUs" in out.splitlines()[0]
    for configuration in configurations:
        assert f"\n{configuration} " in out, configuration
    assert out.count("calibrated list <= faster single engine + 10%: ") == workloads
    recorded = json.loads((tmp_path / "crossover.json").read_text())
    assert recorded["quick"] is True and len(recorded["workloads"]) == workloads
    assert (tmp_path / "crossover.txt").read_text().startswith("crossover benchmark: ")
    assert not cache.exists()  # the user's calibrations are left alone
