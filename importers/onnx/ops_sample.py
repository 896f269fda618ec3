"""Sampling and rearranging ONNX ops: GridSample, AffineGrid, ReverseSequence,
MaxUnpool, Col2Im, and Det (small matrices by the Leibniz formula).

GridSample follows onnx's reference (onnx/reference/ops/op_grid_sample.py)
step by step, vectorised over every output location: denormalise each grid
coordinate, round it (nearest), bring it back inside the borders (border:
clamp, reflection: reflect), then split it into interpolation taps, each an
integer index per spatial dim and a weight (nearest 1 tap, linear 2, cubic 4
per dim). A tap outside the image reads 0 (zeros), the clamped pixel
(border) or the reflected pixel (reflection). Every tap combination is one
row gather from X viewed as [N * pixels, C], scaled by its weight and summed.
"""
from __future__ import annotations

import itertools

import numpy as np

from aot.ir import DType, Value

from .context import Ctx, NodeArgs, op_registry, take_index

OPS, op = op_registry()

CUBIC_A = -0.75  # the coefficient onnx and onnxruntime use for GridSample's cubic mode
MODES = {"linear": "linear", "bilinear": "linear", "nearest": "nearest", "cubic": "cubic", "bicubic": "cubic"}
PADDING_MODES = ("zeros", "border", "reflection")


def _slice_last(ctx: Ctx, v: Value, index: int) -> Value:
    """v[..., index] with the last dim dropped."""
    return take_index(ctx, v, v.type.rank - 1, index)


def _clamp(ctx: Ctx, x: Value, lo: float, hi: float) -> Value:
    return ctx.op("min", [ctx.op("max", [x, ctx.full(lo, x.type)]), ctx.full(hi, x.type)])


def _select_outside(ctx: Ctx, x: Value, lo: float, hi: float, inside: Value, outside: Value) -> Value:
    below = ctx.op("compare", [x, ctx.full(lo, x.type)], direction="lt")
    above = ctx.op("compare", [x, ctx.full(hi, x.type)], direction="gt")
    return ctx.op("select", [ctx.op("or", [below, above]), outside, inside])


def _reflect(ctx: Ctx, x: Value, lo: float, hi: float) -> Value:
    """Reflect x by the nearer border until it lies in [lo, hi] (the reference's _gs_reflect)."""
    span = hi - lo
    if span <= 0:
        return ctx.full(lo, x.type)

    def fold(dx: Value, near: float, far: float, sign: float) -> Value:
        # n = trunc(dx / span) reflections; r = dx - n*span; even n: near + sign*r, odd n: far - sign*r
        n = ctx.op("floor", [ctx.binary_scalar("mul", dx, 1.0 / span)])
        r = ctx.op("sub", [dx, ctx.binary_scalar("mul", n, span)])
        half = ctx.binary_scalar("mul", n, 0.5)
        odd = ctx.op("compare", [ctx.op("floor", [half]), half], direction="ne")
        even_value = ctx.binary_scalar("add", ctx.binary_scalar("mul", r, sign), near)
        odd_value = ctx.binary_scalar("add", ctx.binary_scalar("mul", r, -sign), far)
        return ctx.op("select", [odd, odd_value, even_value])

    below = fold(ctx.op("sub", [ctx.full(lo, x.type), x]), lo, hi, 1.0)
    above = fold(ctx.binary_scalar("sub", x, hi), hi, lo, -1.0)
    low = ctx.op("compare", [x, ctx.full(lo, x.type)], direction="lt")
    high = ctx.op("compare", [x, ctx.full(hi, x.type)], direction="gt")
    return ctx.op("select", [low, below, ctx.op("select", [high, above, x])])


