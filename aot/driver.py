"""compile_model: model file -> IR -> optimized plan -> code -> one artifact."""
from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aot.errors import ModelError, UnsupportedError
from aot.ir.graph import Graph
from aot.kernel_cost import kernel_cost_ns
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from aot.plan import ExecutionPlan

FORMAT_VERSION = 1
# manifest format_version of an artifact with run-time checks: runtimes that predate
# checks refuse it, where they would otherwise ignore the checks (packaging/FORMAT.md)
CHECKS_FORMAT_VERSION = 2
TARGETS = ("cpu",)


@dataclass
class CompileResult:
    path: Path | None
    artifact: bytes
    manifest: dict[str, Any]
    plan: ExecutionPlan

    @property
    def size(self) -> int:
        return len(self.artifact)


def _read_source(model: Any) -> tuple[Any, bytes, str]:
    """(model for the importer, bytes to hash, display name)."""
    if isinstance(model, (str, os.PathLike)):
        path = Path(model)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise ModelError(f"cannot read model '{path}': no such file") from None
        except IsADirectoryError:
            raise ModelError(f"cannot read model '{path}': it is a directory") from None
        except OSError as err:
            raise ModelError(f"cannot read model '{path}': {err.strerror}") from None
        return path, data, path.stem
    serialize = getattr(model, "SerializeToString", None)
    if serialize is None:
        raise ModelError(f"expected a model path or an onnx.ModelProto, got {type(model).__name__}")
    name = getattr(getattr(model, "graph", None), "name", "") or "model"
    return model, serialize(), name


def import_model(
    model: Any,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    bind: Mapping[str, np.ndarray] | None = None,
) -> tuple[Graph, str, str]:
    """Import an ONNX or StableHLO model: (graph, source sha256, model name).

    `bind` turns the named inputs into constants with the given values (ONNX
    only): a model that takes its axes, pads or scales as inputs compiles once
    they are fixed, and the compiled model no longer takes them.
    """
    source, data, name = _read_source(model)
    if isinstance(source, Path) and source.suffix in (".mlir", ".stablehlo"):
        if bind:
            raise UnsupportedError(f"'{source}': binding inputs to constants is supported for ONNX models only")
        from aot.importers.stablehlo import import_stablehlo

        return import_stablehlo(source, dict(shapes) if shapes else None), hashlib.sha256(data).hexdigest(), name
    from aot.importers.onnx import import_onnx, load_model

    if bind:
        source = bind_onnx_inputs(load_model(source), bind)
    graph = import_onnx(source, dict(shapes) if shapes else None)
    return graph, hashlib.sha256(data).hexdigest(), name


def bind_onnx_inputs(proto: Any, bind: Mapping[str, np.ndarray]) -> Any:
    """A copy of `proto` where each bound input is an initializer holding its value."""
    import onnx
    from onnx import numpy_helper

    from aot.importers.onnx.loader import fixed_dim

    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    graph = copy.graph
    by_name = {i.name: i for i in graph.input}
    unknown = sorted(set(bind) - set(by_name))
    if unknown:
        raise ModelError(f"cannot bind {', '.join(repr(n) for n in unknown)}: the model's inputs are "
                         f"{', '.join(repr(i.name) for i in graph.input)}")
    for input_name, value in bind.items():
        declared = by_name[input_name].type.tensor_type
        array = np.asarray(value)
        want = onnx.helper.tensor_dtype_to_np_dtype(declared.elem_type) if declared.elem_type else array.dtype
        if array.dtype != want:
            raise ModelError(f"cannot bind '{input_name}': it is {np.dtype(want).name}, the value is {array.dtype.name}")
        dims = [fixed_dim(d) for d in declared.shape.dim]  # None: dynamic, any size binds
        if declared.HasField("shape") and (len(dims) != array.ndim or any(d is not None and d != n for d, n in zip(dims, array.shape))):
            raise ModelError(f"cannot bind '{input_name}': its shape is {dims}, the value's is {list(array.shape)}")
        graph.initializer.append(numpy_helper.from_array(array, input_name))
    kept = [i for i in graph.input if i.name not in bind]
    del graph.input[:]
    graph.input.extend(kept)
    return copy


