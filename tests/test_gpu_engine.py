"""The gpu engine of the ragbatch example: on a GPU where there is one, else skipped.

The engine's programs also run on JAX's CPU backend (``RAGBATCH_GPU_PLATFORM=cpu``),
which tests/test_example.py uses for the invariant suite; these tests are about the
device itself, and what a user without one sees.
"""

import importlib.util
import os
import subprocess
import sys

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
    ours = ("RAGBATCH_GPU_PLATFORM", "RAGBATCH_GPU_SOFTMAX")
    environ = {k: v for k, v in os.environ.items() if k not in ours}
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={**environ, **env},
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
with coheriq.profile() as prof, coheriq.using_engine("ragbatch", ["gpu", cpu]):
    on_host = ragbatch.softmax(small)
    on_device = ragbatch.from_flat([1.0, 2.0, 3.0], [0, 2, 3])  # not declined: no upload
    again = ragbatch.softmax(on_device)
    explained = coheriq.explain(ragbatch.softmax, small)
print(coheriq.engine_of(on_host) == cpu, coheriq.engine_of(again))
print(explained.answers == cpu, explained.declines)
print([(r.candidate, r.engine, r.count) for r in prof.declines])
"""


def test_a_small_batch_on_the_host_is_declined_and_runs_on_the_next_engine():
    done = run("-c", DECLINES, RAGBATCH_GPU_PLATFORM="cpu", RAGBATCH_GPU_MIN_VALUES="1000")
    assert done.returncode == 0, done.stderr[-3000:]
    ran, explained, counted = done.stdout.strip().splitlines()
    assert ran == "True gpu"
    reason = "a batch on the host with fewer than 1000 values: uploading it costs more than"
    assert explained.startswith("True ['gpu declines: " + reason)
    assert counted == "[('softmax', 'gpu', 1)]"


def test_the_crossover_benchmark_runs_small():
    done = run("-m", "ragbatch_gpu.benchmark", "--crossover", "--repeat", "1",
               "--platform", "cpu")  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "the gpu engine (uploading each batch) is faster than the" in done.stdout


CROSSING = """
import pickle, sys, coheriq, ragbatch
cpu = "compiled" if "compiled" in coheriq.available_engines("ragbatch") else "numpy"
host = ragbatch.RaggedBatch([[float(i), 2.0, 3.0] for i in range(400)])
with coheriq.profile() as prof, coheriq.using_engine("ragbatch", ["gpu", cpu]):
    first = ragbatch.softmax(host)  # uploaded as it enters the engine
    again = ragbatch.softmax(host)  # the upload reused
    indices, best = ragbatch.topk(first, 2)  # stays on the device: no conversion
    small = ragbatch.softmax(best)  # 800 values on the device: declined, downloaded once
    smaller = ragbatch.row_sum(best)  # declined too: the download reused
    explained = coheriq.explain(ragbatch.softmax, best)
print(type(first).__name__, type(again).__name__, type(best).__name__, coheriq.engine_of(small))
print(sorted((r.candidate, r.pair, r.count) for r in prof.conversions))
print(explained.conversions)
with coheriq.verify("ragbatch", "gpu", on_mismatch="raise") as checked:
    ragbatch.softmax(ragbatch.topk(ragbatch.softmax(host), 2)[1])
print(checked.ok, [(r.candidate, r.compared) for r in checked.rows])
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
    done = run("-c", CROSSING, pickled, RAGBATCH_GPU_PLATFORM="cpu", RAGBATCH_GPU_MIN_VALUES="0",
               RAGBATCH_GPU_MIN_DEVICE_VALUES="1000")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    kinds, converted, explained, verified = done.stdout.strip().splitlines()
    cpu = "compiled" if importlib.util.find_spec("ragbatch_compiled") else "numpy"
    assert kinds == f"GpuBatch GpuBatch GpuBatch {cpu}"
    assert converted == (
        "[('softmax', 'GpuBatch -> RaggedBatch', 1), ('softmax', 'RaggedBatch -> GpuBatch', 1)]"
    )
    assert explained == "['GpuBatch -> RaggedBatch by to_library (a fallback)']"
    assert verified == "True [('softmax', 2), ('topk', 1)]"
    loaded = run("-c", LOAD, pickled)  # a plain interpreter: the library's batch, no JAX
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    assert loaded.stdout.split() == ["ragbatch", "RaggedBatch", "400", "False"]
