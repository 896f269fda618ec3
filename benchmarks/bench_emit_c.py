"""Static entry (--emit c) against the runtime's aot_run, side by side in one C program.

    python benchmarks/bench_emit_c.py [--runs 200] [--cpu native] [--threads 1] [models...]
    python benchmarks/bench_emit_c.py --suite benchmark [--runs 50]   # torch-made benchmark models

Per model: the same plan, for one CPU (default native), compiled twice: to an artifact, run by
the C runtime (libaot_runtime.so: aot_run on a context of --threads threads), and with
--emit c to an object linked into the program (<prefix>_run; with --threads N > 1,
<prefix>_run_threads on an aot_pool_t of N threads). One process runs both in alternating blocks of runs, so
both see the same machine load; it prints the medians (microseconds), runtime/static (above
1: the runtime costs more per run), and whether the two outputs agree bit for bit (same
kernel code, so they should). The header names the CPU (lscpu).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "models"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import make_samples  # noqa: E402
from side_by_side import cpu_model_name  # noqa: E402

import aot  # noqa: E402
from aot.emit_c import emit_c  # noqa: E402
from aot.runtime.library import RUNTIME_DIR, library_path  # noqa: E402

BLOCK = 10  # runs per engine per block; blocks alternate

_PROGRAM = """\
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "aot_runtime.h"
#include "{p}.h"

static double now_us(void) {{
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}}
static int by_value(const void* a, const void* b) {{
  double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}}

