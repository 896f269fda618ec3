"""ONNX importer, GridSample, AffineGrid, ReverseSequence, MaxUnpool, Col2Im and Det (importers/onnx/ops_sample.py):
lowered to IR, interpreted, compared with onnxruntime, or with onnx's reference evaluator where onnxruntime
departs from the specification."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import UnsupportedError
from aot.importers.onnx import import_onnx
from onnx_util import check_against_reference, check_node, node_model

RNG = np.random.default_rng(7)


def randn(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# -- GridSample -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["linear", "nearest", "cubic"])
@pytest.mark.parametrize("padding", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align", [0, 1])
def test_grid_sample_2d(mode, padding, align):
    x = randn(2, 3, 5, 4)
    grid = (RNG.uniform(-1.6, 1.6, (2, 3, 7, 2))).astype(np.float32)
    grid[0, 0, :3] = [[-1, -1], [1, 1], [3.7, -4.2]]  # corners and a far reflection
    attrs = {"mode": mode, "padding_mode": padding, "align_corners": align}
    if mode == "cubic" and padding == "border":
        # onnxruntime clamps cubic taps differently from the specification (off by up to 0.45 here)
        feeds = {"X": x, "G": grid}
        check_against_reference(node_model("GridSample", ["X", "G"], feeds, attrs=attrs, opset=20), feeds)
        return
    check_node("GridSample", ["X", "G"], {"X": x, "G": grid}, attrs=attrs, opset=20, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "nearest"])
def test_grid_sample_3d(mode):
    x = randn(1, 2, 3, 4, 5)
    grid = RNG.uniform(-1.2, 1.2, (1, 2, 3, 4, 3)).astype(np.float32)
    check_node("GridSample", ["X", "G"], {"X": x, "G": grid}, attrs={"mode": mode, "padding_mode": "border"},
               opset=20, rtol=1e-4, atol=1e-5)


def test_grid_sample_opset16_mode_names():
    x = randn(1, 1, 4, 4)
    grid = RNG.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)
    check_node("GridSample", ["X", "G"], {"X": x, "G": grid}, attrs={"mode": "bicubic"}, opset=16, rtol=1e-4, atol=1e-5)


def test_grid_sample_rejects_unknown_mode_by_name():
    feeds = {"X": randn(1, 1, 4, 4), "G": RNG.uniform(-1, 1, (1, 3, 3, 2)).astype(np.float32)}
    model = node_model("GridSample", ["X", "G"], feeds, attrs={"mode": "area"}, opset=20)
    with pytest.raises(UnsupportedError, match=r"GridSample.*mode 'area'"):
        import_onnx(model)


# -- AffineGrid, ReverseSequence, MaxUnpool, Col2Im, Det -----------------------------------
@pytest.mark.parametrize("size", [[2, 3, 4, 5], [1, 2, 3, 4, 2]])
@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(size, align):
    rank = len(size) - 2
    theta = randn(size[0], rank, rank + 1)
    check_node("AffineGrid", ["theta", "size"], {"theta": theta}, inits={"size": np.array(size, np.int64)},
               attrs={"align_corners": align}, opset=20, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("batch_axis,time_axis", [(0, 1), (1, 0)])
def test_reverse_sequence_constant_lens(batch_axis, time_axis):
    x = randn(4, 5, 2) if batch_axis == 0 else randn(5, 4, 2)
    check_node("ReverseSequence", ["x", "lens"], {"x": x}, inits={"lens": np.array([5, 0, 1, 3], np.int64)},
               attrs={"batch_axis": batch_axis, "time_axis": time_axis})


def test_max_unpool_of_max_pool_indices():
    """Indices as MaxPool numbers them (flat over N, C, H, W) of each 2x2 window's maximum."""
    x = randn(2, 3, 4, 6)
    windows = x.reshape(2, 3, 2, 2, 3, 2).transpose(0, 1, 2, 4, 3, 5).reshape(2, 3, 2, 3, 4)
    arg = windows.argmax(-1)
    n, c, h, w = np.indices(arg.shape)
    rows, cols = h * 2 + arg // 2, w * 2 + arg % 2
    feeds = {"v": windows.max(-1), "i": (((n * 3 + c) * 4 + rows) * 6 + cols).astype(np.int64)}
    check_node("MaxUnpool", ["v", "i"], feeds, attrs={"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)


def test_max_unpool_output_shape_pads_after_the_unpooled_shape():
    feeds = {"x": randn(1, 1, 2, 2), "i": np.array([[[[5, 7], [13, 15]]]], np.int64)}
    model = node_model("MaxUnpool", ["x", "i", "shape"], feeds, inits={"shape": np.array([1, 1, 5, 5], np.int64)},
                       attrs={"kernel_shape": [2, 2], "strides": [2, 2]}, opset=11)
    check_against_reference(model, feeds)


@pytest.mark.parametrize("attrs", [{}, {"strides": [2, 1], "pads": [1, 0, 1, 2], "dilations": [1, 2]}])
def test_col2im(attrs):
    image, block = np.array([5, 6], np.int64), np.array([2, 3], np.int64)
    strides, pads, dil = attrs.get("strides", [1, 1]), attrs.get("pads", [0] * 4), attrs.get("dilations", [1, 1])
    counts = [(image[d] + pads[d] + pads[d + 2] - dil[d] * (block[d] - 1) - 1) // strides[d] + 1 for d in range(2)]
    x = randn(2, 3 * 6, int(np.prod(counts)))
    check_node("Col2Im", ["x", "image", "block"], {"x": x}, inits={"image": image, "block": block}, attrs=attrs,
               opset=18, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", [(2, 2), (3, 3), (2, 4, 4), (1,)])
def test_det(shape):
    if len(shape) == 1:
        model = node_model("Det", ["x"], {"x": randn(3, 5)}, opset=11)
        with pytest.raises(Exception, match=r"Det.*\[\.\.\., n, n\]"):
            import_onnx(model)
        return
    check_node("Det", ["x"], {"x": randn(*shape)}, opset=11, rtol=1e-4, atol=1e-5)


def test_det_rejects_large_order_by_name():
    with pytest.raises(UnsupportedError, match=r"Det.*order 5"):
        import_onnx(node_model("Det", ["x"], {"x": randn(5, 5)}, opset=11))
