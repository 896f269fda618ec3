#!/usr/bin/env bash
# The demo: set up, write the sample models, compile lenet, show what is inside,
# run it through the C runtime, and print outputs, artifact size and latency.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
VENV=${AOT_VENV:-.venv}  # where setup.sh installed aot
"$VENV/bin/python" models/make_samples.py --out models/out
"$VENV/bin/aot-compile" models/out/lenet.onnx -o models/out/lenet.aot
"$VENV/bin/aot" inspect models/out/lenet.aot
"$VENV/bin/aot" run models/out/lenet.aot --input x=models/out/lenet.input.npy --repeat 200
