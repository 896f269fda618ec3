"""Compile seconds per benchmark-suite model and phase, cold and warm kernel cache.

    python benchmarks/compile_time.py [--runs 3] [--cpu portable,native] [--jobs N] [models...]

For each model of models/make_benchmarks.py (made with torch into a temporary folder,
or taken from --models-dir) and each --cpu (default: portable, the default build with
two variants, and native), compiles it in a fresh process (`aot.compile`, as
aot-compile does) twice over one new cache folder: cold (empty cache) then warm (every
kernel object cached). Prints per phase (from the compile's -v log): import, passes
(every pass but buffers), buffers, codegen, pack (what is left of the total: manifest,
artifact, write) and the total, plus `process`, the whole subprocess's wall time
(Python start and the compiler's own imports too, with Python's bytecode cache on as in an
installed package: PYTHONDONTWRITEBYTECODE is dropped for the children, which would
otherwise compile the compiler's sources in every process, ~0.25 s here). Medians over --runs. The header
names the CPU and its core count; other load on the machine shows up here, so run it
quiet and under the benchmark lock (flock /tmp/aot-bench.lock ...).

    python benchmarks/compile_time.py --iree /path/to/bin [models...]

also times IREE on each model, for one CPU variant (llvm-cpu, --iree-llvmcpu-target-cpu=host):
`iree-import-onnx` then `iree-compile` from that folder (pip install iree-base-compiler; they
are not a dependency), and prints its seconds beside aot's cold process time with the
ratio aot/IREE (the issue's bar: no model over 4). Medians over --runs.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
sys.path.insert(0, str(ROOT / "benchmarks"))

PHASES = ("import", "passes", "buffers", "codegen", "pack", "total", "process")
_TIMED = re.compile(r"^(\S+)\s+([0-9.]+) ms")

# runs in the child: one compile with the -v log, the log's timed lines back as JSON
_CHILD = """
import json, sys
from aot.driver import compile_model
lines = []
compile_model(sys.argv[1], sys.argv[2], cpu=sys.argv[3], log=lines.append)
print(json.dumps(lines))
"""


def phases(lines: list[str]) -> dict[str, float]:
    """Seconds per phase from a compile's log: the timed lines (`name  12.3 ms ...`)."""
    found = {"import": 0.0, "passes": 0.0, "buffers": 0.0, "codegen": 0.0, "total": 0.0}
    for line in lines:
        match = _TIMED.match(line)
        if match is None:
            continue
        name, seconds = match.group(1), float(match.group(2)) / 1000
        if name in ("import", "buffers", "codegen", "total"):
            found[name] = seconds
        else:
            found["passes"] += seconds
    found["pack"] = max(0.0, found["total"] - sum(found[p] for p in ("import", "passes", "buffers", "codegen")))
    return found


def compile_once(model: Path, out: Path, cpu: str, env: dict[str, str]) -> dict[str, float]:
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", _CHILD, str(model), str(out), cpu], env=env,
                            capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"compiling {model.name} for {cpu} failed:\n{result.stderr}")
    found = phases(json.loads(result.stdout.strip().splitlines()[-1]))
    found["process"] = elapsed
    return found


def child_env(**extra: str) -> dict[str, str]:
    """This process's environment for a child compile: the default build and kernel cache, and
    Python's bytecode cache on."""
    env = {k: v for k, v in os.environ.items() if k not in ("AOT_NO_CACHE", "AOT_CPU", "PYTHONDONTWRITEBYTECODE")}
    return {**env, **extra}


def warm_bytecode() -> None:
    """Import the compiler once with the bytecode cache on, so that no timed child compiles
    its sources (an installed package has its bytecode from the install)."""
    subprocess.run([sys.executable, "-c", "import aot.driver, aot.codegen.cpu, aot.importers.onnx, aot.artifact"],
                   env=child_env(), check=True)


def measure(model: Path, cpu: str, runs: int, jobs: int | None, work: Path) -> dict[str, dict[str, float]]:
    """{"cold": {phase: median s}, "warm": {...}} over `runs` pairs of compiles."""
    samples: dict[str, list[dict[str, float]]] = {"cold": [], "warm": []}
    for _ in range(runs):
        with tempfile.TemporaryDirectory(dir=work, prefix="cache-") as cache:
            env = child_env(AOT_CACHE_DIR=cache)
            if jobs is not None:
                env["AOT_JOBS"] = str(jobs)
            for state in ("cold", "warm"):
                samples[state].append(compile_once(model, work / f"{model.stem}.aot", cpu, env))
    return {state: {p: statistics.median(s[p] for s in found) for p in PHASES} for state, found in samples.items()}


