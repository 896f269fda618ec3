"""Layout assignment: pack the constant weights of dot and conv into blocked
layouts at compile time, so the CPU microkernels (codegen/cpu/packed_dot.py,
packed_conv.py) read one vector of `lanes` output columns per load.

The packed forms are ops of their own, packed_dot and packed_conv
(ir/ops/packed.py: shape rules, reference semantics and the `Packing` that says
how the weight is laid out), with the original's result type; the packing is
done here, once, on the constant; nothing is repacked at run time.

dot, W a constant [K, N] (or [N, K] contracted on dim 1), N padded to NB*L:
    before: %y = dot(%x, %w) : [M, N]
    after:  %wp = constant : [NB, K, L]          # wp[b, k, l] = w[k, b*L + l] (0 past N)
            %y  = packed_dot(%x, %wp) {columns = N, lanes = L, lhs_contract = [kx], reversed = false} : [M, N]

conv (1-d or 2-d, NC*/OI*), W a constant [O, C/g, *K], O padded to OB*L, each
block's channels in reverse lane order (the CPU conv body's order):
    after:  %wp = constant : [OB, C/g, *K, L]    # wp[b, c, .., l] = w[b*L + L-1-l, c, ..]
            %y  = packed_conv(%x, %wp) {channels = O, lanes = L, reversed = true, strides, ..} : [N, O, *S']

A dot weight read by several nodes is packed once when every reader can
read the packed form: dots contracting it on the same dim, and gathers of
whole rows along its other dim (a tied embedding table read by the token
lookup and the LM head). Row i of the table is wp[i // L, :, i % L], so a
row gather reads the packed constant with its index split in two (clamped
below the padding first), and the artifact holds the table once:
    before: %e = gather(%w, %i) {collapsed_slice_dims = [0], start_index_map = [0], slice_sizes = [1, K]}
    after:  %c = min(%i, N-1)                        # a negative %i reads row 0 without a max
            %s = concat(div(%c, L), rem(%c, L))      # along the index vector dim
            %e = gather(%wp, %s) {collapsed_slice_dims = [0, 2], start_index_map = [0, 2], slice_sizes = [1, K, 1]}
ONNX exports a tied LM head as MatMul(x, Transpose(E)) and import folds the
transpose into a second constant, so a row gather whose table is not read
otherwise also reads a packed dot weight that holds the same rows (same
bits); the table then dies.

The pass rewrites dot and conv only, never the packed ops it writes, so it
converges in one round. Not packed (left to the elemental path): non-f32,
batched dots, size-0 operands, weights with readers other than those above
(packing a copy would bloat the artifact), convs with several readers,
convs other than 1-d and 2-d, transposed (lhs_dilation) convs, and
grouped convs whose groups have a channel count that is not a multiple of
`lanes` (depthwise among them), and pointwise convs (1x1, stride 1, no
padding, one group), which codegen/cpu/conv1x1.py runs on the [O, C, 1, 1]
weight with the lanes along pixels.
"""
from __future__ import annotations

import numpy as np

from aot.arith import ceil_div
from aot.ir.builder import Builder
from aot.ir.graph import Graph, Node, Value
from aot.ir.types import DType
from aot.ir.ops.packed import Packing
from aot.rewrite.base import Pass


def dot_packing(lanes: int) -> Packing:
    """How this pass lays out a dot weight for the CPU gemm body: blocks of `lanes` columns."""
    return Packing(lanes)


def conv_packing(lanes: int) -> Packing:
    """How this pass lays out a conv weight for the CPU conv body: blocks of `lanes` channels,
    each in reverse lane order (codegen/cpu/packed_conv.py reads output channel od of a block
    from lane L-1-od)."""
    return Packing(lanes, reversed=True)


def pack_dot_weight(w: np.ndarray, contract: int, lanes: int) -> np.ndarray:
    """[K, N] (contract 0) or [N, K] (contract 1) -> [ceil(N/L), K, L], zero padded."""
    return dot_packing(lanes).pack(w.T if contract == 0 else w)


def pack_conv_weight(w: np.ndarray, lanes: int) -> np.ndarray:
    """[O, C, *K] -> [ceil(O/L), C, *K, L] with each block's channels reversed in the lanes."""
    return conv_packing(lanes).pack(w)


