"""Dtypes: every dtype's name, numpy mapping and C runtime table entry; uint16/32/64 and float8
compiled numerics against numpy / ml_dtypes (the float8 conversions exhaustively over the codes and
their midpoints); f64 -> f16 rounded once, on every f16 tie."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from aot.codegen.cpu import CpuTarget
from aot.driver import compile_model
from aot.errors import UnsupportedError
from aot.ir.types import FLOAT8_FORMATS, DType, float8_saturate
from aot.runtime.library import load_library
from aot.runtime.session import Session

ONNX_TYPE = {
    DType.U16: TensorProto.UINT16, DType.U32: TensorProto.UINT32, DType.U64: TensorProto.UINT64,
    DType.F8E4M3FN: TensorProto.FLOAT8E4M3FN, DType.F8E4M3FNUZ: TensorProto.FLOAT8E4M3FNUZ,
    DType.F8E5M2: TensorProto.FLOAT8E5M2, DType.F8E5M2FNUZ: TensorProto.FLOAT8E5M2FNUZ,
    DType.F32: TensorProto.FLOAT, DType.F16: TensorProto.FLOAT16, DType.F64: TensorProto.DOUBLE,
    DType.I32: TensorProto.INT32,
}
FLOAT8 = sorted(FLOAT8_FORMATS, key=lambda d: d.value)


def _model(nodes, inputs, outputs, opset=21):
    graph = helper.make_graph(nodes, "g", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)


def _vi(name: str, dtype: DType, shape) -> object:
    return helper.make_tensor_value_info(name, ONNX_TYPE[dtype], list(shape))


def _run(model, feeds: dict[str, np.ndarray], cpu: str = "native") -> list[np.ndarray]:
    compiled = compile_model(model, cpu=cpu)
    with Session(compiled.artifact) as session:
        return session.run(None, feeds)


def _runnable(cpu: str) -> None:
    if cpu != "native" and not CpuTarget.from_name(cpu).runs_on(CpuTarget.host()):
        pytest.skip(f"this host cannot run {cpu} code")


def _same_bits_or_both_nan(got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype
    g, w = got.astype(np.float32), want.astype(np.float32)
    nan = np.isnan(w)
    np.testing.assert_array_equal(np.isnan(g), nan)
    bits = np.dtype(f"u{want.dtype.itemsize}")
    np.testing.assert_array_equal(got.view(bits)[~nan], want.view(bits)[~nan])


# -- names and tables -----------------------------------------------------------------
@pytest.mark.parametrize("dtype", list(DType), ids=lambda d: d.value)
def test_dtype_round_trips_numpy_and_ir_text(dtype):
    assert DType.from_numpy(dtype.to_numpy()) is dtype
    assert DType.parse(dtype.value) is dtype
    assert dtype.itemsize == dtype.to_numpy().itemsize


def test_c_runtime_names_and_sizes_every_dtype():
    lib = load_library()
    for dtype in DType:
        assert lib.aot_dtype_name(dtype.abi_code).decode() == dtype.manifest_name
        assert lib.aot_dtype_size(dtype.abi_code) == dtype.itemsize == dtype.to_numpy().itemsize
    assert lib.aot_dtype_name(0).decode() == "invalid" and lib.aot_dtype_size(0) == 0


def test_rejects_float8e8m0_by_name():
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT8E8M0)],
                   [_vi("x", DType.F32, [3])], [helper.make_tensor_value_info("y", TensorProto.FLOAT8E8M0, [3])])
    with pytest.raises(UnsupportedError, match="float8e8m0"):
        compile_model(model)


# -- unsigned -----------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [DType.U16, DType.U32, DType.U64], ids=lambda d: d.value)
def test_unsigned_arithmetic_above_the_signed_range(dtype):
    np_t = dtype.to_numpy()
    top = np.iinfo(np_t).max
    a = np.array([0, 1, 7, top, top - 1, top // 2 + 3, 100, 5, 0, top], dtype=np_t)
    b = np.array([3, 0, 2, 2, top, top // 2 + 1, 7, 0, 1, 1], dtype=np_t)
    ops = ["Div", "Mod", "Max", "Min", "Less", "Greater", "Add", "Sub"]
    nodes = [helper.make_node(op, ["a", "b"], [op.lower()]) for op in ops]
    nodes.append(helper.make_node("Cast", ["a"], ["f"], to=TensorProto.FLOAT))
    bool_ops = {"Less", "Greater"}
    outputs = [helper.make_tensor_value_info(op.lower(), TensorProto.BOOL if op in bool_ops else ONNX_TYPE[dtype], [10])
               for op in ops] + [_vi("f", DType.F32, [10])]
    got = _run(_model(nodes, [_vi("a", dtype, [10]), _vi("b", dtype, [10])], outputs), {"a": a, "b": b})
    safe = np.where(b == 0, 1, b)
    with np.errstate(over="ignore"):
        want = [np.where(b == 0, 0, a // safe), np.where(b == 0, 0, a % safe), np.maximum(a, b), np.minimum(a, b),
                a < b, a > b, a + b, a - b, a.astype(np.float32)]
    for i, (g, w) in enumerate(zip(got, want)):
        if ops[i:i + 1] == ["Mod"]:
            g, w = g[b != 0], w[b != 0]  # ONNX leaves x mod 0 undefined
        np.testing.assert_array_equal(g, w, err_msg=(ops + ["Cast"])[i])


def test_float_to_uint_saturates_and_truncates():
    x = np.array([-5.0, 0.7, 3.9, 1e30, np.nan, 70000.0], dtype=np.float32)
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.UINT16)],
                   [_vi("x", DType.F32, [6])], [_vi("y", DType.U16, [6])])
    (y,) = _run(model, {"x": x})
    np.testing.assert_array_equal(y, np.array([0, 0, 3, 65535, 0, 65535], dtype=np.uint16))


# -- f64 -> f16 -------------------------------------------------------------------------
def _f16_tie_probe() -> np.ndarray:
    """f64 values on every f16 rounding tie (subnormals included) and just either side of it: by
    less than half an f32 ulp, where rounding to f32 first lands on the tie and rounds to even
    (the wrong way half the time), and by one f64 ulp; the overflow edge, values outside f32's
    range, +-inf, NaN; and the negatives of all."""
    finite = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    ties = (finite[:-1] + finite[1:]) / 2
    near = [ties * (1 + 2.0 ** -30), ties * (1 - 2.0 ** -30), np.nextafter(ties, np.inf), np.nextafter(ties, 0)]
    edges = [65519.99, 65520.0, np.nextafter(65520.0, np.inf), 3.5e38, 1e300, 2.0 ** -25, 1e-300, 5e-324, 0.0,
             np.inf, np.nan]
    x = np.concatenate([ties, *near, edges])
    return np.concatenate([x, -x])


@pytest.mark.parametrize("cpu", ["native", "x86-64"])
def test_cast_f64_to_f16_rounds_once(cpu):
    """Bit for bit numpy's astype(float16), one correct rounding; through f32 it would differ on
    half the near-tie values (checked, so the probe tells). onnxruntime converts through f32
    (two roundings), so it is the reference only where that gives the same answer."""
    import onnxruntime as ort

    _runnable(cpu)
    x = _f16_tie_probe()
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT16)],
                   [_vi("x", DType.F64, [x.size])], [_vi("y", DType.F16, [x.size])])
    (y,) = _run(model, {"x": x}, cpu)
    with np.errstate(over="ignore"):
        want = x.astype(np.float16)
        twice = x.astype(np.float32).astype(np.float16)
    _same_bits_or_both_nan(y, want)
    differs = twice.view(np.uint16) != want.view(np.uint16)
    assert differs.sum() > 30000, "the probe must hold values where two roundings differ from one"
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (onnxruntime,) = session.run(None, {"x": x})
    _same_bits_or_both_nan(y[~differs], onnxruntime[~differs])


# -- float8 ---------------------------------------------------------------------------
def _float8_probe(dtype: DType) -> np.ndarray:
    """Every code's value, each midpoint between neighbours and one f32 ulp either side, -0, +-inf, NaN, huge."""
    values = np.arange(256, dtype=np.uint8).view(dtype.to_numpy()).astype(np.float32)
    finite = np.unique(values[np.isfinite(values)])
    mids = ((finite[:-1].astype(np.float64) + finite[1:]) / 2).astype(np.float32)
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)), np.nextafter(mids, np.float32(-np.inf))])
    limit, _ = FLOAT8_FORMATS[dtype].overflow_threshold()
    edges = np.array([limit, -limit, limit * 1.01, 1e30, -1e30, np.inf, -np.inf, np.nan, -0.0, 1e-30, -1e-30],
                     dtype=np.float32)
    return np.concatenate([finite, mids, near, edges, -mids]).astype(np.float32)


