"""CPU codegen: compiled kernels vs the reference interpreter.

Plans are built by hand (tests/codegen_util.py: every non-constant node its
own kernel, or hand-fused kernels), the shared object is loaded with ctypes and run.
"""
from __future__ import annotations

import tempfile

import numpy as np
import pytest

from aot.codegen.cpu import CpuTarget, emit_cpu
from aot.errors import CodegenError
from aot.ir import Builder, DType, Graph, TensorType
from codegen_util import FLOATS, HOST, INTS, Compiled, PlanBuilder, check, graph_with_inputs, rand, simple_plan, specials

# the reference casts inf/out-of-range values on purpose (overflow to inf is tested behaviour)
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")


UNARY_FLOAT = ["neg", "abs", "exp", "log", "tanh", "logistic", "sqrt", "rsqrt", "floor", "ceil", "round", "erf", "sin", "cos", "sign", "copy"]


# -- elementwise ---------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_unary_float(dtype, rng):
    dense = np.concatenate([np.linspace(-20, 20, 4001), rng.uniform(-3, 3, 500)]).astype(dtype)
    x_val = np.concatenate([dense, specials(dtype)])
    trig_val = np.where(np.abs(x_val.astype(np.float64)) < 2.0 ** 20, x_val, 0).astype(dtype)  # documented range
    ir_dtype = DType.from_numpy(np.dtype(dtype))
    g, b, (x, t) = graph_with_inputs(("x", ir_dtype, x_val.shape), ("t", ir_dtype, x_val.shape))
    for op in UNARY_FLOAT:
        g.add_output(b.op(op, [t if op in ("sin", "cos") else x]), op)
    check(g, {"x": x_val, "t": trig_val})


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: np.dtype(d).name)
def test_binary_float(dtype, rng):
    n = 257
    a_val = np.concatenate([rand((n,), dtype, rng), specials(dtype), np.array([-2.0, -2.0, -0.0, 0.0, -1.0, 2.0, 0.0, 1.0, np.nan])]).astype(dtype)
    b_val = np.concatenate([rand((n,), dtype, rng), specials(dtype)[::-1], np.array([3.0, 2.0, 3.0, -1.0, np.inf, np.nan, 0.0, np.nan, 0.0])]).astype(dtype)
    g, b, (x, y) = graph_with_inputs(("a", DType.from_numpy(np.dtype(dtype)), a_val.shape), ("b", DType.from_numpy(np.dtype(dtype)), a_val.shape))
    for op in ("add", "sub", "mul", "div", "max", "min", "pow"):
        g.add_output(b.op(op, [x, y]), op)
    for direction in ("eq", "ne", "lt", "le", "gt", "ge"):
        g.add_output(b.op("compare", [x, y], direction=direction), direction)
    g.add_output(b.op("select", [b.op("compare", [x, y], direction="lt"), x, y]), "select")
    check(g, {"a": a_val, "b": b_val})


def test_pow_positive_base_f32(rng):
    a_val = rng.uniform(0.01, 10, 1000).astype(np.float32)
    b_val = rng.uniform(-8, 8, 1000).astype(np.float32)
    g, b, (x, y) = graph_with_inputs(("a", DType.F32, (1000,)), ("b", DType.F32, (1000,)))
    g.add_output(b.op("pow", [x, y]), "pow")
    check(g, {"a": a_val, "b": b_val}, tol=dict(rtol=4e-6, atol=0))




