"""Contractions and reductions: dot_general, dot, convolution, reduce, reduce_window."""
from __future__ import annotations

import numpy as np

from aot.ir import DType, Value
from aot.ir.ops.reduction import reduce_identity
from aot.registry import registry

from .context import Ctx
from .regions import BOOL_REDUCER_KINDS, REDUCER_KINDS, arg_reducer, reducer_kind
from .syntax import Enum, Op

OPS, op = registry()  # op name -> lowering (cx, op, operands) -> results
_COMBINE = {"sum": "add", "prod": "mul", "max": "max", "min": "min"}


def _common_dtype(cx: Ctx, lhs: Value, rhs: Value) -> tuple[Value, Value, DType]:
    """Operands converted to the result's element type (preferred_element_type, mixed int8 x int8 -> i32)."""
    out = cx.dtype(cx.result_type().elem)
    return cx.convert(lhs, out), cx.convert(rhs, out), out


@op("stablehlo.dot_general")
def _dot_general(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    dn = o.attrs.get("dot_dimension_numbers")
    if not isinstance(dn, dict):
        raise cx.error("dot_general needs dot_dimension_numbers")
    lhs, rhs, _ = _common_dtype(cx, *ins)
    keys = ("lhs_batching_dimensions", "rhs_batching_dimensions", "lhs_contracting_dimensions", "rhs_contracting_dimensions")
    lb, rb, lc, rc = (tuple(dn.get(k, ())) for k in keys)
    return [cx.op("dot", [lhs, rhs], lhs_batch=lb, rhs_batch=rb, lhs_contract=lc, rhs_contract=rc)]


@op("stablehlo.dot")
def _dot(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    lhs, rhs, _ = _common_dtype(cx, *ins)
    contract_r = (0,)
    return [cx.op("dot", [lhs, rhs], lhs_batch=(), rhs_batch=(), lhs_contract=(lhs.type.rank - 1,), rhs_contract=contract_r)]


def _layout(cx: Ctx, spec: tuple, labels: tuple[str, str]) -> list[int]:
    """Positions of (batch-like, feature-like, spatial 0, 1, ...) in a conv dim spec such as [b, 0, 1, f]."""
    positions: dict[object, int] = {}
    for i, item in enumerate(spec):
        key = item.value if isinstance(item, Enum) else item
        positions[key] = i
    spatial = sorted(k for k in positions if isinstance(k, int))
    if labels[0] not in positions or labels[1] not in positions or spatial != list(range(len(spec) - 2)):
        raise cx.error(f"convolution dimension spec {spec} is malformed")
    return [positions[labels[0]], positions[labels[1]]] + [positions[k] for k in spatial]


@op("stablehlo.convolution")
def _convolution(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    """Any dim layout: transpose to NC*S / OI*K, conv, transpose to the output layout."""
    dn = o.attrs.get("dimension_numbers")
    if not isinstance(dn, tuple) or len(dn) != 3:
        raise cx.unsupported("convolution dimension_numbers must be the [b, 0, f]x[0, i, o]->[b, 0, f] form")
    x, w, _ = _common_dtype(cx, *ins)
    nsp = x.type.rank - 2
    if cx.int_attr("batch_group_count", 1) != 1:
        raise cx.unsupported("batch_group_count > 1 is not supported")
    x = cx.transpose(x, _layout(cx, dn[0], ("b", "f")))
    w = cx.transpose(w, _layout(cx, dn[1], ("o", "i")))
    reversal = o.attrs.get("window_reversal", (False,) * nsp)
    flipped = tuple(2 + d for d, r in enumerate(reversal) if r)
    if flipped:
        w = cx.op("reverse", [w], dims=flipped)
    padding = o.attrs.get("padding", ((0, 0),) * nsp)
    padding = tuple((int(lo), int(hi)) for lo, hi in np.asarray(padding, dtype=np.int64).reshape(nsp, 2))
    if any(lo < 0 or hi < 0 for lo, hi in padding):
        raise cx.unsupported(f"negative convolution padding {padding} is not supported")
    attrs: dict[str, object] = dict(
        strides=cx.ints("window_strides", (1,) * nsp), padding=padding,
        dilation=cx.ints("rhs_dilation", (1,) * nsp), groups=cx.int_attr("feature_group_count", 1))
    lhs_dilation = cx.ints("lhs_dilation", (1,) * nsp)
    if any(d != 1 for d in lhs_dilation):
        attrs["lhs_dilation"] = lhs_dilation
    y = cx.op("conv", [x, w], **attrs)
    out_layout = _layout(cx, dn[2], ("b", "f"))  # out dim j of ours sits at out_layout[j]
    perm = [0] * len(out_layout)
    for ours, theirs in enumerate(out_layout):
        perm[theirs] = ours
    return [cx.transpose(y, perm)]


def _init_is_identity(cx: Ctx, init: Value, kind: str) -> bool:
    value = cx.const(init)
    return value is not None and bool(np.all(value == np.array(reduce_identity(kind, init.type.dtype)).astype(value.dtype)))


@op("stablehlo.reduce")
def _reduce(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    n = len(ins) // 2
    xs, inits = ins[:n], ins[n:]
    axes = tuple(sorted(cx.ints("dimensions")))
    if n == 1:
        kind = _single_kind(cx, o, xs[0].type.dtype)
        y = cx.op("reduce", xs, kind=kind, axes=axes) if axes else xs[0]
        if not _init_is_identity(cx, inits[0], kind):  # the init joins the reduction once
            y = cx.op(_COMBINE[kind], [y, cx.broadcast_scalar(inits[0], y.type.shape)])
        return [y]
    if n == 2 and o.regions:
        kind = arg_reducer(o.regions[0].blocks[0])
        if kind is not None:
            return _arg_reduce(cx, xs[0], xs[1], inits, kind, axes)
    raise cx.unsupported(f"reduce over {n} operands with this reducer region is not supported (argmax/argmin are)")


def _single_kind(cx: Ctx, o: Op, dtype: DType) -> str:
    is_bool = dtype is DType.BOOL
    if "applies" in o.extra:
        table = BOOL_REDUCER_KINDS if is_bool else REDUCER_KINDS
        kind = table.get(o.extra["applies"])
    else:
        kind = reducer_kind(o.regions[0].blocks[0], is_bool) if o.regions else None
    if kind is None:
        raise cx.unsupported("reducer is not one of add, multiply, maximum, minimum (and/or on i1)")
    return kind


def _arg_reduce(cx: Ctx, x: Value, index: Value, inits: list[Value], kind: str, axes: tuple[int, ...]) -> list[Value]:
    """argmax/argmin: the extreme value, then the lowest index holding it (NaN counts as the extreme)."""
    if not _init_is_identity(cx, inits[0], kind):
        raise cx.unsupported(f"arg{kind} reduce whose value init is not the identity of {kind}")
    m = cx.op("reduce", [x], kind=kind, axes=axes)
    kept = tuple(d for d in range(x.type.rank) if d not in axes)
    mb = cx.op("broadcast", [m], shape=x.type.shape, dims=kept)
    hit = cx.op("compare", [x, mb], direction="eq")
    if x.type.dtype.is_float:
        hit = cx.op("or", [hit, cx.op("compare", [x, x], direction="ne")])
    big = cx.full(int(np.iinfo(index.type.dtype.to_numpy()).max), index.type)
    idx = cx.op("reduce", [cx.op("select", [hit, index, big])], kind="min", axes=axes)
    return [m, idx]


@op("stablehlo.reduce_window")
def _reduce_window(cx: Ctx, o: Op, ins: list[Value]) -> list[Value]:
    if len(ins) != 2:
        raise cx.unsupported("reduce_window over several operands is not supported")
    x, init = ins
    kind = _single_kind(cx, o, x.type.dtype)
    if kind not in ("sum", "max", "min"):
        raise cx.unsupported(f"reduce_window of kind {kind} is not supported")
    rank = x.type.rank
    padding = o.attrs.get("padding", np.zeros((rank, 2), np.int64))
    padding = tuple((int(lo), int(hi)) for lo, hi in np.asarray(padding, dtype=np.int64).reshape(rank, 2))
    attrs: dict[str, object] = dict(
        kind=kind, window=cx.ints("window_dimensions"), strides=cx.ints("window_strides", (1,) * rank), padding=padding)
    base, window = cx.ints("base_dilations", (1,) * rank), cx.ints("window_dilations", (1,) * rank)
    if any(d != 1 for d in base):
        attrs["base_dilation"] = base
    if any(d != 1 for d in window):
        attrs["window_dilation"] = window
    identity = _init_is_identity(cx, init, kind)
    if not identity and kind == "sum":  # each padded position would add the init once more
        raise cx.unsupported("reduce_window sum with a non-zero init is not supported")
    y = cx.op("reduce_window", [x], **attrs)
    if not identity:  # max/min: padding with init or identity gives the same once init joins
        y = cx.op(_COMBINE[kind], [y, cx.broadcast_scalar(init, y.type.shape)])
    return [y]
