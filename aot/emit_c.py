"""`aot-compile MODEL --emit c -o DIR`: a model as a static object and a C header, no runtime.

Writes into DIR (created if missing; its parent must exist, as an artifact's directory must):

    <prefix>.o      code and weights (codegen/cpu/static_entry.py), exporting only <prefix>_run
    lib<prefix>.a   the same object as an archive, where `ar` is installed
    <prefix>.h      the typed entry point and every size as a macro (c_header.py)
    <prefix>.json   the model's own names beside their C identifiers, dtypes, shapes, the CPU

Existing files of those names are replaced, each through a temp file and a rename, as
`-o model.aot` replaces an artifact; nothing else in DIR is touched.

One CPU variant, since one object has one entry: `cpu` names it (default $AOT_CPU, else
native); a spec that names several (portable) is an ArgumentError that lists them. What the
object cannot do without the runtime is refused before codegen: GPU code (the CLI refuses
--target with --emit c) and symbolic dims (the importer asks for --shape).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aot.c_header import CTensor, HeaderSpec, c_identifier, check_prefix, header_text, unique_identifiers
from aot.errors import AotError, ArgumentError
from aot.version import __version__

CPU_ENV = "AOT_CPU"


@dataclass(frozen=True)
class EmitCResult:
    prefix: str
    files: dict[str, Path]  # "object", "header", "json", and "archive" where ar was found
    arena_bytes: int
    weights_bytes: int
    kernels: int
    cpu: str


def check_output_dir(out_dir: Path) -> None:
    """Refuse, before any work, a DIR that is a file, whose parent is missing, or that cannot be written."""
    if out_dir.exists() and not out_dir.is_dir():
        raise ArgumentError(f"cannot write into '{out_dir}': it is a file; --emit c writes several files, so -o "
                            f"names a directory (created if missing)")
    if not out_dir.exists():
        parent = out_dir.parent
        if not parent.is_dir():
            raise ArgumentError(f"cannot create the output directory '{out_dir}': '{parent}' does not exist")
        if not os.access(parent, os.W_OK | os.X_OK):
            raise ArgumentError(f"cannot create the output directory '{out_dir}': no permission in '{parent}'")
    elif not os.access(out_dir, os.W_OK | os.X_OK):
        raise ArgumentError(f"cannot write into '{out_dir}': no permission to create files there")


def default_prefix(model: Any) -> str:
    """The model file's stem as a C identifier ("lenet-5" -> "lenet_5")."""
    stem = Path(model).stem if isinstance(model, (str, os.PathLike)) else "model"
    return c_identifier(stem, "model")


def _one_target(cpu: str | None) -> Any:
    from aot.codegen.cpu.static_entry import check_static_target
    from aot.codegen.cpu.targets import resolve_cpu_targets

    spec = cpu or os.environ.get(CPU_ENV, "").strip() or "native"
    targets = resolve_cpu_targets(spec)
    if len(targets) != 1:
        names = ", ".join(t.cpu for t in targets)
        raise ArgumentError(f"--cpu {spec}: --emit c builds one CPU variant (one object, one entry), and this names "
                            f"{len(targets)} ({names}); pick one, e.g. --cpu {targets[-1].cpu}")
    check_static_target(targets[0])
    return targets[0]


def _tensors(names: list[str], values: list[Any], idents: list[str]) -> list[CTensor]:
    return [CTensor(name, ident, v.type.dtype.manifest_name, tuple(v.type.shape), v.type.nbytes)
            for name, v, ident in zip(names, values, idents)]


def _archive(obj: Path, target_arch: str, out: Path) -> bool:
    """lib<prefix>.a holding the object, deterministic (D); False where no ar is installed."""
    ar = shutil.which(f"{target_arch}-linux-gnu-ar") or shutil.which("ar") or shutil.which("llvm-ar")
    if ar is None:
        return False
    with tempfile.TemporaryDirectory(prefix="aot-ar-", dir=out.parent) as tmp:
        member = Path(tmp) / obj.name
        shutil.copyfile(obj, member)
        built = Path(tmp) / out.name
        result = subprocess.run([ar, "rcsD", built.name, member.name], cwd=tmp, capture_output=True, text=True)
        if result.returncode != 0:
            raise AotError(f"'{ar} rcsD {out.name}' failed: {result.stderr.strip()}")
        os.replace(built, out)
    return True


