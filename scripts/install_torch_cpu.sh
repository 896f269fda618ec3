#!/usr/bin/env bash
# torch (CPU build) only generates the benchmark models; it is never a runtime
# dependency. Installs torch 2.13.0 CPU without ever letting pip pull a CUDA
# build, and onnxscript for torch's newer (dynamo) exporter; where no CPU
# build is reachable it says so and the tests that need torch skip.
set -uo pipefail

install_torch() {
  python3 -c "import torch" 2>/dev/null && return 0
  local wheel
  wheel=$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -n 1)
  if [ -n "$wheel" ] && python3 -m pip install -q "$wheel"; then
    return 0
  fi
  python3 -m pip install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu \
    --extra-index-url https://pypi.org/simple 2>/dev/null
}

if ! install_torch; then
  echo "setup: torch 2.13.0 (CPU) is not available here; the benchmark-model tests will skip" >&2
  exit 0
fi
python3 -c "import onnxscript" 2>/dev/null || python3 -m pip install -q onnxscript \
  || echo "setup: onnxscript is not available; the dynamo-export tests will skip" >&2
exit 0
