#!/usr/bin/env bash
# The GPU check (issue 14), on a machine with an NVIDIA GPU, over a bundle written where the
# compiler runs:
#   here:    python benchmarks/gpu_bundle.py gpu_bundles          (git-ignored; about 58 MiB)
#   there:   bash benchmarks/gpu_check.sh [gpu_bundles] [--quick] [gpu_compare.py options]
# Prints the GPU and driver, builds the C runtime (`make -C runtime_c`) or, where that
# cannot be done (no C compiler or zstd headers), uses the one built here
# (BUNDLE/lib/libaot_runtime.so with its libzstd.so.1) and says which; then
# benchmarks/gpu_compare.py: every bundled model on the GPU against the CPU artifact's
# outputs, latency against PyTorch eager, torch.compile and JAX (XLA) at batch 1 and 32 and
# llama_tiny decode (batch 1, 8) and prefill with the KV cache in place,
# the 4096^3 GEMM against cuBLAS, aot_run_device's overhead, and one table. Needs python3
# with numpy, torch (CUDA), jax (CUDA), onnx; no aot install, no zstandard, no network.
# Everything ends within 8 minutes (AOT_GPU_CHECK_SECONDS, default 470, for the whole
# script; the comparison gets what the build leaves).
set -uo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
limit=${AOT_GPU_CHECK_SECONDS:-470}
bundle=gpu_bundles
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then bundle=$1; shift; fi
if [ ! -f "$bundle/bundle.json" ]; then
  echo "gpu_check: no bundle at $bundle (python benchmarks/gpu_bundle.py $bundle, where aot compiles)" >&2
  exit 2
fi
bundle=$(cd "$bundle" && pwd)

echo "## Device"
nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader \
  || echo "nvidia-smi: not available"
python3 --version

# the runtime: built here from runtime_c/, else the bundle's prebuilt one
runtime_note=""
build_log=$(mktemp)
if timeout 120 make -s -j"$(nproc)" -C runtime_c BUILD_DIR=build/gpu-check all >"$build_log" 2>&1; then
  export AOT_RUNTIME_LIB=$PWD/runtime_c/build/gpu-check/libaot_runtime.so
  runtime_note="built on this machine with make -C runtime_c ($(${CC:-cc} --version 2>/dev/null | head -n 1))"
elif [ -f "$bundle/lib/libaot_runtime.so" ]; then
  export AOT_RUNTIME_LIB=$bundle/lib/libaot_runtime.so
  export LD_LIBRARY_PATH=$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  runtime_note="prebuilt, from the bundle (make failed here: $(tail -n 1 "$build_log"))"
else
  echo "gpu_check: the runtime does not build here and the bundle has none:" >&2
  cat "$build_log" >&2
  exit 2
fi
rm -f "$build_log"

left=$((limit - ($(date +%s) - started)))
export PYTHONUNBUFFERED=1 XLA_PYTHON_CLIENT_PREALLOCATE=false
# the program keeps its own deadline (a little under ours) and prints what it has by then
timeout --signal=TERM --kill-after=10 "$left" \
  python3 benchmarks/gpu_compare.py "$bundle" --deadline "$((left - 15))" --runtime-note "$runtime_note" "$@"
status=$?
echo "gpu_check: $(( $(date +%s) - started )) s, exit $status"
exit $status
