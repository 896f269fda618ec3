"""CPU codegen of the new ops vs their numpy references (compiled plans run with ctypes)."""
from __future__ import annotations

import numpy as np
import pytest
from test_codegen_cpu import FLOATS, INTS, Compiled, PlanBuilder, check, graph_with_inputs, rand, simple_plan, specials

from aot.interpreter import interpret
from aot.ir import DType

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def ir_dtype(dtype) -> DType:
    return DType.from_numpy(np.dtype(dtype))


# -- elementwise -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_new_float_elementwise(dtype, rng):
    n = 301
    a_val = np.concatenate([rand((n,), dtype, rng, -5, 5), specials(dtype)]).astype(dtype)
    b_val = np.concatenate([rand((n,), dtype, rng, -5, 5), specials(dtype)[::-1]]).astype(dtype)
    # tan keeps to the documented |x| < 2^20; log1p's domain is x >= -1
    t_val = np.where(np.abs(a_val.astype(np.float64)) < 2.0 ** 20, a_val, 0).astype(dtype)
    g, b, (x, y, t) = graph_with_inputs(*[(k, ir_dtype(dtype), a_val.shape) for k in "abt"])
    for op in ("expm1", "log1p", "is_finite"):
        g.add_output(b.op(op, [x]), op)
    g.add_output(b.op("tan", [t]), "tan")
    for op in ("atan2", "rem"):
        g.add_output(b.op(op, [x, y]), op)
    tol = {np.dtype(np.float32): dict(rtol=1e-6, atol=1e-30)}.get(np.dtype(dtype))
    check(g, {"a": a_val, "b": b_val, "t": t_val}, tol=tol)


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    spacing = np.spacing(np.abs(exact).astype(np.float32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / spacing


def test_f32_ulps_of_new_transcendentals(rng):
    n = 20000
    grids = {
        "expm1": np.concatenate([rng.uniform(-20, 88, n), rng.uniform(-1e-3, 1e-3, 500)]),
        "log1p": np.concatenate([np.exp(rng.uniform(-30, 30, n)) - 1.0 + 1e-7, rng.uniform(-1e-3, 1e-3, 500)]),
        "tan": rng.uniform(-1000, 1000, n),
    }
    grids = {k: v.astype(np.float32) for k, v in grids.items()}
    ys, xs = rng.standard_normal(n).astype(np.float32) * 10, rng.standard_normal(n).astype(np.float32)
    g, b, (e, l, t, y, x) = graph_with_inputs(*[(k, DType.F32, (v.size,)) for k, v in [*grids.items(), ("y", ys), ("x", xs)]])
    for value, op in zip((e, l, t), grids):
        g.add_output(b.op(op, [value]), op)
    g.add_output(b.op("atan2", [y, x]), "atan2")
    got = Compiled(simple_plan(g)).run({**grids, "y": ys, "x": xs})
    exact = {op: getattr(np, op)(grids[op].astype(np.float64)) for op in grids}
    exact["atan2"] = np.arctan2(ys.astype(np.float64), xs.astype(np.float64))
    for (op, want), have in zip(exact.items(), got):
        errors = _ulps(have, want)
        assert errors.max() <= 1.0, f"{op}: {errors.max():.2f} ulp at {errors.argmax()}"


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_rem_is_exact(dtype, rng):
    n = 2000
    tiny = np.finfo(dtype).smallest_subnormal
    a_val = np.concatenate([rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n), [3e38, 1e-40, -7.5, 0.0, -0.0, tiny * 7]])
    b_val = np.concatenate([rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n), [1e-38, 3e-42, 2.5, 1.0, 3.0, tiny * 2]])
    a_val, b_val = a_val.astype(dtype), b_val.astype(dtype)
    g, b, (x, y) = graph_with_inputs(("a", ir_dtype(dtype), a_val.shape), ("b", ir_dtype(dtype), a_val.shape))
    g.add_output(b.op("rem", [x, y]), "rem")
    (got,) = Compiled(simple_plan(g)).run({"a": a_val, "b": b_val})
    want = np.fmod(a_val, b_val)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_new_int_elementwise(dtype, rng):
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


# -- scatter -------------------------------------------------------------------------------------
ROWS = dict(update_window_dims=(1,), inserted_window_dims=(0,), scatter_dims_to_operand_dims=(0,), index_vector_dim=1)