# taps per output the pixel-vectorized narrow-conv kernel (codegen/cpu/depthwise.py) unrolls
NARROW_TAPS = 64
# the narrowest blocks a grouped conv packs into (Layout._conv_lanes)
MIN_GROUP_LANES = 4
# the smallest window (KH * KW) whose narrow conv, or stem (_pads_stem), reads an explicitly padded input
PADDED_WINDOW = 25
# the most input channels of a stem (_pads_stem)
STEM_CHANNELS = 4


class Layout(Pass):
    """Pack constant dot/conv weights into [blocks, ..., lanes] layouts.

    `lanes` is the f32 vector width of the target: 16 for AVX-512, 8 for AVX2. `pad_stems`:
    a stem conv reads an explicitly padded input (_pads_stem).
    """

    name = "layout"

    def __init__(self, lanes: int = 16, pad_stems: bool = False):
        self.lanes = lanes
        self.pad_stems = pad_stems  # _pads_stem: for CPU code, whose packed conv generates border runs

    def run(self, graph: Graph) -> bool:
        users = graph.users()
        outputs = graph.output_ids()
        packed: set[int] = set()  # weights packed by this run: their readers are gone
        dots = convs = padded = 0
        for node in list(graph.nodes):
            weight = node.inputs[1] if node.op in ("dot", "conv") else None
            if weight is None or id(weight) in packed:
                continue
            array = graph.constant_value(weight)
            if array is None or node.out.type.dtype is not DType.F32 or node.out.type.size == 0:
                continue
            readers = users.get(id(weight), [])
            if node.op == "dot" and self._packable_dot(node, array):
                shared = len(readers) > 1
                if _can_read_packed(node, array, readers) and not (shared and id(weight) in outputs):
                    self._pack_dot_weight(graph, array, readers)
                    packed.add(id(weight))
                    dots += 1
            elif node.op == "conv" and len(readers) == 1:
                planar = conv_as_2d(node, array)
                lanes = None if planar is None else self._conv_lanes(node, *planar)
                if planar is not None and lanes is not None:
                    self._pack_conv(graph, node, array, lanes)
                    convs += 1
                elif _pads_narrow_conv(graph, node, array):
                    padded += 1
        tied = _tie_row_gathers(graph)
        self.summary = (f"{dots} dot and {convs} conv weight(s) packed, {tied} gather(s) read a packed table, "
                        f"{padded} narrow conv(s) read a padded input")
        return bool(dots or convs or tied or padded)

    # -- dot ---------------------------------------------------------------------------
    @staticmethod
    def _packable_dot(node: Node, w: np.ndarray) -> bool:
        attrs = node.attrs
        if attrs["lhs_batch"] or attrs["rhs_batch"] or len(attrs["rhs_contract"]) != 1:
            return False
        return w.ndim == 2 and w.size > 0

    def _pack_dot_weight(self, graph: Graph, w: np.ndarray, readers: list[Node]) -> None:
        """Pack `w` once, before its first reader, and point every reader at the packed constant."""
        first = readers[0]  # users() lists readers in node order
        dot = next(r for r in readers if r.op == "dot")
        contract = dot.attrs["rhs_contract"][0]
        n = w.shape[1 - contract]
        b = Builder(graph, index=graph.index_of(first), loc=first.loc)
        wp = b.constant(pack_dot_weight(w, contract, self.lanes), name=graph.fresh_name(f"{dot.out.name}.packed_w"))
        for reader in readers:
            if reader.op == "dot":
                self._pack_dot(graph, reader, wp, n)
            else:
                gather_packed_rows(graph, reader, wp, n)

    def _pack_dot(self, graph: Graph, node: Node, wp: Value, n: int) -> None:
        b = Builder(graph, index=graph.index_of(node), loc=node.loc)
        result = b.op("packed_dot", [node.inputs[0], wp], name=graph.fresh_name(f"{node.out.name}.packed"),
                      lhs_contract=node.attrs["lhs_contract"], columns=n, **dot_packing(self.lanes).attrs())
        _replace(graph, node, result)

    # -- conv --------------------------------------------------------------------------
    def _conv_lanes(self, node: Node, w: np.ndarray, attrs: dict) -> int | None:
        """The lanes of the packed weight's blocks, or None where the conv stays unpacked.

        A grouped conv's blocks must not straddle groups, so they take the widest of
        lanes, lanes/2, ... (at least MIN_GROUP_LANES) that divides the outputs per group:
        wav2vec2's positional conv (8 channels a group, 1,024 taps each) packs at 8
        lanes instead of running on the elemental path.
        """
        if w.size == 0 or node.inputs[0].type.size == 0:
            return None
        if any(d != 1 for d in attrs.get("lhs_dilation", (1, 1))):
            return None
        groups = attrs["groups"]
        if _is_pointwise(attrs, w):
            return None  # codegen/cpu/conv1x1.py vectorizes these along pixels, on the unpacked weight
        per_group = w.shape[0] // groups
        if per_group < self.lanes and w.shape[1] * w.shape[2] * w.shape[3] <= NARROW_TAPS:
            return None  # too few outputs to fill the lanes: codegen/cpu/depthwise.py vectorizes along pixels
        if groups == 1:
            return self.lanes
        lanes = self.lanes
        while lanes >= MIN_GROUP_LANES:
            if per_group % lanes == 0:
                return lanes
            lanes //= 2
        return None

    def _pack_conv(self, graph: Graph, node: Node, w: np.ndarray, lanes: int) -> None:
        """`w` is the conv's own weight (1-d or 2-d): the packed op keeps the conv's rank and
        attributes, but for a stem's padding (_pads_stem), which an explicit pad takes over."""
        packing = conv_packing(lanes)
        b = Builder(graph, index=graph.index_of(node), loc=node.loc)
        name = node.out.name
        wp = b.constant(packing.pack(w), name=graph.fresh_name(f"{name}.packed_w"))
        attrs = node.attrs
        x, padding = node.inputs[0], attrs["padding"]
        if self.pad_stems and _pads_stem(node, w):
            x, padding = _explicitly_padded(graph, b, node), ((0, 0), (0, 0))
        result = b.op("packed_conv", [x, wp], name=graph.fresh_name(f"{name}.packed"),
                      strides=attrs["strides"], padding=padding, dilation=attrs["dilation"],
                      groups=attrs["groups"], channels=w.shape[0], **packing.attrs())
        _replace(graph, node, result)


