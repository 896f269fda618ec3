"""The sort / argsort GPU body (aot/codegen/nvptx/sort.py), through TopK: emulated on the host
against onnxruntime (ties, NaN and -0.0 bit for bit, every key width, rows in shared memory
and the odd-even fallback for longer ones), the kernels given to the body, and ptxas for
sm_80 and sm_90 with no spills."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.nvptx import NvptxTarget, emit_gpu
from aot.codegen.nvptx.emulate import emulate
from aot.codegen.nvptx.sort import SHARED_ROW, SHARED_ROW_WIDE
from gpu_util import assembles_for_every_sm, emulated_matches_onnxruntime
from onnx_util import make_model, vinfo

ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.float16: TensorProto.FLOAT16,
             np.int32: TensorProto.INT32, np.int64: TensorProto.INT64, np.uint8: TensorProto.UINT8,
             np.int8: TensorProto.INT8}


def _top_k(shape, k: int, largest: int, axis: int = -1, dtype=np.float32):
    """TopK(x), sorted=1: an argsort kernel (the indices) and a sort kernel (the values)."""
    out = list(shape)
    out[axis] = k
    nodes = [helper.make_node("TopK", ["x", "k"], ["v", "i"], axis=axis, largest=largest, sorted=1)]
    t = ONNX_TYPE[dtype]
    k_init = numpy_helper.from_array(np.array([k], np.int64), "k")
    return make_model(nodes, [vinfo("x", t, shape)], [vinfo("v", t, out), vinfo("i", TensorProto.INT64, out)], [k_init])


def _sort_kernels(plan) -> list[str]:
    """The GPU body of every kernel whose root is a sort or argsort."""
    bodies = {k.name: k.body for k in emit_gpu(plan, NvptxTarget("sm_90")).kernels}
    found = [bodies[k.name] for k in plan.kernels if k.root.producer.op in ("sort", "argsort")]
    assert len(found) == 2  # TopK: the indices (argsort) and the values (sort)
    return found


def _ties(rng, shape, dtype=np.float32):
    """Few distinct values, so most keys tie: stability decides the order."""
    return rng.integers(-4, 4, shape).astype(dtype)


@pytest.mark.parametrize("n", [7, 64, 1000])
@pytest.mark.parametrize("k", [1, 5])
@pytest.mark.parametrize("largest", [1, 0])
def test_top_k_with_ties_matches_onnxruntime(n, k, largest):
    rng = np.random.default_rng(n + k)
    plan = emulated_matches_onnxruntime(_top_k((3, n), k, largest), {"x": _ties(rng, (3, n))})
    assert _sort_kernels(plan) == ["sort", "sort"]


@pytest.mark.parametrize("largest", [1, 0])
def test_nan_and_signed_zero_keep_the_cpu_order_bit_for_bit(largest):
    """NaN after every number ascending, first descending; -0.0 == 0.0, so they keep their order."""
    x = np.array([[1, np.nan, -0.0, 0.0, np.inf, -np.inf, np.nan, 3, 0.0, -0.0, -2, np.nan]], np.float32)
    model = _top_k(x.shape, x.shape[1], largest)
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    plan = emulated_matches_onnxruntime(model, {"x": x})
    values, order = emulate(plan, [x])
    np.testing.assert_array_equal(values.view(np.uint32), theirs[0].view(np.uint32))
    np.testing.assert_array_equal(order, theirs[1])


def test_top_k_along_a_leading_axis_with_batch_dims():
    rng = np.random.default_rng(1)
    plan = emulated_matches_onnxruntime(_top_k((33, 2, 3), 4, 1, axis=0), {"x": _ties(rng, (33, 2, 3))})
    assert _sort_kernels(plan) == ["sort", "sort"]


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32, np.uint8, np.int8, np.float16])
@pytest.mark.parametrize("largest", [1, 0])
def test_every_key_width(dtype, largest):
    """64-bit keys (f64, i64: the two-array shared row), signed and unsigned narrow ints, f16."""
    rng = np.random.default_rng(3)
    x = rng.integers(0 if dtype == np.uint8 else -50, 50, (5, 37)).astype(dtype)
    plan = emulated_matches_onnxruntime(_top_k((5, 37), 7, largest, dtype=dtype), {"x": x})
    assert _sort_kernels(plan) == ["sort", "sort"]


@pytest.mark.parametrize(("dtype", "n"), [(np.float32, SHARED_ROW + 904), (np.float64, SHARED_ROW_WIDE + 53)])
def test_rows_longer_than_shared_memory_sort_in_the_output_row(dtype, n):
    """The odd-even transposition fallback: stable too (ties everywhere), both key widths."""
    rng = np.random.default_rng(4)
    model = _top_k((2, n), 9, 1, dtype=dtype)
    plan = emulated_matches_onnxruntime(model, {"x": _ties(rng, (2, n), dtype)})
    code = emit_gpu(plan, NvptxTarget("sm_90"))
    assert all(k.static_shared_bytes == 0 for k in code.kernels if k.body == "sort")


def test_ptxas_assembles_sort_kernels_without_spills():
    rng = np.random.default_rng(5)
    shapes = [((3, 1000), np.float32), ((3, 1000), np.float64), ((2, SHARED_ROW + 1), np.float32)]
    for shape, dtype in shapes:
        plan = emulated_matches_onnxruntime(_top_k(shape, 5, 1, dtype=dtype), {"x": _ties(rng, shape, dtype)})
        sort_symbols = {k.symbol for k in emit_gpu(plan, NvptxTarget("sm_90")).kernels if k.body == "sort"}
        for sm, report in assembles_for_every_sm(plan).items():
            for symbol in sort_symbols:
                info = report[symbol]
                print(f"{sm} {dtype.__name__}{list(shape)} {symbol}: {info}")
                assert info.spill_store_bytes == 0 and info.spill_load_bytes == 0, (sm, symbol, info)
