"""Patch convolutions become matrix products.

A conv whose stride equals its kernel and that has no padding (ViT's and
CLIP's patch embedding, ConvNeXt's 4x4 stem) reads each input element once:
every output pixel is the dot of one KH x KW patch with the weights. The
direct conv body then loads and broadcasts every input element for a single
FMA per channel block; as a matrix product the gemm body reuses each loaded
patch element across four column blocks (ViT-Tiny's 16x16 patch embedding:
47 -> 100+ GFLOP/s, onnxruntime's speed).

    before: %y = conv(%x, %w) {strides = [KH, KW], padding = 0} : [N, O, OH, OW]
    after:  %x6 = reshape(%x) : [N, C, OH, KH, OW, KW]       (a slice first if KH, KW do not divide H, W)
            %xt = transpose(%x6) {perm = [0, 2, 4, 1, 3, 5]} : [N, OH, OW, C, KH, KW]
            %xm = reshape(%xt) : [N*OH*OW, C*KH*KW]
            %wm = constant : [O, C*KH*KW]
            %d  = dot(%xm, %wm) {lhs_contract = [1], rhs_contract = [1]} : [N*OH*OW, O]
            %y  = transpose(reshape(%d) : [N, OH, OW, O]) {perm = [0, 3, 1, 2]}

Only f32, ungrouped, undilated 2-d convs with a constant weight, a kernel
larger than 1x1 (pointwise convs have their own body) and at least
MIN_OUT_CHANNELS outputs are rewritten;
the layout pass then packs the [O, C*KH*KW] weight for the gemm body.
"""
from __future__ import annotations

from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node
from aot.ir.types import DType
from aot.rewrite.base import Pass

# The im2col copy costs about as much per element as a few dozen FLOPs of the dot; the
# dot does 2 * O FLOPs per copied element. Below this many output channels the copy
# outweighs what the gemm body gains (ConvNeXt's 4x4 stem to 48 channels got slower:
# 0.5 ms of copying for 0.15 ms of arithmetic), and the direct conv body stays.
MIN_OUT_CHANNELS = 128


def is_patch_conv(node: Node, graph: Graph) -> bool:
    if node.op != "conv" or node.out.type.dtype is not DType.F32 or node.inputs[0].type.rank != 4:
        return False
    attrs = node.attrs
    x, w = node.inputs
    kernel = w.type.shape[2:]
    if graph.constant_value(w) is None or attrs["groups"] != 1 or kernel == (1, 1):
        return False
    if tuple(attrs["strides"]) != tuple(kernel) or any(d != 1 for d in attrs["dilation"]):
        return False
    if any(d != 1 for d in attrs.get("lhs_dilation", (1, 1))):
        return False
    if w.type.shape[0] < MIN_OUT_CHANNELS:
        return False
    return all(tuple(p) == (0, 0) for p in attrs["padding"]) and node.out.type.size > 0


class PatchConv(Pass):
    name = "patch-conv"

    def run(self, graph: Graph) -> bool:
        changed = 0
        for node in list(graph.nodes):
            if is_patch_conv(node, graph):
                self._rewrite(graph, node)
                changed += 1
        self.summary = f"{changed} patch conv(s) -> dot" if changed else ""
        return bool(changed)

    @staticmethod
    def _rewrite(graph: Graph, node: Node) -> None:
        x, w = node.inputs
        weights = graph.constant_value(w)
        assert weights is not None
        n, c, h, wd = x.type.shape
        o, _, kh, kw = weights.shape
        _, _, oh, ow = node.out.type.shape
        b = Builder(graph, index=graph.index_of(node), loc=node.loc)
        name = node.out.name
        fresh = graph.fresh_name
        if (h, wd) != (oh * kh, ow * kw):  # rows and columns past the last whole patch are never read
            x = b.op("slice", [x], name=fresh(f"{name}.whole"), start=(0, 0, 0, 0), limit=(n, c, oh * kh, ow * kw),
                     stride=(1, 1, 1, 1))
        x6 = b.op("reshape", [x], name=fresh(f"{name}.patches"), shape=(n, c, oh, kh, ow, kw))
        xt = b.op("transpose", [x6], name=fresh(f"{name}.patch_rows"), perm=(0, 2, 4, 1, 3, 5))
        xm = b.op("reshape", [xt], name=fresh(f"{name}.im2col"), shape=(n * oh * ow, c * kh * kw))
        wm = b.constant(weights.reshape(o, c * kh * kw), name=fresh(f"{name}.w2d"))
        d = b.op("dot", [xm, wm], name=fresh(f"{name}.dot"), lhs_batch=(), rhs_batch=(), lhs_contract=(1,),
                 rhs_contract=(1,))
        d4 = b.op("reshape", [d], name=fresh(f"{name}.nhwc"), shape=(n, oh, ow, o))
        y = b.op("transpose", [d4], name=fresh(f"{name}.nchw"), perm=(0, 3, 1, 2))
        graph.replace_uses(node.out, y)
        graph.remove_nodes([node])
