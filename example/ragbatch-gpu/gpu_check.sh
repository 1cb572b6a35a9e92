#!/usr/bin/env bash
# Every check of the gpu engine that needs a GPU, in one run (run it from the
# repository root, on a machine with an NVIDIA GPU and JAX with CUDA support):
#
#   bash example/ragbatch-gpu/gpu_check.sh [OUTPUT_FOLDER]
#
# 1. installs coheriq, ragbatch, its numpy, compiled and gpu engines (no
#    dependencies: JAX, NumPy, pytest and hypothesis must be there already);
# 2. runs ragbatch's invariant suite on the gpu engine, and the gpu engine's tests;
# 3. benchmarks softmax over 10^8 float64 values in 10^5 rows with the Pallas
#    kernel and with the XLA program, each against the compiled CPU engine;
# 4. calibrates the gpu engine against the compiled one (coheriq calibrate): times
#    both on batches on the host (each call uploads its batch) of 2^8 to 2^22 values
#    and fits the size from which the gpu engine wins, its crossover, below which
#    the engine declines a batch on the host. The table goes to crossover.txt, the
#    drawing to crossover.png (where matplotlib is installed), the calibrations file
#    to calibrations/ (not the user's cache).
#
# Each step's output goes to the terminal and to a file in OUTPUT_FOLDER (default:
# the current folder). With WHEELS=folder, the pure-Python packages are installed
# from wheels made beforehand (for a machine without a package index), with
#   pip wheel --no-deps -w folder . ./example/ragbatch ./example/ragbatch-numpy ./example/ragbatch-gpu
# The compiled engine is always built on the machine itself, with its setuptools.
set -uo pipefail
out=${1:-.}
python=${PYTHON:-python3}
mkdir -p "$out"
failed=0

step() {  # step NAME COMMAND...: run, show and keep the output; remember a failure
    local name=$1
    shift
    echo "== $name: $*" | tee "$out/$name.txt"
    "$@" 2>&1 | tee -a "$out/$name.txt"
    local status=${PIPESTATUS[0]}
    echo "== $name: exit $status" | tee -a "$out/$name.txt"
    [[ $status -eq 0 ]] || failed=1
}

pip_install=("$python" -m pip install -q --no-deps)
if [[ -n "${WHEELS:-}" ]]; then
    step install "${pip_install[@]}" --no-index --no-build-isolation "$WHEELS"/*.whl \
        ./example/ragbatch-compiled
else
    step install "${pip_install[@]}" . ./example/ragbatch ./example/ragbatch-numpy \
        ./example/ragbatch-compiled ./example/ragbatch-gpu
fi
step device "$python" -c "import jax; print('JAX', jax.__version__, jax.devices())"
step invariants "$python" -m pytest -p no:cacheprovider -q --pyargs ragbatch.tests \
    --coheriq-engine=ragbatch:gpu
step gpu_tests "$python" -m pytest -p no:cacheprovider -q -rs tests/test_gpu_engine.py
step benchmark_pallas "$python" -m ragbatch_gpu.benchmark --softmax pallas
step benchmark_xla "$python" -m ragbatch_gpu.benchmark --softmax xla --cpu-repeat 1
plot=()
if "$python" -c "import matplotlib" 2>/dev/null; then
    plot=(--plot "$out/crossover.png")
fi
step crossover env COHERIQ_CACHE_DIR="$out/calibrations" "$python" -m coheriq calibrate \
    ragbatch gpu --against compiled --budget 120 ${plot[@]+"${plot[@]}"}
exit $failed
