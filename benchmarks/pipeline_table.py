"""What the optimizing pipeline does to each benchmark model: one table.

    python benchmarks/pipeline_table.py [--dir DIR] [--generate] [--light] [MODEL ...]

Per model: ONNX nodes, kernels after fusion (and the ratio), kernels with a
fused reduction (softmax, layer norm), arena bytes, the arena's lower bound
(max live bytes over the schedule), arena / lower bound, and the sum of all
temporaries (what the arena would be without reuse). A MODEL is a name
looked up as DIR/NAME.onnx (default DIR: models/out) or a path to an .onnx
file. `--generate` first writes missing benchmark models with
models/make_benchmarks.py (needs torch), whose exports keep BatchNormalization
nodes for our fold pass (for torch's own folded graph, write one with
`make_benchmarks.py DIR resnet18 --exporter-folds-batch-norm` and pass its
path); `--light` adds the ONNX package's light model zoo (resnet50,
densenet121, ...). Runs import and the pipeline
only (no code generation), so it takes seconds.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))

BENCHMARKS = ("mlp", "lenet", "lenet_bn", "resnet18", "mobilenetv2", "bert_mini", "gpt_block")


def light_models() -> list[Path]:
    import onnx

    folder = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
    return sorted(folder.glob("light_*.onnx"))


def measure(path: Path) -> dict[str, object]:
    import onnx

    from aot.driver import import_model
    from aot.pipeline import run_pipeline

    nodes = len(onnx.load(str(path), load_external_data=False).graph.node)
    start = time.perf_counter()
    graph, _, _ = import_model(path)
    plan = run_pipeline(graph)
    fused_reductions = sum(
        1 for k in plan.kernels
        if "reduce" in k.ops and k.root.producer is not None and k.root.producer.op != "reduce"
    )
    return {
        "model": path.stem.removeprefix("light_"),
        "onnx_nodes": nodes,
        "kernels": len(plan.kernels),
        "fused_reductions": fused_reductions,
        "arena": plan.arena_bytes,
        "lower_bound": plan.arena_lower_bound,
        "temporaries": int(plan.notes.get("temporaries_bytes", 0)),  # type: ignore[call-overload]
        "seconds": time.perf_counter() - start,
    }


def resolve(names: list[str], folder: Path, generate: bool) -> list[Path]:
    paths = []
    for name in names:
        candidate = Path(name)
        if candidate.suffix == ".onnx":
            paths.append(candidate)
            continue
        path = folder / f"{name}.onnx"
        if not path.exists() and generate and name != "lenet_bn":
            import make_benchmarks

            path = make_benchmarks.make(name, folder)
        if not path.exists() and name in ("mlp", "lenet", "lenet_bn"):
            import make_samples

            make_samples.write_samples(folder)
        if path.exists():
            paths.append(path)
        else:
            print(f"skipped {name}: {path} not found (run with --generate, needs torch)", file=sys.stderr)
    return paths


def table(rows: list[dict[str, object]]) -> str:
    header = f"{'model':<14} {'ONNX nodes':>10} {'kernels':>8} {'nodes/k':>8} {'fused red.':>10} " \
             f"{'arena B':>12} {'lower bound B':>14} {'arena/lb':>9} {'temporaries B':>14}"
    lines = [header, "-" * len(header)]
    for r in rows:
        ratio = r["arena"] / r["lower_bound"] if r["lower_bound"] else 1.0  # type: ignore[operator]
        lines.append(
            f"{r['model']:<14} {r['onnx_nodes']:>10} {r['kernels']:>8} {r['onnx_nodes'] / max(1, r['kernels']):>8.2f} "  # type: ignore[operator]
            f"{r['fused_reductions']:>10} {r['arena']:>12} {r['lower_bound']:>14} {ratio:>9.3f} {r['temporaries']:>14}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", default=list(BENCHMARKS))
    parser.add_argument("--dir", type=Path, default=ROOT / "models" / "out")
    parser.add_argument("--generate", action="store_true", help="write missing benchmark models (needs torch)")
    parser.add_argument("--light", action="store_true", help="add the ONNX light model zoo")
    args = parser.parse_args(argv)
    paths = resolve(args.models, args.dir, args.generate)
    if args.light:
        paths += light_models()
    rows = [measure(p) for p in paths]
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