def _can_read_packed(dot: Node, w: np.ndarray, readers: list[Node]) -> bool:
    """Every reader of `dot`'s weight `w` reads it as `dot` does, or gathers whole rows along its free dim."""
    weight = dot.inputs[1]
    contract = dot.attrs["rhs_contract"]
    for reader in readers:
        if reader.op == "dot":
            if not (reader.inputs[0] is not weight and reader.attrs["rhs_contract"] == contract
                    and reader.out.type.dtype is DType.F32 and reader.out.type.size > 0 and Layout._packable_dot(reader, w)):
                return False
        elif row_gather_axis(reader) != 1 - contract[0]:
            return False
    return True


def row_gather_axis(node: Node) -> int | None:
    """The dim along which a gather reads whole rows of its rank-2 operand, one start index
    per row and the row dim collapsed (an embedding lookup); None for any other node."""
    if node.op != "gather" or node.inputs[0].type.rank != 2:
        return None
    attrs = node.attrs
    if attrs.get("operand_batching_dims", ()) or len(attrs["start_index_map"]) != 1:
        return None
    axis = attrs["start_index_map"][0]
    rows = tuple(1 if d == axis else size for d, size in enumerate(node.inputs[0].type.shape))
    return axis if attrs["collapsed_slice_dims"] == (axis,) and attrs["slice_sizes"] == rows else None


