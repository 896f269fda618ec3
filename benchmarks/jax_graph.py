"""An aot IR graph as a JAX function, op by op: the XLA peer of the GPU comparison.

    from aot.driver import import_model
    graph, _, _ = import_model("bert_mini.onnx", {"x": (32, 128, 256)})
    lowered = lower_graph(graph)                   # UnknownOp if an op has no lowering here
    fn = jax.jit(lowered.fn)
    (y,) = fn(lowered.device_params(), x)

The graph is the importer's, before aot optimizes it, so XLA sees the model as the
ONNX file states it and does its own fusion. Each primitive op (aot/ir/ops) maps to the
jax.lax call with the same semantics (dot -> dot_general, conv -> conv_general_dilated,
gather -> gather with clamped starts, reduce_window -> reduce_window, ...). Constants of
more than SMALL_CONSTANT elements are parameters of the function, not literals in it, as
a JAX model holds its weights; the small ones stay literals, which XLA may fold.

Matrix products and convolutions ask for `precision` (default HIGHEST: fp32 on the GPU,
as aot's default; the caller also sets jax_default_matmul_precision). Without
jax_enable_x64, 64-bit tensors are 32-bit ones, as JAX has them by default.
A `check` op (a run-time assertion, ir/ops/checks.py) passes its operand through: XLA
has no run-time error, so the JAX function does not enforce the model's checks.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from aot.ir.graph import Graph, Node, Value
from aot.ir.ops.reduction import reduce_identity
from aot.ir.types import DType

SMALL_CONSTANT = 64  # elements: up to this, a constant is a literal of the function


class UnknownOp(Exception):
    """The graph has an op this lowering does not know; `op` names it."""

    def __init__(self, op: str, node: str):
        super().__init__(f"no JAX lowering for op {op!r} (node {node})")
        self.op = op


@dataclass
class Lowered:
    """`fn(params, *inputs) -> list of outputs`, to jit; `params` the constants it takes."""
    fn: Callable[..., list[Any]]
    params: dict[str, np.ndarray] = field(default_factory=dict)

    def device_params(self) -> dict[str, Any]:
        """The parameters on JAX's default device, once (as a served model holds them)."""
        import jax

        return {name: jax.device_put(value) for name, value in self.params.items()}


def _jnp_dtype(dtype: DType) -> np.dtype:
    """The numpy dtype JAX holds `dtype` as: 64-bit types are 32-bit without jax_enable_x64."""
    import jax

    want = dtype.to_numpy()
    if jax.config.jax_enable_x64 or want.itemsize < 8:
        return want
    return np.dtype(f"{want.kind}4") if want.kind in "fiu" else want


def _ints(value: Any) -> tuple[int, ...]:
    return tuple(int(v) for v in value)


def _unary_table() -> dict[str, Callable[[Any], Any]]:
    import jax.numpy as jnp
    from jax import lax

    def logical_or_bitwise_not(x):
        return jnp.logical_not(x) if x.dtype == jnp.bool_ else lax.bitwise_not(x)

    return {
        "neg": lax.neg, "abs": lax.abs, "exp": lax.exp, "log": lax.log, "tanh": lax.tanh,
        "logistic": lax.logistic, "sqrt": lax.sqrt, "rsqrt": lax.rsqrt, "floor": lax.floor, "ceil": lax.ceil,
        "round": lambda x: lax.round(x, lax.RoundingMethod.TO_NEAREST_EVEN), "erf": lax.erf, "sin": lax.sin,
        "cos": lax.cos, "sign": lax.sign, "not": logical_or_bitwise_not, "copy": lambda x: x, "expm1": lax.expm1,
        "log1p": lax.log1p, "tan": lax.tan, "is_finite": lax.is_finite, "popcnt": lax.population_count,
        "clz": lax.clz,
    }


def _binary_table() -> dict[str, Callable[[Any, Any], Any]]:
    from jax import lax

    return {
        "add": lax.add, "sub": lax.sub, "mul": lax.mul, "div": lax.div, "max": lax.max, "min": lax.min,
        "pow": lax.pow, "and": lax.bitwise_and, "or": lax.bitwise_or, "xor": lax.bitwise_xor, "atan2": lax.atan2,
        "rem": lax.rem, "shift_left": lax.shift_left, "shift_right_arithmetic": lax.shift_right_arithmetic,
        "shift_right_logical": lax.shift_right_logical,
    }


def _compare_table() -> dict[str, Callable[[Any, Any], Any]]:
    from jax import lax

    return {"eq": lax.eq, "ne": lax.ne, "lt": lax.lt, "le": lax.le, "gt": lax.gt, "ge": lax.ge}


