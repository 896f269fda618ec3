"""Shape and data-movement ONNX ops, and the constant producers (Constant, Shape, Range, ...).

Operands that set a shape (Reshape's shape, Pad's pads, Slice's starts, ...)
must be known at compile time: initializers, Constant nodes, or subgraphs
that fold to constants.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from aot.arith import ceil_div
from aot.ir import DType, TensorType, Value

from .context import Ctx, NodeArgs, broadcast_shape, norm_axis, op_registry, static_ints
from .loader import tensor_to_array
from .ops_index import gather_axis

OPS, op = op_registry()


def _ints_from(ctx: Ctx, a: NodeArgs, attr: str, input_index: int, since_opset: int, what: str) -> list[int] | None:
    """An int list given as attribute before `since_opset` and as an input from it on."""
    if ctx.opset >= since_opset:
        return static_ints(ctx, a.input(input_index), what)
    value = a.attr(attr)
    return None if value is None else [int(x) for x in value]


# -- constants ------------------------------------------------------------------
@op("Constant")
def _constant(ctx: Ctx, a: NodeArgs) -> list[Value]:
    attrs = a.attrs
    if "value" in attrs:
        array = tensor_to_array(attrs["value"], f"Constant '{ctx.node_name}'")
    elif "value_float" in attrs:
        array = np.array(attrs["value_float"], dtype=np.float32)
    elif "value_floats" in attrs:
        array = np.array(attrs["value_floats"], dtype=np.float32)
    elif "value_int" in attrs:
        array = np.array(attrs["value_int"], dtype=np.int64)
    elif "value_ints" in attrs:
        array = np.array(attrs["value_ints"], dtype=np.int64)
    elif "sparse_value" in attrs:
        raise ctx.unsupported("sparse_value constants")
    else:
        raise ctx.unsupported(f"constant of kind {sorted(attrs)} (strings are not supported)")
    return [ctx.constant(array)]


@op("ConstantOfShape")
def _constant_of_shape(ctx: Ctx, a: NodeArgs) -> list[Value]:
    shape = static_ints(ctx, a.inputs[0], "shape")
    fill = a.attr("value")
    value = tensor_to_array(fill, f"value of '{ctx.node_name}'") if fill is not None else np.zeros(1, np.float32)
    scalar = ctx.constant(value.reshape(()))
    return [ctx.broadcast_in_dims(scalar, shape, ())]


@op("Shape")
def _shape(ctx: Ctx, a: NodeArgs) -> list[Value]:
    shape = np.array(a.inputs[0].type.shape, dtype=np.int64)
    rank = len(shape)
    start, end = a.attr("start", 0), a.attr("end", rank)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return [ctx.constant(shape[start:end])]


@op("Size")
def _size(ctx: Ctx, a: NodeArgs) -> list[Value]:
    return [ctx.constant(np.array(a.inputs[0].type.size, dtype=np.int64))]


def _offset_from(ctx: Ctx, limit: Value, start: Value) -> np.ndarray | None:
    """limit - start where limit is start plus a constant (Range(position, position + T), as a
    decoder's positions are written): that constant, else None."""
    node = limit.producer
    if node is None or node.op != "add":
        return None
    for x, c in (node.inputs, node.inputs[::-1]):
        offset = ctx.const(c)
        if x is start and offset is not None and offset.size == 1:
            return offset.reshape(())
    return None


def _range_from_run_time_start(ctx: Ctx, a: NodeArgs) -> Value | None:
    """Range(start, start + c, delta) with a run-time start: c / delta elements whatever start is,
    start + iota * delta at run time. None when the inputs are not of that form."""
    start, limit, delta_value = a.inputs
    delta, offset = ctx.const(delta_value), _offset_from(ctx, limit, start)
    if delta is None or offset is None or delta.size != 1 or start.type.size != 1:
        return None
    delta = delta.reshape(())
    if float(delta) == 0:
        raise ctx.error("delta is 0")
    count = max(int(math.ceil(float(offset) / float(delta))), 0)
    dtype = start.type.dtype
    steps = ctx.op("mul", [ctx.op("iota", [], shape=(count,), dim=0, dtype=dtype),
                           ctx.full(delta.item(), TensorType(dtype, (count,)))])
    first = ctx.op("broadcast", [ctx.reshape(start, ())], shape=(count,), dims=())
    return ctx.op("add", [first, steps])


@op("Range")
def _range(ctx: Ctx, a: NodeArgs) -> list[Value]:
    arrays = [ctx.const(v) for v in a.inputs]
    if any(x is None for x in arrays):
        ranged = _range_from_run_time_start(ctx, a) if arrays[0] is None and len(a.inputs) == 3 else None
        if ranged is not None:
            return [ranged]
        raise ctx.unsupported("start, limit and delta must be known at compile time (or limit be start plus a "
                              "constant)")
    if any(x.size != 1 for x in arrays):
        raise ctx.error(f"start, limit and delta must be scalars, got shapes {[list(x.shape) for x in arrays]}")
    # exporters' function expansions pass 1-element vectors where the spec says scalars
    start, limit, delta = (x.reshape(()) for x in arrays)
    count = max(int(math.ceil((float(limit) - float(start)) / float(delta))), 0)
    values = start + np.arange(count).astype(start.dtype) * delta
    return [ctx.constant(values.astype(start.dtype))]


# -- reshaping ------------------------------------------------------------------
@op("Reshape")
def _reshape(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    target = _ints_from(ctx, a, "shape", 1, 5, "shape")
    allow_zero = bool(a.attr("allowzero", 0))
    shape = []
    for i, d in enumerate(target):
        if d == 0 and not allow_zero:
            if i >= x.type.rank:
                raise ctx.error(f"shape {target}: 0 at dim {i} copies a dim {x.type} does not have")
            d = x.type.shape[i]
        shape.append(d)
    if shape.count(-1) > 1:
        raise ctx.error(f"shape {target} has more than one -1")
    if -1 in shape:
        known = math.prod(d for d in shape if d != -1)
        if known == 0 or x.type.size % known:
            raise ctx.error(f"cannot reshape {x.type} to {target}")
        shape[shape.index(-1)] = x.type.size // known
    if math.prod(shape) != x.type.size:
        raise ctx.error(f"cannot reshape {x.type} ({x.type.size} elements) to {target}")
    return [ctx.reshape(x, shape)]


@op("Flatten")
def _flatten(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    rank = x.type.rank
    axis = a.attr("axis", 1)
    axis = axis + rank if axis < 0 else axis
    if not 0 <= axis <= rank:
        raise ctx.error(f"axis {a.attr('axis')} out of range for {x.type}")
    shape = x.type.shape
    return [ctx.reshape(x, (math.prod(shape[:axis]), math.prod(shape[axis:])))]


@op("Squeeze")
def _squeeze(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    rank = x.type.rank
    axes = _ints_from(ctx, a, "axes", 1, 13, "axes")
    if axes is None:
        axes = [i for i, d in enumerate(x.type.shape) if d == 1]
    axes = {norm_axis(ctx, ax, rank) for ax in axes}
    for ax in axes:
        if x.type.shape[ax] != 1:
            raise ctx.error(f"cannot squeeze dim {ax} of {x.type}: it is not 1")
    return [ctx.reshape(x, [d for i, d in enumerate(x.type.shape) if i not in axes])]


@op("Unsqueeze")
def _unsqueeze(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    axes = _ints_from(ctx, a, "axes", 1, 13, "axes") or []
    out_rank = x.type.rank + len(axes)
    axes = {norm_axis(ctx, ax, out_rank) for ax in axes}
    dims = iter(x.type.shape)
    return [ctx.reshape(x, [1 if i in axes else next(dims) for i in range(out_rank)])]


@op("Transpose")
def _transpose(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    perm = a.attr("perm")
    perm = list(range(x.type.rank))[::-1] if perm is None else [norm_axis(ctx, p, x.type.rank) for p in perm]
    return [ctx.transpose(x, perm)]


@op("Concat")
def _concat(ctx: Ctx, a: NodeArgs) -> list[Value]:
    operands = [v for v in a.inputs if v is not None]
    axis = norm_axis(ctx, a.attr("axis"), operands[0].type.rank)
    # zero-sized operands add nothing (ONNX allows them; shape subgraphs produce them)
    nonempty = [v for v in operands if v.type.shape[axis] != 0] or operands[:1]
    if len(nonempty) == 1:
        return [nonempty[0]]
    return [ctx.op("concat", nonempty, axis=axis)]


@op("Expand")
def _expand(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    shape = static_ints(ctx, a.inputs[1], "shape")
    return [ctx.broadcast_to(x, broadcast_shape(ctx, x.type.shape, shape))]


@op("Tile")
def _tile(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    repeats = static_ints(ctx, a.inputs[1], "repeats")
    if len(repeats) != x.type.rank:
        raise ctx.error(f"repeats {repeats} does not match {x.type}")
    # x[d0, d1, ...] -> broadcast to [r0, d0, r1, d1, ...] -> reshape to [r0*d0, r1*d1, ...]
    interleaved = [n for r, d in zip(repeats, x.type.shape) for n in (r, d)]
    spread = ctx.broadcast_in_dims(x, interleaved, tuple(range(1, 2 * x.type.rank, 2)))
    return [ctx.reshape(spread, [r * d for r, d in zip(repeats, x.type.shape)])]


# -- slicing --------------------------------------------------------------------
def slice_axis(ctx: Ctx, x: Value, axis: int, start: int, limit: int, step: int = 1) -> Value:
    rank = x.type.rank
    starts, limits, strides = [0] * rank, list(x.type.shape), [1] * rank
    starts[axis], limits[axis], strides[axis] = start, limit, step
    if starts == [0] * rank and limits == list(x.type.shape) and strides == [1] * rank:
        return x
    return ctx.op("slice", [x], start=tuple(starts), limit=tuple(limits), stride=tuple(strides))


@op("Slice")
def _slice(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    rank = x.type.rank
    if ctx.opset >= 10:
        starts = static_ints(ctx, a.inputs[1], "starts")
        ends = static_ints(ctx, a.inputs[2], "ends")
        axes = static_ints(ctx, a.input(3), "axes")
        steps = static_ints(ctx, a.input(4), "steps")
    else:
        starts, ends, axes, steps = a.attr("starts"), a.attr("ends"), a.attr("axes"), None
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    begin, limit, stride = [0] * rank, list(x.type.shape), [1] * rank
    reversed_axes = []
    for ax, s, e, st in zip(axes, starts, ends, steps):
        ax = norm_axis(ctx, ax, rank)
        if st == 0:
            raise ctx.error(f"step 0 on axis {ax}")
        dim = x.type.shape[ax]
        s = s + dim if s < 0 else s
        e = e + dim if e < 0 else e
        if st > 0:
            s, e = min(max(s, 0), dim), min(max(e, 0), dim)
        else:
            # a negative step walks s, s + st, ... > e: the same elements, forward, in the reversed axis
            s, e = min(max(s, 0), dim - 1), min(max(e, -1), dim - 1)
            s, e, st = dim - 1 - s, dim - 1 - e, -st
            reversed_axes.append(ax)
        begin[ax], limit[ax], stride[ax] = s, max(e, s), st
    if reversed_axes:
        x = ctx.op("reverse", [x], dims=tuple(sorted(reversed_axes)))
    if begin == [0] * rank and limit == list(x.type.shape) and stride == [1] * rank:
        return [x]
    return [ctx.op("slice", [x], start=tuple(begin), limit=tuple(limit), stride=tuple(stride))]


@op("Split")
def _split(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    axis = norm_axis(ctx, a.attr("axis", 0), x.type.rank)
    dim = x.type.shape[axis]
    sizes = _ints_from(ctx, a, "split", 1, 13, "split")
    if sizes is None:
        parts = a.attr("num_outputs", a.num_outputs)
        chunk = ceil_div(dim, parts)
        sizes = [max(0, min(chunk, dim - i * chunk)) for i in range(parts)]
    if sum(sizes) != dim or any(s < 0 for s in sizes):
        raise ctx.error(f"split sizes {sizes} do not add up to dim {axis} of {x.type}")
    outputs, offset = [], 0
    for size in sizes:
        outputs.append(slice_axis(ctx, x, axis, offset, offset + size))
        offset += size
    return outputs


@op("Gather")
def _gather(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, indices_v = a.inputs
    axis = norm_axis(ctx, a.attr("axis", 0), x.type.rank)
    indices = ctx.const(indices_v)
    if indices is None:
        return [gather_axis(ctx, x, indices_v, axis)]
    dim = x.type.shape[axis]
    flat = [int(i) + dim if i < 0 else int(i) for i in indices.reshape(-1)]
    if any(not 0 <= i < dim for i in flat):
        raise ctx.error(f"index out of range for dim {axis} of size {dim}: {indices.reshape(-1).tolist()}")
    data = ctx.const(x)
    if data is not None:
        return [ctx.constant(np.take(data, np.array(flat, dtype=np.int64).reshape(indices.shape), axis=axis))]
    out_shape = x.type.shape[:axis] + tuple(indices.shape) + x.type.shape[axis + 1:]
    return [ctx.reshape(take_static(ctx, x, flat, axis), out_shape)]


def _contiguous_runs(indices: Sequence[int]) -> list[tuple[int, int]]:
    """[3, 4, 5, 1] -> [(3, 6), (1, 2)]: one slice per run of consecutive indices."""
    runs = []
    start = prev = indices[0]
    for i in indices[1:]:
        if i == prev + 1:
            prev = i
            continue
        runs.append((start, prev + 1))
        start = prev = i
    runs.append((start, prev + 1))
    return runs


def take_static(ctx: Ctx, x: Value, flat: Sequence[int], axis: int) -> Value:
    """x's elements at the in-range compile-time indices `flat` along `axis`, one slice per run."""
    if not flat:
        return slice_axis(ctx, x, axis, 0, 0)
    parts = [slice_axis(ctx, x, axis, start, stop) for start, stop in _contiguous_runs(flat)]
    return parts[0] if len(parts) == 1 else ctx.op("concat", parts, axis=axis)


@op("Compress")
def _compress(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """The slices along `axis` (of the flattened input when axis is absent) where a compile-time condition holds."""
    x, cond_v = a.inputs
    cond = ctx.const(cond_v)
    if cond is None:
        raise ctx.unsupported("condition must be known at compile time (the output shape depends on it)")
    if a.attr("axis") is None:
        x, axis = ctx.reshape(x, (x.type.size,)), 0
    else:
        axis = norm_axis(ctx, a.attr("axis"), x.type.rank)
    picked = [i for i, c in enumerate(cond.reshape(-1).tolist()) if c]
    if picked and picked[-1] >= x.type.shape[axis]:
        raise ctx.error(f"condition selects index {picked[-1]} beyond dim {axis} of {x.type}")
    return [take_static(ctx, x, picked, axis)]


@op("CenterCropPad")
def _center_crop_pad(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Crop (centered, the odd element off the end) or zero-pad (likewise) each of `axes` to `shape`."""
    x = a.inputs[0]
    target = static_ints(ctx, a.inputs[1], "shape")
    rank = x.type.rank
    axes = [norm_axis(ctx, ax, rank) for ax in a.attr("axes", list(range(rank)))]
    if len(axes) != len(target):
        raise ctx.error(f"shape has {len(target)} entries for {len(axes)} axes")
    low, high = [0] * rank, [0] * rank
    for ax, want in zip(axes, target):
        dim = x.type.shape[ax]
        if want < dim:
            start = (dim - want) // 2
            x = slice_axis(ctx, x, ax, start, start + want)
        elif want > dim:
            low[ax] = (want - dim) // 2
            high[ax] = want - dim - low[ax]
    if any(low) or any(high):
        x = ctx.op("pad", [x], low=tuple(low), high=tuple(high), value=0)
    return [x]


# -- padding --------------------------------------------------------------------
@op("Pad")
def _pad(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    rank = x.type.rank
    mode = a.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise ctx.unsupported(f"mode '{mode}'")
    runtime_fill = None
    if ctx.opset >= 11:
        pads = static_ints(ctx, a.inputs[1], "pads")
        fill = a.input(2)
        value = 0
        if fill is not None:
            array = ctx.const(fill)
            if array is None:
                runtime_fill = fill  # padded with 0, then the pad region selects this value
            else:
                value = array.reshape(-1)[0].item() if array.size else 0
        axes = static_ints(ctx, a.input(3), "axes")
    else:
        pads = [int(p) for p in a.attr("pads", a.attr("paddings", []))]
        value = float(a.attr("value", 0.0))
        axes = None
    axes = list(range(rank)) if axes is None else [norm_axis(ctx, ax, rank) for ax in axes]
    if len(pads) != 2 * len(axes):
        raise ctx.error(f"pads {pads} needs {2 * len(axes)} entries")
    low, high = [0] * rank, [0] * rank
    for i, ax in enumerate(axes):
        low[ax], high[ax] = pads[i], pads[i + len(axes)]
    if x.type.dtype.is_float:
        value = float(value)
    elif x.type.dtype.is_int:
        value = int(value)
    else:
        value = int(bool(value))
    # negative pads crop: slice first, then pad by the non-negative rest
    if min(low + high) < 0:
        start = [max(-lo, 0) for lo in low]
        limit = [d - max(-hi, 0) for d, hi in zip(x.type.shape, high)]
        x = ctx.op("slice", [x], start=tuple(start), limit=tuple(limit), stride=(1,) * rank)
        low, high = [max(lo, 0) for lo in low], [max(hi, 0) for hi in high]
    if not any(low + high):
        return [x]
    if mode != "constant":
        return [_pad_from_data(ctx, x, low, high, mode)]
    padded = ctx.op("pad", [x], low=tuple(low), high=tuple(high), value=value)
    if runtime_fill is None:
        return [padded]
    inside = ctx.op("pad", [ctx.full(True, x.type.with_dtype(DType.BOOL))], low=tuple(low), high=tuple(high), value=0)
    fill_b = ctx.broadcast_in_dims(ctx.reshape(runtime_fill, ()), padded.type.shape, ())
    return [ctx.op("select", [inside, padded, fill_b])]


def _pad_from_data(ctx: Ctx, x: Value, low: Sequence[int], high: Sequence[int], mode: str) -> Value:
    """reflect / edge / wrap padding: each axis in turn, the border built from slices of the data."""
    for axis, (lo, hi) in enumerate(zip(low, high)):
        if not lo and not hi:
            continue
        n = x.type.shape[axis]
        parts = [_border(ctx, x, axis, n, i, mode) for i in range(-lo, 0)]
        parts.append(x)
        parts += [_border(ctx, x, axis, n, i, mode) for i in range(n, n + hi)]
        x = ctx.op("concat", parts, axis=axis)
    return x


def _border(ctx: Ctx, x: Value, axis: int, n: int, i: int, mode: str) -> Value:
    """The element at out-of-range position i of an axis of size n, per padding mode."""
    if mode == "edge":
        src = min(max(i, 0), n - 1)
    elif mode == "wrap":
        src = i % n
    else:  # reflect: mirror without repeating the edge
        period = 2 * (n - 1) if n > 1 else 1
        src = i % period
        src = period - src if src >= n else src
    return slice_axis(ctx, x, axis, src, src + 1)


@op("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    if x.type.rank != 4:
        raise ctx.error(f"needs a 4-D input, got {x.type}")
    n, c, h, w = x.type.shape
    b = int(a.attr("blocksize"))
    if a.node.op_type == "SpaceToDepth":
        y = ctx.reshape(x, (n, c, h // b, b, w // b, b))
        # the inverse of DepthToSpace in the same mode: DCR puts the block offsets before the channel
        perm = (0, 3, 5, 1, 2, 4) if a.attr("mode", "DCR") == "DCR" else (0, 1, 3, 5, 2, 4)
        y = ctx.transpose(y, perm)
        return [ctx.reshape(y, (n, c * b * b, h // b, w // b))]
    if a.attr("mode", "DCR") == "DCR":
        y = ctx.reshape(x, (n, b, b, c // (b * b), h, w))
        y = ctx.transpose(y, (0, 3, 4, 1, 5, 2))
    else:
        y = ctx.reshape(x, (n, c // (b * b), b, b, h, w))
        y = ctx.transpose(y, (0, 1, 4, 2, 5, 3))
    return [ctx.reshape(y, (n, c // (b * b), h * b, w * b))]