int main(int argc, char** argv) {{
  if (argc != 4) return 2;
  int runs = atoi(argv[3]);
  FILE* f = fopen(argv[2], "rb");
  if (!f) return 2;
  enum {{ NI = {P}_INPUT_COUNT, NO = {P}_OUTPUT_COUNT }};
  static const uint64_t in_bytes[NI] = {{ {in_bytes} }}, out_bytes[NO] = {{ {out_bytes} }};
  void* in[NI]; void* out_static[NO]; void* out_runtime[NO];
  for (int i = 0; i < NI; i++) {{
    in[i] = malloc(in_bytes[i] + 1);
    if (fread(in[i], 1, in_bytes[i], f) != in_bytes[i]) return 2;
  }}
  fclose(f);
  for (int i = 0; i < NO; i++) {{ out_static[i] = calloc(1, out_bytes[i] + 1); out_runtime[i] = calloc(1, out_bytes[i] + 1); }}
  void* arena = {P}_ARENA_BYTES ? aligned_alloc({P}_ARENA_ALIGN, ({P}_ARENA_BYTES + {P}_ARENA_ALIGN - 1) / {P}_ARENA_ALIGN * {P}_ARENA_ALIGN) : NULL;

  aot_error_t err;
  aot_model_t* model = NULL;
  aot_context_t* ctx = NULL;
  aot_pool_t* pool = NULL;
  aot_context_options_t options = {{0}};
  options.struct_size = sizeof options;
  options.num_threads = {threads};
  if (aot_model_open_file(argv[1], &model, &err) || aot_context_create(model, &options, &ctx, &err) ||
      aot_pool_create({threads}, &pool, &err)) {{
    fprintf(stderr, "error: %s\\n", err.message);
    return 1;
  }}
  aot_tensor_t tin[NI], tout[NO];
  aot_tensor_info_t info;
  for (uint32_t i = 0; i < NI; i++) {{
    aot_model_input_info(model, i, &info, &err);
    tin[i] = (aot_tensor_t){{info.dtype, info.rank, info.shape, in[i], info.byte_size}};
  }}
  for (uint32_t i = 0; i < NO; i++) {{
    aot_model_output_info(model, i, &info, &err);
    tout[i] = (aot_tensor_t){{info.dtype, info.rank, info.shape, out_runtime[i], info.byte_size}};
  }}
  double* t_static = malloc(sizeof(double) * (size_t)runs);
  double* t_runtime = malloc(sizeof(double) * (size_t)runs);
  for (int warm = 0; warm < {block}; warm++) {{
    {static_call};
    aot_run(ctx, tin, NI, tout, NO, &err);
  }}
  for (int done = 0; done < runs; done += {block}) {{
    for (int r = done; r < done + {block} && r < runs; r++) {{
      double t0 = now_us();
      int32_t status = {static_call};
      t_static[r] = now_us() - t0;
      if (status) {{ fprintf(stderr, "static: %s\\n", {p}_status_message(status)); return 1; }}
    }}
    for (int r = done; r < done + {block} && r < runs; r++) {{
      double t0 = now_us();
      aot_status_t st = aot_run(ctx, tin, NI, tout, NO, &err);
      t_runtime[r] = now_us() - t0;
      if (st) {{ fprintf(stderr, "runtime: %s\\n", err.message); return 1; }}
    }}
  }}
  int same = 1;
  for (int i = 0; i < NO; i++) same &= memcmp(out_static[i], out_runtime[i], out_bytes[i]) == 0;
  qsort(t_static, (size_t)runs, sizeof(double), by_value);
  qsort(t_runtime, (size_t)runs, sizeof(double), by_value);
  printf("%f %f %d\\n", t_static[runs / 2], t_runtime[runs / 2], same);
  aot_pool_destroy(pool);
  aot_context_destroy(ctx);
  aot_model_close(model);
  return 0;
}}
"""


def _program(info: dict, threads: int) -> str:
    p = info["prefix"]
    args = ", ".join([*(f"in[{i}]" for i in range(len(info["inputs"]))),
                      *(f"out_static[{i}]" for i in range(len(info["outputs"]))), "arena"])
    call = f"{p}_run_threads({args}, pool)" if threads > 1 else f"{p}_run({args})"
    return _PROGRAM.format(p=p, P=p.upper(), block=BLOCK, static_call=call, threads=threads,
                           in_bytes=", ".join(str(t["bytes"]) for t in info["inputs"]),
                           out_bytes=", ".join(str(t["bytes"]) for t in info["outputs"]))


def bench(model: Path, inputs: list[np.ndarray], cpu: str, runs: int, work: Path,
          threads: int = 1) -> tuple[float, float, bool]:
    """(static µs, runtime µs, outputs bit-identical) for `model`, medians over `runs` runs each."""
    artifact = work / f"{model.stem}.aot"
    aot.compile(model, artifact, cpu=cpu)
    result = emit_c(model, work, cpu=cpu, name="m")
    info = json.loads(result.files["json"].read_text())
    (work / "bench.c").write_text(_program(info, threads))
    with open(work / "inputs.bin", "wb") as f:
        for array in inputs:
            f.write(np.ascontiguousarray(array).tobytes())
    lib = library_path()
    subprocess.run(["cc", "-std=c11", "-O2", "-Wall", "-Werror", f"-I{RUNTIME_DIR / 'include'}", f"-I{work}",
                    str(work / "bench.c"), str(result.files["object"]), f"-L{lib.parent}", "-laot_runtime",
                    f"-Wl,-rpath,{lib.parent}", "-o", str(work / "bench")], check=True)
    out = subprocess.run([str(work / "bench"), str(artifact), str(work / "inputs.bin"), str(runs)],
                         capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1]), out[2] == "1"


def _models(args: argparse.Namespace, work: Path) -> list[tuple[str, Path, list[np.ndarray]]]:
    if args.suite == "benchmark":
        import make_benchmarks

        names = args.models or list(make_benchmarks.MODELS)
        found = []
        for name in names:
            path = make_benchmarks.make(name, work)
            found.append((name, path, [np.load(path.with_name(f"{name}.input.npy"))]))
        return found
    paths = make_samples.write_samples(work)
    names = args.models or list(paths)
    return [(name, paths[name], [np.load(paths[name].with_name(f"{name}.input.npy"))]) for name in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("models", nargs="*")
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--cpu", default="native")
    parser.add_argument("--threads", type=int, default=1, help="threads of the context and of the static pool")
    parser.add_argument("--suite", choices=["samples", "benchmark"], default="samples")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_model_name()}; code for --cpu {args.cpu}; {args.runs} runs each, {args.threads} thread(s), "
          f"alternating blocks of {BLOCK}")
    print(f"{'model':<14} {'static us':>10} {'aot_run us':>11} {'runtime/static':>15}  same bits")
    ratios = []
    with tempfile.TemporaryDirectory(prefix="aot-bench-emit-c-") as tmp:
        for name, path, inputs in _models(args, Path(tmp)):
            work = Path(tmp) / f"{name}.work"
            work.mkdir()
            static, runtime, same = bench(path, inputs, args.cpu, args.runs, work, args.threads)
            ratios.append(runtime / static)
            print(f"{name:<14} {static:10.2f} {runtime:11.2f} {runtime / static:15.3f}  {'yes' if same else 'NO'}",
                  flush=True)
    print(f"{'geomean':<14} {'':>10} {'':>11} {float(np.exp(np.mean(np.log(ratios)))):15.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