def _index_vector_last(indices: Any, index_vector_dim: int, batching: Sequence[int]) -> tuple[Any, tuple[int, ...]]:
    """JAX's gather and scatter read the index vector from the last dim: move it there (or
    add it, when index_vector_dim is the rank), renumbering the batching dims behind it."""
    import jax.numpy as jnp

    if index_vector_dim == indices.ndim:
        return jnp.expand_dims(indices, -1), tuple(batching)
    moved = jnp.moveaxis(indices, index_vector_dim, -1)
    return moved, tuple(d - (d > index_vector_dim) for d in batching)


class _Lowering:
    """Per-op lowerings; `emit(node, args)` gives the node's JAX value."""

    def __init__(self, precision: Any):
        from jax import lax

        self.lax = lax
        self.precision = precision
        self.unary = _unary_table()
        self.binary = _binary_table()
        self.compare = _compare_table()

    def emit(self, node: Node, args: list[Any]) -> Any:
        op, a = node.op, node.attrs
        if op in self.unary:
            return self.unary[op](args[0])
        if op in self.binary:
            return self.binary[op](args[0], args[1])
        method = getattr(self, f"_{op}", None)
        if method is None:
            raise UnknownOp(op, node.loc or f"%{node.out.name}")
        return method(node, args, a)

    def _out_dtype(self, node: Node) -> np.dtype:
        return _jnp_dtype(node.out.type.dtype)

    def _compare(self, node, args, a):
        return self.compare[a["direction"]](args[0], args[1])

    def _select(self, node, args, a):
        return self.lax.select(args[0], args[1], args[2])

    def _convert(self, node, args, a):
        if node.out.type.dtype is DType.BOOL:
            return self.lax.ne(args[0], self.lax.full_like(args[0], 0))
        return self.lax.convert_element_type(args[0], self._out_dtype(node))

    def _check(self, node, args, a):
        return args[0]  # not enforced: see the module docstring

    def _iota(self, node, args, a):
        return self.lax.broadcasted_iota(self._out_dtype(node), _ints(a["shape"]), int(a["dim"]))

    def _broadcast(self, node, args, a):
        return self.lax.broadcast_in_dim(args[0], _ints(a["shape"]), _ints(a["dims"]))

    def _reshape(self, node, args, a):
        return self.lax.reshape(args[0], _ints(a["shape"]))

    def _transpose(self, node, args, a):
        return self.lax.transpose(args[0], _ints(a["perm"]))

    def _slice(self, node, args, a):
        return self.lax.slice(args[0], _ints(a["start"]), _ints(a["limit"]), _ints(a["stride"]))

    def _concat(self, node, args, a):
        return self.lax.concatenate(args, int(a["axis"]))

    def _pad(self, node, args, a):
        x = args[0]
        value = np.asarray(a["value"]).astype(x.dtype)
        return self.lax.pad(x, value, [(int(lo), int(hi), 0) for lo, hi in zip(a["low"], a["high"])])

    def _reverse(self, node, args, a):
        return self.lax.rev(args[0], _ints(a["dims"]))

    def _dot(self, node, args, a):
        dims = ((_ints(a["lhs_contract"]), _ints(a["rhs_contract"])), (_ints(a["lhs_batch"]), _ints(a["rhs_batch"])))
        return self.lax.dot_general(args[0], args[1], dims, precision=self.precision)

    def _conv(self, node, args, a):
        x, w = args
        spatial = x.ndim - 2
        layout = tuple(range(x.ndim))  # NC*S, OI*K, NC*S: the IR's layouts
        numbers = self.lax.ConvDimensionNumbers(layout, layout, layout)
        return self.lax.conv_general_dilated(
            x, w, _ints(a["strides"]), [(int(lo), int(hi)) for lo, hi in a["padding"]],
            lhs_dilation=_ints(a.get("lhs_dilation", (1,) * spatial)), rhs_dilation=_ints(a["dilation"]),
            dimension_numbers=numbers, feature_group_count=int(a["groups"]), precision=self.precision)

    def _reducer(self, kind: str, dtype: DType) -> tuple[Any, Callable[[Any, Any], Any]]:
        import jax.numpy as jnp

        init = np.asarray(reduce_identity(kind, dtype)).astype(_jnp_dtype(dtype))
        if dtype is DType.BOOL:  # max is any, min is all; sum of i1 does not occur in the IR
            return init, {"max": jnp.logical_or, "min": jnp.logical_and}[kind]
        return init, {"sum": self.lax.add, "prod": self.lax.mul, "max": self.lax.max, "min": self.lax.min}[kind]

    def _reduce(self, node, args, a):
        init, combine = self._reducer(a["kind"], node.out.type.dtype)
        return self.lax.reduce(args[0], init, combine, _ints(a["axes"]))

    def _reduce_window(self, node, args, a):
        rank = args[0].ndim
        init, combine = self._reducer(a["kind"], node.out.type.dtype)
        return self.lax.reduce_window(
            args[0], init, combine, _ints(a["window"]), _ints(a["strides"]),
            [(int(lo), int(hi)) for lo, hi in a["padding"]],
            base_dilation=_ints(a.get("base_dilation", (1,) * rank)),
            window_dilation=_ints(a.get("window_dilation", (1,) * rank)))

    def _gather(self, node, args, a):
        operand, indices = args
        indices, batching = _index_vector_last(indices, int(a["index_vector_dim"]),
                                               _ints(a.get("start_indices_batching_dims", ())))
        numbers = self.lax.GatherDimensionNumbers(
            offset_dims=_ints(a["offset_dims"]), collapsed_slice_dims=_ints(a["collapsed_slice_dims"]),
            start_index_map=_ints(a["start_index_map"]),
            operand_batching_dims=_ints(a.get("operand_batching_dims", ())), start_indices_batching_dims=batching)
        return self.lax.gather(operand, indices, numbers, _ints(a["slice_sizes"]),
                               mode=self.lax.GatherScatterMode.CLIP)  # aot clamps the starts, as the spec

    def _scatter(self, node, args, a):
        operand, indices, updates = args
        indices, batching = _index_vector_last(indices, int(a["index_vector_dim"]),
                                               _ints(a.get("scatter_indices_batching_dims", ())))
        numbers = self.lax.ScatterDimensionNumbers(
            update_window_dims=_ints(a["update_window_dims"]), inserted_window_dims=_ints(a["inserted_window_dims"]),
            scatter_dims_to_operand_dims=_ints(a["scatter_dims_to_operand_dims"]),
            operand_batching_dims=_ints(a.get("input_batching_dims", ())), scatter_indices_batching_dims=batching)
        scatter = {"assign": self.lax.scatter, "add": self.lax.scatter_add, "mul": self.lax.scatter_mul,
                   "max": self.lax.scatter_max, "min": self.lax.scatter_min}[a["kind"]]
        # a window that does not fit is skipped whole, as aot and XLA do
        return scatter(operand, indices, updates, numbers, mode=self.lax.GatherScatterMode.FILL_OR_DROP)

    def _sort(self, node, args, a):
        import jax.numpy as jnp

        return jnp.sort(args[0], axis=int(a["dim"]), stable=True, descending=bool(a["descending"]))

    def _argsort(self, node, args, a):
        import jax.numpy as jnp

        order = jnp.argsort(args[0], axis=int(a["dim"]), stable=True, descending=bool(a["descending"]))
        return order.astype(self._out_dtype(node))


