#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU (the device tool's H200) over bundles
# written where the compiler runs:
#   here:    python benchmarks/gpu_bundle.py gpu_bundles        (gpu_bundles/ is git-ignored)
#   there:   bash benchmarks/gpu_check.sh [gpu_bundles]
# Prints the device, then per model and code variant (cubin for the device's SM, PTX of
# every SM through the driver's JIT) the largest difference from the CPU artifact and the
# median time of the launch sequence. Needs python3 with numpy and CuPy; no aot install.
set -euo pipefail
cd "$(dirname "$0")/.."
bundles="${1:-gpu_bundles}"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true
PYTHONUNBUFFERED=1 python3 benchmarks/gpu_launch.py "$bundles" --runs 20
