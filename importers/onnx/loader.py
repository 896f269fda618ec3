"""Read and check an ONNX model; resolve the static shapes of its inputs.

Everything here fails with a message that names the file, the input or the
dim at fault, and says how to fix it where a shape can (`shapes={'x': (1, 5)}`
in the API, `--shape x=1x5` on the command line: aot.errors.spelled).
"""
from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto
from onnx.external_data_helper import load_external_data_for_model, uses_external_data

from aot.errors import ModelError, Spelling, UnsupportedError, spelled
from aot.ir.types import DType

# ONNX element types aot compiles (aot.ir.types.DType's table); every other one is refused by name.
ONNX_DTYPES: dict[int, DType] = {TensorProto.DataType.Value(d.onnx_name): d for d in DType}


def onnx_dtype_name(elem_type: int) -> str:
    try:
        return TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"type #{elem_type}"


def to_dtype(elem_type: int, what: str) -> DType:
    """The IR dtype of an ONNX element type; `what` names the value for the error."""
    dtype = ONNX_DTYPES.get(elem_type)
    if dtype is None:
        raise UnsupportedError(f"{what} has dtype {onnx_dtype_name(elem_type)}, which aot does not support")
    return dtype


@dataclass(frozen=True)
class InputSpec:
    name: str
    dtype: DType
    shape: tuple[int, ...]


def load_model(model: str | os.PathLike | onnx.ModelProto, data: bytes | None = None) -> onnx.ModelProto:
    """Read (path) or take (ModelProto) a model and run the ONNX checker on it. `data`: the
    file's bytes where the caller has read them already (the file is then not read again)."""
    serialized: bytes | None = None
    if isinstance(model, onnx.ModelProto):
        proto, label = model, "<in-memory model>"
    else:
        path = os.fspath(model)
        label = path
        proto, serialized = _read(path, data)
    if not proto.HasField("graph") or proto.ir_version <= 0:
        raise ModelError(f"cannot read model '{label}': not an ONNX model (no graph or IR version)")
    checked = _with_output_shapes(proto)
    try:
        # the file's own bytes where they are the model checked: the checker takes
        # serialized bytes, and serializing resnet18's 47 MB again cost 0.27 s
        onnx.checker.check_model(serialized if serialized is not None and checked is proto else checked)
    except (onnx.checker.ValidationError, ValueError) as err:
        message = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ModelError(f"model '{label}' fails the ONNX checker: {message}") from None
    return proto


