#!/usr/bin/env bash
# The demo: set up, write the sample models, compile lenet, show what is inside,
# run it through the C runtime, and print outputs, artifact size and latency.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
python3 models/make_samples.py --out models/out
aot-compile models/out/lenet.onnx -o models/out/lenet.aot
aot inspect models/out/lenet.aot
aot run models/out/lenet.aot --input x=models/out/lenet.input.npy --repeat 200
