"""The scatter GPU body (aot/codegen/nvptx/scatter.py): ScatterElements and ScatterND emulated on
the host against onnxruntime, every reduction, duplicate indices, each of the three update
strategies (serial, window, atomic), the kernels given the body, ptxas for sm_80 and sm_90."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from aot.codegen.nvptx import NvptxTarget, emit_gpu
from aot.codegen.nvptx.scatter import strategy
from gpu_util import assembles_for_every_sm, emulated_matches_onnxruntime
from onnx_util import make_model, vinfo

ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.float64: TensorProto.DOUBLE, np.int32: TensorProto.INT32,
             np.int64: TensorProto.INT64, np.float16: TensorProto.FLOAT16, np.int8: TensorProto.INT8}
REDUCTIONS = ["none", "add", "mul", "max", "min"]
# float adds through atomics sum repeated targets in another order than onnxruntime
ADD_RTOL = 1e-5


def _scatter_elements(shape, index_shape, axis: int, reduction: str, dtype=np.float32):
    t = ONNX_TYPE[dtype]
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=axis, reduction=reduction)
    return make_model([node], [vinfo("d", t, shape), vinfo("i", TensorProto.INT64, index_shape), vinfo("u", t, index_shape)],
                      [vinfo("y", t, shape)], opset=18)


def _scatter_nd(shape, index_shape, reduction: str, dtype=np.float32):
    t = ONNX_TYPE[dtype]
    update_shape = index_shape[:-1] + shape[index_shape[-1]:]
    node = helper.make_node("ScatterND", ["d", "i", "u"], ["y"], reduction=reduction)
    return make_model([node], [vinfo("d", t, shape), vinfo("i", TensorProto.INT64, index_shape), vinfo("u", t, update_shape)],
                      [vinfo("y", t, shape)], opset=18), update_shape


def _values(rng, shape, dtype):
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-9, 9, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def _scatter_strategies(plan) -> list[str]:
    """The update strategy of each scatter kernel, after checking it got the scatter body."""
    bodies = {k.name: k.body for k in emit_gpu(plan, NvptxTarget("sm_90")).kernels}
    scatters = [k for k in plan.kernels if k.root.producer.op == "scatter"]
    assert scatters and all(bodies[k.name] == "scatter" for k in scatters)
    return [strategy(k) for k in scatters]


@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_elements_with_duplicate_indices(axis, reduction):
    """Indices repeat along the axis (negative ones too); replace keeps the last update, as onnxruntime does."""
    rng = np.random.default_rng(axis * 10 + REDUCTIONS.index(reduction))
    shape, index_shape = (6, 7), (5, 4)
    indices = rng.integers(-shape[axis], shape[axis], index_shape)
    feeds = {"d": _values(rng, shape, np.float32), "i": indices, "u": _values(rng, index_shape, np.float32)}
    plan = emulated_matches_onnxruntime(_scatter_elements(shape, index_shape, axis, reduction), feeds, rtol=ADD_RTOL)
    assert _scatter_strategies(plan) == ["atomic" if reduction == "add" else "serial"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_scatter_nd_rows_with_duplicate_indices(reduction):
    """Windows of 40 elements: the window strategy, each update's row across the threads in order."""
    rng = np.random.default_rng(REDUCTIONS.index(reduction))
    model, update_shape = _scatter_nd((5, 40), (4, 1), reduction)
    feeds = {"d": _values(rng, (5, 40), np.float32), "i": np.array([[1], [3], [-4], [0]]),
             "u": _values(rng, update_shape, np.float32)}
    plan = emulated_matches_onnxruntime(model, feeds, rtol=ADD_RTOL)
    assert _scatter_strategies(plan) == ["atomic" if reduction == "add" else "window"]


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_nd_of_single_elements(reduction):
    """Full index vectors (windows of one element) into a 3-d operand: serial or atomic."""
    rng = np.random.default_rng(7)
    shape = (3, 4, 5)
    model, update_shape = _scatter_nd(shape, (6, 3), reduction)
    indices = np.array([[0, 1, 2], [2, 3, 4], [1, 0, 0], [2, 2, 2], [0, 0, 4], [1, 3, 1]])
    if reduction == "add":
        indices[3] = indices[0]  # a repeated target
    feeds = {"d": _values(rng, shape, np.float32), "i": indices, "u": _values(rng, update_shape, np.float32)}
    plan = emulated_matches_onnxruntime(model, feeds, rtol=ADD_RTOL)
    assert _scatter_strategies(plan) == ["atomic" if reduction == "add" else "serial"]


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float64, np.int8])
def test_scatter_add_dtypes(dtype):
    """32/64-bit integer adds are exact through atomics; i8 has no atomic here and applies in order."""
    rng = np.random.default_rng(8)
    shape, index_shape = (4, 9), (4, 6)
    feeds = {"d": _values(rng, shape, dtype), "i": rng.integers(0, 9, index_shape), "u": _values(rng, index_shape, dtype)}
    plan = emulated_matches_onnxruntime(_scatter_elements(shape, index_shape, 1, "add", dtype), feeds,
                                        rtol=ADD_RTOL)
    assert _scatter_strategies(plan) == ["serial" if dtype == np.int8 else "atomic"]


