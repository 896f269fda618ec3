"""compile_model: model file -> IR -> optimized plan -> code -> one artifact."""
from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from aot.donations import check_donate, choose_donations
from aot.errors import AotError, ArgumentError, ModelError, UnsupportedError
from aot.ir.graph import Graph
from aot.kernel_cost import kernel_cost_ns
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from aot.plan import ExecutionPlan
from aot.version import __version__

# what --target accepts: CPU code, GPU code (PTX and cubin per SM), or both in one artifact
TARGETS = ("cpu", "cuda", "cpu,cuda")


@dataclass
class CompileResult:
    path: Path | None
    artifact: bytes
    manifest: dict[str, Any]  # what the runtime reads
    tooling: dict[str, Any]  # what tools read (aot/tooling.py)
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
    shapes = check_shapes(shapes)
    bind = _check_bind(bind)
    source, data, name = _read_source(model)
    if isinstance(source, Path) and source.suffix in (".mlir", ".stablehlo"):
        if bind:
            raise UnsupportedError(f"'{source}': binding inputs to constants is supported for ONNX models only")
        from aot.importers.stablehlo import import_stablehlo

        return import_stablehlo(source, shapes), hashlib.sha256(data).hexdigest(), name
    from aot.importers.onnx import import_onnx, load_model

    # the file is read once: the bytes hashed are the bytes imported
    read = data if isinstance(source, Path) else None
    if bind:
        source, read = bind_onnx_inputs(load_model(source, read), bind), None
    graph = import_onnx(source, shapes, read)
    return graph, hashlib.sha256(data).hexdigest(), name


_DIMS_EXAMPLE = "a tuple of ints like (8, 4), () for a scalar"


def check_shapes(shapes: Any) -> dict[str, tuple[int, ...]] | None:
    """`shapes` as the API takes it, {input name: tuple of non-negative ints}; anything else
    is an ArgumentError that names the input and says what its value must be."""
    if shapes is None:
        return None
    if not isinstance(shapes, Mapping):
        raise ArgumentError(f"shapes must be a dict of input name -> {_DIMS_EXAMPLE}, e.g. {{'x': (1, 3, 224, 224)}}; "
                            f"got {type(shapes).__name__} {shapes!r}")
    checked = {}
    for name, dims in shapes.items():
        if not isinstance(name, str):
            raise ArgumentError(f"shapes keys are the model's input names (str); got {type(name).__name__} {name!r}")
        checked[name] = _check_dims(name, dims)
    return checked or None


def _check_dims(name: str, dims: Any) -> tuple[int, ...]:
    where = f"shapes[{name!r}]"
    if isinstance(dims, str):
        as_tuple = tuple(int(d) for d in dims.split("x")) if re.fullmatch(r"\d+(x\d+)*", dims) else None
        hint = f"write {as_tuple!r}; " if as_tuple else ""
        raise ArgumentError(f"{where} must be {_DIMS_EXAMPLE}, got the str {dims!r} "
                            f"({hint}NAME=8x4 is the command line's --shape form)")
    if isinstance(dims, (bytes, bytearray)) or not isinstance(dims, (Sequence, np.ndarray)):
        raise ArgumentError(f"{where} must be {_DIMS_EXAMPLE}, got {type(dims).__name__} {dims!r}")
    checked = []
    for i, dim in enumerate(dims):
        if isinstance(dim, (bool, np.bool_)) or not isinstance(dim, (int, np.integer)):
            why = ": aot compiles static shapes, so every dim needs a size" if dim is None else ", not an int"
            raise ArgumentError(f"{where} = {tuple(dims)!r}: dim {i} is {dim!r}{why}")
        if dim < 0:
            raise ArgumentError(f"{where} = {tuple(dims)!r}: dim {i} is {dim}; sizes are >= 0")
        checked.append(int(dim))
    return tuple(checked)


def _check_bind(bind: Any) -> Mapping[str, np.ndarray] | None:
    if bind is None:
        return None
    if not isinstance(bind, Mapping) or not all(isinstance(name, str) for name in bind):
        raise ArgumentError(f"bind must be a dict of input name -> array, e.g. {{'axes': np.array([1])}}; got {bind!r}")
    return bind


def check_output_path(output: Path, model: Any = None, what: str = "model") -> None:
    """Refuse, before any work, an output file that cannot be written or that is the input
    `model` (`what` names that input in the message)."""
    if output.is_dir():
        raise ArgumentError(f"cannot write '{output}': it is a directory; give a file name such as '{output / 'model.aot'}'")
    directory = output.parent
    if not directory.is_dir():
        why = "does not exist" if not directory.exists() else "is not a directory"
        raise ArgumentError(f"cannot write '{output}': the directory '{directory}' {why}")
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ArgumentError(f"cannot write '{output}': no permission to create files in '{directory}'")
    if isinstance(model, (str, os.PathLike)) and _same_file(Path(model), output):
        instead = Path(model).with_suffix(".aot")
        hint = f"; write the artifact elsewhere, e.g. '{instead}'" if what == "model" and not _same_file(Path(model), instead) else ""
        raise ArgumentError(f"the output '{output}' is the {what} file '{model}' itself: writing it would destroy the {what}{hint}")


