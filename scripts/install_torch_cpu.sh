#!/usr/bin/env bash
# torch (CPU build) only generates the benchmark models; it is never a runtime
# dependency. Installs torch 2.13.0 CPU without ever letting pip pull a CUDA
# build; where no CPU build is reachable it says so and the tests that need
# torch skip.
set -uo pipefail
if python3 -c "import torch" 2>/dev/null; then
  exit 0
fi
wheel=$(ls /opt/wheels/torch-2.13.0+cpu-*.whl 2>/dev/null | head -n 1)
if [ -n "$wheel" ]; then
  python3 -m pip install -q "$wheel" && exit 0
fi
if python3 -m pip install -q "torch==2.13.0" --index-url https://download.pytorch.org/whl/cpu \
     --extra-index-url https://pypi.org/simple 2>/dev/null; then
  exit 0
fi
echo "setup: torch 2.13.0 (CPU) is not available here; the benchmark-model tests will skip" >&2
exit 0
