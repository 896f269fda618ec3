"""Resize and Upsample as separable interpolation matrices.

Every Resize mode (nearest, linear, cubic, antialiased or not, any
coordinate transformation) is linear in the data along each axis: out =
W @ x with W [out, in] fixed by the static sizes. W is computed at compile
time by running onnx's reference 1-D interpolation on the identity, so
the weights match the specification's reference bit for bit, and each
resized axis becomes one dot (a constant weight aot packs and fuses).
tf_crop_and_resize's extrapolation_value adds a constant where a sample
falls outside the input.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from aot.ir import DType, Value

from .context import Ctx, NodeArgs, norm_axis, op_registry

OPS, _ = op_registry()


def _coeff_fn(ctx: Ctx, mode: str, antialias: bool, nearest_mode: str, cubic_a: float) -> Callable[..., np.ndarray]:
    from onnx.reference.ops import op_resize as ref

    if mode == "nearest":
        if antialias:
            raise ctx.error("antialias is not defined for mode 'nearest'")
        return lambda x, scale: ref._nearest_coeffs(x, mode=nearest_mode)
    if mode == "linear":
        return ref._linear_coeffs_antialias if antialias else ref._linear_coeffs
    if mode == "cubic":
        cubic = ref._cubic_coeffs_antialias if antialias else ref._cubic_coeffs
        return lambda x, scale: cubic(x, scale, A=cubic_a)
    raise ctx.unsupported(f"mode '{mode}'")


def _axis_matrix(fn: Callable[..., np.ndarray], n: int, scale: float, out: int, roi: list[float] | None,
                 attrs: dict[str, Any], extrapolation: float) -> tuple[np.ndarray, np.ndarray]:
    """(W [out, n], constant [out]) with resized = W @ x + constant along one axis."""
    from onnx.reference.ops import op_resize as ref

    common = dict(roi=roi, exclude_outside=bool(attrs.get("exclude_outside", 0)),
                  coordinate_transformation_mode=attrs.get("coordinate_transformation_mode", "half_pixel"))
    weights = ref._interpolate_1d_along_axis(np.eye(n), 0, scale, out, fn, extrapolation_value=0.0, **common)
    constant = np.zeros(out)
    if extrapolation != 0.0:
        constant = ref._interpolate_1d_along_axis(np.zeros((n, 1)), 0, scale, out, fn,
                                                  extrapolation_value=extrapolation, **common)[:, 0]
    return np.asarray(weights, np.float64), np.asarray(constant, np.float64)


def _static(ctx: Ctx, v: Value | None, what: str) -> np.ndarray | None:
    if v is None:
        return None
    array = ctx.const(v)
    if array is None:
        raise ctx.unsupported(f"{what} must be known at compile time")
    return None if array.size == 0 else array.astype(np.float64).reshape(-1)


def _geometry(ctx: Ctx, a: NodeArgs, shape: tuple[int, ...]) -> tuple[list[float], list[int], list[int], np.ndarray | None]:
    """(scale per dim, output size per dim, resized axes, roi per dim as [starts..., ends...] or None)."""
    rank = len(shape)
    if a.node.op_type == "Upsample" or ctx.opset < 11:
        scales = _static(ctx, a.input(1), "scales") if ctx.opset >= 9 else np.array(a.attr("scales"), np.float64)
        sizes, roi = None, None
    else:
        roi = _static(ctx, a.input(1), "roi")
        scales = _static(ctx, a.input(2), "scales")
        sizes = _static(ctx, a.input(3), "sizes")
    axes = [norm_axis(ctx, ax, rank) for ax in a.attr("axes", list(range(rank)))]
    if roi is not None and len(axes) != rank:
        full = [0.0] * rank + [1.0] * rank
        for i, d in enumerate(axes):
            full[d], full[rank + d] = roi[i], roi[len(axes) + i]
        roi = np.array(full)
    if sizes is not None:
        out = list(shape)
        for i, d in enumerate(axes):
            out[d] = int(sizes[i])
        scale = [o / s if s else 1.0 for o, s in zip(out, shape)]
        policy = a.attr("keep_aspect_ratio_policy", "stretch")
        if policy != "stretch":
            pick = min if policy == "not_larger" else max
            common = pick(scale[d] for d in axes)
            scale = [common if i in axes else 1.0 for i in range(rank)]
            out = [int(common * shape[i] + 0.5) if i in axes else shape[i] for i in range(rank)]
        return scale, out, axes, roi
    if scales is None:
        raise ctx.error("needs scales or sizes")
    scale = [1.0] * rank
    for i, d in enumerate(axes):
        scale[d] = float(scales[i])
    out = [int(s * n) for s, n in zip(scale, shape)]
    return scale, out, axes, roi


def _resize(ctx: Ctx, a: NodeArgs) -> list[Value]:
    x = a.inputs[0]
    shape = x.type.shape
    scale, out, axes, roi = _geometry(ctx, a, shape)
    mode = a.attr("mode", "nearest")
    attrs = dict(a.attrs)
    if a.node.op_type == "Upsample" or ctx.opset < 11:
        attrs["coordinate_transformation_mode"] = "asymmetric"  # Upsample and Resize-10 semantics
        nearest_mode = "floor" if mode == "nearest" else "round_prefer_floor"
    else:
        nearest_mode = a.attr("nearest_mode", "round_prefer_floor")
    fn = _coeff_fn(ctx, mode, bool(a.attr("antialias", 0)), nearest_mode, float(a.attr("cubic_coeff_a", -0.75)))
    extrapolation = float(a.attr("extrapolation_value", 0.0))
    if attrs.get("coordinate_transformation_mode") != "tf_crop_and_resize":
        extrapolation = 0.0
    dtype = x.type.dtype
    y = x if dtype.is_float else ctx.convert(x, DType.F32)
    rank = len(shape)
    for axis in range(rank):
        axis_roi = None if roi is None else [float(roi[axis]), float(roi[axis + rank])]
        identity = abs(scale[axis] - 1.0) < 1e-12 and out[axis] == shape[axis] and (
            axis_roi is None or axis_roi == [0.0, 1.0])
        if identity:
            continue
        weights, constant = _axis_matrix(fn, shape[axis], scale[axis], out[axis], axis_roi, attrs, extrapolation)
        w = ctx.constant(weights, y.type.dtype)
        # contract `axis` with W's input dim; the new dim comes out last, then moves back
        y = ctx.op("dot", [y, w], lhs_batch=(), rhs_batch=(), lhs_contract=(axis,), rhs_contract=(1,))
        perm = list(range(rank - 1))
        perm.insert(axis, rank - 1)
        y = ctx.transpose(y, perm)
        if np.any(constant):
            c = ctx.constant(constant, y.type.dtype)
            y = ctx.op("add", [y, ctx.broadcast_in_dims(c, y.type.shape, (axis,))])
    if not dtype.is_float:
        y = ctx.convert(ctx.op("round", [y]), dtype)
    return [y]


OPS["Resize"] = _resize
OPS["Upsample"] = _resize