def _same_file(a: Path, b: Path) -> bool:
    """The same file, through any path, symlink or hard link."""
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist (yet)
        return os.path.realpath(a) == os.path.realpath(b)


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


def build_manifest(plan: ExecutionPlan, codes: Sequence[Any], model_name: str,
                   gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """What the runtime reads, and nothing else (packaging/FORMAT.md, "What the runtime reads").
    `codes` the CPU code variants, best first (empty: a GPU-only artifact, whose `cpu` list is
    empty and whose kernels carry only their names); `gpu` the `cuda` entry
    (gpu_package.gpu_manifest)."""
    from aot.artifact import FORMAT_VERSION
    from aot.codegen.cpu.kernel import CHECKS_SYMBOL
    from aot.codegen.cpu.targets import section_name

    graph = plan.graph

    def tensor(value: Any, name: str) -> dict[str, Any]:
        return {"name": name, "dtype": value.type.dtype.manifest_name, "shape": list(value.type.shape)}

    cpus: list[dict[str, Any]] = []
    for index, code in enumerate(codes):
        cpu: dict[str, Any] = {"section": section_name(code.target, index), "arch": code.target.arch,
                               "entry": "aot_model_entry",
                               "cpu": code.target.cpu}  # the variant's name: AOT_CPU_VARIANT, refusals
        if code.target.arch == "x86_64":
            # the extensions the code may use: the runtime skips the variant on a machine that
            # lacks one (and refuses the artifact, naming them, when no variant runs) instead of
            # dying of SIGILL in the first run
            cpu["x86_features"] = list(code.target.x86_features)
        elif code.target.arch == "aarch64":
            # likewise for aarch64 (SVE code on a CPU without SVE): the kernel's hwcaps
            cpu["aarch64_features"] = list(code.target.aarch64_features)
        if plan.checks:
            cpu["checks"] = CHECKS_SYMBOL
        if index:
            # the top-level kernels give the first variant's symbol, work and cost_ns (as a runtime
            # from before variants reads them, with cpu[0]); each other variant lists its own,
            # since work items follow the target's tiles
            cpu["kernels"] = _cpu_kernels(plan, code)
        cpus.append(cpu)
    if codes:
        kernels = [{"name": k.name, **entry} for k, entry in zip(plan.kernels, _cpu_kernels(plan, codes[0]))]
    else:
        kernels = [{"name": k.name} for k in plan.kernels]
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "model": {"name": model_name},
        "inputs": [tensor(v, n) for v, n in zip(graph.inputs, graph.input_names)],
        "outputs": [tensor(v, n) for v, n in zip(graph.outputs, graph.output_names)],
        "arena": {"bytes": plan.arena_bytes, "alignment": 64},
        "weights": {"section": "weights", "bytes": len(plan.weights), "alignment": 64},
        "cpu": cpus,
        "kernels": kernels,
    }
    if gpu is not None:
        manifest["cuda"] = gpu
    if plan.donations:
        manifest["donations"] = [{"input": d.input, "output": d.output} for d in plan.donations]
    if plan.checks:
        manifest["checks"] = [{"message": c.message} for c in plan.checks]
    return manifest


def _cpu_kernels(plan: ExecutionPlan, code: Any) -> list[dict[str, Any]]:
    """Per kernel, its symbol and work items in `code`, and cost_ns: the estimated single-core
    time, so the runtime runs small kernels on the caller."""
    return [{"symbol": symbol, "work": work, "cost_ns": kernel_cost_ns(k, work)}
            for k, (symbol, work) in zip(plan.kernels, code.kernels)]