@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_int_ops(dtype, rng):
    n = 131
    a_val = rand((n,), dtype, rng)
    b_val = rand((n,), dtype, rng)
    b_val[b_val == 0] = 3
    e_val = rng.integers(0, 5, n).astype(dtype)
    ir_dtype = DType.from_numpy(np.dtype(dtype))
    g, b, (x, y, e) = graph_with_inputs(("a", ir_dtype, (n,)), ("b", ir_dtype, (n,)), ("e", ir_dtype, (n,)))
    for op in ("add", "sub", "mul", "div", "max", "min"):
        g.add_output(b.op(op, [x, y]), op)
    g.add_output(b.op("pow", [x, e]), "pow")
    for op in ("neg", "abs", "sign", "copy"):
        g.add_output(b.op(op, [x]), op)
    for direction in ("eq", "ne", "lt", "le", "gt", "ge"):
        g.add_output(b.op("compare", [x, y], direction=direction), direction)
    g.add_output(b.op("select", [b.op("compare", [x, y], direction="gt"), x, y]), "select")
    check(g, {"a": a_val, "b": b_val, "e": e_val})


def test_int_div_truncates_and_never_traps():
    a_val = np.array([7, -7, 7, -7, 0, -128, 5, -128], dtype=np.int8)
    b_val = np.array([2, 2, -2, -2, 5, -1, 0, 1], dtype=np.int8)
    g, b, (x, y) = graph_with_inputs(("a", DType.I8, (8,)), ("b", DType.I8, (8,)))
    g.add_output(b.op("div", [x, y]), "div")
    got = Compiled(simple_plan(g)).run({"a": a_val, "b": b_val})[0]
    assert got[:6].tolist() == [3, -3, -3, 3, 0, -128]  # truncation toward zero; MIN/-1 wraps
    assert got[6] == 0 and got[7] == -128  # x/0 is defined (0), no SIGFPE


def test_bool_ops(rng):
    n = 67
    a_val, b_val = rand((n,), bool, rng), rand((n,), bool, rng)
    g, b, (x, y) = graph_with_inputs(("a", DType.BOOL, (n,)), ("b", DType.BOOL, (n,)))
    for op in ("and", "or", "xor", "add", "mul", "max", "min"):
        g.add_output(b.op(op, [x, y]), op)
    g.add_output(b.op("not", [x]), "not")
    for direction in ("eq", "ne", "lt", "ge"):
        g.add_output(b.op("compare", [x, y], direction=direction), direction)
    g.add_output(b.op("select", [x, y, b.op("not", [y])]), "select")
    check(g, {"a": a_val, "b": b_val})


ALL_DTYPES = [DType.F32, DType.F64, DType.F16, DType.BF16, DType.I8, DType.I16, DType.I32, DType.I64, DType.U8, DType.BOOL]


@pytest.mark.parametrize("src", ALL_DTYPES, ids=lambda d: d.value)
def test_convert_matrix(src, rng):
    if src.is_float:
        values = np.concatenate([rng.uniform(-300, 300, 200), [0.0, -0.0, 0.5, -0.5, 1.5, 127.9, -128.9, 255.5, 1e10, -1e10, np.nan, np.inf, -np.inf, 3.14159265358979]])
    elif src is DType.BOOL:
        values = np.array([True, False, True])
    else:
        values = rand((200,), src.to_numpy(), rng)
    x_val = values.astype(src.to_numpy())
    g, b, (x,) = graph_with_inputs(("x", src, x_val.shape))
    for dst in ALL_DTYPES:
        g.add_output(b.op("convert", [x], dtype=dst), dst.value)
    check(g, {"x": x_val}, tol=dict(rtol=0, atol=0))