def gather_packed_rows(graph: Graph, node: Node, wp: Value, n: int) -> None:
    """gather(w, i) of whole rows -> gather(wp, [c / L, c % L]), c = min(i, n - 1), reading what the original read.

    `wp` [NB, K, L] holds the table's n rows as `dot_packing` lays them out: row r is
    wp[r // L, :, r % L]. The result keeps the gather's type and dims; only the index
    vector grows from one start to two.
    """
    indices = node.inputs[1]
    attrs = node.attrs
    _, k, lanes = wp.type.shape
    name = node.out.name
    b = Builder(graph, index=graph.index_of(node), loc=node.loc)
    vector_dim = attrs["index_vector_dim"]
    if vector_dim == indices.type.rank:  # implicit index vector: make it an explicit dim of one
        indices = b.op("reshape", [indices], name=graph.fresh_name(f"{name}.start"), shape=indices.type.shape + (1,))
    shape = indices.type.shape
    dtype = indices.type.dtype
    limits = np.iinfo(dtype.to_numpy())

    def splat(value: int) -> Value:
        return b.op("broadcast", [b.constant(np.array(value, dtype.to_numpy()))], shape=shape, dims=())

    # Past the last row, block and lane could name a padding row or a wrong one: clamp. A negative
    # index needs nothing: truncating div and rem give a block and a lane <= 0, which the
    # gather clamps to 0, so it reads row 0, as the table's gather does.
    row = indices
    if n - 1 < limits.max:
        row = b.op("min", [row, splat(n - 1)], name=graph.fresh_name(f"{name}.row"))
    block = b.op("div", [row, splat(lanes)], name=graph.fresh_name(f"{name}.block"))
    lane = b.op("rem", [row, splat(lanes)], name=graph.fresh_name(f"{name}.lane"))
    starts = b.op("concat", [block, lane], name=graph.fresh_name(f"{name}.starts"), axis=vector_dim)
    result = b.op("gather", [wp, starts], name=graph.fresh_name(f"{name}.packed"), offset_dims=attrs["offset_dims"],
                  collapsed_slice_dims=(0, 2), start_index_map=(0, 2), index_vector_dim=vector_dim, slice_sizes=(1, k, 1))
    _replace(graph, node, result)


def _tie_row_gathers(graph: Graph) -> int:
    """Point row gathers at a packed dot weight holding the same rows (same bits), where the
    gathers are all that read their table (so it dies). Returns how many gathers moved."""
    tables: dict[int, list[Node]] = {}  # id(table) -> its readers, when all are row gathers along one dim
    users = graph.users()
    weights: dict[int, Value] = {}  # id -> packed dot weight, in node order
    for node in graph.nodes:
        if _reads_packed_rows(node):
            weights.setdefault(id(node.inputs[1]), node.inputs[1])
        axis = row_gather_axis(node)
        if axis is None or graph.constant_value(node.inputs[0]) is None or id(node.inputs[0]) in tables:
            continue
        readers = users[id(node.inputs[0])]
        if all(row_gather_axis(r) == axis for r in readers):
            tables[id(node.inputs[0])] = readers
    if not tables or not weights:
        return 0
    moved = 0
    outputs = graph.output_ids()
    for readers in tables.values():
        table = readers[0].inputs[0]
        if id(table) in outputs:
            continue
        array = graph.constant_value(table)
        rows = array if row_gather_axis(readers[0]) == 0 else array.T
        wp = next((w for w in weights.values() if _holds_rows(graph.constant_value(w), rows)), None)
        if wp is None:
            continue
        _hoist(graph, wp.producer, readers[0])
        for reader in readers:
            gather_packed_rows(graph, reader, wp, rows.shape[0])
        moved += len(readers)
    return moved


def _reads_packed_rows(node: Node) -> bool:
    """A packed_dot whose weight is a constant laid out by `dot_packing` (row r at wp[r // L, :, r % L])."""
    if node.op != "packed_dot" or Packing.of(node.attrs) != dot_packing(node.attrs["lanes"]):
        return False
    producer = node.inputs[1].producer
    return producer is not None and producer.op == "constant"


def _holds_rows(wp: np.ndarray, rows: np.ndarray) -> bool:
    """wp [NB, K, L] packs exactly `rows` [N, K] (row r at wp[r // L, :, r % L]), bit for bit."""
    blocks, k, lanes = wp.shape
    n = rows.shape[0]
    if wp.dtype != rows.dtype or rows.shape[1] != k or blocks != ceil_div(n, lanes) or n == 0:
        return False
    bits = np.dtype(f"u{wp.dtype.itemsize}")
    head = min(n, lanes)  # the first block first: a cheap rejection of unrelated weights
    if not np.array_equal(wp[0, :, :head].T.view(bits), rows[:head].view(bits)):
        return False
    return np.array_equal(dot_packing(lanes).unpack(wp, n).view(bits), rows.view(bits))


def _hoist(graph: Graph, constant: Node, before: Node) -> None:
    """Move a constant node up to just before `before` if it comes later (a constant reads nothing)."""
    here, there = graph.index_of(constant), graph.index_of(before)
    if here > there:
        graph.nodes.pop(here)
        graph.nodes.insert(there, constant)