def _cubic_weights(ctx: Ctx, t: Value) -> list[Value]:
    """Keys cubic convolution weights of taps -1, 0, 1, 2 for the fraction t in [0, 1)."""
    a = CUBIC_A

    def near(d: Value) -> Value:  # |d| <= 1: ((a + 2) d - (a + 3)) d^2 + 1
        inner = ctx.binary_scalar("sub", ctx.binary_scalar("mul", d, a + 2), a + 3)
        return ctx.binary_scalar("add", ctx.op("mul", [ctx.op("mul", [inner, d]), d]), 1.0)

    def far(d: Value) -> Value:  # 1 < |d| < 2: ((a d - 5a) d + 8a) d - 4a
        inner = ctx.binary_scalar("sub", ctx.binary_scalar("mul", d, a), 5 * a)
        inner = ctx.binary_scalar("add", ctx.op("mul", [inner, d]), 8 * a)
        return ctx.binary_scalar("sub", ctx.op("mul", [inner, d]), 4 * a)

    one_minus = ctx.op("sub", [ctx.full(1.0, t.type), t])
    return [far(ctx.binary_scalar("add", t, 1.0)), near(t), near(one_minus),
            far(ctx.op("sub", [ctx.full(2.0, t.type), t]))]


def _taps(ctx: Ctx, x: Value, length: int, mode: str, padding: str, lo: float, hi: float) -> list[tuple[Value, Value]]:
    """(index, weight) per tap of one spatial dim; index is float, already inside [0, length)
    for border/reflection, and weight is zeroed where zeros padding reads outside."""
    if mode == "nearest":
        taps = [(x, ctx.full(1.0, x.type))]
    else:
        base = ctx.op("floor", [x])
        t = ctx.op("sub", [x, base])
        if mode == "linear":
            offsets, weights = (0, 1), [ctx.op("sub", [ctx.full(1.0, t.type), t]), t]
        else:
            offsets, weights = (-1, 0, 1, 2), _cubic_weights(ctx, t)
        taps = [(ctx.binary_scalar("add", base, float(k)), w) for k, w in zip(offsets, weights)]
    result = []
    for index, weight in taps:
        if padding == "zeros":
            weight = _select_outside(ctx, index, 0.0, length - 1.0, weight, ctx.full(0.0, weight.type))
        elif padding == "reflection":
            index = _reflect(ctx, index, lo, hi)
        result.append((_clamp(ctx, index, 0.0, length - 1.0), weight))
    return result


