"""Kernel fingerprints (aot/codegen/cpu/fingerprint.py): equal where the body is, different
where it is not. A fingerprint stands for the body in the object cache, so two kernels
that share one must print the same text."""
from __future__ import annotations

import numpy as np

from aot.codegen.cpu.build import ObjectBuilder
from aot.codegen.cpu.fingerprint import kernel_fingerprints
from aot.ir import Builder, DType, Graph, TensorType
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from codegen_util import HOST

SHAPE = (1, 16, 10, 10)


def _block(b: Builder, x, seed: int, clip: float, scalars_first: bool):
    """1x1 conv + bias + clip(0, clip), as mobilenetv2's blocks; `scalars_first` lists the
    clip bounds before the conv (another node order, the same work)."""
    rng = np.random.default_rng(seed)
    shape = SHAPE

    def bounds():
        return [b.op("broadcast", [b.constant(np.float32(v))], dims=(), shape=shape) for v in (0.0, clip)]
    low_high = bounds() if scalars_first else None
    w = b.constant(rng.standard_normal((16, 16, 1, 1)).astype(np.float32))
    y = b.op("conv", [x, w], strides=(1, 1), padding=((0, 0), (0, 0)), dilation=(1, 1), groups=1)
    bias = b.op("broadcast", [b.constant(rng.standard_normal(16).astype(np.float32))], dims=(1,), shape=shape)
    y = b.op("add", [y, bias])
    low, high = low_high or bounds()
    return b.op("min", [b.op("max", [y, low]), high])


def _plan():
    g = Graph()
    x = g.add_input("x", TensorType(DType.F32, SHAPE))
    b = Builder(g)
    # the first block reads the input; the second and third read a block's output (a param's
    # producer is described: an emitter may look at it)
    y = _block(b, x, seed=0, clip=6.0, scalars_first=False)
    y = _block(b, y, seed=1, clip=6.0, scalars_first=False)
    y = _block(b, y, seed=2, clip=6.0, scalars_first=True)  # other weights, other order
    y = _block(b, y, seed=3, clip=4.0, scalars_first=False)  # another clip: other code
    g.add_output(y, "y")
    return run_pipeline(g, PipelineOptions(passes=default_passes(HOST.vector_lanes)))


def _conv_kernels(plan):
    return [k for k, kernel in enumerate(plan.kernels) if "conv" in kernel.ops or "packed_conv" in kernel.ops]


def test_weights_and_node_order_do_not_split_a_fingerprint_but_an_inlined_constant_does():
    plan = _plan()
    convs = _conv_kernels(plan)
    assert len(convs) == 4
    (prints,) = kernel_fingerprints(plan.kernels, [HOST], len(plan.weights))
    first, second, third = (prints[k] for k in convs[1:])
    assert first is not None and first == second != third


def test_kernels_of_one_fingerprint_print_one_body():
    plan = _plan()
    (prints,) = kernel_fingerprints(plan.kernels, [HOST], len(plan.weights))
    builder = ObjectBuilder(plan, [HOST], None)
    texts: dict[str, str] = {}
    for k, fingerprint in enumerate(prints):
        text = builder.print_body(0, k).text
        assert texts.setdefault(fingerprint, text) == text