# -- shapes and index maps ------------------------------------------------------------
def test_index_mapping_ops(rng):
    g, b, (x, v, z) = graph_with_inputs(("x", DType.F32, (3, 4, 5)), ("v", DType.F32, (4,)), ("z", DType.F32, (3, 0, 5)))
    g.add_output(b.op("broadcast", [v], shape=(3, 4, 2), dims=(1,)), "bcast")
    g.add_output(b.op("broadcast", [b.op("reshape", [v], shape=(1, 4))], shape=(7, 4), dims=(0, 1)), "bcast_unit")
    g.add_output(b.op("reshape", [x], shape=(12, 5)), "reshape_merge")
    g.add_output(b.op("reshape", [x], shape=(6, 10)), "reshape_general")
    g.add_output(b.op("reshape", [x], shape=(3, 1, 4, 5, 1)), "reshape_units")
    g.add_output(b.op("transpose", [x], perm=(2, 0, 1)), "transpose")
    g.add_output(b.op("slice", [x], start=(1, 0, 1), limit=(3, 4, 5), stride=(1, 3, 2)), "slice")
    g.add_output(b.op("concat", [x, z, x], axis=1), "concat")
    g.add_output(b.op("pad", [x], low=(1, 0, 2), high=(0, 2, 1), value=-7.5), "pad")
    g.add_output(b.op("pad", [z], low=(0, 1, 0), high=(0, 1, 0), value=2.0), "pad_empty")
    g.add_output(b.op("iota", [], shape=(3, 5), dim=1, dtype=DType.F32), "iota_f32")
    g.add_output(b.op("iota", [], shape=(4, 2), dim=0, dtype=DType.I64), "iota_i64")
    g.add_output(b.op("transpose", [b.op("slice", [x], start=(0, 1, 0), limit=(3, 4, 5), stride=(2, 1, 1))], perm=(1, 2, 0)), "chain")
    check(g, {"x": rand((3, 4, 5), np.float32, rng), "v": rand((4,), np.float32, rng), "z": np.zeros((3, 0, 5), np.float32)})


def test_scalar_and_empty_and_prime_shapes(rng):
    g, b, (s, t, e, p) = graph_with_inputs(("s", DType.F32, ()), ("t", DType.F32, ()), ("e", DType.F32, (0, 5)), ("p", DType.F32, (7, 13)))
    g.add_output(b.op("mul", [s, t]), "scalar")
    g.add_output(b.op("add", [e, e]), "empty")
    g.add_output(b.op("reduce", [e], kind="sum", axes=(0,)), "reduce_empty_axis")
    g.add_output(b.op("reduce", [e], kind="max", axes=(0,)), "max_empty_axis")
    g.add_output(b.op("reduce", [p], kind="sum", axes=(0, 1)), "reduce_all")
    g.add_output(b.op("dot", [e, e], lhs_batch=(), rhs_batch=(), lhs_contract=(0,), rhs_contract=(0,)), "dot_empty_contract")
    g.add_output(b.op("exp", [p]), "prime")
    g.add_output(b.op("add", [p, b.op("broadcast", [s], shape=(7, 13), dims=())]), "scalar_bcast")
    check(g, {"s": np.float32(1.5), "t": np.float32(-2.0), "e": np.zeros((0, 5), np.float32), "p": rand((7, 13), np.float32, rng)},
          tol=dict(rtol=1e-5, atol=1e-5))


def test_constants_immediate_weights_and_fused_global(rng):
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (4, 3)))
    c_big = b.constant(rng.standard_normal((4, 3)).astype(np.float32))
    c_scalar = b.constant(np.float32(0.25))
    y = b.op("mul", [b.op("add", [x, c_big]), b.op("broadcast", [c_scalar], shape=(4, 3), dims=())])
    g.add_output(y, "y")
    check(g, {"x": rand((4, 3), np.float32, rng)})  # c_big from weights, the scalar inline
    # the same graph as one kernel with the large constant fused (a private LLVM global)
    pb = PlanBuilder(g)
    plan = pb.plan([pb.kernel(list(g.nodes))])
    compiled = check(g, {"x": rand((4, 3), np.float32, rng)}, plan=plan)
    assert "const." in compiled.code.llvm_ir