def iree_seconds(model: Path, bin_dir: Path, work: Path) -> tuple[float, float]:
    """(import s, compile s) of one IREE compile of `model` for this CPU, each a fresh process."""
    mlir, vmfb = work / f"{model.stem}.mlir", work / f"{model.stem}.vmfb"
    steps = ([str(bin_dir / "iree-import-onnx"), str(model), "-o", str(mlir)],
             [str(bin_dir / "iree-compile"), str(mlir), "--iree-hal-target-device=local",
              "--iree-hal-local-target-device-backends=llvm-cpu", "--iree-llvmcpu-target-cpu=host", "-o", str(vmfb)])
    seconds = []
    for step in steps:
        start = time.perf_counter()
        result = subprocess.run(step, capture_output=True, text=True)
        seconds.append(time.perf_counter() - start)
        if result.returncode != 0:
            raise SystemExit(f"IREE failed on {model.name}: {' '.join(step)}\n{result.stderr[-2000:]}")
    return seconds[0], seconds[1]


def main(argv: list[str] | None = None) -> int:
    from side_by_side import cpu_model_name

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*", help="suite models (default: all of make_benchmarks.MODELS)")
    parser.add_argument("--runs", type=int, default=1, help="cold+warm pairs per model and cpu; medians")
    parser.add_argument("--cpu", default="portable,native", help="comma list of --cpu values, each timed apart")
    parser.add_argument("--jobs", type=int, default=None, help="codegen worker processes (AOT_JOBS; default: the cores)")
    parser.add_argument("--models-dir", type=Path, help="take MODEL.onnx from here instead of making them with torch")
    parser.add_argument("--iree", type=Path, help="a folder with iree-import-onnx and iree-compile: time IREE too")
    args = parser.parse_args(argv)
    if args.iree and not all((args.iree / tool).is_file() for tool in ("iree-import-onnx", "iree-compile")):
        parser.error(f"--iree {args.iree}: no iree-import-onnx and iree-compile there (pip install iree-base-compiler)")
    import make_benchmarks

    names = args.models or list(make_benchmarks.MODELS)
    cpus = [c for c in args.cpu.split(",") if c]
    print(f"# CPU: {cpu_model_name()}, {len(os.sched_getaffinity(0))} usable cores; "
          f"codegen jobs: {args.jobs or 'all cores'}; medians of {args.runs} run(s), seconds")
    print(f"| model | cpu | cache | {' | '.join(PHASES)} |")
    print(f"|---|---|---|{'--:|' * len(PHASES)}")
    against_iree = []
    warm_bytecode()
    with tempfile.TemporaryDirectory(prefix="aot-compile-time-") as tmp:
        work = Path(tmp)
        for name in names:
            model = args.models_dir / f"{name}.onnx" if args.models_dir else make_benchmarks.make(name, work / "models")
            for cpu in cpus:
                result = measure(model, cpu, args.runs, args.jobs, work)
                for state in ("cold", "warm"):
                    row = " | ".join(f"{result[state][p]:.2f}" for p in PHASES)
                    print(f"| {name} | {cpu} | {state} | {row} |", flush=True)
                if args.iree and cpu == cpus[0]:
                    runs = [iree_seconds(model, args.iree, work) for _ in range(args.runs)]
                    imported, compiled = (statistics.median(r[i] for r in runs) for i in (0, 1))
                    against_iree.append((name, cpu, result["cold"]["process"], imported, compiled))
    if against_iree:
        print(f"\n| model | aot cpu | aot cold process s | IREE import s | IREE compile s | IREE total s | aot/IREE |")
        print("|---|---|--:|--:|--:|--:|--:|")
        for name, cpu, ours, imported, compiled in against_iree:
            print(f"| {name} | {cpu} | {ours:.2f} | {imported:.2f} | {compiled:.2f} | {imported + compiled:.2f} | "
                  f"{ours / (imported + compiled):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