def lower_graph(graph: Graph, precision: Any = None) -> Lowered:
    """`graph` as a JAX function (see the module docstring); UnknownOp names the first op
    with no lowering, before anything runs. `precision` defaults to lax.Precision.HIGHEST."""
    import jax.numpy as jnp
    from jax import lax

    lowering = _Lowering(lax.Precision.HIGHEST if precision is None else precision)
    for node in graph.nodes:  # every op known up front: a clear error, not one at trace time
        if node.op != "constant" and node.op not in lowering.unary and node.op not in lowering.binary \
                and not hasattr(lowering, f"_{node.op}"):
            raise UnknownOp(node.op, node.loc or f"%{node.out.name}")
    params: dict[str, np.ndarray] = {}
    literals: dict[int, np.ndarray] = {}
    for node in graph.nodes:
        if node.op != "constant":
            continue
        value = np.asarray(node.attrs["value"]).astype(_jnp_dtype(node.out.type.dtype))
        if value.size > SMALL_CONSTANT:
            params[node.out.name] = value
        else:
            literals[id(node.out)] = value
    nodes = [n for n in graph.nodes if n.op != "constant"]
    inputs, outputs = list(graph.inputs), list(graph.outputs)

    def fn(weights: dict[str, Any], *args: Any) -> list[Any]:
        if len(args) != len(inputs):
            raise TypeError(f"the graph takes {len(inputs)} inputs, got {len(args)}")
        env: dict[int, Any] = {id(v): jnp.asarray(x) for v, x in zip(inputs, args)}

        def read(value: Value) -> Any:
            if id(value) in env:
                return env[id(value)]
            if id(value) in literals:
                return jnp.asarray(literals[id(value)])
            return weights[value.name]

        for node in nodes:
            env[id(node.out)] = lowering.emit(node, [read(v) for v in node.inputs])
        return [read(v) for v in outputs]

    return Lowered(fn, params)