def build_tooling(plan: ExecutionPlan, codes: Sequence[Any], source_sha: str,
                  gpu: dict[str, Any] | None = None) -> dict[str, Any]:
    """What tools read (`aot inspect`, `verify`, the profiler): the tooling section, which
    extends the manifest's entries (aot/tooling.py). `codes` the CPU variants (empty for a
    GPU-only artifact); `gpu` the tooling's `cuda` entry (gpu_package.gpu_tooling)."""
    tooling: dict[str, Any] = {
        "compiler": {"name": "aot", "version": __version__},
        "model": {"source_sha256": source_sha},
        "cpu": [{"triple": code.target.triple, "features": code.target.features} for code in codes],
        "arena": {"lower_bound_bytes": plan.arena_lower_bound,
                  "temporaries_bytes": plan.notes.get("temporaries_bytes", 0)},
        # why each kernel exists (fusion's decisions) and what it reads and writes
        "kernels": [{"name": k.name, "ops": k.ops, "output": k.root.name, "inputs": [p.name for p in k.params],
                     "reason": k.reason} for k in plan.kernels],
        # per arena buffer: offset, size and live interval in kernel steps (`aot inspect --memory-plan`)
        "memory_plan": plan.notes.get("memory_plan", []),
        # where every kernel input/output lives (`aot inspect --graph`, `aot verify`'s bisection)
        "values": {name: {"kind": s.kind, "index": s.index, "offset": s.offset, "bytes": s.size}
                   for name, s in sorted(plan.slices.items())},
    }
    if gpu is not None:
        tooling["cuda"] = gpu
    if plan.checks:
        tooling["checks"] = [{"node": c.loc, "value": c.ok.name} for c in plan.checks]
    if plan.donations:
        # how the plan keeps each pair (planning/donation.py): in place, or behind a copy, and why
        tooling["donations"] = [{"how": n["how"], "why": n["why"]}
                                for n in plan.notes.get("donations", [])]  # type: ignore[union-attr]
    return tooling


def check_target(target: Any) -> tuple[bool, bool]:
    """`target` ("cpu", "cuda" or "cpu,cuda", in either order): (CPU code?, GPU code?)."""
    parts = target.split(",") if isinstance(target, str) else None
    if parts is None or not parts or any(p not in ("cpu", "cuda") for p in parts) or len(set(parts)) != len(parts):
        raise ArgumentError(f"target {target!r} is not supported; choose one of {', '.join(TARGETS)}")
    return "cpu" in parts, "cuda" in parts