def test_half_scatter_replace():
    """f16 elements: copied and replaced through their storage type (native half on the GPU)."""
    rng = np.random.default_rng(11)
    model, update_shape = _scatter_nd((5, 40), (2, 1), "none", np.float16)
    feeds = {"d": _values(rng, (5, 40), np.float16), "i": np.array([[4], [0]]), "u": _values(rng, update_shape, np.float16)}
    plan = emulated_matches_onnxruntime(model, feeds)
    assert _scatter_strategies(plan) == ["window"]


def test_scatter_add_emits_global_atomics():
    rng = np.random.default_rng(9)
    shape, index_shape = (6, 7), (5, 4)
    feeds = {"d": _values(rng, shape, np.float32), "i": rng.integers(0, 6, index_shape),
             "u": _values(rng, index_shape, np.float32)}
    plan = emulated_matches_onnxruntime(_scatter_elements(shape, index_shape, 0, "add"), feeds, rtol=ADD_RTOL)
    ptx = emit_gpu(plan, NvptxTarget("sm_90")).ptx
    assert "red.global.add.f32" in ptx or "atom.global.add.f32" in ptx


def test_ptxas_assembles_scatter_kernels_without_spills():
    rng = np.random.default_rng(10)
    cases = []
    for reduction in ("none", "add"):  # window, atomic
        model, update_shape = _scatter_nd((5, 40), (4, 1), reduction)
        cases.append((model, {"d": _values(rng, (5, 40), np.float32), "i": np.array([[1], [3], [1], [0]]),
                              "u": _values(rng, update_shape, np.float32)}))
    cases.append((_scatter_elements((6, 7), (5, 4), 1, "max"),  # serial
                  {"d": _values(rng, (6, 7), np.float32), "i": rng.integers(0, 7, (5, 4)),
                   "u": _values(rng, (5, 4), np.float32)}))
    for model, feeds in cases:
        plan = emulated_matches_onnxruntime(model, feeds, rtol=ADD_RTOL)
        how = dict(zip((f"aot_kernel_{i}" for i in range(len(plan.kernels))), map(_strategy_or_none, plan.kernels)))
        for sm, report in assembles_for_every_sm(plan).items():
            for symbol, info in report.items():
                if how[symbol] is None:
                    continue
                print(f"{sm} {how[symbol]} {symbol}: {info}")
                assert info.spill_store_bytes == 0 and info.spill_load_bytes == 0, (sm, symbol, info)


def _strategy_or_none(kernel):
    return strategy(kernel) if kernel.root.producer.op == "scatter" else None
