"""Direct f32 convolution: packed_conv (ir/ops/packed.py), the conv whose constant weight
the layout pass (rewrite/layout.py) packed as Wp [OB, C/g, KH, KW, L]: one block
of L output channels lives in the vector lanes, in reverse lane order (channel
ob*L + od in lane L-1-od). A 1-d conv (x [N, C, W], Wp [OB, C/g, KW, L]) runs as
the 2-d conv over a unit height.

Work item: (n, channel block ob, output row oh, a run of output columns), as
many as the target's accumulator registers hold (at most MAX_PIXELS: 6 of
16-lane vectors on AVX2); where they hold 2 x PAIRED_MAX_PIXELS (AVX-512), two
channel blocks ob, ob+1 of one group. Per item, one accumulator vector per
output pixel (and block):

    for i in 0..KH:  h = oh*sh + i*dh - ph;  skip the row if h is padding
      for c in 0..C/g:
        for j in 0..KW (unrolled):  w = Wp[ob, c, i, j, :]
          for p in pixels (unrolled):  acc[p] = fma(splat(x[n, g*C/g + c, h, (ow0+p)*sw + j*dw - pw]), w, acc[p])

A run whose columns all stay inside the input takes a variant without
bounds checks; a border run (one reading padding columns) has its columns
known at compile time, a zero vector for padding, where a row has at most
MAX_STATIC_BORDER_RUNS of them, else clamps the column and selects 0.
Where a block's weights outgrow L1, an item is instead a band of output rows of
its blocks (the whole plane of the 7x7 and 14x14 maps): the runs keep their
accumulators in a stack scratch and sweep the input channels chunk by chunk, so
each chunk's weights are read from L2 once per band (_channel_chunking); that accumulation
is a helper function (body.new_helper), shared by the convs of one shape. A weight
that comes from DRAM is prefetched into L2 while the blocks before it compute.

The store: on AVX-512 the item's accumulators are transposed in registers so
that each channel's pixels go through the fused epilogue (epilogue.py) as one
vectorizable row; elsewhere a loop over the channels reads them back from a
scratch.
Not handled here: convs the layout pass leaves unpacked (depthwise and other
narrow groups: depthwise.py; pointwise: conv1x1.py; non-f32, transposed and
other ranks: the elemental path).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from aot.arith import ceil_div
from aot.codegen.constants import constant
from aot.codegen.cpu.body import KernelContext, matched_body, new_helper
from aot.codegen.fused_epilogue import Epilogue, packed_epilogue
from aot.codegen.loops import branch, const_i64, delinearize, for_range
from aot.codegen.math import F32
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.cpu.vector_epilogue import store_run
from aot.codegen.cpu.vector import (accumulator_budget, fma, load_vector, prefetch, registers_per_vector, splat,
                                   store_vector, vector_of)
from aot.ir.graph import Node, Value
from aot.ir.ops import Packing
from aot.ir.types import DType
from aot.plan import Kernel
from aot.planning.contraction_sum import accumulation_join

# output pixels per work item: one accumulator vector each, at most the target's
# accumulator budget (the rest of the registers hold the weight vector and the broadcast)
MAX_PIXELS = 12
# on AVX-512 (32 registers of 16 floats) an item takes two channel blocks
# at up to 8 pixels: 16 accumulators and 2 weight vectors, and each broadcast
# input element feeds two FMAs, halving the loads per FMA. More pixels spill:
# on resnet18, 12 pixels made the 56x56 convs 35% slower and 14 twice as slow.
PAIRED_MAX_PIXELS = 8
ZERO = const_i64(0)
# A conv weight that comes from DRAM on every call (larger than these, as packed_dot.py's
# rule) is prefetched into L2 while the items of the channel blocks before it compute: each
# item of blocks ob.. fetches its share of blocks ob+per_item..'s weights, a few cache lines
# per input channel step. Unprefetched, the first item of each block pair waited for its
# 590 KB (resnet18's 512-channel 7x7 convs: 2.36 ms in a model run, 1.9 ms with the
# weights in cache).
PREFETCH_MIN_WEIGHT_BYTES = 1 << 20
PREFETCH_MIN_MODEL_WEIGHT_BYTES = 16 << 20
PREFETCH_LOCALITY = 2  # prefetcht1: into L2
CACHE_LINE_FLOATS = 16
# a narrow input (the stem's image) comes from DRAM at the start of a run, and its strided rows
# (a few per channel) outrun the hardware prefetchers: each item prefetches into L1 what the
# next output row's items read (mobilenetv2's stem, 3 -> 32 at 224x224 stride 2, AVX-512)
PREFETCH_ROWS_MAX_CHANNELS = 4
PREFETCH_ROWS_LOCALITY = 3
# band items (_channel_chunking): L1 data cache (32 KiB: every x86-64-v3/v4 server core has
# at least that), the most accumulator scratch of a band, the weights of one chunk of input
# channels. resnet18 on Zen 3 (32 KiB L1), kernels A/B against 20 KiB chunks: 56- and 28-wide
# convs 1-2% faster with 10 KiB, 2-3% slower with 5 KiB; 6 KiB bands no faster than 16 KiB
L1_BYTES = 32 << 10
PLANE_SCRATCH_BYTES = 16 << 10
WEIGHT_CHUNK_BYTES = 10 << 10
# band items run band by band (every channel block of a band, then the next band) where all
# the conv's weights fit this share of L2 (256 KiB: half of Zen 3's): a band's input rows and
# the weights then stay in L2, where block by block each block re-read the whole input map
# (resnet18's 56x56 layers: 800 KB, over the 512 KiB L2). Zen 3, AVX2, whole resnet18 A/B
# (the 56x56 convs band-major): 1 thread 0.96-1.00, 2 threads 0.98 (twice), with a memory
# hog on the other core 0.98-1.01; the kernels alone, caches warm, 1.00-1.01
BAND_MAJOR_MAX_WEIGHT_BYTES = 256 << 10
# a conv whose rows have more runs reading padding columns than this keeps the run-time
# checked variant for them (_static_border_runs emits code per such run)
MAX_STATIC_BORDER_RUNS = 3
# a column in the padding, known at compile time (_accumulate's static columns)
PADDING = object()


@dataclass(frozen=True)
class ConvGeometry:
    batch: int
    in_channels: int
    height: int
    width: int
    blocks: int  # OB
    group_channels: int  # C/g
    kh: int
    kw: int
    lanes: int
    out_channels: int  # O (logical)
    oh: int
    ow: int
    groups: int
    strides: tuple[int, int]
    dilation: tuple[int, int]
    pad_low: tuple[int, int]
    pixels: int  # columns of a wide run
    runs: int  # runs per output row
    per_item: int  # channel blocks per work item (1 or 2)

    @property
    def wide_runs(self) -> int:
        """The first runs of a row, `pixels` columns each; the others (narrow) have one column
        fewer. Balanced so, not full runs and one short tail: a tail's few accumulator chains
        cannot hide the FMA latency (resnet18's 56-wide rows on AVX2, 9 x 6 + 2 columns: the
        2-column run took 7% of the conv's time). resnet18 --cpu x86-64-v3, kernels A/B: the
        stem (112 = 17 x 6 + 2 x 5 columns) 5% faster, the 56-wide convs level."""
        return self.ow - self.runs * (self.pixels - 1)

    @property
    def narrow(self) -> int:
        """Columns of the runs after the wide ones (`pixels` where every run is wide)."""
        return self.pixels if self.wide_runs == self.runs else self.pixels - 1

    def run_start(self, run: int) -> int:
        """The first output column of run `run`."""
        return run * (self.pixels - 1) + min(run, self.wide_runs)

    def run_start_ir(self, b: ir.IRBuilder, run: ir.Value, name: str) -> ir.Value:
        """run_start of a run-time run index."""
        if self.wide_runs == self.runs:
            return b.mul(run, const_i64(self.pixels), name=name, flags=["nuw", "nsw"])
        wide = b.select(b.icmp_unsigned("<", run, const_i64(self.wide_runs)), run, const_i64(self.wide_runs))
        return b.add(b.mul(run, const_i64(self.pixels - 1), flags=["nuw", "nsw"]), wide, name=name, flags=["nuw", "nsw"])

    def by_width(self, b: ir.IRBuilder, run: ir.Value, body: Callable[[int, range], None]) -> None:
        """body(columns, the runs of that width) for the width of run `run` (known at run time)."""
        if self.wide_runs == self.runs:
            body(self.pixels, range(self.runs))
            return
        wide = b.icmp_unsigned("<", run, const_i64(self.wide_runs))
        branch(b, wide, lambda: body(self.pixels, range(self.wide_runs)),
               lambda: body(self.narrow, range(self.wide_runs, self.runs)))

    @property
    def items(self) -> int:
        return self.batch * (self.blocks // self.per_item) * self.oh * self.runs

    @staticmethod
    def of(match: ConvMatch) -> ConvGeometry:
        return ConvGeometry.of_conv(match.epilogue.contraction, match.per_item, match.max_pixels)

    @staticmethod
    def of_conv(conv: Node, per_item: int, max_pixels: int) -> ConvGeometry:
        x, wp = conv.inputs
        attrs = conv.attrs
        strides, dilation = tuple(attrs["strides"]), tuple(attrs["dilation"])
        pad_low = tuple(low for low, _ in attrs["padding"])
        out_spatial = conv.out.type.shape[2:]
        kernel = wp.type.shape[2:-1]
        if x.type.rank == 3:  # 1-d: the 2-d conv over a unit height
            strides, dilation, pad_low = (1, *strides), (1, *dilation), (0, *pad_low)
            out_spatial, kernel = (1, *out_spatial), (1, *kernel)
        n, c = x.type.shape[:2]
        h, w = _planar(x)
        blocks, cg = wp.type.shape[:2]
        lanes = wp.type.shape[-1]
        oh, ow = out_spatial
        kh, kw = kernel
        runs = max(1, ceil_div(ow, max_pixels))
        pixels = ceil_div(ow, runs)  # the runs take ow // runs or one more columns
        return ConvGeometry(
            n, c, h, w, blocks, cg, kh, kw, lanes, attrs["channels"], oh, ow, attrs["groups"],
            strides, dilation, pad_low, pixels, runs, per_item,
        )

    def rows_always_inside(self) -> bool:
        low = -self.pad_low[0]
        high = (self.oh - 1) * self.strides[0] + (self.kh - 1) * self.dilation[0] - self.pad_low[0]
        return low >= 0 and high < self.height

    def columns_always_inside(self) -> bool:
        low = -self.pad_low[1]
        high = (self.ow - 1) * self.strides[1] + (self.kw - 1) * self.dilation[1] - self.pad_low[1]
        return low >= 0 and high < self.width


@dataclass(frozen=True)
class ConvMatch:
    epilogue: Epilogue
    per_item: int  # channel blocks per work item
    max_pixels: int  # output columns per work item, at most
    chunk: int = 0  # input channels per weight chunk of a band item (0: an item is one run)
    band: int = 0  # output rows per band item (all of them: a whole-plane item)

    def bands(self) -> int:
        """Band items per set of channel blocks."""
        return ceil_div(ConvGeometry.of(self).oh, self.band)

    def band_major(self) -> bool:
        """Whether band items go band by band, not channel block by block (BAND_MAJOR_MAX_WEIGHT_BYTES)."""
        g = ConvGeometry.of(self)
        weight_bytes = g.blocks * g.group_channels * g.kh * g.kw * g.lanes * 4
        return 0 < self.band < g.oh and weight_bytes <= BAND_MAJOR_MAX_WEIGHT_BYTES

    def items(self) -> int:
        g = ConvGeometry.of(self)
        return g.batch * (g.blocks // g.per_item) * ceil_div(g.oh, self.band) if self.chunk else g.items


def _planar(x: Value) -> tuple[int, int]:
    """(H, W) of a 2-d conv's input; (1, W) of a 1-d one's."""
    spatial = x.type.shape[2:]
    return (spatial[0], spatial[1]) if len(spatial) == 2 else (1, spatial[0])


def _input_index(x: Value, n: ir.Value, channel: ir.Value, h: ir.Value, pos: ir.Value) -> list[ir.Value]:
    """x's index of input column `pos` of row h (none for a 1-d conv), image n; a unit dim reads at 0."""
    index = [n, channel, h, pos] if x.type.rank == 4 else [n, channel, pos]
    return [ZERO if size == 1 else i for i, size in zip(index, x.type.shape)]


def is_cpu_packed_conv(node: Node) -> bool:
    """An f32 1-d or 2-d packed_conv in the lane order this body reads (channel ob*L + od in lane L-1-od)."""
    return (node.op == "packed_conv" and node.out.type.dtype is DType.F32 and node.inputs[0].type.rank in (3, 4)
            and Packing.of(node.attrs).reversed)


def _groups_split_into(conv: Node, per_item: int) -> bool:
    """Each group's channel blocks split into whole items of `per_item` blocks."""
    return (conv.inputs[1].type.shape[0] // conv.attrs["groups"]) % per_item == 0


def _tiling(conv: Node, target: CpuTarget) -> tuple[int, int]:
    """(channel blocks, most output columns) per work item: a pair of blocks of PAIRED_MAX_PIXELS
    where the accumulator registers hold them (AVX-512) and the groups split into pairs,
    else one block of as many columns as they hold (6 vectors of 16 lanes on AVX2)."""
    budget = accumulator_budget(target, conv.attrs["lanes"])
    if budget >= 2 * PAIRED_MAX_PIXELS and _groups_split_into(conv, 2):
        return 2, PAIRED_MAX_PIXELS
    return 1, min(MAX_PIXELS, budget)


def _conv_match(kernel: Kernel, target: CpuTarget) -> ConvMatch | None:
    epilogue = packed_epilogue(kernel, is_cpu_packed_conv)
    if epilogue is None:
        return None
    users: dict[int, list[Node]] = {}
    for node in kernel.nodes:
        for v in node.inputs:
            users.setdefault(id(v), []).append(node)
    params = {id(p) for p in kernel.params}
    main = epilogue.contraction
    per_item, max_pixels = _tiling(main, target)
    # other convs of the kernel that join the main one in a plain sum share its accumulators
    # (and its items: a pair of blocks must not straddle a group); any other contraction
    # stays on the elemental path (computed where the epilogue reads it)
    partners = tuple(
        n for n in kernel.nodes
        if n is not main and n.op == "packed_conv" and id(n.inputs[1]) in params
        and _groups_split_into(n, per_item)
        and accumulation_join(main, n, lambda v: users.get(id(v), []), lambda v: v is kernel.root) is not None
    )
    chunk, band = _channel_chunking(ConvGeometry.of_conv(main, per_item, max_pixels),
                                    bands=registers_per_vector(target, main.attrs["lanes"]) > 1)
    return ConvMatch(Epilogue(main, partners) if partners else epilogue, per_item, max_pixels, chunk, band)


def _channel_chunking(g: ConvGeometry, bands: bool) -> tuple[int, int]:
    """(input channels per weight chunk, output rows per item) where an item is a band of
    output rows of its blocks, else (0, 0). A band item keeps its accumulators in a stack
    scratch and runs every run of the band over one chunk of input channels before the next,
    so the chunk's weights stay in L1 across the runs; an item of one run reads all of its
    blocks' weights from L2 (they are larger than L1), once per run. Taken where the weights
    are larger than L1; a band is as many rows as the scratch holds (the whole plane of the
    narrow late-stage maps), split evenly. resnet18, kernels in sequence: with --cpu znver3
    (one block of 4 + 3 or 5 + 5 + 4 pixels a row) the 7x7 convs 2.51-2.71 -> 2.27-2.47 ms,
    the 14x14 ones 2.29-2.48 -> 2.09-2.28; native (pairs of blocks, 7 pixels) the 7x7 ones
    1.96-2.09 -> 1.94-2.04. Bands of the wide maps (before, an item of one run there read
    its 37 KB of weights from L2 per run), on Zen 3, AVX2, kernels A/B: resnet18's 56-wide
    3x3 convs 5-9% faster, the 28-wide ones 4-10%, the model's kernels 5%. `bands`: items
    of fewer rows than the plane are taken (else only whole planes), on targets whose block
    takes several registers (AVX2, NEON). Not yet measured on AVX-512 (paired blocks of
    unrolled taps), so there wide maps keep items of one run."""
    tap_bytes = g.per_item * g.kh * g.kw * g.lanes * 4  # weight bytes per input channel
    row_bytes = g.per_item * g.runs * g.pixels * g.lanes * 4  # scratch of one output row
    rows = min(g.oh, PLANE_SCRATCH_BYTES // row_bytes)
    if tap_bytes * g.group_channels <= L1_BYTES or rows == 0 or (rows < g.oh and not bands):
        return 0, 0
    chunk = max(1, WEIGHT_CHUNK_BYTES // tap_bytes)
    if chunk >= g.group_channels:
        return 0, 0
    chunk = ceil_div(g.group_channels, ceil_div(g.group_channels, chunk))  # even chunks
    return chunk, ceil_div(g.oh, ceil_div(g.oh, rows))  # even bands


def _emit_conv(ctx: KernelContext, match: ConvMatch) -> None:
    g = ConvGeometry.of(match)
    epilogue = match.epilogue
    b = ctx.builder
    name = epilogue.contraction.out.name
    if match.chunk:
        _emit_planes(ctx, match, g)
        return
    with for_range(b, ctx.begin, ctx.end, f"{name}.item") as item:
        n, pair, oh, run = delinearize(b, item, (g.batch, g.blocks // g.per_item, g.oh, g.runs), f"{name}.item")
        ob = b.mul(pair, const_i64(g.per_item), name=f"{name}.ob", flags=["nuw", "nsw"])
        ow0 = g.run_start_ir(b, run, f"{name}.ow0")
        # the item's place among its blocks' items: where it is in prefetching the next blocks' weights
        step = b.add(b.mul(oh, const_i64(g.runs), flags=["nuw", "nsw"]), run, flags=["nuw", "nsw"])
        at = _Item(n, ob, oh, ow0, step)
        if _prefetches_rows(ctx, match, g):
            _prefetch_next_rows(ctx, epilogue.contraction, g, at)

        def width(pixels: int, runs: range) -> None:
            inside = None if g.columns_always_inside() else _run_inside(b, g, ow0, pixels)
            _conv_run(ctx, epilogue, g, at, pixels, inside, list(runs))

        g.by_width(b, run, width)


def _emit_planes(ctx: KernelContext, match: ConvMatch, g: ConvGeometry) -> None:
    """Items of bands of output rows (_channel_chunking): for each chunk of input channels,
    every run of the band accumulates the chunk into its scratch accumulators; then the
    partners and the store, run by run. The accumulation is a helper function of its own
    (body.new_helper) where the input is a buffer: it depends on the conv alone, not on the
    epilogue, so convs of one shape share its code (resnet18's 3x3 convs at one map size:
    with a ReLU, a residual sum, a downsampling partner)."""
    epilogue = match.epilogue
    conv = epilogue.contraction
    x, wp = conv.inputs
    b, e = ctx.builder, ctx.elemental
    name = conv.out.name
    scratch = e.alloca(_scratch_type(match, g), f"{name}.plane")
    i8p = ir.IntType(8).as_pointer()
    helper = None
    if id(x) in ctx.params and ctx.helpers is not None:
        helper, inside, finish = new_helper(ctx, [x, wp], [i8p] + [ir.IntType(64)] * 4)
        args = inside.fn.args
        args[2].add_attribute("noalias")  # the scratch: the inputs' loads need not wait for its stores
        into = inside.builder.bitcast(args[2], _scratch_type(match, g).as_pointer())
        _accumulate_band(inside, match, g, into, *args[3:])
        finish()

    with for_range(b, ctx.begin, ctx.end, f"{name}.item") as item:
        pairs = g.blocks // g.per_item
        if match.band_major():
            n, band, pair = delinearize(b, item, (g.batch, match.bands(), pairs), f"{name}.item")
        else:
            n, pair, band = delinearize(b, item, (g.batch, pairs, match.bands()), f"{name}.item")
        ob = b.mul(pair, const_i64(g.per_item), name=f"{name}.ob", flags=["nuw", "nsw"])
        oh0 = b.mul(band, const_i64(match.band), name=f"{name}.oh0", flags=["nuw", "nsw"])
        oh_end = b.add(oh0, const_i64(match.band), flags=["nuw", "nsw"])
        oh_end = b.select(b.icmp_signed("<", oh_end, const_i64(g.oh)), oh_end, const_i64(g.oh), name=f"{name}.oh_end")
        if helper is None:
            _accumulate_band(ctx, match, g, scratch, n, ob, oh0, oh_end)
        else:
            operands = [b.bitcast(ctx.params[id(v)], i8p) for v in (x, wp)]
            b.call(helper, [*operands, b.bitcast(scratch, i8p), n, ob, oh0, oh_end])
        run_slots, loaded, each_run = _band_runs(ctx, match, g, scratch)

        def finish_run(oh: ir.Value, ow0: ir.Value, step: ir.Value, slot: ir.Value, pixels: int, _: range) -> None:
            _partners_and_store(ctx, epilogue, g, _Item(n, ob, oh, ow0, step), loaded(run_slots(slot, pixels)))

        each_run(oh0, oh_end, finish_run)


def _scratch_type(match: ConvMatch, g: ConvGeometry) -> ir.ArrayType:
    """A band item's accumulators: per_item x pixels vectors for each run of the band."""
    return ir.ArrayType(vector_of(g.lanes), match.band * g.runs * g.per_item * g.pixels)


def _band_runs(ctx: KernelContext, match: ConvMatch, g: ConvGeometry,
               scratch: ir.Value) -> tuple[Callable, Callable, Callable]:
    """(run_slots, loaded, each_run) of a band item whose accumulators are in `scratch`."""
    b, e = ctx.builder, ctx.elemental
    name = match.epilogue.contraction.out.name
    vec = vector_of(g.lanes)
    per_run = g.per_item * g.pixels  # scratch vectors per run

    def run_slots(slot: ir.Value, pixels: int) -> list[list[ir.Value]]:
        first = b.mul(slot, const_i64(per_run), flags=["nuw", "nsw"])
        return [[b.gep(scratch, [ZERO, b.add(first, const_i64(k * g.pixels + p), flags=["nuw", "nsw"])], inbounds=True)
                 for p in range(pixels)] for k in range(g.per_item)]

    def loaded(stored: list[list[ir.Value]]) -> list[list[ir.Value]]:
        """Register slots (allocas LLVM promotes) holding the run's scratch accumulators."""
        slots = [[e.alloca(vec, f"{name}.acc{k}_{p}") for p in range(len(row))] for k, row in enumerate(stored)]
        for block_slots, block_stored in zip(slots, stored):
            for slot, where in zip(block_slots, block_stored):
                b.store(b.load(where), slot)
        return slots

    def each_run(oh0: ir.Value, oh_end: ir.Value, body) -> None:
        """body(oh, ow0, step, scratch slot, pixels) for each run of the band's rows [oh0, oh_end)."""
        with for_range(b, oh0, oh_end, f"{name}.oh") as oh:
            with for_range(b, 0, g.runs, f"{name}.run") as run:
                ow0 = g.run_start_ir(b, run, f"{name}.ow0")
                step = b.add(b.mul(oh, const_i64(g.runs), flags=["nuw", "nsw"]), run, flags=["nuw", "nsw"])
                slot = b.sub(step, b.mul(oh0, const_i64(g.runs), flags=["nuw", "nsw"]), flags=["nuw", "nsw"])
                g.by_width(b, run, lambda pixels, runs: body(oh, ow0, step, slot, pixels, runs))

    return run_slots, loaded, each_run


def _accumulate_band(ctx: KernelContext, match: ConvMatch, g: ConvGeometry, scratch: ir.Value, n: ir.Value,
                     ob: ir.Value, oh0: ir.Value, oh_end: ir.Value) -> None:
    """The band item's accumulators in `scratch`: zeroed, then every input channel chunk by chunk."""
    conv = match.epilogue.contraction
    b = ctx.builder
    name = conv.out.name
    run_slots, loaded, each_run = _band_runs(ctx, match, g, scratch)
    chunks = ceil_div(g.group_channels, match.chunk)
    with for_range(b, 0, scratch.type.pointee.count, f"{name}.zero") as v:
        b.store(constant(vector_of(g.lanes), [0.0] * g.lanes), b.gep(scratch, [ZERO, v], inbounds=True))
    with for_range(b, 0, chunks, f"{name}.chunk") as chunk:
        c_lo = b.mul(chunk, const_i64(match.chunk), flags=["nuw", "nsw"])
        c_hi = b.add(c_lo, const_i64(match.chunk), flags=["nuw", "nsw"])
        c_hi = b.select(b.icmp_signed("<", c_hi, const_i64(g.group_channels)), c_hi, const_i64(g.group_channels))

        def accumulate_run(oh: ir.Value, ow0: ir.Value, step: ir.Value, slot: ir.Value, pixels: int,
                           runs: range) -> None:
            at = _Item(n, ob, oh, ow0, step)
            stored = run_slots(slot, pixels)
            slots = loaded(stored)  # registers for the chunk's accumulation, the scratch around it
            inside = None if g.columns_always_inside() else _run_inside(b, g, ow0, pixels)
            _accumulate_columns(ctx, conv, g, at, slots, inside, list(runs), (c_lo, c_hi))
            for block_slots, block_stored in zip(slots, stored):
                for slot_, where in zip(block_slots, block_stored):
                    b.store(b.load(slot_), where)

        each_run(oh0, oh_end, accumulate_run)


@dataclass(frozen=True)
class _Item:
    n: ir.Value
    ob: ir.Value
    oh: ir.Value
    ow0: ir.Value
    step: ir.Value  # oh * runs + run: the item's index among the items of its channel blocks


def _run_inside(b: ir.IRBuilder, g: ConvGeometry, ow0: ir.Value, pixels: int) -> ir.Value:
    """Every input column the run reads is inside the input (no padding)."""
    first = b.sub(b.mul(ow0, const_i64(g.strides[1])), const_i64(g.pad_low[1]))
    span = (pixels - 1) * g.strides[1] + (g.kw - 1) * g.dilation[1]
    low_ok = b.icmp_signed(">=", first, ZERO)
    high_ok = b.icmp_signed("<", b.add(first, const_i64(span)), const_i64(g.width))
    return b.and_(low_ok, high_ok, name="run.inside")


def _run_inside_at(g: ConvGeometry, run: int, pixels: int) -> bool:
    """_run_inside for run `run` (of `pixels` columns), at compile time."""
    first = g.run_start(run) * g.strides[1] - g.pad_low[1]
    return first >= 0 and first + (pixels - 1) * g.strides[1] + (g.kw - 1) * g.dilation[1] < g.width


def _conv_run(ctx: KernelContext, epilogue: Epilogue, g: ConvGeometry, at: _Item, pixels: int,
              inside: ir.Value | None, runs: list[int]) -> None:
    """Accumulate and store `pixels` output columns (compile-time count) of one item; where
    `inside` (the run reads no padding column) is known only at run time, the main conv
    accumulates in a variant without column checks and one with.

    The store follows the join of the two: emitted in each branch, LLVM sinks the two
    identical copies into the join before the SLP vectorizer runs, with a phi for every
    value that differs (the output columns among them), and SLP no longer sees the
    columns as neighbours."""
    b, e = ctx.builder, ctx.elemental
    conv = epilogue.contraction
    vec = vector_of(g.lanes)
    slots = [[e.alloca(vec, f"{conv.out.name}.acc{k}_{p}") for p in range(pixels)] for k in range(g.per_item)]
    for block_slots in slots:
        for slot in block_slots:
            b.store(constant(vec, [0.0] * g.lanes), slot)
    _accumulate_columns(ctx, conv, g, at, slots, inside, runs)
    _partners_and_store(ctx, epilogue, g, at, slots)


def _accumulate_columns(ctx: KernelContext, conv: Node, g: ConvGeometry, at: _Item, slots: list[list[ir.Value]],
                        inside: ir.Value | None, runs: list[int],
                        channels: tuple[ir.Value, ir.Value] | None = None) -> None:
    """_accumulate for an item of one of `runs` (the run indices of its width), whose columns
    may read padding (`inside` None: never): an unchecked variant for the runs inside the
    input and, for the others, static runs where few, else the run-time checked variant.
    Only the variants some run takes are emitted (a 7-wide map's runs all read padding):
    LLVM's time goes with the loop nests it is given."""
    pixels = len(slots[0])
    border_runs = [r for r in runs if not _run_inside_at(g, r, pixels)]

    def plain() -> None:
        _accumulate(ctx, conv, g, at, slots, checked=False, channels=channels)

    def border() -> None:
        if len(border_runs) <= MAX_STATIC_BORDER_RUNS:
            _static_border_runs(ctx, conv, g, at, slots, border_runs, channels)
        else:
            _accumulate(ctx, conv, g, at, slots, checked=True, channels=channels)

    if inside is None or not border_runs:
        plain()
    elif len(border_runs) == len(runs):
        border()
    else:
        branch(ctx.builder, inside, plain, border)


def _static_border_runs(ctx: KernelContext, conv: Node, g: ConvGeometry, at: _Item, slots: list[list[ir.Value]],
                        runs: list[int], channels: tuple[ir.Value, ir.Value] | None = None) -> None:
    """The runs that read padding columns (`runs`: every one of them), each accumulated with
    its columns known at compile time: a tap column's pixels that read padding take a zero
    vector, the others a plain load. The run-time checked variant (a clamped column and a
    select per input element) needs registers for its masks where the tap columns are a
    loop (AVX2): it spilled the accumulators, and resnet18's 3x3 convs took 2.2x as long on
    their first run of a row as on an inside one. Where they are unrolled (AVX-512) its
    clamps and selects cost less, but resnet18 still ran 1-3% faster with static runs (its
    3x3 convs 1-4%, A/B)."""
    b = ctx.builder
    first, rest = runs[0], runs[1:]
    if not rest:
        _accumulate(ctx, conv, g, at, slots, checked=True, channels=channels, static_ow0=g.run_start(first))
        return
    here = b.icmp_unsigned("==", at.ow0, const_i64(g.run_start(first)))
    branch(b, here, lambda: _accumulate(ctx, conv, g, at, slots, checked=True, channels=channels,
                                        static_ow0=g.run_start(first)),
           lambda: _static_border_runs(ctx, conv, g, at, slots, rest, channels))


def _partners_and_store(ctx: KernelContext, epilogue: Epilogue, g: ConvGeometry, at: _Item,
                        slots: list[list[ir.Value]]) -> None:
    b = ctx.builder
    for partner in epilogue.partners:
        partner_geometry = ConvGeometry.of_conv(partner, g.per_item, g.pixels)
        # the partner checks its columns unless never needed
        _accumulate(ctx, partner, partner_geometry, at, slots, not partner_geometry.columns_always_inside())
    for k, block_slots in enumerate(slots):
        block = _Item(at.n, b.add(at.ob, const_i64(k), flags=["nuw", "nsw"]), at.oh, at.ow0, at.step)
        _conv_store(ctx, epilogue, g, block, block_slots)


def _accumulate(ctx: KernelContext, conv: Node, g: ConvGeometry, at: _Item, slots: list[list[ir.Value]],
                checked: bool, channels: tuple[ir.Value, ir.Value] | None = None, static_ow0: int | None = None) -> None:
    """slots[k][p] += conv at channel block ob + k, output pixel ow0 + p of the item, over every tap
    and the input channels [lo, hi) of `channels` (all where None; the blocks of one item lie in
    one group, so they read the same inputs). `static_ow0`: the item's first column, known at
    compile time (_static_border_runs): one channel loop per tap column, each pixel's column a
    constant, and a zero vector for a column in the padding."""
    c_lo, c_hi = channels or (0, g.group_channels)
    b, e = ctx.builder, ctx.elemental
    source, wp = conv.inputs
    name = conv.out.name
    weights = ctx.params[id(wp)]
    pixels = len(slots[0])
    block_stride = g.group_channels * g.kh * g.kw * g.lanes  # packed weight elements per channel block
    blocks_per_group = g.blocks // g.groups
    channel_base = b.mul(b.udiv(at.ob, const_i64(blocks_per_group)), const_i64(g.group_channels), name=f"{name}.cbase")
    unrolled = _taps_unrolled(ctx.target, g, len(slots), pixels)

    def column(j: ir.Value | int, p: int) -> tuple[ir.Value, ir.Value | object | None]:
        """(input column of tap column j for pixel p, in-bounds or None); j a constant or the loop's"""
        if static_ow0 is not None:  # j is an int here: the column is a constant
            pos = (static_ow0 + p) * g.strides[1] + int(j) * g.dilation[1] - g.pad_low[1]
            return const_i64(pos), (None if 0 <= pos < g.width else PADDING)
        col = b.add(at.ow0, const_i64(p), flags=["nuw", "nsw"])
        offset = b.sub(b.mul(j, const_i64(g.dilation[1])), const_i64(g.pad_low[1]))
        pos = b.add(b.mul(col, const_i64(g.strides[1])), offset, name=f"{name}.w{p}")
        if not checked:
            return pos, None
        ok = b.icmp_unsigned("<", pos, const_i64(g.width))
        return b.select(ok, pos, ZERO), ok

    zero = constant(F32, 0.0)

    streams = (wp.type.size * wp.type.dtype.itemsize > PREFETCH_MIN_WEIGHT_BYTES
               and ctx.model_weight_bytes > PREFETCH_MIN_MODEL_WEIGHT_BYTES)
    # one channel loop of the item prefetches: that of the first tap row inside the input
    # (and of tap column 0 where the columns are a loop)
    first_row = b.sub(b.mul(at.oh, const_i64(g.strides[0])), const_i64(g.pad_low[0]))  # h at i = 0
    above = b.sub(ZERO, first_row)
    skipped = b.udiv(b.add(above, const_i64(g.dilation[0] - 1)), const_i64(g.dilation[0]))  # rows in the padding
    prefetch_row = b.select(b.icmp_signed("<", first_row, ZERO), skipped, ZERO, name=f"{name}.prefetch_row")

    def prefetching(i: ir.Value, j: int | ir.Value) -> ir.Value:
        on_row = b.icmp_unsigned("==", i, prefetch_row)
        return on_row if isinstance(j, int) else b.and_(on_row, b.icmp_unsigned("==", j, ZERO))

    def channels(h: ir.Value, i: ir.Value, taps: list[tuple[int | ir.Value, list[tuple[ir.Value, ir.Value | None]]]],
                 prefetches: bool = True) -> None:
        """For each input channel, every tap column of `taps` ((j, columns per pixel)) at row h (tap row i)."""
        # LLVM unrolls the inside runs' channel loop by 2 (2-3% faster 14x14 convs on Zen 3);
        # the border runs' loops, few runs but most of the loops, stay rolled: resnet18's LLVM
        # time 3% less, its kernels as fast (A/B)
        with for_range(b, c_lo, c_hi, f"{name}.c", unroll=not checked) as c:
            e.push_scope()
            if streams and prefetches:
                _prefetch_next_blocks(b, weights, g, at, len(slots), c, prefetching(i, taps[0][0]))
            channel = b.add(channel_base, c, name=f"{name}.ch")
            tap = b.mul(b.add(b.mul(b.add(b.mul(at.ob, const_i64(g.group_channels)), c), const_i64(g.kh)), i), const_i64(g.kw * g.lanes))
            accs = [[b.load(slot) for slot in block_slots] for block_slots in slots]
            for j, cols in taps:
                j_offset = const_i64(j * g.lanes) if isinstance(j, int) else b.mul(j, const_i64(g.lanes))
                ws = [load_vector(b, weights, b.add(b.add(tap, j_offset), const_i64(k * block_stride)), g.lanes,
                                  f"{name}.wv{k}") for k in range(len(slots))]
                for p in range(pixels):
                    pos, ok = cols[p]
                    if ok is PADDING:  # a compile-time padding column: the element is 0
                        x = constant(vector_of(g.lanes), [0.0] * g.lanes)
                    else:
                        xv = e.value(source, _input_index(source, at.n, channel, h, pos))
                        if ok is not None:
                            xv = b.select(ok, xv, zero)
                        x = splat(b, xv, g.lanes, f"{name}.x")
                    for k, w in enumerate(ws):
                        accs[k][p] = fma(b, x, w, accs[k][p], f"{name}.acc{k}_{p}")
            for block_slots, block_accs in zip(slots, accs):
                for slot, acc in zip(block_slots, block_accs):
                    b.store(acc, slot)
            e.pop_scope()


    if unrolled:  # every tap column in one channel loop; static ones are constants
        columns = [(j, [column(j if static_ow0 is not None else const_i64(j), p) for p in range(pixels)])
                   for j in range(g.kw)]
    with for_range(b, 0, g.kh, f"{name}.i") as i:
        h = b.add(b.mul(at.oh, const_i64(g.strides[0])), b.sub(b.mul(i, const_i64(g.dilation[0])), const_i64(g.pad_low[0])), name=f"{name}.h")
        row_ok = None if g.rows_always_inside() else b.icmp_unsigned("<", h, const_i64(g.height), name=f"{name}.h.inb")

        def row() -> None:
            if unrolled:
                channels(h, i, columns)
                return
            if static_ow0 is not None:  # a channel loop per tap column, its columns constants
                for j in range(g.kw):  # the first loop of the row prefetches
                    channels(h, i, [(j, [column(j, p) for p in range(pixels)])], prefetches=j == 0)
                return
            # one tap column at a time: its pixels' inputs are broadcast once each, not kept
            # live across the columns that share them (registers for them only on AVX-512)
            with for_range(b, 0, g.kw, f"{name}.j") as j:
                channels(h, i, [(j, [column(j, p) for p in range(pixels)])])

        if row_ok is None:
            row()
        else:
            with b.if_then(row_ok):
                row()


def _prefetches_rows(ctx: KernelContext, match: ConvMatch, g: ConvGeometry) -> bool:
    """Whether each item prefetches the input rows of the next output row (_prefetch_next_rows):
    a buffer input of at most PREFETCH_ROWS_MAX_CHANNELS channels (the stem of an image model,
    its input the model's, cold in DRAM at the start of a run)."""
    x = match.epilogue.contraction.inputs[0]
    return id(x) in ctx.params and g.in_channels <= PREFETCH_ROWS_MAX_CHANNELS and g.groups == 1


def _prefetch_next_rows(ctx: KernelContext, conv: Node, g: ConvGeometry, at: _Item) -> None:
    """Prefetch, for each input channel, the input rows output row oh + 1 reads and row oh does
    not (its last min(stride, KH) tap rows), at the item's columns: the next row's items then
    find them in L1. Rows and columns past the input name memory outside it, which a prefetch
    may (it never faults)."""
    b = ctx.builder
    x_ptr = ctx.params[id(conv.inputs[0])]
    first = b.sub(b.mul(at.ow0, const_i64(g.strides[1])), const_i64(g.pad_low[1]))
    span = (g.pixels - 1) * g.strides[1] + (g.kw - 1) * g.dilation[1] + 1  # input columns of a wide run
    next_first_row = b.sub(b.mul(b.add(at.oh, const_i64(1)), const_i64(g.strides[0])), const_i64(g.pad_low[0]))
    image = b.mul(at.n, const_i64(g.in_channels * g.height * g.width))
    for c in range(g.in_channels):
        for t in range(min(g.strides[0], g.kh)):
            h = b.add(next_first_row, const_i64((g.kh - 1 - t) * g.dilation[0]))
            row = b.add(image, b.add(const_i64(c * g.height * g.width), b.mul(h, const_i64(g.width))))
            for column in range(0, span + CACHE_LINE_FLOATS - 1, CACHE_LINE_FLOATS):
                prefetch(b, x_ptr, b.add(row, b.add(first, const_i64(min(column, span - 1)))), PREFETCH_ROWS_LOCALITY)


def _prefetch_next_blocks(b: ir.IRBuilder, weights: ir.Value, g: ConvGeometry, at: _Item, blocks: int,
                          c: ir.Value, on: ir.Value) -> None:
    """Where `on` (the item's prefetching channel loop), at input channel c: prefetch a few lines
    of the item's share of the packed weights of the `blocks` channel blocks after its own.
    The items of one set of blocks (g.oh * g.runs of them) take equal runs of the next set's
    cache lines, spread over the first channels of the loop. Past the last block it names
    memory beyond the weight, which a prefetch may (it never faults), so the address is not
    `inbounds`."""
    lines = ceil_div(blocks * g.group_channels * g.kh * g.kw * g.lanes, CACHE_LINE_FLOATS)
    per_item = ceil_div(lines, g.oh * g.runs)
    per_channel = ceil_div(per_item, g.group_channels)
    channels = ceil_div(per_item, per_channel)
    with b.if_then(b.and_(on, b.icmp_unsigned("<", c, const_i64(channels)))):
        next_blocks = b.mul(b.add(at.ob, const_i64(blocks)), const_i64(g.group_channels * g.kh * g.kw * g.lanes))
        first = b.add(b.mul(at.step, const_i64(per_item)), b.mul(c, const_i64(per_channel)))
        for k in range(per_channel):
            line = b.add(first, const_i64(k))
            prefetch(b, weights, b.add(next_blocks, b.mul(line, const_i64(CACHE_LINE_FLOATS))), PREFETCH_LOCALITY)


def _taps_unrolled(target: CpuTarget, g: ConvGeometry, blocks: int, pixels: int) -> bool:
    """Whether a run unrolls the tap columns of a row: its accumulators, weight vectors and
    every distinct input broadcast of the row's columns (pixels sharing an input across taps
    reuse it, so LLVM keeps it live) fit the target's registers, or broadcasts need none.
    Else the columns are a loop. On AVX2 the unrolled 3x3 convs of resnet18 at 56x56 spilled
    their accumulators: 4x slower than the loop."""
    per_vector = registers_per_vector(target, g.lanes)
    inputs = len({p * g.strides[1] + j * g.dilation[1] for p in range(pixels) for j in range(g.kw)})
    broadcasts = 0 if target.broadcast_operands else inputs
    return (blocks * pixels + blocks) * per_vector + broadcasts <= target.vector_registers


def _conv_store(ctx: KernelContext, epilogue: Epilogue, g: ConvGeometry, at: _Item, slots: list[ir.Value]) -> None:
    """The item's outputs of one channel block: pixels x lanes accumulators to [o][ow] rows.

    Where the block's L channels all exist, the accumulators are transposed in registers
    (_channel_rows) and a loop over the channels runs each channel's pixels through the
    vector epilogue as one row (_conv_store_transposed). The partial last block of a channel count that is not a multiple of L keeps
    a loop over its channels (_conv_store_by_channel), and so does a target whose
    registers are narrower than a block (AVX2, NEON): there the transposes of 16-lane
    vectors take several instructions each, and SLP left many channels scalar (resnet18's
    56x56 convs with --cpu znver3: 4% slower than the loop)."""
    b = ctx.builder
    o0 = b.mul(at.ob, const_i64(g.lanes), name=f"{epilogue.contraction.out.name}.o0", flags=["nuw", "nsw"])
    if ctx.target.register_lanes < g.lanes:
        _conv_store_by_channel(ctx, epilogue, g, at, slots, o0)
        return
    if g.out_channels % g.lanes == 0:
        _conv_store_transposed(ctx, epilogue, g, at, slots, o0)
        return
    full = b.icmp_signed("<=", b.add(o0, const_i64(g.lanes)), const_i64(g.out_channels))
    branch(b, full, lambda: _conv_store_transposed(ctx, epilogue, g, at, slots, o0),
           lambda: _conv_store_by_channel(ctx, epilogue, g, at, slots, o0))


def _root_row(b: ir.IRBuilder, g: ConvGeometry, at: _Item, o: ir.Value) -> ir.Value:
    """Linear index of output (n, o, oh, 0); the root is [N, O, OH, OW], or [N, O, OW] for
    a 1-d conv (OH = 1: the same linear index)."""
    return b.mul(b.add(b.mul(b.add(b.mul(at.n, const_i64(g.out_channels)), o), const_i64(g.oh)), at.oh), const_i64(g.ow))


def _conv_store_transposed(ctx: KernelContext, epilogue: Epilogue, g: ConvGeometry, at: _Item, slots: list[ir.Value],
                           o0: ir.Value) -> None:
    """The accumulators transposed in registers (_channel_rows), stored one after another to a
    stack scratch (row l: the pixels of the channel in lane l), then a loop over the block's
    channels, each row through the epilogue as one vector. Unrolled over the channels (one
    epilogue per channel, 32 per paired AVX-512 item) the store was ~40% of a conv body's
    IR, and printing and optimizing it a quarter of resnet18's x86-64-v4 codegen time (1.9
    -> 1.4 s of CPU), for the same run time (resnet18 and mobilenetv2, A/B: 0.98-1.00x)."""
    b = ctx.builder
    name = epilogue.contraction.out.name
    pixels = len(slots)
    accs = [b.load(slot, name=f"{name}.px{p}") for p, slot in enumerate(slots)]
    vectors = _channel_rows(b, ctx.target, accs, g.lanes, name)
    rows = len(vectors)

    def row(first: ir.Value, lane: ir.Value) -> ir.Value:
        loaded = load_vector(b, first, b.mul(lane, const_i64(rows), flags=["nuw", "nsw"]), rows, f"{name}.run")
        return loaded if pixels == rows else b.shuffle_vector(
            loaded, constant(loaded.type, None), constant(ir.VectorType(ir.IntType(32), pixels), list(range(pixels))),
            name=f"{name}.run")

    _store_channels(ctx, epilogue, g, at, o0, const_i64(g.lanes), vectors, row)


def _store_channels(ctx: KernelContext, epilogue: Epilogue, g: ConvGeometry, at: _Item, o0: ir.Value, count: ir.Value,
                    vectors: list[ir.Value], row: Callable[[ir.Value, ir.Value], ir.Value | list[ir.Value]]) -> None:
    """`vectors` to a stack scratch one after another, then a loop over the `count` channels
    o0 + od of the block, each channel's pixels `row(scratch, lane)` (channel o0+od sits in
    lane L-1-od) through the epilogue as one row."""
    b = ctx.builder
    name = epilogue.contraction.out.name
    width = vectors[0].type.count
    scratch = ctx.elemental.alloca(ir.ArrayType(F32, len(vectors) * width), f"{name}.scratch")
    first = b.gep(scratch, [ZERO, ZERO], inbounds=True)
    for v, vector in enumerate(vectors):
        store_vector(b, first, const_i64(v * width), vector, f"{name}.spill{v}")
    planar = epilogue.contraction.out.type.rank == 4
    # rolled: a few pixels a channel once per item, against the item's channels x taps of
    # FMAs; unrolled by LLVM, they were half of a band body's LLVM time (resnet18 portable:
    # LLVM CPU 4.21 -> 3.59 s rolled, kernels A/B 1.001)
    with for_range(b, 0, count, f"{name}.od", unroll=False) as od:
        o = b.add(o0, od, flags=["nuw", "nsw"])
        root_row = _root_row(b, g, at, o)
        lane = b.sub(const_i64(g.lanes - 1), od, name=f"{name}.lane")
        store_run(ctx, epilogue, row(first, lane), _pixel_index(b, at, o, planar), b.add(root_row, at.ow0),
                  frozenset({ctx.kernel.root.type.rank - 1}))


def _pixel_index(b: ir.IRBuilder, at: _Item, o: ir.Value, planar: bool) -> Callable[[int], list[ir.Value]]:
    """The root index of pixel ow0 + p of output channel o in the item's row."""
    def index_of(p: int) -> list[ir.Value]:
        ow = b.add(at.ow0, const_i64(p), flags=["nuw", "nsw"])
        return [at.n, o, at.oh, ow] if planar else [at.n, o, ow]
    return index_of


def _channel_rows(b: ir.IRBuilder, target: CpuTarget, accs: list[ir.Value], lanes: int, name: str) -> list[ir.Value]:
    """Transpose pixels x lanes (accs[p] lane l) into Q vectors which, laid one after another,
    hold lane l's pixels at l*Q .. l*Q + pixels - 1: a [lanes][Q] matrix of rows.

    The rows are padded to a power of two Q (at most `lanes`); each of log2(Q) steps
    interleaves vector i with vector i + n/2 element by element (two-source shuffles: one
    vpermt2ps each on AVX-512). 8 pixels of 16 lanes take 24 shuffles; the scratch of
    untransposed accumulators and per-channel scalar loads it replaces were vectorized
    across channels by LLVM as 8-lane scatters, 32 per item (the store was ~25% of
    resnet18's 7x7 stem and ~6% of its 56x56 convs)."""
    rows = 1
    while rows < len(accs):
        rows *= 2
    vec = accs[0].type
    vectors: list[ir.Value] = accs + [constant(vec, None)] * (rows - len(accs))
    half = lanes // 2
    i32 = ir.IntType(32)
    low = constant(ir.VectorType(i32, lanes), [k // 2 + (lanes if k % 2 else 0) for k in range(lanes)])
    high = constant(ir.VectorType(i32, lanes), [half + k // 2 + (lanes if k % 2 else 0) for k in range(lanes)])
    for _ in range(rows.bit_length() - 1):  # log2(rows) steps
        n = len(vectors)
        vectors = [b.shuffle_vector(vectors[i], vectors[i + n // 2], mask, name=f"{name}.t")
                   for i in range(n // 2) for mask in (low, high)]
    return [_opaque(b, target, v, name) for v in vectors]


def _opaque(b: ir.IRBuilder, target: CpuTarget, vector: ir.Value, name: str) -> ir.Value:
    """`vector` through an empty inline asm per register: no instruction, but LLVM cannot see
    through it. Without it InstCombine folds each lane read of the transposed vectors back
    into a read of an accumulator, and the SLP vectorizer rebuilds every channel's pixels
    from 8 accumulators with its own blends and permutes (k2 of resnet18: 48 vpermt2ps,
    77 blends, spilled accumulators in the FMA loop: 1.7x slower)."""
    piece = min(target.register_lanes, vector.type.count)
    constraint = "=w,0" if target.arch == "aarch64" else "=v,0"
    i32 = ir.IntType(32)
    parts = []
    for first in range(0, vector.type.count, piece):
        part_type = vector_of(piece)
        part = vector if piece == vector.type.count else b.shuffle_vector(
            vector, constant(vector.type, None), constant(ir.VectorType(i32, piece), list(range(first, first + piece))))
        barrier = ir.InlineAsm(ir.FunctionType(part_type, [part_type]), "", constraint)
        parts.append(b.call(barrier, [part], name=f"{name}.opaque"))
    while len(parts) > 1:  # neighbours back together: 2 x <p> -> <2p>
        width = parts[0].type.count
        both = constant(ir.VectorType(i32, 2 * width), list(range(2 * width)))
        parts = [b.shuffle_vector(lo, hi, both, name=f"{name}.cat") for lo, hi in zip(parts[::2], parts[1::2])]
    return parts[0]


def _conv_store_by_channel(ctx: KernelContext, epilogue: Epilogue, g: ConvGeometry, at: _Item, slots: list[ir.Value],
                           o0: ir.Value) -> None:
    b = ctx.builder
    name = epilogue.contraction.out.name
    lanes = g.lanes
    pixels = len(slots)
    accs = [b.load(slot, name=f"{name}.px{p}") for p, slot in enumerate(slots)]
    # the accumulators go to the scratch as whole vectors (scratch[p][lane]); each channel
    # reads its pixels from lane L-1-od of each (one vector store per pixel instead of L lane
    # extracts: resnet18 ~4% faster)
    left = b.sub(const_i64(g.out_channels), o0)
    count = b.select(b.icmp_signed("<", left, const_i64(lanes)), left, const_i64(lanes), name=f"{name}.count")

    def row(first: ir.Value, lane: ir.Value) -> list[ir.Value]:
        return [b.load(b.gep(first, [b.add(lane, const_i64(p * lanes))], inbounds=True), name=f"{name}.v")
                for p in range(pixels)]

    _store_channels(ctx, epilogue, g, at, o0, count, accs, row)


CONV_EMITTER = matched_body(_conv_match, lambda match: match.items(), _emit_conv)