# -- reductions ------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [DType.F32, DType.I32, DType.F16, DType.BOOL, DType.U8], ids=lambda d: d.value)
def test_reduce(dtype, rng):
    x_val = rand((5, 6, 7), dtype.to_numpy(), rng)
    if dtype is DType.F32:
        x_val[1, 2, 3] = np.nan
        x_val[4, 0, 0] = np.inf
    g, b, (x,) = graph_with_inputs(("x", dtype, (5, 6, 7)))
    for kind in ("sum", "max", "min", "prod"):
        for axes in ((0,), (1,), (2,), (0, 2), (0, 1, 2)):
            if kind == "prod" and dtype.is_float and len(axes) > 1:
                continue
            g.add_output(b.op("reduce", [x], kind=kind, axes=axes), f"{kind}{axes}")
    tol = dict(rtol=1e-5, atol=1e-5) if dtype is DType.F32 else dict(rtol=2e-3, atol=2e-2) if dtype is DType.F16 else None
    check(g, {"x": x_val}, tol=tol)


def test_reduce_window(rng):
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (2, 3, 9, 8)))
    pads = ((0, 0), (0, 0), (1, 1), (0, 2))
    g.add_output(b.op("reduce_window", [x], kind="max", window=(1, 1, 3, 3), strides=(1, 1, 2, 2), padding=pads), "maxpool")
    g.add_output(b.op("reduce_window", [x], kind="sum", window=(1, 1, 2, 3), strides=(1, 1, 1, 3), padding=pads), "sumpool")
    g.add_output(b.op("reduce_window", [x], kind="min", window=(1, 2, 2, 2), strides=(1, 1, 2, 2), padding=((0, 0),) * 4), "minpool")
    x_val = rand((2, 3, 9, 8), np.float32, rng)
    x_val[0, 0, 0, 0] = np.nan
    check(g, {"x": x_val}, tol=dict(rtol=1e-6, atol=1e-6))


# -- contractions ----------------------------------------------------------------------
def test_dot(rng):
    g, b, (a, c, bat, bat2, v) = graph_with_inputs(
        ("a", DType.F32, (7, 13)), ("c", DType.F32, (13, 5)), ("bat", DType.F32, (3, 7, 4)), ("bat2", DType.F32, (3, 5, 4)), ("v", DType.F32, (13,)))
    g.add_output(b.op("dot", [a, c], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,)), "matmul")
    g.add_output(b.op("dot", [bat, bat2], lhs_batch=(0,), rhs_batch=(0,), lhs_contract=(2,), rhs_contract=(2,)), "batched_nt")
    g.add_output(b.op("dot", [a, a], lhs_batch=(), rhs_batch=(), lhs_contract=(0,), rhs_contract=(0,)), "tn")
    g.add_output(b.op("dot", [v, v], lhs_batch=(), rhs_batch=(), lhs_contract=(0,), rhs_contract=(0,)), "inner")
    g.add_output(b.op("dot", [a, v], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,)), "matvec")
    g.add_output(b.op("dot", [bat, bat2], lhs_batch=(), rhs_batch=(), lhs_contract=(0, 2), rhs_contract=(0, 2)), "two_contract")
    feeds = {"a": rand((7, 13), np.float32, rng), "c": rand((13, 5), np.float32, rng), "bat": rand((3, 7, 4), np.float32, rng),
             "bat2": rand((3, 5, 4), np.float32, rng), "v": rand((13,), np.float32, rng)}
    check(g, feeds, tol=dict(rtol=1e-5, atol=1e-4))


def test_dot_int_and_half(rng):
    g, b, (a, c, h, k) = graph_with_inputs(("a", DType.I32, (4, 6)), ("c", DType.I32, (6, 3)), ("h", DType.F16, (4, 6)), ("k", DType.F16, (6, 3)))
    g.add_output(b.op("dot", [a, c], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,)), "int")
    g.add_output(b.op("dot", [h, k], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,)), "half")
    feeds = {"a": rand((4, 6), np.int32, rng), "c": rand((6, 3), np.int32, rng), "h": rand((4, 6), np.float16, rng), "k": rand((6, 3), np.float16, rng)}
    check(g, feeds, tol=dict(rtol=2e-3, atol=2e-2))


