"""Elemental CPU codegen (aot/codegen/elemental.py) of integer bitwise ops, rem, shifts and bit
counts, gather (indices clamped), reverse, conv with lhs_dilation and reduce_window with dilations, vs
the reference interpreter (hand-built plans run with ctypes)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.ir import DType
from codegen_util import INTS, PlanBuilder, check, graph_with_inputs, ir_dtype, rand


# -- integer ops ----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_int_bitwise_rem_shifts_and_bit_counts(dtype, rng):
    n = 137
    info = np.iinfo(dtype)
    a_val = np.concatenate([rng.integers(info.min, info.max, n, endpoint=True), [info.min, info.max, 0, 1, 7]]).astype(dtype)
    b_val = np.concatenate([rng.integers(info.min, info.max, n, endpoint=True), [-1 if info.min else 0, 0, 3, 0, 2]]).astype(dtype)
    bits = 8 * np.dtype(dtype).itemsize
    s_val = rng.integers(0, bits + 3, a_val.size).astype(dtype)
    s_val[:5] = np.array([info.max, bits, bits - 1, 0, info.min]).astype(dtype)  # huge and negative amounts
    g, b, (x, y, s) = graph_with_inputs(*[(k, ir_dtype(dtype), a_val.shape) for k in "abs"])
    for op in ("and", "or", "xor", "rem"):
        g.add_output(b.op(op, [x, y]), op)
    for op in ("shift_left", "shift_right_arithmetic", "shift_right_logical"):
        g.add_output(b.op(op, [x, s]), op)
    for op in ("not", "popcnt", "clz"):
        g.add_output(b.op(op, [x]), op)
    check(g, {"a": a_val, "b": b_val, "s": s_val})


# -- gather / reverse ------------------------------------------------------------------------
GATHERS = {
    "take_axis1": ((3, 5, 2), (3, 2), "i32", dict(offset_dims=(0, 3), collapsed_slice_dims=(1,), start_index_map=(1,),
                                                  index_vector_dim=2, slice_sizes=(3, 1, 2))),
    "rows": ((6, 4), (7,), "i64", dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                                       index_vector_dim=1, slice_sizes=(1, 4))),
    "nd": ((4, 5, 3), (2, 3, 2), "i32", dict(offset_dims=(2,), collapsed_slice_dims=(0, 1), start_index_map=(0, 1),
                                             index_vector_dim=2, slice_sizes=(1, 1, 3))),
    "windows_clamped": ((11,), (5, 1), "i16", dict(offset_dims=(1,), collapsed_slice_dims=(), start_index_map=(0,),
                                                   index_vector_dim=1, slice_sizes=(3,))),
    "vector_dim_middle": ((4, 6), (2, 2, 3), "u8", dict(offset_dims=(2, 3), collapsed_slice_dims=(), start_index_map=(0, 1),
                                                        index_vector_dim=1, slice_sizes=(2, 3))),
    "batching": ((3, 5, 4), (3, 2), "i32", dict(offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,),
                                                index_vector_dim=2, slice_sizes=(1, 1, 4),
                                                operand_batching_dims=(0,), start_indices_batching_dims=(0,))),
    "empty": ((4, 3), (0,), "i32", dict(offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                                        index_vector_dim=1, slice_sizes=(1, 3))),
}


@pytest.mark.parametrize("case", sorted(GATHERS))
def test_gather(case, rng):
    x_shape, i_shape, i_dtype, attrs = GATHERS[case]
    x_val = rng.standard_normal(x_shape).astype(np.float32)
    # indices partly out of range: codegen must clamp exactly as the reference does
    i_val = rng.integers(-3, max(x_shape) + 3, i_shape)
    i_val = (np.abs(i_val) if i_dtype == "u8" else i_val).astype(i_dtype.replace("i", "int").replace("u8", "uint8"))
    g, b, (x, i) = graph_with_inputs(("x", DType.F32, x_shape), ("i", DType.parse(i_dtype), i_shape))
    g.add_output(b.op("gather", [x, i], **attrs), "y")
    check(g, {"x": x_val, "i": i_val})


def test_gather_fused_into_consumer_and_reverse(rng):
    x_val = rng.standard_normal((5, 6)).astype(np.float64)
    i_val = np.array([4, 0, 2, 2, 9, -1], np.int32)
    g, b, (x, i) = graph_with_inputs(("x", DType.F64, (5, 6)), ("i", DType.I32, (6,)))
    rows = b.op("gather", [x, i], offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                index_vector_dim=1, slice_sizes=(1, 6))
    flipped = b.op("reverse", [rows], dims=(0, 1))
    y = b.op("mul", [flipped, flipped])
    g.add_output(y, "y")
    pb = PlanBuilder(g)
    plan = pb.plan([pb.kernel([rows.producer, flipped.producer, y.producer])])
    check(g, {"x": x_val, "i": i_val}, plan=plan)


@pytest.mark.parametrize("dims", [(0,), (1, 2), (), (0, 1, 2)])
def test_reverse(dims, rng):
    x_val = rand((3, 1, 5), np.int16, rng)
    g, b, (x,) = graph_with_inputs(("x", DType.I16, (3, 1, 5)))
    g.add_output(b.op("reverse", [x], dims=dims), "y")
    check(g, {"x": x_val})


# -- conv / reduce_window dilations ----------------------------------------------------------------
def test_conv_transposed_lhs_dilation(rng):
    x_val = rng.standard_normal((2, 4, 5, 3)).astype(np.float32)
    w_val = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    g, b, (x, w) = graph_with_inputs(("x", DType.F32, x_val.shape), ("w", DType.F32, w_val.shape))
    g.add_output(b.op("conv", [x, w], strides=(1, 2), padding=((2, 2), (1, 0)), dilation=(1, 2), lhs_dilation=(2, 3), groups=2), "y")
    g.add_output(b.op("conv", [x, w], strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), lhs_dilation=(3, 1), groups=2), "z")
    check(g, {"x": x_val, "w": w_val}, tol=dict(rtol=1e-5, atol=1e-5))


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_reduce_window_dilations(kind, rng):
    x_val = rng.standard_normal((5, 7)).astype(np.float32)
    g, b, (x,) = graph_with_inputs(("x", DType.F32, x_val.shape))
    g.add_output(b.op("reduce_window", [x], kind=kind, window=(2, 3), strides=(1, 2), padding=((1, 0), (2, 2)),
                      base_dilation=(2, 1), window_dilation=(1, 2)), "a")
    g.add_output(b.op("reduce_window", [x], kind=kind, window=(3, 2), strides=(2, 1), padding=((0, 0), (0, 1)),
                      base_dilation=(2, 3), window_dilation=(2, 2)), "b")
    check(g, {"x": x_val}, tol=dict(rtol=1e-5, atol=1e-6))


def _rows_of_specials(width: int, dtype) -> np.ndarray:
    """Rows whose max and min test NaN and the order of signed zeros: all -0.0 or +0.0, both
    zeros (either order) or one among numbers below / above them, a NaN, infinities."""
    rng = np.random.default_rng(3)
    below, above, mixed = -rng.uniform(1, 4, width), rng.uniform(1, 4, width), rng.uniform(-4, 4, width)
    cases = [(np.full(width, -0.0), []), (np.full(width, 0.0), []),
             (below, [-0.0, 0.0]), (below, [0.0, -0.0]), (below, [-0.0]), (above, [0.0]),
             (above, [0.0, -0.0]), (above, [-0.0]), (mixed, [np.nan]), (mixed, [-np.inf]), (mixed, [np.inf]),
             (mixed, [])]
    rows = []
    for base, specials in cases:
        row = base.copy()
        for i, v in enumerate(specials[:width]):
            row[(i * 7 + width // 2) % width] = v
        rows.append(row)
    return np.array(rows, dtype)


def _ieee_row(kind: str, row: np.ndarray) -> float:
    """llvm.maximum/minimum over a row: NaN if any element is NaN; +0.0 above -0.0."""
    if np.isnan(row).any():
        return np.nan
    best = row.max() if kind == "max" else row.min()
    if best != 0:
        return best
    zeros = row[row == 0]
    if kind == "max":
        return 0.0 if (~np.signbit(zeros)).any() else -0.0
    return -0.0 if np.signbit(zeros).any() else 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("width", [1, 7, 37, 1500])
def test_row_max_and_min_keep_nan_and_signed_zeros(dtype, width):
    # on x86 a float max/min over a row is maxps/minps plus a NaN flag, and a second loop
    # where the result is a zero (elemental._float_minmax_row): bit for bit llvm.maximum's
    from aot.pipeline import run_pipeline
    from codegen_util import Compiled

    x = _rows_of_specials(width, dtype)
    g, b, (value,) = graph_with_inputs(("x", ir_dtype(dtype), x.shape))
    g.add_output(b.op("reduce", [value], kind="max", axes=[1]), "max")
    g.add_output(b.op("reduce", [value], kind="min", axes=[1]), "min")
    got_max, got_min = Compiled(run_pipeline(g)).run({"x": x})
    for kind, got in (("max", got_max), ("min", got_min)):
        want = np.array([_ieee_row(kind, row) for row in x], dtype)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(want), err_msg=kind)
        keep = ~np.isnan(want)
        np.testing.assert_array_equal(got[keep], want[keep], err_msg=kind)
        np.testing.assert_array_equal(np.signbit(got[keep]), np.signbit(want[keep]), err_msg=f"{kind}: sign of zero")