def emit_c(
    model: Any,
    out_dir: str | os.PathLike,
    *,
    name: str | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    bind: Mapping[str, np.ndarray] | None = None,
    cpu: str | None = None,
    donate: Mapping[str, str] | None = None,
    infer_donation: bool = True,
    log: Callable[[str], None] | None = None,
) -> EmitCResult:
    """Compile `model` (path or onnx.ModelProto) into DIR as <name>.o, lib<name>.a, <name>.h and
    <name>.json (see the module docstring). `name` the C prefix (default: the file's stem as an
    identifier); the other arguments as aot.compile's."""
    from aot.artifact import write_atomically
    from aot.codegen.cpu.static_entry import emit_static_object
    from aot.codegen.cpu.targets import plan_lanes
    from aot.donations import check_donate, choose_donations
    from aot.driver import import_model
    from aot.pipeline import PipelineOptions, default_passes, run_pipeline

    out = Path(out_dir)
    check_output_dir(out)
    prefix = check_prefix(name) if name is not None else default_prefix(model)
    target = _one_target(cpu)
    donate = check_donate(donate)
    started = time.perf_counter()
    graph, _, _ = import_model(model, shapes, bind)
    donations = choose_donations(graph, donate, infer_donation)
    plan = run_pipeline(graph, PipelineOptions(log=log, passes=default_passes(plan_lanes([target]), pad_stems=True),
                                               donations=list(donations.pairs)))
    obj = emit_static_object(plan, target, prefix)
    idents = unique_identifiers([*graph.input_names, *graph.output_names])
    inputs = _tensors(list(graph.input_names), list(graph.inputs), idents[:len(graph.inputs)])
    outputs = _tensors(list(graph.output_names), list(graph.outputs), idents[len(graph.inputs):])
    features = tuple(target.x86_features) if target.arch == "x86_64" else tuple(target.aarch64_features)
    source = Path(model).name if isinstance(model, (str, os.PathLike)) else "an onnx.ModelProto"
    spec = HeaderSpec(prefix, source, target.cpu, target.arch, features, inputs, outputs, plan.arena_bytes, 64,
                      len(plan.weights), [(d.input, d.output) for d in plan.donations],
                      [c.message for c in plan.checks], __version__)
    described = {
        "prefix": prefix, "entry": f"{prefix}_run", "source": source, "compiler": {"name": "aot", "version": __version__},
        "cpu": {"name": target.cpu, "arch": target.arch, "features": list(features)},
        "arena": {"bytes": plan.arena_bytes, "alignment": 64}, "weights": {"bytes": len(plan.weights)},
        "inputs": [{"name": t.name, "c_name": t.ident, "dtype": t.dtype, "shape": list(t.shape), "bytes": t.nbytes}
                   for t in inputs],
        "outputs": [{"name": t.name, "c_name": t.ident, "dtype": t.dtype, "shape": list(t.shape), "bytes": t.nbytes}
                    for t in outputs],
        "donations": [{"input": d.input, "output": d.output} for d in plan.donations],
        "checks": [{"status": i + 1, "message": c.message} for i, c in enumerate(plan.checks)],
    }
    files = {"object": out / f"{prefix}.o", "header": out / f"{prefix}.h", "json": out / f"{prefix}.json"}
    try:
        out.mkdir(exist_ok=True)
        write_atomically(files["object"], obj)
        write_atomically(files["header"], header_text(spec).encode())
        write_atomically(files["json"], (json.dumps(described, indent=2) + "\n").encode())
        if _archive(files["object"], target.arch, out / f"lib{prefix}.a"):
            files["archive"] = out / f"lib{prefix}.a"
    except OSError as err:
        raise AotError(f"cannot write into '{out}': {err.strerror or err}") from None
    if log:
        log(f"{'emit c':<14} {(time.perf_counter() - started) * 1000:8.1f} ms  {len(obj)} B object for {target.cpu}")
    return EmitCResult(prefix, files, plan.arena_bytes, len(plan.weights), len(plan.kernels), target.cpu)
