#!/usr/bin/env bash
# torch (CPU build) only generates the benchmark models; it is never a runtime
# dependency. Installs torch 2.13.0 CPU without ever letting pip pull a CUDA
# build, onnxscript for torch's newer (dynamo) exporter, and transformers for the
# model zoo (models/make_zoo.py) under a constraint that holds torch where it is;
# where no CPU build is reachable it says so and the tests that need torch skip.
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

# transformers does not require torch, but a dependency could still ask for
# another one: the constraint makes pip fail rather than swap the installed build.
TRANSFORMERS=5.24.0
install_transformers() {
  local torch_version constraints status
  torch_version=$(python3 -c "import torch; print(torch.__version__)") || return 1
  constraints=$(mktemp)
  echo "torch==${torch_version}" > "$constraints"
  python3 -m pip install -q "transformers==${TRANSFORMERS}" --constraint "$constraints"
  status=$?
  rm -f "$constraints"
  if [ "$(python3 -c "import torch; print(torch.__version__)")" != "$torch_version" ]; then
    echo "setup: error: installing transformers changed torch from ${torch_version}" >&2
    return 1
  fi
  return $status
}
python3 -c "import transformers, sys; sys.exit(transformers.__version__ != '${TRANSFORMERS}')" 2>/dev/null \
  || install_transformers \
  || echo "setup: transformers ${TRANSFORMERS} is not available; the model-zoo tests will skip" >&2
exit 0