def compile_model(
    model: Any,
    output_path: str | os.PathLike | None = None,
    *,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    bind: Mapping[str, np.ndarray] | None = None,
    target: str = "cpu",
    cpu: str | None = None,
    sm: str | Sequence[str] | None = None,
    gpu_matmul_precision: str = "fp32",
    weights_codec: str = "zstd",
    donate: Mapping[str, str] | None = None,
    infer_donation: bool = True,
    dump_ir: str | os.PathLike | None = None,
    log: Callable[[str], None] | None = None,
) -> CompileResult:
    """Compile an ONNX model (path or onnx.ModelProto) into an .aot artifact.

    `shapes` fixes symbolic input dims ({name: (1, 3, 224, 224)}); `bind` fixes
    inputs to constant values (ONNX). `target` "cpu", "cuda" or "cpu,cuda": CPU code
    for `cpu` ("portable", "native", a CPU name or a comma list of them, one code variant
    each, best first: aot/codegen/cpu/targets.py; default $AOT_CPU, else "portable" on x86-64
    hosts: x86-64-v4 and x86-64-v3), PTX (and cubin, where ptxas is installed) for each
    GPU architecture of `sm` (default all: sm_80, sm_90), or both, from one plan.
    `gpu_matmul_precision` "fp32" (default) or "tf32": with tf32, the GPU code runs f32
    matrix multiplies on tensor cores with their inputs rounded to tf32 (10 mantissa bits),
    which changes results; the manifest's cuda entry records it. f16/bf16 ones use tensor
    cores either way.
    `weights_codec` "zstd" (default: the smallest file) or "none": the weights stored as they
    are, 64-byte aligned, so the C runtime reads them in place from the mapped file (opening
    is near-instant and processes opening one file share its pages) at the cost of size.
    `donate` ({input name: output name}) lets an output take over an input's buffer (a KV
    cache updated in place: the caller may pass one buffer for both, see aot/donations.py);
    with `infer_donation` (default) the model's names imply more pairs (past_keys ->
    present_keys, past_key_values.N.key -> present.N.key, past.* -> present.*) where dtype and
    shape agree. The manifest records every pair.
    Writes `output_path` when given, through a temp file and a rename; always
    returns the artifact bytes, manifest and execution plan. A wrong argument
    (shapes, target, cpu, sm, an output path that cannot be written or is the
    model) raises ArgumentError before any work.
    """
    from aot.artifact import pack_artifact, write_atomically
    from aot.codegen.cpu import emit_cpu_variants
    from aot.codegen.cpu.targets import plan_lanes, resolve_cpu_targets, section_name
    from aot.gpu_options import check_matmul_precision

    # every argument is checked before the work, so a mistake costs no compile
    wants_cpu, wants_gpu = check_target(target)
    if sm is not None and not wants_gpu:
        raise ArgumentError(f"sm {sm!r} is given but target {target!r} has no GPU; use target 'cuda' or 'cpu,cuda'")
    if cpu is not None and not wants_cpu:
        raise ArgumentError(f"cpu {cpu!r} is given but target {target!r} has no CPU; use target 'cpu' or 'cpu,cuda'")
    if wants_gpu:  # the NVPTX back end is loaded only for GPU code
        from aot.gpu_package import build_gpu, check_sms, gpu_manifest, gpu_sections, gpu_tooling
    sms = check_sms(sm) if wants_gpu else ()
    check_matmul_precision(gpu_matmul_precision)
    if weights_codec not in ("zstd", "none"):
        raise ArgumentError(f"weights_codec {weights_codec!r}: choose zstd or none")
    if gpu_matmul_precision != "fp32" and not wants_gpu:
        raise ArgumentError(f"gpu_matmul_precision {gpu_matmul_precision!r} is given but target {target!r} has no GPU; "
                            f"use target 'cuda' or 'cpu,cuda'")
    if output_path is not None and not isinstance(output_path, (str, os.PathLike)):
        raise ArgumentError(f"output_path must be a path (str or os.PathLike), got {type(output_path).__name__}")
    path = Path(output_path) if output_path is not None else None
    if path is not None:
        check_output_path(path, model)
    cpu_targets = resolve_cpu_targets(cpu) if wants_cpu else []
    shapes = check_shapes(shapes)
    bind = _check_bind(bind)
    donate = check_donate(donate)
    dump_dir = Path(dump_ir) if dump_ir is not None else None
    if dump_dir is not None:
        try:
            dump_dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ArgumentError(f"cannot create the IR dump directory '{dump_dir}': {err.strerror or err}") from None
    started = time.perf_counter()
    graph, source_sha, name = import_model(model, shapes, bind)
    if log:
        log(f"{'import':<14} {(time.perf_counter() - started) * 1000:8.1f} ms  {len(graph.nodes)} nodes")
    # weights are packed once for every CPU variant (one plan, one weights section); a GPU-only
    # compile runs the same pipeline with the default width. Stems are padded explicitly for
    # CPU code alone: a plan the GPU shares keeps its convs' padding (the GPU conv takes it)
    passes = default_passes(plan_lanes(cpu_targets), pad_stems=not wants_gpu) if cpu_targets else default_passes()
    donations = choose_donations(graph, donate, infer_donation)
    if log:
        for pair, inferred in zip(donations.pairs, donations.inferred):
            log(f"{'donate':<14} {graph.input_names[pair.input]} -> {graph.output_names[pair.output]} "
                f"({'inferred from the names' if inferred else 'asked for'})")
        for skipped in donations.skipped:
            log(f"{'donate':<14} not inferred: {skipped}")
    plan = run_pipeline(graph, PipelineOptions(dump_dir=dump_dir, log=log, passes=passes,
                                               donations=list(donations.pairs)))
    sections: list[tuple[str, bytes] | tuple[str, bytes, str]] = [("weights", plan.weights, weights_codec)]
    codes = []
    if cpu_targets:
        start = time.perf_counter()
        codes = emit_cpu_variants(plan, cpu_targets)
        if log:
            for code in codes:
                log(f"{'codegen':<14} {len(code.shared_object)} B of {code.target.arch} code for {code.target.cpu}")
            log(f"{'codegen':<14} {(time.perf_counter() - start) * 1000:8.1f} ms  {len(codes)} variant(s)")
        for index, code in enumerate(codes):
            if dump_dir is not None:  # cpu.ll for one variant, as before variants; cpu.<cpu>.ll for several
                name = "cpu.ll" if len(codes) == 1 else f"cpu.{code.target.arch}.{code.target.cpu}.ll"
                (dump_dir / name).write_text(code.llvm_ir)
            sections.append((section_name(code.target, index), code.shared_object))
    gpu_entry = gpu_notes = None
    if sms:
        builds = build_gpu(plan, sms, dump_dir, log, gpu_matmul_precision)
        sections.extend(gpu_sections(builds))
        gpu_entry, gpu_notes = gpu_manifest(plan, builds, "weights"), gpu_tooling(plan, builds)
    manifest = build_manifest(plan, codes, name, gpu_entry)
    tooling = build_tooling(plan, codes, source_sha, gpu_notes)
    if plan.donations:
        inferred = {pair.input: flag for pair, flag in zip(donations.pairs, donations.inferred)}
        for entry, pair in zip(tooling["donations"], plan.donations):
            entry["inferred"] = inferred[pair.input]
    artifact = pack_artifact(manifest, sections, tooling=tooling)
    if path is not None:
        try:  # through a temp file and a rename: a failure leaves any earlier artifact as it was
            write_atomically(path, artifact)
        except OSError as err:
            raise AotError(f"cannot write '{path}': {err.strerror or err}") from None
    if log:
        log(f"{'total':<14} {(time.perf_counter() - started) * 1000:8.1f} ms  artifact {len(artifact)} B")
    return CompileResult(path, artifact, manifest, tooling, plan)
