"""Helpers for `--emit c` tests: a C program that runs emitted models, built with `cc` and run.

The program is generated from each model's <prefix>.json and uses only its header's names:
it allocates every buffer from the macros (the arena with aligned_alloc), reads input i of
model P from DIR/P.in<i>.bin, runs P_run, and writes DIR/P.out<i>.bin; a failing status
prints P_status_message's text and exits 3. With `threads` it calls P_run_threads instead,
RUNS times (past the pool's calibration runs) on a pool of that many threads from the
runtime (aot_pool_create), or with a NULL pool for threads == 0 (no runtime needed).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror"]
# runs of P_run_threads: the pool times every kernel in its first 2 (threadpool.c) and splits after
RUNS = 5

_PRELUDE = """\
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
{includes}

static void* load(const char* dir, const char* name, size_t bytes) {{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "rb");
  void* data = malloc(bytes ? bytes : 1);
  if (!f || !data || fread(data, 1, bytes, f) != bytes) {{ fprintf(stderr, "cannot read %s\\n", path); exit(2); }}
  fclose(f);
  return data;
}}

static void save(const char* dir, const char* name, const void* data, size_t bytes) {{
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE* f = fopen(path, "wb");
  if (!f || fwrite(data, 1, bytes, f) != bytes) {{ fprintf(stderr, "cannot write %s\\n", path); exit(2); }}
  fclose(f);
}}

static void* arena_for(size_t bytes, size_t align) {{
  if (bytes == 0) return NULL;
  return aligned_alloc(align, (bytes + align - 1) / align * align); /* C11: a multiple of align */
}}
"""


def _run_block(model: dict, threaded: bool) -> str:
    p, P = model["prefix"], model["prefix"].upper()
    lines = ["  {"]
    args = []
    for i, t in enumerate(model["inputs"]):
        lines.append(f'    void* in{i} = load(dir, "{p}.in{i}.bin", {P}_{t["c_name"].upper()}_BYTES);')
        args.append(f"in{i}")
    for i, t in enumerate(model["outputs"]):
        lines.append(f"    void* out{i} = calloc(1, {P}_{t['c_name'].upper()}_BYTES + 1);")
        args.append(f"out{i}")
    lines.append(f"    void* arena = arena_for({P}_ARENA_BYTES, {P}_ARENA_ALIGN);")
    if threaded:
        lines.append("    int32_t status = 0;")
        lines.append(f"    for (int run = 0; run < {RUNS} && !status; run++) "
                     f"status = {p}_run_threads({', '.join([*args, 'arena', 'pool'])});")
    else:
        lines.append(f"    int32_t status = {p}_run({', '.join([*args, 'arena'])});")
    lines.append(f'    if (status) {{ printf("%s\\n", {p}_status_message(status)); return 3; }}')
    for i, t in enumerate(model["outputs"]):
        lines.append(f'    save(dir, "{p}.out{i}.bin", out{i}, {P}_{t["c_name"].upper()}_BYTES);')
    lines += [f"    free({a});" for a in args]
    lines += ["    free(arena);", "  }"]
    return "\n".join(lines)


def driver_source(models: Sequence[dict], threads: int | None = None) -> str:
    """A C program running every model of `models` (their <prefix>.json contents) in turn;
    `threads` as the module docstring says."""
    includes = "\n".join(f'#include "{m["prefix"]}.h"' for m in models)
    pool = ""
    if threads:
        includes = "#include <aot_runtime.h>\n" + includes
        pool = (f"  aot_pool_t* pool = NULL;\n  aot_error_t error;\n"
                f"  if (aot_pool_create({threads}, &pool, &error) != AOT_OK) {{ printf(\"%s\\n\", error.message); return 4; }}\n")
    elif threads == 0:
        pool = "  struct aot_pool* pool = NULL;\n"
    body = "\n".join(_run_block(m, threads is not None) for m in models)
    return (_PRELUDE.format(includes=includes) + "\nint main(int argc, char** argv) {\n"
            '  if (argc != 2) { fprintf(stderr, "usage: %s DIR\\n", argv[0]); return 2; }\n'
            "  const char* dir = argv[1];\n" + pool + body + ("\n  aot_pool_destroy(pool);" if threads else "")
            + "\n  return 0;\n}\n")


def cc() -> str:
    found = shutil.which(os.environ.get("CC", "cc"))
    if found is None:
        pytest.skip("no C compiler (cc) to build the program")
    return found


def build(source: str, work: Path, include_dirs: Sequence[Path], objects: Sequence[Path], name: str = "prog",
          libs: Sequence[str] = ()) -> Path:
    """Compile `source` with CFLAGS against the headers in `include_dirs`, link `objects`, then `libs`."""
    (work / f"{name}.c").write_text(source)
    program = work / name
    includes = [f"-I{d}" for d in include_dirs]
    result = subprocess.run([cc(), *CFLAGS, *includes, str(work / f"{name}.c"), *map(str, objects), *libs, "-o", str(program)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return program


def run_models(program: Path, work: Path, feeds: dict[str, Sequence[np.ndarray]],
               models: dict[str, dict]) -> dict[str, list[np.ndarray]]:
    """Write each model's inputs, run the program, read every output back by the json's dtype and shape."""
    for prefix, arrays in feeds.items():
        for i, array in enumerate(arrays):
            np.ascontiguousarray(array).tofile(work / f"{prefix}.in{i}.bin")
    result = subprocess.run([str(program), str(work)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    outputs = {}
    for prefix, model in models.items():
        outputs[prefix] = [np.fromfile(work / f"{prefix}.out{i}.bin", dtype=np.dtype(t["dtype"])).reshape(t["shape"])
                           for i, t in enumerate(model["outputs"])]
    return outputs


def described(out_dir: Path, prefix: str) -> dict:
    return json.loads((out_dir / f"{prefix}.json").read_text())