@op("GridSample")
def _grid_sample(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x, grid = a.inputs[0], a.inputs[1]
    mode_attr = a.attr("mode", "linear" if ctx.opset >= 20 else "bilinear")
    padding = a.attr("padding_mode", "zeros")
    align = bool(a.attr("align_corners", 0))
    if mode_attr not in MODES:
        raise ctx.unsupported(f"mode '{mode_attr}'")
    if padding not in PADDING_MODES:
        raise ctx.unsupported(f"padding_mode '{padding}'")
    mode = MODES[mode_attr]
    if not x.type.dtype.is_float or not grid.type.dtype.is_float:
        raise ctx.unsupported(f"X {x.type} and grid {grid.type} must be float")
    rank = x.type.rank - 2
    n, c = x.type.shape[:2]
    spatial = x.type.shape[2:]
    if rank < 1 or grid.type.rank != rank + 2 or grid.type.shape[0] != n or grid.type.shape[-1] != rank:
        raise ctx.error(f"grid {grid.type} does not fit X {x.type}: expected [N, out..., {rank}]")
    out_spatial = grid.type.shape[1:-1]
    compute = DType.F64 if x.type.dtype is DType.F64 else DType.F32
    g = ctx.convert(grid, compute)
    pixels = int(np.prod(spatial))
    locations = int(np.prod(out_spatial))

    per_dim: list[list[tuple[Value, Value]]] = []
    for d, length in enumerate(spatial):
        coord = _slice_last(ctx, g, rank - 1 - d)  # the grid lists x (the last dim) first
        if align:
            pos = ctx.binary_scalar("mul", ctx.binary_scalar("add", coord, 1.0), (length - 1) / 2.0)
            lo, hi = 0.0, length - 1.0
        else:
            # ((g + 1) * L - 1) / 2
            pos = ctx.binary_scalar("mul", ctx.binary_scalar("add", ctx.binary_scalar("mul", coord, float(length)),
                                                             length - 1.0), 0.5)
            lo, hi = -0.5, length - 0.5
        if mode == "nearest":
            pos = ctx.op("round", [pos])  # half to even, as np.rint and nearbyint
        if padding == "border":
            pos = _select_outside(ctx, pos, lo, hi, pos, _clamp(ctx, pos, 0.0, length - 1.0))
        elif padding == "reflection":
            pos = _reflect(ctx, pos, lo, hi)
        per_dim.append(_taps(ctx, pos, length, mode, padding, lo, hi))

    # X as rows [N * pixels, C]; a tap's row = n * pixels + sum_d index_d * stride_d
    rows = ctx.reshape(ctx.transpose(ctx.reshape(x, (n, c, pixels)), (0, 2, 1)), (n * pixels, c))
    rows = ctx.convert(rows, compute)
    strides = [int(np.prod(spatial[d + 1:])) for d in range(rank)]
    loc_shape = (n,) + out_spatial
    batch_offset = ctx.op("iota", [], shape=loc_shape, dim=0, dtype=DType.I32)
    batch_offset = ctx.binary_scalar("mul", batch_offset, pixels)
    total = None
    for combo in itertools.product(*per_dim):
        row = batch_offset
        weight = None
        for d, (index, w) in enumerate(combo):
            term = ctx.convert(ctx.op("round", [index]), DType.I32)
            if strides[d] != 1:
                term = ctx.binary_scalar("mul", term, strides[d])
            row = ctx.op("add", [row, term])
            weight = w if weight is None else ctx.op("mul", [weight, w])
        indices = ctx.reshape(row, (n * locations, 1))
        picked = ctx.op("gather", [rows, indices], offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                        index_vector_dim=1, slice_sizes=(1, c))
        weight = ctx.broadcast_in_dims(ctx.reshape(weight, (n * locations,)), (n * locations, c), (0,))
        term = ctx.op("mul", [picked, weight])
        total = term if total is None else ctx.op("add", [total, term])
    y = ctx.reshape(total, (n,) + out_spatial + (c,))
    y = ctx.transpose(y, (0, rank + 1) + tuple(range(1, rank + 1)))
    return [ctx.convert(y, x.type.dtype)]


# -- AffineGrid ---------------------------------------------------------------------
def _static_ints(ctx: Ctx, v: Value, what: str) -> list[int]:
    array = ctx.const(v)
    if array is None:
        raise ctx.unsupported(f"{what} must be known at compile time")
    return [int(d) for d in array.reshape(-1)]


def _base_coords(length: int, align: bool) -> np.ndarray:
    """Normalised coordinates of `length` pixel centres in [-1, 1]."""
    if align:
        return np.linspace(-1.0, 1.0, length) if length > 1 else np.zeros(1)
    return (np.arange(length) * 2.0 + 1.0) / length - 1.0


@op("AffineGrid")
def _affine_grid(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """grid[n, ..., :] = theta[n] @ (x, y[, z], 1): one dot with a constant [pixels, r + 1] base grid."""
    theta = a.inputs[0]
    size = _static_ints(ctx, a.inputs[1], "size")
    align = bool(a.attr("align_corners", 0))
    rank = len(size) - 2
    if rank not in (2, 3) or theta.type.shape != (size[0], rank, rank + 1):
        raise ctx.error(f"theta {theta.type} does not fit size {size}: expected [N, {rank}, {rank + 1}]")
    if not theta.type.dtype.is_float:
        raise ctx.unsupported(f"{theta.type.dtype} theta (float types only)")
    spatial = size[2:]
    axes = [_base_coords(n, align) for n in spatial]
    mesh = np.meshgrid(*axes, indexing="ij")  # one array per spatial dim (D, H, W order)
    columns = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(int(np.prod(spatial)))]  # x first, then 1
    base = ctx.constant(np.stack(columns, axis=1), theta.type.dtype)  # [pixels, r + 1]
    grid = ctx.op("dot", [theta, base], lhs_batch=(), rhs_batch=(), lhs_contract=(2,), rhs_contract=(1,))
    grid = ctx.transpose(grid, (0, 2, 1))  # [N, pixels, r]
    return [ctx.reshape(grid, (size[0],) + tuple(spatial) + (rank,))]


# -- ReverseSequence ---------------------------------------------------------------
def _take_rows(ctx: Ctx, rows: Value, index: np.ndarray) -> Value:
    """rows[index] for a 2-D `rows` and constant row indices."""
    indices = ctx.constant(index.reshape(-1, 1).astype(np.int32))
    return ctx.op("gather", [rows, indices], offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                  index_vector_dim=1, slice_sizes=(1, rows.type.shape[1]))


@op("ReverseSequence")
def _reverse_sequence(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Per batch entry, reverse the first lens[b] steps: one row gather with constant indices."""
    x = a.inputs[0]
    lens = _static_ints(ctx, a.inputs[1], "sequence_lens")
    batch_axis, time_axis = int(a.attr("batch_axis", 1)), int(a.attr("time_axis", 0))
    if sorted((batch_axis, time_axis)) != [0, 1] or x.type.rank < 2:
        raise ctx.error(f"batch_axis {batch_axis} and time_axis {time_axis} must be 0 and 1 of a rank >= 2 input")
    batch, steps = x.type.shape[batch_axis], x.type.shape[time_axis]
    if len(lens) != batch or any(not 0 <= n <= steps for n in lens):
        raise ctx.error(f"sequence_lens {lens} does not fit batch {batch} and {steps} steps")
    bt = ctx.transpose(x, (batch_axis, time_axis) + tuple(range(2, x.type.rank)))  # [B, T, ...]
    rest = int(np.prod(x.type.shape[2:]))
    rows = ctx.reshape(bt, (batch * steps, rest))
    index = np.arange(batch * steps).reshape(batch, steps)
    for b, n in enumerate(lens):
        index[b, :n] = index[b, :n][::-1]
    y = ctx.reshape(_take_rows(ctx, rows, index), bt.type.shape)
    return [ctx.transpose(y, (batch_axis, time_axis) + tuple(range(2, x.type.rank)))]


# -- MaxUnpool / Col2Im (scatters with constant or run-time positions) ----------------
def _scatter_rows(ctx: Ctx, base: Value, indices: Value, updates: Value, kind: str) -> Value:
    """base[indices[m]] (kind)= updates[m, ...] along base's dim 0."""
    window = tuple(range(1, updates.type.rank))
    return ctx.op("scatter", [base, indices, updates], update_window_dims=window, inserted_window_dims=(0,),
                  scatter_dims_to_operand_dims=(0,), index_vector_dim=1, kind=kind)


@op("MaxUnpool")
def _max_unpool(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Zeros with x written at its flat indices (as MaxPool's Indices output numbers them)."""
    x, indices = a.inputs[0], a.inputs[1]
    kernel = list(a.attr("kernel_shape"))
    rank = len(kernel)
    strides = list(a.attr("strides", [1] * rank))
    pads = list(a.attr("pads", [0] * 2 * rank))
    spatial = x.type.shape[2:]
    if x.type.rank != rank + 2 or indices.type.shape != x.type.shape:
        raise ctx.error(f"X {x.type} and I {indices.type} do not fit kernel_shape {kernel}")
    out = [(n - 1) * s - pads[d] - pads[d + rank] + k for d, (n, s, k) in enumerate(zip(spatial, strides, kernel))]
    inferred = x.type.shape[:2] + tuple(out)
    total = int(np.prod(inferred))
    flat = ctx.full(0, x.type.with_shape((total,)))
    positions = ctx.reshape(indices, (x.type.size, 1))
    y = ctx.reshape(_scatter_rows(ctx, flat, positions, ctx.reshape(x, (x.type.size,)), "assign"), inferred)
    if a.input(2) is None:
        return [y]
    # onnx's reference: indices address the inferred shape; a larger output_shape pads with zeros after it
    given = _static_ints(ctx, a.inputs[2], "output_shape")
    if len(given) != len(inferred) or any(g < i for g, i in zip(given, inferred)):
        raise ctx.unsupported(f"output_shape {given} smaller than the unpooled shape {list(inferred)}")
    high = tuple(g - i for g, i in zip(given, inferred))
    return [ctx.op("pad", [y], low=(0,) * len(high), high=high, value=0)]


@op("Col2Im")
def _col2im(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Sum each column block back into the image: one scatter-add of rows with constant positions.
    Taps that land in the padding get position `pixels`, a window outside the operand, which
    scatter skips."""
    x = a.inputs[0]
    image = _static_ints(ctx, a.inputs[1], "image_shape")
    block = _static_ints(ctx, a.inputs[2], "block_shape")
    rank = len(image)
    dilations = list(a.attr("dilations", [1] * rank))
    strides = list(a.attr("strides", [1] * rank))
    pads = list(a.attr("pads", [0] * 2 * rank))
    n, ck, cols = x.type.shape
    taps = int(np.prod(block))
    if len(block) != rank or ck % taps:
        raise ctx.error(f"input {x.type} does not fit block_shape {block}")
    channels = ck // taps
    counts = [(image[d] + pads[d] + pads[d + rank] - dilations[d] * (block[d] - 1) - 1) // strides[d] + 1
              for d in range(rank)]
    if int(np.prod(counts)) != cols:
        raise ctx.error(f"input has {cols} blocks, image_shape {image} with these attributes gives {counts}")
    pixels = int(np.prod(image))
    positions = np.empty((taps, cols), np.int64)
    for k, tap in enumerate(itertools.product(*(range(b) for b in block))):
        for col, where in enumerate(itertools.product(*(range(c) for c in counts))):
            coords = [where[d] * strides[d] - pads[d] + tap[d] * dilations[d] for d in range(rank)]
            inside = all(0 <= coords[d] < image[d] for d in range(rank))
            positions[k, col] = np.ravel_multi_index(coords, image) if inside else pixels
    # rows [taps * cols, N * C] of x, scattered into [pixels, N * C]
    rows = ctx.reshape(ctx.transpose(ctx.reshape(x, (n, channels, taps, cols)), (2, 3, 0, 1)), (taps * cols, n * channels))
    index = ctx.constant(positions.reshape(-1, 1).astype(np.int32))
    y = _scatter_rows(ctx, ctx.full(0, x.type.with_shape((pixels, n * channels))), index, rows, "add")
    y = ctx.transpose(ctx.reshape(y, (pixels, n, channels)), (1, 2, 0))
    return [ctx.reshape(y, (n, channels) + tuple(image))]


# -- Det -----------------------------------------------------------------------------
MAX_DET_ORDER = 4  # the Leibniz formula has n! terms


@op("Det")
def _det(ctx: Ctx, a: NodeArgs) -> list[Value]:
    """Leibniz formula: sum over permutations p of sign(p) * prod_i x[..., i, p(i)], for n <= 4."""
    x = a.inputs[0]
    if x.type.rank < 2 or x.type.shape[-1] != x.type.shape[-2]:
        raise ctx.error(f"needs [..., n, n], got {x.type}")
    if not x.type.dtype.is_float:
        raise ctx.unsupported(f"{x.type.dtype} input (float types only)")
    order = x.type.shape[-1]
    if order > MAX_DET_ORDER:
        raise ctx.unsupported(f"matrices of order {order} (at most {MAX_DET_ORDER})")
    batch = x.type.shape[:-2]
    compute = DType.F64 if x.type.dtype is DType.F64 else DType.F32
    m = ctx.convert(x, compute)
    if order == 0:
        return [ctx.convert(ctx.full(1.0, m.type.with_shape(batch)), x.type.dtype)]
    rows = [take_index(ctx, m, m.type.rank - 2, i) for i in range(order)]
    entries = {(i, j): _slice_last(ctx, rows[i], j) for i in range(order) for j in range(order)}  # x[..., i, j]
    total = None
    for perm in itertools.permutations(range(order)):
        inversions = sum(1 for p in range(order) for q in range(p + 1, order) if perm[p] > perm[q])
        term = None
        for i, j in enumerate(perm):
            term = entries[i, j] if term is None else ctx.op("mul", [term, entries[i, j]])
        if total is None:
            total = term if inversions % 2 == 0 else ctx.op("neg", [term])
        else:
            total = ctx.op("sub" if inversions % 2 else "add", [total, term])
    return [ctx.convert(total, x.type.dtype)]
