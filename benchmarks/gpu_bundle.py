"""Write device-run bundles (benchmarks/gpu_launch.py reads them) for models compiled here.

    python benchmarks/gpu_bundle.py OUT_DIR                    # the default set (fits a device run's upload)
    python benchmarks/gpu_bundle.py OUT_DIR --model mlp --model transformer

Each model is compiled with --target cpu,cuda (both SMs); its artifact's CPU code
runs here (the C runtime) on the model's input, and OUT_DIR/<model>/ gets the
manifest, the weights, the PTX and cubin sections, the inputs and the CPU outputs:
all a machine with a GPU needs to run the launch plan and compare, with numpy and
CuPy only (no aot, LLVM or zstd there). The default set: the benchmark models but
resnet18 (its 45 MB of weights), and the StableHLO test cases. Benchmark models
need torch (models/make_benchmarks.py).
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
sys.path.insert(0, str(ROOT / "benchmarks"))

BENCHMARK_MODELS = ("mlp", "mlp_b64", "lenet", "mobilenetv2", "bert_mini", "gpt_block")


def write_bundle(artifact: bytes, inputs: dict[str, np.ndarray], folder: Path) -> None:
    """`artifact` (compiled with cuda in its targets) and its CPU outputs on `inputs`, as a bundle."""
    from aot.artifact import read_artifact
    from aot.runtime.session import Session

    parsed = read_artifact(artifact)
    manifest = parsed.manifest
    if "cuda" not in manifest:
        raise SystemExit("the artifact has no GPU code: compile with target 'cpu,cuda'")
    session = Session(artifact)
    outputs = session.run(None, inputs)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=1))
    (folder / "weights.bin").write_bytes(parsed.sections.get(manifest["weights"]["section"], b""))
    for entry in manifest["cuda"]["sms"]:
        for key in ("ptx", "cubin"):
            if entry.get(key):
                (folder / entry[key]).write_bytes(parsed.sections[entry[key]])
    np.savez(folder / "inputs.npz", **inputs)
    np.savez(folder / "cpu_outputs.npz", **{spec["name"]: out for spec, out in zip(manifest["outputs"], outputs)})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--model", action="append", help="a benchmark model or StableHLO case name")
    args = parser.parse_args(argv)
    import gpu_suite

    from aot.driver import compile_model

    args.out.mkdir(parents=True, exist_ok=True)
    wanted = set(args.model or [])
    with tempfile.TemporaryDirectory() as tmp:
        cases = [c for c in gpu_suite._stablehlo_cases() if not wanted or c.name in wanted]
        if not wanted or wanted & set(BENCHMARK_MODELS):
            cases += [c for c in gpu_suite._benchmark_cases(Path(tmp)) if c.name in (wanted or BENCHMARK_MODELS)]
        for case in cases:
            result = compile_model(case.model, target="cpu,cuda", shapes=case.shapes)
            names = [spec["name"] for spec in result.manifest["inputs"]]
            dtypes = [spec["dtype"] for spec in result.manifest["inputs"]]
            inputs = {n: np.asarray(x).astype(d) for n, x, d in zip(names, case.inputs, dtypes)}
            folder = args.out / case.name.replace("/", "_")
            write_bundle(result.artifact, inputs, folder)
            size = sum(p.stat().st_size for p in folder.iterdir())
            print(f"{folder.name}: {len(result.manifest['kernels'])} kernels, {size / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