def build_manifest(plan: ExecutionPlan, code: Any, model_name: str, source_sha: str) -> dict[str, Any]:
    from aot import __version__

    graph = plan.graph

    def tensor(value: Any, name: str) -> dict[str, Any]:
        return {"name": name, "dtype": value.type.dtype.manifest_name, "shape": list(value.type.shape)}

    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "compiler": {"name": "aot", "version": __version__},
        "model": {"name": model_name, "source_sha256": source_sha},
        "inputs": [tensor(v, n) for v, n in zip(graph.inputs, graph.input_names)],
        "outputs": [tensor(v, n) for v, n in zip(graph.outputs, graph.output_names)],
        "arena": {"bytes": plan.arena_bytes, "alignment": 64, "lower_bound_bytes": plan.arena_lower_bound,
                  "temporaries_bytes": plan.notes.get("temporaries_bytes", 0)},
        "weights": {"section": "weights", "bytes": len(plan.weights), "alignment": 64},
        "cpu": [{
            "section": f"cpu.{code.target.arch}", "arch": code.target.arch, "triple": code.target.triple,
            "cpu": code.target.cpu, "features": code.target.features, "entry": "aot_model_entry",
        }],
        "kernels": [
            # cost_ns: estimated single-core time, so the runtime runs small kernels on the caller
            {"name": k.name, "symbol": symbol, "work": work, "cost_ns": kernel_cost_ns(k, work), "ops": k.ops,
             "output": k.root.name, "inputs": [p.name for p in k.params], "reason": k.reason}
            for k, (symbol, work) in zip(plan.kernels, code.kernels)
        ],
        # per arena buffer: offset, size and live interval in kernel steps (for `aot inspect --memory-plan`)
        "memory_plan": plan.notes.get("memory_plan", []),
        # where every kernel input/output lives (for `aot inspect --graph`); a list, since the
        # runtime's JSON reader caps object members
        "values": [{"name": name, "kind": s.kind, "index": s.index, "offset": s.offset, "bytes": s.size}
                   for name, s in sorted(plan.slices.items())],
    }
    if code.target.arch == "x86_64":
        # the extensions the code may use: the runtime refuses the artifact on a machine that
        # lacks one (naming it) instead of dying of SIGILL in the first run
        manifest["cpu"][0]["x86_features"] = list(code.target.x86_features)
    if plan.checks:  # a model without checks keeps format 1 and the same bytes as before checks existed
        from aot.codegen.cpu.kernel import CHECKS_SYMBOL

        manifest["format_version"] = CHECKS_FORMAT_VERSION
        for cpu in manifest["cpu"]:
            cpu["checks"] = CHECKS_SYMBOL
        manifest["checks"] = [{"message": c.message, "node": c.loc, "value": c.ok.name} for c in plan.checks]
    return manifest


def compile_model(
    model: Any,
    output_path: str | os.PathLike | None = None,
    *,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    bind: Mapping[str, np.ndarray] | None = None,
    target: str = "cpu",
    cpu: str = "native",
    dump_ir: str | os.PathLike | None = None,
    log: Callable[[str], None] | None = None,
) -> CompileResult:
    """Compile an ONNX model (path or onnx.ModelProto) into an .aot artifact.

    `shapes` fixes symbolic input dims; `bind` fixes inputs to constant values
    (ONNX). Writes `output_path` when given; always returns the artifact
    bytes, manifest and execution plan.
    """
    from aot.artifact import pack_artifact, write_atomically
    from aot.codegen.cpu import CpuTarget, emit_cpu

    if target not in TARGETS:
        raise UnsupportedError(f"target '{target}' is not supported; choose one of {', '.join(TARGETS)}")
    started = time.perf_counter()
    graph, source_sha, name = import_model(model, shapes, bind)
    if log:
        log(f"{'import':<14} {(time.perf_counter() - started) * 1000:8.1f} ms  {len(graph.nodes)} nodes")
    dump_dir = Path(dump_ir) if dump_ir is not None else None
    cpu_target = CpuTarget.from_name(cpu)
    # weights are packed for the target's vector width (the microkernels hold one register per vector)
    plan = run_pipeline(graph, PipelineOptions(dump_dir=dump_dir, log=log, passes=default_passes(cpu_target.vector_lanes)))
    start = time.perf_counter()
    code = emit_cpu(plan, cpu_target)
    if log:
        log(f"{'codegen':<14} {(time.perf_counter() - start) * 1000:8.1f} ms  {len(code.shared_object)} B of {code.target.arch} code for {code.target.cpu}")
    if dump_dir is not None:
        (dump_dir / "cpu.ll").write_text(code.llvm_ir)
    manifest = build_manifest(plan, code, name, source_sha)
    sections = [("weights", plan.weights), (f"cpu.{code.target.arch}", code.shared_object)]
    artifact = pack_artifact(manifest, sections)
    path = None
    if output_path is not None:
        path = Path(output_path)
        write_atomically(path, artifact)
    if log:
        log(f"{'total':<14} {(time.perf_counter() - started) * 1000:8.1f} ms  artifact {len(artifact)} B")
    return CompileResult(path, artifact, manifest, plan)