def test_conv(rng):
    g, b, (x, w, wg, wd, x1, w1) = graph_with_inputs(
        ("x", DType.F32, (2, 4, 9, 8)), ("w", DType.F32, (6, 4, 3, 3)), ("wg", DType.F32, (6, 2, 3, 2)),
        ("wd", DType.F32, (4, 1, 3, 3)), ("x1", DType.F32, (1, 3, 11)), ("w1", DType.F32, (5, 3, 4)))
    g.add_output(b.op("conv", [x, w], strides=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=1), "same")
    g.add_output(b.op("conv", [x, w], strides=(2, 3), padding=((0, 2), (1, 0)), dilation=(1, 2), groups=1), "strided_dilated")
    g.add_output(b.op("conv", [x, wg], strides=(1, 2), padding=((2, 1), (0, 1)), dilation=(2, 1), groups=2), "grouped")
    g.add_output(b.op("conv", [x, wd], strides=(1, 1), padding=((1, 1), (1, 1)), dilation=(1, 1), groups=4), "depthwise")
    g.add_output(b.op("conv", [x1, w1], strides=(2,), padding=((3, 1),), dilation=(1,), groups=1), "conv1d")
    feeds = {name: rand(v.type.shape, np.float32, rng) for name, v in zip(("x", "w", "wg", "wd", "x1", "w1"), g.inputs)}
    check(g, feeds, tol=dict(rtol=1e-5, atol=1e-4))


# -- hand-fused kernels -----------------------------------------------------------------
def test_fused_elementwise_into_reduce(rng):
    g, b, (x, bias) = graph_with_inputs(("x", DType.F32, (6, 33)), ("bias", DType.F32, (33,)))
    bb = b.op("broadcast", [bias], shape=(6, 33), dims=(1,))
    s = b.op("add", [x, bb])
    act = b.op("mul", [s, b.op("logistic", [s])])  # silu: s is used twice
    red = b.op("reduce", [act], kind="sum", axes=(1,))
    g.add_output(red, "out")
    pb = PlanBuilder(g)
    plan = pb.plan([pb.kernel(list(g.nodes))])
    assert [k.ops for k in plan.kernels] == [["broadcast", "add", "logistic", "mul", "reduce"]]
    compiled = check(g, {"x": rand((6, 33), np.float32, rng), "bias": rand((33,), np.float32, rng)}, plan=plan, tol=dict(rtol=1e-5, atol=1e-5))
    assert compiled.code.kernels == [("aot_kernel_0", 1)]


def test_fused_dot_with_transposed_constant(rng):
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (5, 8)))
    w = b.constant(rng.standard_normal((3, 8)).astype(np.float32), name="w")
    wt = b.op("transpose", [w], perm=(1, 0))
    y = b.op("dot", [x, wt], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,))
    z = b.op("tanh", [y])
    g.add_output(z, "out")
    pb = PlanBuilder(g)
    plan = pb.plan([pb.kernel([wt.producer, y.producer, z.producer])])  # w itself is a weights param
    assert plan.slices["w"].kind == "weights"
    check(g, {"x": rand((5, 8), np.float32, rng)}, plan=plan, tol=dict(rtol=1e-5, atol=1e-5))


def test_softmax_two_kernels(rng):
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (4, 10)))
    m = b.op("reduce", [x], kind="max", axes=(1,))
    e = b.op("exp", [b.op("sub", [x, b.op("broadcast", [m], shape=(4, 10), dims=(0,))])])
    s = b.op("reduce", [e], kind="sum", axes=(1,))
    y = b.op("div", [e, b.op("broadcast", [s], shape=(4, 10), dims=(0,))])
    g.add_output(y, "y")
    nodes = list(g.nodes)
    pb = PlanBuilder(g)
    first = pb.kernel(nodes[:1])
    plan = pb.plan([first, pb.kernel(nodes[1:])])  # reduce recomputed per element: correct, if slow
    x_val = rand((4, 10), np.float32, rng)
    x_val[2, 3] = np.inf
    check(g, {"x": x_val}, plan=plan, tol=dict(rtol=1e-5, atol=1e-6))


