"""Random ONNX graphs that are valid by construction (opset 18, float32).

A graph grows from one or two inputs: each step picks an op from OPS (weighted),
whose builder picks operands among the tensors made so far (so producers get
several consumers) and attributes that fit their shapes, and records the output
shapes it computed. The ops are the ones the pipeline fuses, tiles and plans:
elementwise and broadcast chains, reshape/transpose, concat/slice/pad/gather,
pools, reductions, softmax-like rows, conv and matmul with epilogues. Values stay
tame (exp of a clipped input, division by 1 + |y|), so a difference from
onnxruntime is a bug, not float overflow.

The same seed gives the same case on every machine.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 18
Shape = tuple[int, ...]


# the GPU code path as a fuzz target, by its matmul precision (NvptxTarget.matmul_precision):
# the plan's GPU kernels emulated on the host (aot/codegen/nvptx/emulate.py), not a CPU artifact
GPU_TARGETS = {"gpu": "fp32", "gpu-tf32": "tf32"}


@dataclass(frozen=True)
class FuzzCase:
    """One random graph and how to run it: inputs, the CPU to compile for, threads; or, with
    `gpu` a matmul precision ("fp32", "tf32"), through the GPU kernels instead (cpu and
    threads then unused)."""

    seed: int
    model: onnx.ModelProto
    cpu: str = "native"
    threads: int = 1
    gpu: str = ""

    def feeds(self) -> dict[str, np.ndarray]:
        return make_feeds(self.model, self.seed)

    @property
    def target(self) -> str:
        """What the case runs on, as a target name of case_for: a CPU, "gpu" or "gpu-tf32"."""
        if not self.gpu:
            return self.cpu
        return next(name for name, precision in GPU_TARGETS.items() if precision == self.gpu)


def case_for(seed: int, targets: list[str], max_ops: int = 8) -> FuzzCase:
    """The case of `seed`: its graph, and the target and threads of case_settings. A target
    is a CPU name (CpuTarget.from_name) or one of GPU_TARGETS."""
    target, threads = case_settings(seed, targets)
    if target in GPU_TARGETS:
        return FuzzCase(seed, random_model(seed, max_ops, gpu=True), gpu=GPU_TARGETS[target])
    return FuzzCase(seed, random_model(seed, max_ops), target, threads)


def case_settings(seed: int, targets: list[str]) -> tuple[str, int]:
    """(a target from `targets`, 1-3 threads), chosen by the seed."""
    rng = np.random.default_rng([seed, 1])
    return targets[int(rng.integers(len(targets)))], int(rng.integers(1, 4))


def make_feeds(model: onnx.ModelProto, seed: int) -> dict[str, np.ndarray]:
    """Standard-normal float32 inputs, a function of the seed and the inputs' names and shapes."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.input:
        shape = tuple(d.dim_value for d in value.type.tensor_type.shape.dim)
        feeds[value.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


@dataclass
class Tensor:
    name: str
    shape: Shape
    is_float: bool = True  # False: a bool mask, only Where reads it
    exact: bool = False  # equal in aot and onnxruntime to the bit: a rounding op or a compare may read it

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return math.prod(self.shape)


@dataclass
class GraphBuilder:
    rng: np.random.Generator
    max_elements: int = 12_000
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    inputs: list[Tensor] = field(default_factory=list)
    tensors: list[Tensor] = field(default_factory=list)
    uses: dict[str, int] = field(default_factory=dict)
    _counter: int = 0

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{hint}{self._counter}"

    def new_input(self, shape: Shape) -> Tensor:
        t = Tensor(self.fresh("x"), shape, exact=True)
        self.inputs.append(t)
        self.tensors.append(t)
        return t

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def ints(self, values: list[int] | tuple[int, ...]) -> str:
        return self.const(np.array(values, np.int64), "i")

    def weights(self, shape: Shape, fan_in: int) -> str:
        scale = 1.0 / math.sqrt(max(fan_in, 1))
        return self.const((self.rng.standard_normal(shape) * scale).astype(np.float32), "w")

    def pick(self, accept: Callable[[Tensor], bool] = lambda t: True) -> Tensor | None:
        """A random tensor made so far that `accept`s, newer ones likelier (chains grow deep)."""
        found = [t for t in self.tensors if t.is_float and accept(t)]
        if not found:
            return None
        weights = np.arange(1, len(found) + 1, dtype=np.float64)
        return found[int(self.rng.choice(len(found), p=weights / weights.sum()))]

    def node(self, op: str, inputs: list[str], shapes: list[Shape], is_float: bool = True, **attrs) -> list[Tensor]:
        """Append a node; its outputs (with the shapes the builder computed) join the pool."""
        exact = op in EXACT_OPS and all(self._exact(name) for name in inputs)
        outs = [Tensor(self.fresh("t"), shape, is_float, exact) for shape in shapes]
        self.nodes.append(helper.make_node(op, inputs, [t.name for t in outs], name=self.fresh(op), **attrs))
        for name in inputs:
            self.uses[name] = self.uses.get(name, 0) + 1
        self.tensors.extend(outs)
        return outs

    def _exact(self, name: str) -> bool:
        return any(t.name == name and t.exact for t in self.tensors) or any(i.name == name for i in self.initializers)

    def one(self, op: str, inputs: list[str], shape: Shape, is_float: bool = True, **attrs) -> Tensor:
        return self.node(op, inputs, [shape], is_float, **attrs)[0]

    def fits(self, shape: Shape) -> bool:
        return 0 < math.prod(shape) <= self.max_elements and all(d > 0 for d in shape)

    def randint(self, low: int, high: int) -> int:
        """Uniform in [low, high] (inclusive)."""
        return int(self.rng.integers(low, high + 1))

    def coin(self, p: float = 0.5) -> bool:
        return bool(self.rng.random() < p)


# ops whose result is exact when their inputs are: data movement, max/min, sign flips. Floor,
# Ceil and compares read only exact values, or a 1-ulp difference upstream flips them.
EXACT_OPS = frozenset({
    "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Concat", "Slice", "Pad", "Gather", "Expand", "Tile", "Split",
    "Relu", "Abs", "Neg", "Max", "Min", "MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "Floor", "Ceil", "Where",
})
# == op builders: each returns False when nothing in the pool fits =====================
UNARY = ("Relu", "Tanh", "Sigmoid", "Abs", "Neg", "Erf", "Softsign", "Softplus", "Sin", "Cos")
# periodic ops read a clipped input: sin(x) passes x's rounding error on undamped, and
# that error grows with |x| (fuzz seed 111860: cos of a sum near 1400, off by 5e-4 in
# aot and 1.4e-4 in onnxruntime against float64, both within float32 summation error)
PERIODIC = ("Sin", "Cos")


def _unary(g: GraphBuilder) -> bool:
    x = g.pick()
    if x is None:
        return False
    if x.exact and g.coin(0.15):
        g.one(("Floor", "Ceil")[g.randint(0, 1)], [x.name], x.shape)
        return True
    kind = g.randint(0, len(UNARY) + 5)
    if kind < len(UNARY) and UNARY[kind] in PERIODIC:
        clipped = g.one("Clip", [x.name, g.const(np.float32(-8)), g.const(np.float32(8))], x.shape)
        g.one(UNARY[kind], [clipped.name], x.shape)
    elif kind < len(UNARY):
        g.one(UNARY[kind], [x.name], x.shape)
    elif kind == len(UNARY):
        g.one("LeakyRelu", [x.name], x.shape, alpha=float(g.rng.uniform(0.01, 0.5)))
    elif kind == len(UNARY) + 1:
        g.one("Elu", [x.name], x.shape, alpha=float(g.rng.uniform(0.5, 1.5)))
    elif kind == len(UNARY) + 2:
        g.one("HardSigmoid", [x.name], x.shape, alpha=float(g.rng.uniform(0.1, 0.3)), beta=0.5)
    elif kind == len(UNARY) + 3:
        low = float(g.rng.uniform(-2, 0))
        g.one("Clip", [x.name, g.const(np.float32(low)), g.const(np.float32(low + g.rng.uniform(0.5, 4)))], x.shape)
    elif kind == len(UNARY) + 4:  # exp of a clipped input: no overflow
        clipped = g.one("Clip", [x.name, g.const(np.float32(-6)), g.const(np.float32(6))], x.shape)
        g.one("Exp", [clipped.name], x.shape)
    else:  # sqrt / log of a positive value
        positive = g.one("Add", [g.one("Abs", [x.name], x.shape).name, g.const(np.float32(0.5))], x.shape)
        g.one("Sqrt" if g.coin() else "Log", [positive.name], x.shape)
    return True


def _broadcastable(g: GraphBuilder, shape: Shape) -> Shape:
    """A shape that broadcasts against `shape`: some dims set to 1, some leading dims dropped."""
    dims = [1 if g.coin(0.35) else d for d in shape]
    drop = g.randint(0, len(dims)) if g.coin(0.3) else 0
    return tuple(dims[drop:])


def _binary(g: GraphBuilder) -> bool:
    a = g.pick()
    if a is None:
        return False
    other = g.pick(lambda t: t is not a and _broadcast_shape(a.shape, t.shape) == a.shape) if g.coin(0.6) else None
    if other is not None:
        b = other.name
    else:
        shape = _broadcastable(g, a.shape)
        b = g.const(g.rng.standard_normal(shape).astype(np.float32)) if g.coin() else g.new_input(shape).name
    op = ("Add", "Sub", "Mul", "Max", "Min", "Div", "Where")[g.randint(0, 6)]
    if op == "Where" and not (a.exact and g._exact(b)):
        op = "Max"
    lhs, rhs = (a.name, b) if g.coin(0.7) else (b, a.name)
    if op == "Div":  # divide by 1 + |y|: never near zero
        rhs = g.one("Add", [g.one("Abs", [rhs], _shape_of(g, rhs)).name, g.const(np.float32(1))], _shape_of(g, rhs)).name
    if op == "Where":
        cond = g.one("Greater", [lhs, rhs], a.shape, is_float=False)
        g.one("Where", [cond.name, lhs, rhs], a.shape)
        return True
    g.one(op, [lhs, rhs], a.shape)
    return True


def _shape_of(g: GraphBuilder, name: str) -> Shape:
    for t in g.tensors:
        if t.name == name:
            return t.shape
    for init in g.initializers:
        if init.name == name:
            return tuple(init.dims)
    raise KeyError(name)


def _broadcast_shape(a: Shape, b: Shape) -> Shape | None:
    out = []
    for x, y in zip(reversed((1,) * (len(b) - len(a)) + a), reversed((1,) * (len(a) - len(b)) + b)):
        if x != y and 1 not in (x, y):
            return None
        out.append(max(x, y))
    return tuple(reversed(out))


def _factor_shape(g: GraphBuilder, size: int, rank: int) -> Shape:
    dims = []
    rest = size
    for _ in range(rank - 1):
        divisors = [d for d in range(1, rest + 1) if rest % d == 0]
        d = divisors[g.randint(0, len(divisors) - 1)]
        dims.append(d)
        rest //= d
    dims.append(rest)
    g.rng.shuffle(dims)
    return tuple(dims)


def _reshape(g: GraphBuilder) -> bool:
    x = g.pick()
    if x is None:
        return False
    shape = _factor_shape(g, x.size, g.randint(1, 4))
    written = list(shape)
    if g.coin(0.3):
        written[g.randint(0, len(written) - 1)] = -1
    g.one("Reshape", [x.name, g.ints(written)], shape)
    return True


def _transpose(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 2)
    if x is None:
        return False
    perm = [int(p) for p in g.rng.permutation(x.rank)]
    g.one("Transpose", [x.name], tuple(x.shape[p] for p in perm), perm=perm)
    return True


def _unsqueeze_squeeze(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank <= 4)
    if x is None:
        return False
    ones = [i for i, d in enumerate(x.shape) if d == 1]
    if ones and g.coin():
        axis = ones[g.randint(0, len(ones) - 1)]
        g.one("Squeeze", [x.name, g.ints([axis])], tuple(d for i, d in enumerate(x.shape) if i != axis))
        return True
    axis = g.randint(0, x.rank)
    g.one("Unsqueeze", [x.name, g.ints([axis])], x.shape[:axis] + (1,) + x.shape[axis:])
    return True


def _concat(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    axis = g.randint(0, x.rank - 1)
    parts = [x]
    for _ in range(g.randint(1, 3)):
        same = g.pick(lambda t: t.rank == x.rank and all(a == b for i, (a, b) in enumerate(zip(t.shape, x.shape)) if i != axis))
        if same is not None and g.coin(0.6):
            parts.append(same)
        else:  # a sibling computed from x: a producer with several consumers, as SPP's pools
            parts.append(g.one(("Relu", "Tanh", "Neg", "Sigmoid")[g.randint(0, 3)], [x.name], x.shape))
    if g.coin(0.3):
        g.rng.shuffle(parts)
    shape = list(x.shape)
    shape[axis] = sum(p.shape[axis] for p in parts)
    if not g.fits(tuple(shape)):
        return False
    g.one("Concat", [p.name for p in parts], tuple(shape), axis=axis - x.rank if g.coin(0.3) else axis)
    return True


def _slice(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1 and max(t.shape) > 1)
    if x is None:
        return False
    axes = [a for a in range(x.rank) if g.coin(0.6)] or [g.randint(0, x.rank - 1)]
    starts, ends, steps, shape = [], [], [], list(x.shape)
    for a in axes:
        n = x.shape[a]
        step = (1, 1, 1, 2, 3, -1, -2)[g.randint(0, 6)]
        lo, hi = sorted((g.randint(0, n - 1), g.randint(0, n - 1)))
        if step > 0:
            start, end = lo, hi + 1
            count = len(range(start, end, step))
        else:
            start, end = hi, lo - 1
            count = len(range(start, end, step))
            if end < 0:
                end = -n - 1  # "before the first element": -1 would mean the last
        if g.coin(0.25) and step > 0:
            end = n + g.randint(0, 5)  # past the end: clamped
            count = len(range(start, n, step))
        starts.append(start - n if g.coin(0.2) else start)
        ends.append(end)
        steps.append(step)
        shape[a] = count
    if 0 in shape:
        return False
    g.one("Slice", [x.name, g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)], tuple(shape))
    return True


def _pad(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    mode = ("constant", "constant", "reflect", "edge")[g.randint(0, 3)]
    pads_low, pads_high = [], []
    for d in x.shape:
        limit = d - 1 if mode == "reflect" else 3
        pads_low.append(g.randint(0, min(limit, 3)) if g.coin(0.5) else 0)
        pads_high.append(g.randint(0, min(limit, 3)) if g.coin(0.5) else 0)
    shape = tuple(d + lo + hi for d, lo, hi in zip(x.shape, pads_low, pads_high))
    if not g.fits(shape):
        return False
    inputs = [x.name, g.ints(pads_low + pads_high)]
    if mode == "constant" and g.coin():
        inputs.append(g.const(np.float32(g.rng.uniform(-2, 2))))
    g.one("Pad", inputs, shape, mode=mode)
    return True


def _gather(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    axis = g.randint(0, x.rank - 1)
    n = x.shape[axis]
    index_shape = _factor_shape(g, g.randint(1, 6), g.randint(0, 2)) if g.coin(0.8) else ()
    indices = g.rng.integers(-n, n, size=index_shape).astype(np.int64)
    shape = x.shape[:axis] + index_shape + x.shape[axis + 1:]
    if not g.fits(shape):
        return False
    g.one("Gather", [x.name, g.const(indices, "idx")], shape, axis=axis)
    return True


def _expand_tile(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1 and t.size <= 600)
    if x is None:
        return False
    if g.coin():
        reps = [g.randint(1, 3) for _ in x.shape]
        shape = tuple(d * r for d, r in zip(x.shape, reps))
        if not g.fits(shape):
            return False
        g.one("Tile", [x.name, g.ints(reps)], shape)
        return True
    target = tuple(g.randint(2, 5) if d == 1 else d for d in x.shape)
    if g.coin(0.3):
        target = (g.randint(1, 3),) + target
    if not g.fits(target):
        return False
    g.one("Expand", [x.name, g.ints(list(target))], target)
    return True


def _split(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1 and max(t.shape) >= 2)
    if x is None:
        return False
    axes = [a for a in range(x.rank) if x.shape[a] >= 2]
    axis = axes[g.randint(0, len(axes) - 1)]
    n = x.shape[axis]
    cuts = sorted(set(int(c) for c in g.rng.integers(1, n, size=g.randint(1, min(3, n - 1)))))
    sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n])]
    shapes = [x.shape[:axis] + (s,) + x.shape[axis + 1:] for s in sizes]
    g.node("Split", [x.name, g.ints(sizes)], shapes, axis=axis)
    return True