@pytest.mark.parametrize("dtype", FLOAT8, ids=lambda d: d.value)
@pytest.mark.parametrize("saturate", [1, 0])
def test_f32_to_float8_rounds_to_nearest_even(dtype, saturate):
    x = _float8_probe(dtype)
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=ONNX_TYPE[dtype], saturate=saturate)],
                   [_vi("x", DType.F32, [x.size])], [_vi("y", dtype, [x.size])])
    (y,) = _run(model, {"x": x})
    with np.errstate(invalid="ignore", over="ignore"):
        want = float8_saturate(x, dtype) if saturate else x.astype(dtype.to_numpy())
    _same_bits_or_both_nan(y, want)


@pytest.mark.parametrize("dtype", [DType.F8E4M3FN, DType.F8E5M2FNUZ], ids=lambda d: d.value)
def test_f32_to_float8_on_baseline_x86_64_rounds_subnormals_in_software(dtype):
    """Without SSE4.1 llvm.roundeven is a call to libm's roundevenf, which the loader does not
    resolve (the compile now fails on it): the subnormal codes round with the software roundeven."""
    _runnable("x86-64")
    x = _float8_probe(dtype)
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=ONNX_TYPE[dtype], saturate=0)],
                   [_vi("x", DType.F32, [x.size])], [_vi("y", dtype, [x.size])])
    (y,) = _run(model, {"x": x}, "x86-64")
    with np.errstate(invalid="ignore", over="ignore"):
        _same_bits_or_both_nan(y, x.astype(dtype.to_numpy()))