# -- ABI, determinism, targets, errors ----------------------------------------------------
def test_split_ranges_equal_entry(rng):
    g, b, (x, w) = graph_with_inputs(("x", DType.F32, (3, 5, 7)), ("w", DType.F32, (7, 4)))
    y = b.op("dot", [x, w], lhs_batch=(), rhs_batch=(), lhs_contract=(2,), rhs_contract=(0,))
    g.add_output(b.op("tanh", [y]), "out")
    g.add_output(b.op("reduce", [x], kind="sum", axes=(1,)), "red")
    compiled = Compiled(simple_plan(g))
    # the dot runs on dot_dynamic's tiles (one 15-row x 16-lane tile); the others split by rows
    assert [items for _, items in compiled.code.kernels] == [1, 15, 3]
    feeds = {"x": rand((3, 5, 7), np.float32, rng), "w": rand((7, 4), np.float32, rng)}
    whole = compiled.run(feeds)
    for pieces in (2, 4, 15):
        for a, c in zip(whole, compiled.run_split(feeds, pieces)):
            np.testing.assert_array_equal(a, c)


def test_deterministic_bytes(rng):
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (4, 9)))
    g.add_output(b.op("reduce", [b.op("exp", [x])], kind="sum", axes=(1,)), "out")
    plan = simple_plan(g)
    first, second = emit_cpu(plan, HOST), emit_cpu(plan, HOST)
    assert first.shared_object == second.shared_object
    assert first.llvm_ir == second.llvm_ir
    assert b"/tmp" not in first.shared_object and b"aot-link" not in first.shared_object


def test_generic_target_has_no_libm_calls(rng):
    """Baseline x86-64 has no SSE4.1/F16C: rounding and half conversion are done in software."""
    if HOST.arch != "x86_64":
        pytest.skip("x86-64 host needed to run baseline code")
    generic = CpuTarget.from_name("generic")
    assert not generic.native_rounding and not generic.native_f16
    x_val = np.concatenate([rng.uniform(-1e4, 1e4, 300), specials(np.float32), [8388609.0, -8388609.5, 0.49999997]]).astype(np.float32)
    g, b, (x, h) = graph_with_inputs(("x", DType.F32, x_val.shape), ("h", DType.F16, x_val.shape))
    for op in ("floor", "ceil", "round", "exp"):
        g.add_output(b.op(op, [x]), op)
        g.add_output(b.op(op, [h]), f"{op}_f16")
    g.add_output(b.op("convert", [x], dtype=DType.F16), "to_f16")
    g.add_output(b.op("convert", [h], dtype=DType.F32), "from_f16")
    compiled = check(g, {"x": x_val, "h": x_val.astype(np.float16)}, target=generic)
    _assert_only_libc_memory_symbols(compiled.code.shared_object)


def _assert_only_libc_memory_symbols(so: bytes) -> None:
    import shutil
    import subprocess

    nm = shutil.which("nm")
    if nm is None:
        return
    with tempfile.NamedTemporaryFile(suffix=".so") as f:
        f.write(so)
        f.flush()
        out = subprocess.run([nm, "-D", "--undefined-only", f.name], capture_output=True, text=True, check=True).stdout
    undefined = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert undefined <= {"memcpy", "memset", "memmove"}, undefined


def test_host_code_needs_no_libm(rng):
    g, b, (x,) = graph_with_inputs(("x", DType.F32, (64,)))
    for op in UNARY_FLOAT:
        g.add_output(b.op(op, [x]), op)
    g.add_output(b.op("pow", [x, x]), "pow")
    code = emit_cpu(simple_plan(g), HOST)
    _assert_only_libc_memory_symbols(code.shared_object)
    assert "aot_model_entry" in code.llvm_ir