def _pool(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank in (3, 4) and min(t.shape[2:]) >= 2)
    if x is None:
        return False
    spatial = x.shape[2:]
    if g.coin(0.15):
        g.one("GlobalAveragePool" if g.coin() else "GlobalMaxPool", [x.name], x.shape[:2] + (1,) * len(spatial))
        return True
    op = "MaxPool" if g.coin(0.6) else "AveragePool"
    kernel, strides, dilations, pads_low, pads_high, out = [], [], [], [], [], []
    ceil_mode = g.coin(0.2)
    for d in spatial:
        k = g.randint(1, min(d, 13))
        dil = g.randint(1, 2) if op == "MaxPool" and g.coin(0.2) else 1
        if (k - 1) * dil + 1 > d + 2 * (k // 2):
            dil = 1
        s = g.randint(1, 3) if g.coin(0.5) else 1
        low = g.randint(0, (k - 1) // 2 + (k % 2 == 0)) if g.coin(0.6) else 0
        low = min(low, k - 1)
        high = min(g.randint(0, max(k - 1, 0)) if g.coin(0.3) else low, k - 1)
        span = d + low + high - ((k - 1) * dil + 1)
        if span < 0:
            return False
        count = (math.ceil(span / s) if ceil_mode else span // s) + 1
        if ceil_mode and (count - 1) * s >= d + low:
            return False  # the last window would start in the high padding: exporters disagree on it
        kernel.append(k)
        strides.append(s)
        dilations.append(dil)
        pads_low.append(low)
        pads_high.append(high)
        out.append(count)
    attrs = dict(kernel_shape=kernel, strides=strides, pads=pads_low + pads_high, ceil_mode=int(ceil_mode))
    if op == "MaxPool":
        attrs["dilations"] = dilations
    else:
        attrs["count_include_pad"] = int(g.coin(0.3))
    g.one(op, [x.name], x.shape[:2] + tuple(out), **attrs)
    return True


REDUCE = ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare")


def _reduce(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    op = REDUCE[g.randint(0, len(REDUCE) - 1)]
    axes = sorted(a for a in range(x.rank) if g.coin(0.4)) or [g.randint(0, x.rank - 1)]
    keep = g.coin()
    shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape)) if keep else tuple(d for i, d in enumerate(x.shape) if i not in axes)
    source = x.name
    if op == "ReduceLogSumExp":
        source = g.one("Clip", [x.name, g.const(np.float32(-6)), g.const(np.float32(6))], x.shape).name
    written = [a - x.rank if g.coin(0.3) else a for a in axes]
    g.one(op, [source, g.ints(written)], shape, keepdims=int(keep))
    return True


def _softmax(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    axis = g.randint(-x.rank, x.rank - 1)
    g.one(("Softmax", "LogSoftmax")[g.randint(0, 1)], [x.name], x.shape, axis=axis)
    return True


def _normalize(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 2)
    if x is None:
        return False
    if g.coin():
        axis = g.randint(1, x.rank - 1)
        norm = x.shape[axis:]
        scale = g.const((1 + 0.2 * g.rng.standard_normal(norm)).astype(np.float32))
        bias = g.const(g.rng.standard_normal(norm).astype(np.float32))
        g.one("LayerNormalization", [x.name, scale, bias], x.shape, axis=axis, epsilon=1e-5)
        return True
    c = x.shape[1]
    params = [(1 + 0.2 * g.rng.standard_normal(c)).astype(np.float32), g.rng.standard_normal(c).astype(np.float32),
              (0.3 * g.rng.standard_normal(c)).astype(np.float32), g.rng.uniform(0.5, 2, c).astype(np.float32)]
    g.one("BatchNormalization", [x.name, *(g.const(p) for p in params)], x.shape, epsilon=1e-5)
    return True


def _conv(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank in (3, 4) and t.shape[1] <= 64)
    if x is None:
        return False
    c = x.shape[1]
    spatial = x.shape[2:]
    shape_kind = g.randint(0, 3)
    groups = c if shape_kind == 0 else 1
    if shape_kind == 1:
        divisors = [d for d in range(2, c + 1) if c % d == 0]
        groups = divisors[g.randint(0, len(divisors) - 1)] if divisors else 1
    per_group_out = g.randint(1, 3) if groups == c else g.randint(1, 24) // max(groups // 2, 1) or 1
    out_channels = groups * per_group_out
    kernel, strides, dilations, pads, out = [], [], [], [], []
    for d in spatial:
        k = 1 if shape_kind == 3 else g.randint(1, min(d + 2, 7))
        dil = 2 if g.coin(0.15) and k > 1 else 1
        s = g.randint(1, 2) if g.coin(0.4) else 1
        p = g.randint(0, k - 1) if g.coin(0.6) else 0
        span = d + 2 * p - ((k - 1) * dil + 1)
        if span < 0:
            return False
        kernel.append(k)
        strides.append(s)
        dilations.append(dil)
        pads.append(p)
        out.append(span // s + 1)
    shape = (x.shape[0], out_channels, *out)
    if not g.fits(shape):
        return False
    fan_in = (c // groups) * math.prod(kernel)
    inputs = [x.name, g.weights((out_channels, c // groups, *kernel), fan_in)]
    if g.coin(0.7):
        inputs.append(g.const((0.1 * g.rng.standard_normal(out_channels)).astype(np.float32)))
    conv = g.one("Conv", inputs, shape, kernel_shape=kernel, strides=strides, dilations=dilations, pads=pads + pads, group=groups)
    epilogue = g.randint(0, 3)  # as networks write them: ReLU, sigmoid, ReLU6, or none
    if epilogue == 0:
        g.one("Relu", [conv.name], shape)
    elif epilogue == 1:
        g.one("Sigmoid", [conv.name], shape)
    elif epilogue == 2:
        g.one("Clip", [conv.name, g.const(np.float32(0)), g.const(np.float32(6))], shape)
    return True


def _matmul(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1 and t.shape[-1] <= 256)
    if x is None:
        return False
    k = x.shape[-1]
    if x.rank == 2 and g.coin(0.3):  # Gemm with a bias and a transposed weight
        n = g.randint(1, 40)
        trans_b = int(g.coin())
        w = g.weights((n, k) if trans_b else (k, n), k)
        bias = g.const(g.rng.standard_normal(_broadcastable(g, (x.shape[0], n))).astype(np.float32))
        g.one("Gemm", [x.name, w, bias], (x.shape[0], n), transB=trans_b, alpha=float(g.rng.uniform(0.5, 1.5)))
        return True
    other = g.pick(lambda t: t.rank >= 2 and t.shape[-2] == k and t is not x) if g.coin(0.3) else None
    if other is not None:
        batch = _broadcast_shape(x.shape[:-2], other.shape[:-2])
        if batch is None or x.rank == 1:
            return False
        shape = batch + (x.shape[-2], other.shape[-1])
        rhs = other.name
    else:
        n = g.randint(1, 48)
        rhs = g.weights((k, n), k)
        shape = x.shape[:-1] + (n,)
    if not g.fits(shape):
        return False
    out = g.one("MatMul", [x.name, rhs], shape)
    if g.coin(0.5):
        bias = g.const((0.1 * g.rng.standard_normal(shape[-1:])).astype(np.float32))
        out = g.one("Add", [out.name, bias], shape)
    if g.coin(0.3):
        g.one(("Relu", "Tanh", "Sigmoid")[g.randint(0, 2)], [out.name], shape)
    return True


# (builder, weight): how often each kind of op is tried
OPS: tuple[tuple[Callable[[GraphBuilder], bool], float], ...] = (
    (_unary, 3.0), (_binary, 3.0), (_reshape, 1.0), (_transpose, 1.0), (_unsqueeze_squeeze, 0.5),
    (_concat, 1.5), (_slice, 1.0), (_pad, 0.8), (_gather, 0.6), (_expand_tile, 0.5), (_split, 0.5),
    (_pool, 1.5), (_reduce, 1.2), (_softmax, 0.8), (_normalize, 0.6), (_conv, 2.0), (_matmul, 1.5),
)


# == ops only GPU cases draw (random_model's `gpu`): the GPU bodies for sorting, scatter and
# i64 arg-reductions. CPU cases never draw them, so a CPU seed gives the graph it always gave.
def _top_k(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    axis = g.randint(0, x.rank - 1)
    k = g.randint(1, x.shape[axis])
    shape = x.shape[:axis] + (k,) + x.shape[axis + 1:]
    values, indices = g.node("TopK", [x.name, g.ints([k])], [shape, shape], axis=axis - x.rank if g.coin(0.3) else axis,
                             largest=int(g.coin()), sorted=1)
    indices.is_float = False
    values.exact = x.exact
    if x.exact:  # the indices agree only where the order does: ties break by index, both ways
        g.one("Cast", [indices.name], shape, to=TensorProto.FLOAT).exact = True
    return True


def _arg_reduce(g: GraphBuilder) -> bool:
    x = g.pick(lambda t: t.rank >= 1 and t.exact)  # an exact input: a 1-ulp difference moves an arg
    if x is None:
        return False
    axis = g.randint(0, x.rank - 1)
    keep = g.coin()
    shape = x.shape[:axis] + ((1,) if keep else ()) + x.shape[axis + 1:]
    index = g.one(("ArgMax", "ArgMin")[g.randint(0, 1)], [x.name], shape, is_float=False, axis=axis, keepdims=int(keep),
                  select_last_index=int(g.coin(0.3)))
    g.one("Cast", [index.name], shape, to=TensorProto.FLOAT).exact = True
    return True


SCATTER_REDUCTIONS = ("none", "add", "mul", "max", "min")


def _scatter_updates(g: GraphBuilder, shape: Shape) -> str:
    """Updates of `shape`: a tensor of the graph where one has it, else a constant."""
    found = g.pick(lambda t: t.shape == shape)
    return found.name if found is not None else g.const(g.rng.standard_normal(shape).astype(np.float32), "u")


def _scatter(g: GraphBuilder) -> bool:
    """ScatterElements or ScatterND with distinct targets: with repeats, `none` has no defined result."""
    x = g.pick(lambda t: t.rank >= 1)
    if x is None:
        return False
    reduction = SCATTER_REDUCTIONS[g.randint(0, len(SCATTER_REDUCTIONS) - 1)]
    if g.coin():
        axis = g.randint(0, x.rank - 1)
        n = x.shape[axis]
        shape = tuple(g.randint(1, n) if d == axis else g.randint(1, dim) for d, dim in enumerate(x.shape))
        fibers = math.prod(shape) // shape[axis]
        picks = np.stack([g.rng.permutation(n)[:shape[axis]] for _ in range(fibers)])  # distinct along each fiber
        picks = np.moveaxis(picks.reshape(*(s for d, s in enumerate(shape) if d != axis), shape[axis]), -1, axis)
        indices = np.where(g.rng.random(shape) < 0.3, picks - n, picks).astype(np.int64)
        g.one("ScatterElements", [x.name, g.const(indices, "idx"), _scatter_updates(g, shape)], x.shape, axis=axis,
              reduction=reduction)
        return True
    k = g.randint(1, x.rank)
    indexed = x.shape[:k]
    count = g.randint(1, min(math.prod(indexed), 12))
    flat = g.rng.permutation(math.prod(indexed))[:count]
    vectors = np.stack(np.unravel_index(flat, indexed), axis=-1).astype(np.int64)
    batch = (count,) if g.coin() or count % 2 else (2, count // 2)
    updates_shape = batch + x.shape[k:]
    if not g.fits(updates_shape):
        return False
    indices = g.const(vectors.reshape(*batch, k), "idx")
    g.one("ScatterND", [x.name, indices, _scatter_updates(g, updates_shape)], x.shape, reduction=reduction)
    return True


GPU_OPS: tuple[tuple[Callable[[GraphBuilder], bool], float], ...] = (
    *OPS, (_top_k, 1.0), (_arg_reduce, 0.6), (_scatter, 1.0),
)


def _input_shape(g: GraphBuilder) -> Shape:
    rank = (1, 2, 3, 4, 4, 4)[g.randint(0, 5)]
    if rank == 4:  # an image: small batch, some channels, a plane
        shape = (g.randint(1, 2), g.randint(1, 24), g.randint(1, 20), g.randint(1, 20))
    else:
        shape = tuple(g.randint(1, 12) for _ in range(rank))
    return shape if g.fits(shape) else (g.randint(1, 16),)


def random_model(seed: int, max_ops: int = 8, gpu: bool = False) -> onnx.ModelProto:
    """A random valid graph of 1..max_ops op builders (a builder may emit a few nodes);
    with `gpu`, drawn from GPU_OPS (OPS and the GPU-only builders) instead of OPS."""
    g = GraphBuilder(np.random.default_rng(seed))
    for _ in range(g.randint(1, 2)):
        g.new_input(_input_shape(g))
    table = GPU_OPS if gpu else OPS
    builders = [b for b, _ in table]
    weights = np.array([w for _, w in table])
    target = g.randint(1, max_ops)
    built = attempts = 0
    while built < target and attempts < 8 * max_ops:
        attempts += 1
        if builders[int(g.rng.choice(len(builders), p=weights / weights.sum()))](g):
            built += 1
    return _finish(g, seed)


def _finish(g: GraphBuilder, seed: int) -> onnx.ModelProto:
    produced = [t for t in g.tensors if t not in g.inputs]
    if not produced:  # nothing fitted: one op so the graph is not empty
        x = g.inputs[0]
        produced = [g.one("Relu", [x.name], x.shape)]
    leaves = [t for t in produced if t.is_float and g.uses.get(t.name, 0) == 0]
    outputs = leaves[-3:] or [t for t in produced if t.is_float][-1:]
    if g.coin(0.3):  # an intermediate value as an output too: it must be kept and stored
        extra = produced[g.randint(0, len(produced) - 1)]
        if extra.is_float and extra not in outputs:
            outputs.append(extra)
    used = {name for node in g.nodes for name in node.input}
    inputs = [t for t in g.inputs if t.name in used]
    initializers = [init for init in g.initializers if init.name in used]  # a builder that gave up left some
    graph = helper.make_graph(
        g.nodes, f"fuzz{seed}",
        [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.shape)) for t in inputs],
        [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, list(t.shape)) for t in outputs],
        initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="aot.fuzz")
    model.ir_version = 8
    return model