@pytest.mark.parametrize("kind", ["assign", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_scatter_rows_with_duplicates_and_out_of_bounds(kind, dtype, rng):
    i_val = np.array([1, 3, 1, 7, -2, 0, 4, 1], np.int32)  # duplicates; 7 and -2 are outside [0, 5)
    x_val = rand((5, 3), dtype, rng)
    u_val = rand((8, 3), dtype, rng)
    g, b, (x, i, u) = graph_with_inputs(("x", ir_dtype(dtype), (5, 3)), ("i", DType.I32, (8,)), ("u", ir_dtype(dtype), (8, 3)))
    g.add_output(b.op("scatter", [x, i, u], kind=kind, **ROWS), "y")
    check(g, {"x": x_val, "i": i_val, "u": u_val})


def test_scatter_windows_batching_and_empty(rng):
    # windows of 2 x 3 into a 6 x 4 operand, starts from 2-vectors (some windows stick out: skipped)
    i_val = np.array([[0, 0], [4, 1], [5, 0], [2, 2], [-1, 0], [3, 1]], np.int64)
    u_val = rng.standard_normal((6, 2, 3)).astype(np.float32)
    x_val = rng.standard_normal((6, 4)).astype(np.float32)
    g, b, (x, i, u, bi, bu, ei, eu) = graph_with_inputs(
        ("x", DType.F32, (6, 4)), ("i", DType.I64, (6, 2)), ("u", DType.F32, (6, 2, 3)),
        ("bi", DType.I32, (6, 2)), ("bu", DType.F32, (6, 2)), ("ei", DType.I32, (0, 1)), ("eu", DType.F32, (0, 4)))
    g.add_output(b.op("scatter", [x, i, u], update_window_dims=(1, 2), inserted_window_dims=(), scatter_dims_to_operand_dims=(0, 1),
                      index_vector_dim=1, kind="add"), "windows")
    g.add_output(b.op("scatter", [x, bi, bu], update_window_dims=(), inserted_window_dims=(1,), scatter_dims_to_operand_dims=(1,),
                      index_vector_dim=2, input_batching_dims=(0,), scatter_indices_batching_dims=(0,), kind="assign"), "batching")
    g.add_output(b.op("scatter", [x, ei, eu], kind="add", **ROWS), "empty")
    bi_val = rng.integers(-1, 5, (6, 2)).astype(np.int32)
    bu_val = rng.standard_normal((6, 2)).astype(np.float32)
    feeds = {"x": x_val, "i": i_val, "u": u_val, "bi": bi_val, "bu": bu_val,
             "ei": np.zeros((0, 1), np.int32), "eu": np.zeros((0, 4), np.float32)}
    check(g, feeds)


# -- sort / argsort ------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 2, 7, 33, 1000])
@pytest.mark.parametrize("descending", [False, True], ids=["asc", "desc"])
def test_sort_rows_f32_with_ties_and_nan(n, descending, rng):
    x_val = rng.integers(-4, 4, (3, n)).astype(np.float32)  # many ties
    x_val[x_val == 3] = np.nan
    x_val[x_val == -3] = -0.0
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (3, n)))
    g.add_output(b.op("sort", [x], dim=1, descending=descending), "values")
    g.add_output(b.op("argsort", [x], dim=1, descending=descending, dtype=DType.I32), "order")
    compiled = check(g, {"x": x_val})
    values, order = compiled.run_split({"x": x_val}, 3)
    want_values, want_order = interpret(g, {"x": x_val})
    np.testing.assert_array_equal(order, want_order)
    np.testing.assert_array_equal(np.signbit(values), np.signbit(want_values))  # -0.0 vs 0.0 kept in order


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int64, np.float64, np.float16, np.bool_], ids=lambda d: np.dtype(d).name)
def test_sort_along_inner_and_outer_dims(dtype, rng):
    x_val = rand((37, 4, 3), dtype, rng)
    g, b, (x,) = graph_with_inputs(("x", ir_dtype(dtype), x_val.shape))
    for dim in (0, 2):
        for descending in (False, True):
            suffix = f"{dim}{'d' if descending else 'a'}"
            g.add_output(b.op("sort", [x], dim=dim, descending=descending), f"sort{suffix}")
            g.add_output(b.op("argsort", [x], dim=dim, descending=descending, dtype=DType.I64), f"argsort{suffix}")
    check(g, {"x": x_val})


def test_sort_of_transposed_input_fused(rng):
    x_val = rng.standard_normal((5, 9)).astype(np.float32)
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (5, 9)))
    t = b.op("transpose", [x], perm=(1, 0))
    y = b.op("argsort", [t], dim=0, descending=True, dtype=DType.I32)
    g.add_output(y, "y")
    pb = PlanBuilder(g)
    check(g, {"x": x_val}, plan=pb.plan([pb.kernel([t.producer, y.producer])]))


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


# -- through the whole pipeline ------------------------------------------------------------------
def test_pipeline_fuses_and_runs_the_new_ops(rng):
    """Fusion, buffer assignment and planning over gather/scatter/sort/reverse, then the compiled plan."""
    from aot.pipeline import run_pipeline

    x_val = rng.standard_normal((6, 5)).astype(np.float32)
    i_val = np.array([5, 1, 1, 0], np.int32)
    g, b, (x, i) = graph_with_inputs(("x", DType.F32, (6, 5)), ("i", DType.I32, (4,)))
    e = b.op("exp", [x])
    rows = b.op("gather", [e, i], offset_dims=(1,), collapsed_slice_dims=(0,), start_index_map=(0,),
                index_vector_dim=1, slice_sizes=(1, 5))
    scaled = b.op("mul", [rows, b.op("reverse", [rows], dims=(1,))])
    order = b.op("argsort", [scaled], dim=1, descending=False, dtype=DType.I32)
    values = b.op("sort", [scaled], dim=0, descending=True)
    added = b.op("scatter", [e, i, values], kind="add", **ROWS)
    g.add_output(order, "order")
    g.add_output(b.op("tanh", [added]), "out")
    feeds = {"x": x_val, "i": i_val}
    want = interpret(g, feeds)
    got = Compiled(run_pipeline(g)).run(feeds)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