@pytest.mark.parametrize("dtype", FLOAT8, ids=lambda d: d.value)
def test_float8_to_f32_and_f16_exact_over_all_codes(dtype):
    x = np.arange(256, dtype=np.uint8).view(dtype.to_numpy())
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT),
                    helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16)],
                   [_vi("x", dtype, [256])], [_vi("y", DType.F32, [256]), _vi("h", DType.F16, [256])])
    y, h = _run(model, {"x": x})
    np.testing.assert_array_equal(y, x.astype(np.float32))
    np.testing.assert_array_equal(h, x.astype(np.float32).astype(np.float16))


def test_float8_inputs_accept_raw_uint8_bits():
    x = np.array([0x38, 0x40, 0xC0], dtype=np.uint8)  # 1, 2, -2 in e4m3fn
    model = _model([helper.make_node("Cast", ["x"], ["y"], to=TensorProto.FLOAT)],
                   [_vi("x", DType.F8E4M3FN, [3])], [_vi("y", DType.F32, [3])])
    (y,) = _run(model, {"x": x})
    np.testing.assert_array_equal(y, np.array([1.0, 2.0, -2.0], dtype=np.float32))


def test_float8_arithmetic_rounds_back_like_ml_dtypes():
    rng = np.random.default_rng(0)
    dtype = DType.F8E4M3FN
    a = rng.normal(0, 20, 37).astype(np.float32).astype(dtype.to_numpy())
    b = rng.normal(0, 20, 37).astype(np.float32).astype(dtype.to_numpy())
    model = _model([helper.make_node("Mul", ["a", "b"], ["y"])],
                   [_vi("a", dtype, [37]), _vi("b", dtype, [37])], [_vi("y", dtype, [37])])
    (y,) = _run(model, {"a": a, "b": b})
    with np.errstate(invalid="ignore", over="ignore"):
        want = (a.astype(np.float32) * b.astype(np.float32)).astype(dtype.to_numpy())
    _same_bits_or_both_nan(y, want)


@pytest.mark.parametrize("dtype", [DType.F8E4M3FN, DType.F8E5M2], ids=lambda d: d.value)
def test_quantize_dequantize_float8(dtype):
    x = np.array([-1000.0, -3.3, 0.0, 0.126, 7.7, 1000.0, np.nan], dtype=np.float32)
    scale = np.array(0.5, dtype=np.float32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["d"])]
    inits = [helper.make_tensor("s", TensorProto.FLOAT, [], [0.5]),
             helper.make_tensor("z", ONNX_TYPE[dtype], [], [0])]
    graph = helper.make_graph(nodes, "g", [_vi("x", DType.F32, [7])], [_vi("q", dtype, [7]), _vi("d", DType.F32, [7])],
                              initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    q, d = _run(model, {"x": x})
    want = float8_saturate(x / scale, dtype)
    _same_bits_or_both_nan(q, want)
    np.testing.assert_array_equal(d, want.astype(np.float32) * scale)


def test_float8_saturate_reference_matches_onnx():
    from onnx.numpy_helper import saturate_cast

    x = _float8_probe(DType.F8E5M2)
    for dtype in FLOAT8:
        got = float8_saturate(x, dtype)
        want = saturate_cast(x, dtype.to_numpy())
        _same_bits_or_both_nan(got, want)
    assert ml_dtypes.finfo(DType.F8E4M3FN.to_numpy()).max == 448