def _pads_stem(node: Node, w: np.ndarray) -> bool:
    """A 2-d conv over a few input channels (an image model's stem) with a large padded window
    reads an explicitly padded input: the copy is small (3 channels), and without padding the
    packed conv has no border runs, whose code per run and tap column was a third of resnet18's
    largest body (its 7x7 stem)."""
    return (w.ndim == 4 and node.attrs["groups"] == 1 and w.shape[1] <= STEM_CHANNELS
            and w.shape[2] * w.shape[3] >= PADDED_WINDOW and _padding_can_be_explicit(node.attrs))


def _padding_can_be_explicit(attrs: dict) -> bool:
    """A conv with some padding, none of it negative (a crop), and no lhs dilation."""
    padding = attrs["padding"]
    return (any(tuple(p) != (0, 0) for p in padding) and all(lo >= 0 and hi >= 0 for lo, hi in padding)
            and all(d == 1 for d in attrs.get("lhs_dilation", (1, 1))))


def _explicitly_padded(graph: Graph, b: Builder, conv: Node) -> Value:
    """A zero pad op of `conv`'s input by the conv's 2-d padding, made with `b`."""
    (top, bottom), (left, right) = conv.attrs["padding"]
    return b.op("pad", [conv.inputs[0]], name=graph.fresh_name(f"{conv.out.name}.padded_in"), low=(0, 0, top, left),
                high=(0, 0, bottom, right), value=0.0)


def _pads_narrow_conv(graph: Graph, node: Node, w: np.ndarray) -> bool:
    """A narrow (depthwise-like) 2-d conv with padding reads an explicitly padded input instead.

    The depthwise body (codegen/cpu/depthwise.py) vectorizes along output columns; a
    block that reaches into the padding builds a lane mask per tap and loads in masked
    pieces, and with 7x7 windows half of a 56-wide row's blocks do. Padding the input
    once (a copy the fusion pass materializes) leaves every load plain: ConvNeXt's 7x7
    depthwise convs 0.66 -> 0.40 ms and 0.38 -> 0.22 ms. Small windows gain less than
    the copy costs (MobileNetV2's 3x3 convs ran 20% slower padded): windows of at least
    PADDED_WINDOW taps only.
    """
    attrs = node.attrs
    x = node.inputs[0]
    if w.ndim != 4 or x.type.rank != 4 or node.out.type.dtype is not DType.F32 or x.type.size == 0:
        return False
    if not _padding_can_be_explicit(attrs):
        return False
    if w.shape[1] * w.shape[2] * w.shape[3] > NARROW_TAPS or w.shape[2] * w.shape[3] < PADDED_WINDOW:
        return False
    b = Builder(graph, index=graph.index_of(node), loc=node.loc)
    name = node.out.name
    xp = _explicitly_padded(graph, b, node)
    unpadded = dict(attrs)
    unpadded["padding"] = ((0, 0), (0, 0))
    y = b.op("conv", [xp, node.inputs[1]], name=graph.fresh_name(f"{name}.unpadded"), **unpadded)
    _replace(graph, node, y)
    return True


def conv_as_2d(node: Node, w: np.ndarray) -> tuple[np.ndarray, dict] | None:
    """A 2-d conv's weight and attributes; a 1-d conv's as the 2-d conv over a unit height
    ([N, C, L] read as [N, C, 1, L]); None for other ranks."""
    attrs = node.attrs
    if w.ndim == 4:
        return w, attrs
    if w.ndim != 3:
        return None
    lifted = dict(attrs)
    lifted["strides"] = (1,) + tuple(attrs["strides"])
    lifted["padding"] = ((0, 0),) + tuple(tuple(p) for p in attrs["padding"])
    lifted["dilation"] = (1,) + tuple(attrs["dilation"])
    if "lhs_dilation" in attrs:
        lifted["lhs_dilation"] = (1,) + tuple(attrs["lhs_dilation"])
    return w[:, :, None, :], lifted


def _is_pointwise(attrs: dict, w: np.ndarray) -> bool:
    """1x1, stride 1, unpadded, ungrouped: a matrix product along contiguous pixels in NCHW."""
    return (w.shape[2:] == (1, 1) and attrs["groups"] == 1 and tuple(attrs["strides"]) == (1, 1)
            and all(tuple(p) == (0, 0) for p in attrs["padding"]))


def _replace(graph: Graph, node: Node, result: Value) -> None:
    graph.replace_uses(node.out, result)
    graph.remove_nodes([node])