def _with_output_shapes(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The checker demands a shape on every output type; onnxruntime and exporters do not.

    Outputs of unknown rank get an empty placeholder shape, on a copy made only
    for the checker: the importer infers every type itself.
    """
    unshaped = [o for o in proto.graph.output if o.type.HasField("tensor_type") and not o.type.tensor_type.HasField("shape")]
    if not unshaped:
        return proto
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    for output in copy.graph.output:
        if output.type.HasField("tensor_type") and not output.type.tensor_type.HasField("shape"):
            output.type.tensor_type.shape.SetInParent()
    return copy


def _read(path: str, data: bytes | None = None) -> tuple[onnx.ModelProto, bytes | None]:
    """The model at `path` (its bytes `data` where already read), and the file's bytes when
    they hold the whole model (no external data)."""
    if data is None:
        if not os.path.exists(path):
            raise ModelError(f"cannot read model '{path}': no such file")
        if os.path.isdir(path):
            raise ModelError(f"cannot read model '{path}': is a directory")
    try:
        if data is None:
            with open(path, "rb") as file:
                data = file.read()
        proto = onnx.load_model_from_string(data)
        if not any(uses_external_data(t) for t in _tensors(proto.graph)):
            return proto, data
        # external data files are resolved relative to the model's directory
        load_external_data_for_model(proto, os.path.dirname(path))
        return proto, None
    except OSError as err:
        raise ModelError(f"cannot read model '{path}': {err.strerror or err}") from None
    except Exception as err:  # protobuf raises DecodeError, RuntimeWarning and friends on garbage
        raise ModelError(f"cannot read model '{path}': not an ONNX model ({type(err).__name__}: {err})") from None


def _tensors(graph: onnx.GraphProto) -> Iterator[TensorProto]:
    """Every tensor the graph stores: initializers and node attributes, subgraphs too."""
    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            if attribute.HasField("g"):
                yield from _tensors(attribute.g)
            for subgraph in attribute.graphs:
                yield from _tensors(subgraph)


def default_opset(proto: onnx.ModelProto) -> int:
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    if any(entry.domain == "ai.onnx.ml" for entry in proto.opset_import):
        return 0  # a graph of ai.onnx.ml ops only (a lone TreeEnsemble): no default op reads the opset
    raise ModelError("model imports no version of the default ONNX domain (opset_import)")


def resolve_inputs(graph: onnx.GraphProto, shapes: Mapping[str, tuple[int, ...]] | None) -> list[InputSpec]:
    """Graph inputs that are not initializers, each with a fully static shape.

    A dim is dynamic when the model names it (`dim_param`), stores a negative
    `dim_value` (older Paddle exports write -1), or gives neither, as
    onnxruntime reads them; `shapes` fixes them. A `dim_value` of 0 is a real
    empty dim. Without `shapes`, one error lists every dynamic dim of every
    input with the shapes that fix them.
    """
    initializers = {init.name for init in graph.initializer}
    real = [vi for vi in graph.input if vi.name not in initializers]
    shapes = dict(shapes or {})
    names = [vi.name for vi in real]
    unknown = [name for name in shapes if name not in names]
    if unknown:
        listed = ", ".join(f"'{n}'" for n in names) or "none"
        given = ", ".join(repr(n) for n in unknown)
        raise spelled(ModelError, lambda s: f"{s.option} names unknown input(s) {given}; the model's inputs are: {listed}")
    specs: list[InputSpec] = []
    dynamic: list[_DynamicInput] = []
    for vi in real:
        resolved = _resolve_one(vi, shapes.get(vi.name))
        if isinstance(resolved, InputSpec):
            specs.append(resolved)
        else:
            dynamic.append(resolved)
    if dynamic:
        what = "; ".join(d.describe() for d in dynamic)
        fixes = {d.name: d.example for d in dynamic}
        it = "it" if sum(len(d.dims) for d in dynamic) == 1 else "them"
        raise spelled(UnsupportedError, lambda s: f"{what}; fix {it} with {s.shapes(fixes)}")
    return specs


@dataclass(frozen=True)
class _DynamicInput:
    """An input whose shape the model leaves partly dynamic, for the error that lists them all."""

    name: str
    dims: tuple[str, ...]  # each dynamic dim and why: "0 ('batch')", "2 (dim_value -1)"
    example: tuple[int, ...]  # the model's shape with 1 for each dynamic dim

    def describe(self) -> str:
        if len(self.dims) == 1:
            return f"input '{self.name}' dim {self.dims[0]} is dynamic"
        return f"input '{self.name}' dims {', '.join(self.dims)} are dynamic"


def fixed_dim(dim: onnx.TensorShapeProto.Dimension) -> int | None:
    """The size of a dim the model fixes, or None for a dynamic one (named, negative or absent)."""
    if dim.HasField("dim_value") and dim.dim_value >= 0:
        return int(dim.dim_value)
    return None


def _describe_dim(dim: onnx.TensorShapeProto.Dimension) -> str:
    if dim.HasField("dim_param"):
        return f"'{dim.dim_param}'"
    if dim.HasField("dim_value"):
        return f"dim_value {dim.dim_value}"
    return "no size"


def _resolve_one(vi: onnx.ValueInfoProto, given: tuple[int, ...] | None) -> InputSpec | _DynamicInput:
    """The input's static shape, or what is dynamic about it when `given` does not fix it."""
    name = vi.name
    if not vi.type.HasField("tensor_type"):
        raise UnsupportedError(f"input '{name}' is not a tensor (sequence, map and optional inputs are not supported)")
    ttype = vi.type.tensor_type
    dtype = to_dtype(ttype.elem_type, f"input '{name}'")
    if not ttype.HasField("shape"):
        if given is None:
            unknown_dims = {name: ("D0", "D1", "...")}
            raise spelled(UnsupportedError, lambda s: f"input '{name}' has no shape in the model; give one with {s.shapes(unknown_dims)}")
        return InputSpec(name, dtype, _check_given(name, given))
    dims = list(ttype.shape.dim)
    if given is not None:
        given = _check_given(name, given)
        if len(given) != len(dims):
            raise spelled(ModelError, lambda s: f"{s.shape(name, given)} has rank {len(given)}, but input '{name}' has rank {len(dims)}")
        for i, (dim, size) in enumerate(zip(dims, given)):
            fixed = fixed_dim(dim)
            if fixed is not None and fixed != size:
                raise _contradicts(name, given, i, fixed)
        return InputSpec(name, dtype, given)
    sizes = [fixed_dim(dim) for dim in dims]
    if all(size is not None for size in sizes):
        return InputSpec(name, dtype, tuple(sizes))
    which = tuple(f"{i} ({_describe_dim(dim)})" for i, (dim, size) in enumerate(zip(dims, sizes)) if size is None)
    return _DynamicInput(name, which, tuple(1 if size is None else size for size in sizes))


def _contradicts(name: str, given: tuple[int, ...], dim: int, fixed: int) -> ModelError:
    def compose(s: Spelling) -> str:
        return f"{s.shape(name, given)} contradicts input '{name}' dim {dim}, which is fixed to {fixed}"

    return spelled(ModelError, compose)


def _check_given(name: str, given: tuple[int, ...]) -> tuple[int, ...]:
    dims = tuple(int(d) for d in given)
    if any(d < 0 for d in dims):
        raise spelled(ModelError, lambda s: f"{s.shape(name, given)}: dims must be non-negative")
    return dims


def tensor_to_array(tensor: onnx.TensorProto, what: str) -> np.ndarray:
    """An initializer or Constant tensor as a numpy array of an IR dtype."""
    dtype = to_dtype(tensor.data_type, what)
    from onnx import numpy_helper

    array = numpy_helper.to_array(tensor)
    return np.asarray(array).astype(dtype.to_numpy(), copy=False)