def test_aarch64_emits_llvm_ir():
    from aot.codegen.cpu import build_module, optimize

    g, b, (x,) = graph_with_inputs(("x", DType.F32, (8, 8)))
    g.add_output(b.op("tanh", [x]), "y")
    target = CpuTarget.from_name("neoverse-v1")
    assert target.arch == "aarch64"
    module, kernels = build_module(simple_plan(g), target)
    optimized = optimize(module, target.target_machine())
    assert kernels == [("aot_kernel_0", 8)]
    assert target.target_machine().emit_object(optimized)[:4] == b"\x7fELF"


def test_unsupported_raises_codegen_error():
    g = Graph()
    b = Builder(g, loc="onnx:MatMul_3")
    x = g.add_input("x", TensorType(DType.BOOL, (2, 2)))
    g.add_output(b.op("dot", [x, x], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(0,), name="mm"), "y")
    with pytest.raises(CodegenError, match=r"no cpu lowering for dot i1 \(node %mm from onnx:MatMul_3\)"):
        emit_cpu(simple_plan(g), HOST)


@pytest.mark.parametrize("cpu,register_lanes,registers,path", [
    ("skylake-avx512", 16, 32, "avx512"), ("znver4", 16, 32, "avx512"), ("haswell", 8, 16, "avx2"),
    ("x86-64-v3", 8, 16, "avx2"), ("znver3", 8, 16, "avx2"), ("x86-64-v2", 4, 16, "narrow"),
    ("znver4:-avx512f", 8, 16, "avx2"), ("neoverse-n1", 4, 32, "narrow"), ("generic-aarch64", 4, 32, "narrow"),
])
def test_registers_follow_the_target_and_the_layout_is_16_lanes_everywhere(cpu, register_lanes, registers, path):
    target = CpuTarget.from_name(cpu) if ":" not in cpu else CpuTarget("x86_64-unknown-linux-gnu", *cpu.split(":"))
    assert (target.register_lanes, target.vector_registers, target.code_path) == (register_lanes, registers, path)
    assert target.vector_lanes == 16


def test_target_names():
    assert CpuTarget.from_name("znver4").cpu == "znver4"
    assert CpuTarget.from_name("x86-64-v3").native_f16
    assert CpuTarget.from_name("native") == CpuTarget.host()
    assert CpuTarget.host().arch in ("x86_64", "aarch64")


@pytest.mark.parametrize("kind", ["max", "min", "sum"])
@pytest.mark.parametrize("width", [64, 37])
def test_masked_reduction_with_independent_accumulators(kind, width):
    """reduce(select(mask, x, fill)) over the innermost dim takes ElementalEmitter.accumulate_unrolled
    (8 accumulators, and a tail when the width is not a multiple): NaN, all-masked and tail rows."""
    rows = 6
    g, b, (x, mask) = graph_with_inputs(("x", DType.F32, (rows, width)), ("mask", DType.BOOL, (rows, width)))
    fill = {"max": -np.inf, "min": np.inf, "sum": 0.0}[kind]
    filled = b.op("broadcast", [b.constant(np.float32(fill))], dims=(), shape=(rows, width))
    chosen = b.op("select", [mask, x, filled])
    g.add_output(b.op("reduce", [chosen], axes=(1,), kind=kind), "y")
    rng = np.random.default_rng(3)
    x_val = rng.standard_normal((rows, width)).astype(np.float32)
    mask_val = rng.random((rows, width)) < 0.7
    mask_val[1] = False  # every element masked: the identity
    x_val[2, 5] = np.nan  # NaN propagates through max/min/sum
    x_val[3, width - 1] = 40.0  # the extreme sits in the tail when width % 8 != 0
    mask_val[3, width - 1] = True
    check(g, {"x": x_val, "mask": mask_val}, tol=dict(rtol=1e-5, atol=1e-5))
