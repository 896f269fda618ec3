"""aot/kernel_cost.py: the per-kernel estimate the runtime splits kernels by (manifest cost_ns)."""
import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import aot
from aot.kernel_cost import _conv_macs, _taps, cost_terms, kernel_cost_ns
from paths_util import RUNTIME_C


def min_split_cost_ns() -> int:
    """The least cost_ns the C runtime splits: two chunks of AOT__MIN_CHUNK_NS."""
    text = (RUNTIME_C / "src" / "internal.h").read_text()
    return 2 * int(re.search(r"#define AOT__MIN_CHUNK_NS (\d+)", text).group(1))


def compile_graph(nodes, inputs, outputs, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return aot.compile(model)


def weight(name, shape, seed=0):
    return numpy_helper.from_array(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), name)


def matmul_model(m, k, n):
    return compile_graph(
        [helper.make_node("MatMul", ["x", "w"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])],
        [weight("w", (k, n))],
    )


def brute_taps(size, out, kernel, stride, pad_lo, dilation, lhs_dilation):
    pairs = 0
    for o in range(out):
        for t in range(kernel):
            p = o * stride + t * dilation - pad_lo
            pairs += p >= 0 and p % lhs_dilation == 0 and p // lhs_dilation < size
    return pairs


@pytest.mark.parametrize("size,kernel,stride,pad,dilation", [
    (1, 16, 1, 15, 1),  # a blocked channel dim: one real tap per output
    (7, 3, 1, 1, 1), (224, 7, 2, 3, 1), (10, 3, 2, 0, 2), (5, 5, 3, 4, 1), (3, 1, 1, 0, 1),
])
def test_taps_count_only_reads_of_the_input(size, kernel, stride, pad, dilation):
    out = (size + 2 * pad - (kernel - 1) * dilation - 1) // stride + 1
    assert _taps(size, out, kernel, stride, pad, dilation, 1) == brute_taps(size, out, kernel, stride, pad, dilation, 1)


def test_dot_cost_scales_with_multiply_adds():
    small, large = matmul_model(16, 64, 64), matmul_model(64, 256, 512)
    (ks,), (kl,) = small.plan.kernels, large.plan.kernels
    assert cost_terms(ks)["macs"] == 16 * 64 * 64
    assert cost_terms(kl)["macs"] == 64 * 256 * 512
    assert kernel_cost_ns(kl, 1) > 20 * kernel_cost_ns(ks, 1)


def test_conv_counts_the_taps_its_padding_skips():
    result = compile_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16, 12, 12])],
        [weight("w", (16, 8, 3, 3))],
    )
    convs = [n for k in result.plan.kernels for n in k.nodes if n.op in ("conv", "packed_conv")]
    assert convs
    # 12 x 12 outputs, 3 x 3 taps, less the taps on the zero border: 10 + 2 * 11 = 34 per dim, not 36
    assert sum(_conv_macs(n) for n in convs) == 16 * 8 * 34 * 34


def test_gather_counts_the_rows_read_not_the_table():
    result = compile_graph(
        [helper.make_node("Gather", ["table", "ids"], ["y"])],
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 64])],
        [weight("table", (30000, 64))],
    )
    (kernel,) = [k for k in result.plan.kernels if any(n.op == "gather" for n in k.nodes)]
    assert cost_terms(kernel)["bytes"] < 10 * 4 * 64 * 4
    assert kernel_cost_ns(kernel, 4) < min_split_cost_ns()


def test_manifest_costs_put_small_kernels_below_the_runtime_threshold():
    """A 64x256x512 matmul (8.4 M multiply-adds, about 150 us) is split; a 4x4 add is not."""
    large = matmul_model(64, 256, 512)
    small = compile_graph(
        [helper.make_node("Add", ["x", "x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 4])],
    )
    for result in (large, small):
        for entry in result.manifest["kernels"]:
            assert type(entry["cost_ns"]) is int and entry["cost_ns"] >= 0
    assert max(k["cost_ns"] for k in large.manifest["kernels"]) > 8 * min_split_cost_ns()
    assert max(k["cost_ns"] for k in small.manifest["kernels"]) < min_split_cost_ns()
