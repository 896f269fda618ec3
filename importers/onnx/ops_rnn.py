"""Recurrent ONNX ops (RNN, GRU, LSTM) unrolled over the static sequence length.

The input projection of every time step is one dot over the whole sequence
(X @ W^T + Wb, [S, B, gates*H]); each step then adds one recurrent dot
(H @ R^T + Rb) and elementwise gate arithmetic, so a sequence of length S
becomes S small dots per direction. Y is the per-step hidden states
concatenated along time (in original time order for the reverse direction).

sequence_lens is accepted only when known at compile time and equal to the
sequence length for every batch entry (variable lengths would need per-batch
masking and per-batch reversal): anything else is rejected by name.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from aot.ir import Value

from .context import Ctx, NodeArgs, op_registry

OPS, _ = op_registry()

# ONNX default (alpha, beta) per activation, lower-cased names; None: the activation takes no such value.
ACTIVATION_DEFAULTS: dict[str, tuple[float | None, float | None]] = {
    "relu": (None, None),
    "tanh": (None, None),
    "sigmoid": (None, None),
    "softsign": (None, None),
    "softplus": (None, None),
    "affine": (1.0, 0.0),
    "leakyrelu": (0.01, None),
    "thresholdedrelu": (1.0, None),
    "scaledtanh": (1.0, 1.0),
    "hardsigmoid": (0.2, 0.5),
    "elu": (1.0, None),
}


@dataclass(frozen=True)
class Activation:
    name: str  # lower-cased ONNX name
    alpha: float | None
    beta: float | None


@dataclass(frozen=True)
class Cell:
    """What differs between RNN, GRU and LSTM: the number of gates and the default activations."""

    gates: int
    activations: tuple[str, ...]  # per direction


CELLS = {
    "RNN": Cell(1, ("Tanh",)),
    "GRU": Cell(3, ("Sigmoid", "Tanh")),
    "LSTM": Cell(4, ("Sigmoid", "Tanh", "Tanh")),
}


def _activations(ctx: Ctx, a: NodeArgs, cell: Cell, directions: int) -> list[list[Activation]]:
    """Per direction, the cell's activations. alpha/beta lists are consumed in order by the
    activations that take them (onnxruntime's rule); the others use the ONNX defaults."""
    names = a.attr("activations", None)
    per_dir = len(cell.activations)
    if names is None:
        names = list(cell.activations) * directions
    if len(names) != per_dir * directions:
        raise ctx.error(f"activations lists {len(names)} functions, the cell needs {per_dir} per direction "
                        f"for {directions} direction(s)")
    alphas = list(a.attr("activation_alpha", []))
    betas = list(a.attr("activation_beta", []))
    result: list[Activation] = []
    for name in names:
        key = name.lower()
        if key not in ACTIVATION_DEFAULTS:
            raise ctx.unsupported(f"activation '{name}'")
        alpha, beta = ACTIVATION_DEFAULTS[key]
        if alpha is not None and alphas:
            alpha = float(alphas.pop(0))
        if beta is not None and betas:
            beta = float(betas.pop(0))
        result.append(Activation(key, alpha, beta))
    return [result[d * per_dir:(d + 1) * per_dir] for d in range(directions)]


def _apply(ctx: Ctx, act: Activation, x: Value) -> Value:
    if act.name == "tanh":
        return ctx.op("tanh", [x])
    if act.name == "sigmoid":
        return ctx.op("logistic", [x])
    if act.name == "relu":
        return ctx.op("max", [x, ctx.full(0.0, x.type)])
    if act.name == "softsign":  # x / (1 + |x|)
        return ctx.op("div", [x, ctx.binary_scalar("add", ctx.op("abs", [x]), 1.0)])
    if act.name == "softplus":  # max(x, 0) + log1p(exp(-|x|)), no overflow for large x
        tail = ctx.op("log1p", [ctx.op("exp", [ctx.op("neg", [ctx.op("abs", [x])])])])
        return ctx.op("add", [ctx.op("max", [x, ctx.full(0.0, x.type)]), tail])
    if act.name == "affine":  # alpha * x + beta
        return ctx.binary_scalar("add", ctx.binary_scalar("mul", x, act.alpha), act.beta)
    if act.name == "leakyrelu":
        negative = ctx.op("compare", [x, ctx.full(0.0, x.type)], direction="lt")
        return ctx.op("select", [negative, ctx.binary_scalar("mul", x, act.alpha), x])
    if act.name == "thresholdedrelu":
        above = ctx.op("compare", [x, ctx.full(act.alpha, x.type)], direction="gt")
        return ctx.op("select", [above, x, ctx.full(0.0, x.type)])
    if act.name == "scaledtanh":  # alpha * tanh(beta * x)
        return ctx.binary_scalar("mul", ctx.op("tanh", [ctx.binary_scalar("mul", x, act.beta)]), act.alpha)
    if act.name == "hardsigmoid":  # clamp(alpha * x + beta, 0, 1)
        y = ctx.binary_scalar("add", ctx.binary_scalar("mul", x, act.alpha), act.beta)
        return ctx.op("min", [ctx.op("max", [y, ctx.full(0.0, x.type)]), ctx.full(1.0, x.type)])
    if act.name == "elu":  # x if x >= 0 else alpha * (exp(x) - 1)
        negative = ctx.op("compare", [x, ctx.full(0.0, x.type)], direction="lt")
        return ctx.op("select", [negative, ctx.binary_scalar("mul", ctx.op("expm1", [x]), act.alpha), x])
    raise ctx.unsupported(f"activation '{act.name}'")


def _slice(ctx: Ctx, v: Value, axis: int, start: int, stop: int) -> Value:
    shape = v.type.shape
    starts = [0] * len(shape)
    limits = list(shape)
    starts[axis], limits[axis] = start, stop
    return ctx.op("slice", [v], start=tuple(starts), limit=tuple(limits), stride=(1,) * len(shape))


def _take(ctx: Ctx, v: Value, axis: int, index: int) -> Value:
    """v[..., index, ...] with `axis` dropped."""
    part = _slice(ctx, v, axis, index, index + 1)
    return ctx.reshape(part, v.type.shape[:axis] + v.type.shape[axis + 1:])


def _gate(ctx: Ctx, v: Value, index: int, hidden: int) -> Value:
    """Gate `index` of a [B, gates*H] pre-activation."""
    return _slice(ctx, v, 1, index * hidden, (index + 1) * hidden)


def _clip(ctx: Ctx, x: Value, clip: float | None) -> Value:
    if clip is None:
        return x
    return ctx.op("min", [ctx.op("max", [x, ctx.full(-clip, x.type)]), ctx.full(clip, x.type)])


def _recurrent(ctx: Ctx, h: Value, r: Value, rb: Value | None) -> Value:
    """H @ R^T (+ Rb): [B, H] x [G*H, H] -> [B, G*H]."""
    y = ctx.op("dot", [h, r], lhs_batch=(), rhs_batch=(), lhs_contract=(1,), rhs_contract=(1,))
    if rb is not None:
        y = ctx.op("add", [y, ctx.broadcast_in_dims(rb, y.type.shape, (1,))])
    return y


@dataclass
class Direction:
    """One direction's weights, sliced out of the [D, ...] operands, and its initial state."""

    w: Value  # [G*H, I]
    r: Value  # [G*H, H]
    wb: Value | None  # [G*H]
    rb: Value | None  # [G*H]
    p: Value | None  # [3*H] (LSTM peepholes i, o, f)
    h0: Value  # [B, H]
    c0: Value | None  # [B, H]
    acts: list[Activation]
    reverse: bool


def _rnn_step(ctx: Ctx, d: Direction, xw: Value, h: Value, c: Value | None, hidden: int, clip: float | None,
              op_type: str, linear_before_reset: bool) -> tuple[Value, Value | None]:
    """One time step: (H_t, C_t) from the input projection xw [B, G*H] and the previous state."""
    if op_type == "RNN":
        pre = ctx.op("add", [xw, _recurrent(ctx, h, d.r, d.rb)])
        return _apply(ctx, d.acts[0], _clip(ctx, pre, clip)), None
    if op_type == "GRU":
        f, g = d.acts
        if linear_before_reset:
            hr = _recurrent(ctx, h, d.r, d.rb)
        else:
            hr = _recurrent(ctx, h, _slice(ctx, d.r, 0, 0, 2 * hidden),
                            None if d.rb is None else _slice(ctx, d.rb, 0, 0, 2 * hidden))
        z = _apply(ctx, f, _clip(ctx, ctx.op("add", [_gate(ctx, xw, 0, hidden), _gate(ctx, hr, 0, hidden)]), clip))
        r = _apply(ctx, f, _clip(ctx, ctx.op("add", [_gate(ctx, xw, 1, hidden), _gate(ctx, hr, 1, hidden)]), clip))
        if linear_before_reset:  # r (.) (H R_h^T + Rb_h)
            recurrent_h = ctx.op("mul", [r, _gate(ctx, hr, 2, hidden)])
        else:  # (r (.) H) R_h^T + Rb_h
            recurrent_h = _recurrent(ctx, ctx.op("mul", [r, h]), _slice(ctx, d.r, 0, 2 * hidden, 3 * hidden),
                                     None if d.rb is None else _slice(ctx, d.rb, 0, 2 * hidden, 3 * hidden))
        candidate = _apply(ctx, g, _clip(ctx, ctx.op("add", [_gate(ctx, xw, 2, hidden), recurrent_h]), clip))
        # H = (1 - z) (.) candidate + z (.) H  ==  candidate + z (.) (H - candidate)
        new_h = ctx.op("add", [candidate, ctx.op("mul", [z, ctx.op("sub", [h, candidate])])])
        return new_h, None
    # LSTM, gates in i, o, f, c order; peepholes in i, o, f order
    f, g, act_h = d.acts
    pre = ctx.op("add", [xw, _recurrent(ctx, h, d.r, d.rb)])
    shape = h.type.shape

    def peephole(index: int, state: Value) -> Value:
        weight = ctx.broadcast_in_dims(_slice(ctx, d.p, 0, index * hidden, (index + 1) * hidden), shape, (1,))
        return ctx.op("mul", [weight, state])

    pre_i, pre_o, pre_f, pre_c = (_gate(ctx, pre, k, hidden) for k in range(4))
    if d.p is not None:
        pre_i = ctx.op("add", [pre_i, peephole(0, c)])
        pre_f = ctx.op("add", [pre_f, peephole(2, c)])
    i = _apply(ctx, f, _clip(ctx, pre_i, clip))
    forget = _apply(ctx, f, _clip(ctx, pre_f, clip))
    candidate = _apply(ctx, g, _clip(ctx, pre_c, clip))
    new_c = ctx.op("add", [ctx.op("mul", [forget, c]), ctx.op("mul", [i, candidate])])
    if d.p is not None:
        pre_o = ctx.op("add", [pre_o, peephole(1, new_c)])
    o = _apply(ctx, f, _clip(ctx, pre_o, clip))
    return ctx.op("mul", [o, _apply(ctx, act_h, new_c)]), new_c


def _check_sequence_lens(ctx: Ctx, lens: Value | None, seq: int) -> None:
    if lens is None:
        return
    array = ctx.const(lens)
    if array is None:
        raise ctx.unsupported("sequence_lens must be known at compile time")
    if np.any(array != seq):
        raise ctx.unsupported(f"sequence_lens {array.tolist()} shorter than the sequence length {seq} "
                              "(only full-length sequences are supported)")


def _state(ctx: Ctx, v: Value | None, d: int, layout: int, batch: int, hidden: int, like: Value) -> Value:
    """Direction d's [B, H] slice of an initial state ([D, B, H], or [B, D, H] with layout 1), zeros if omitted."""
    if v is None:
        return ctx.full(0.0, like.type.with_shape((batch, hidden)))
    return _take(ctx, v, 1 if layout else 0, d)


def _recurrent_op(ctx: Ctx, a: NodeArgs) -> list[Value]:
    op_type = a.node.op_type
    cell = CELLS[op_type]
    x, w, r = a.inputs[0], a.inputs[1], a.inputs[2]
    b, lens, init_h = a.input(3), a.input(4), a.input(5)
    init_c = a.input(6) if op_type == "LSTM" else None
    peepholes = a.input(7) if op_type == "LSTM" else None
    if not x.type.dtype.is_float:
        raise ctx.unsupported(f"{x.type.dtype} input (float types only)")
    layout = int(a.attr("layout", 0))
    if layout not in (0, 1):
        raise ctx.unsupported(f"layout {layout}")
    direction = a.attr("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.unsupported(f"direction '{direction}'")
    if op_type == "LSTM" and a.attr("input_forget", 0):
        raise ctx.unsupported("input_forget=1 (coupled input and forget gates)")
    directions = 2 if direction == "bidirectional" else 1
    gates = cell.gates
    if x.type.rank != 3 or w.type.rank != 3 or r.type.rank != 3:
        raise ctx.error(f"X, W and R must be 3-D, got {x.type}, {w.type}, {r.type}")
    if layout:
        x = ctx.transpose(x, (1, 0, 2))  # [B, S, I] -> [S, B, I]
    seq, batch, _ = x.type.shape
    hidden = int(a.attr("hidden_size", r.type.shape[-1]))
    if w.type.shape[0] != directions or w.type.shape[1] != gates * hidden or r.type.shape[1:] != (gates * hidden, hidden):
        raise ctx.error(f"W {w.type} / R {r.type} do not fit {directions} direction(s) of {gates} gate(s) "
                        f"with hidden_size {hidden}")
    _check_sequence_lens(ctx, lens, seq)
    state_shape = (batch, directions, hidden) if layout else (directions, batch, hidden)
    expected_shapes = (("B", b, (directions, 2 * gates * hidden)), ("initial_h", init_h, state_shape),
                       ("initial_c", init_c, state_shape), ("P", peepholes, (directions, 3 * hidden)))
    for what, v, shape in expected_shapes:
        if v is not None and v.type.shape != shape:
            raise ctx.error(f"{what} is {v.type}, expected shape {list(shape)}")
    clip = a.attr("clip", None)
    clip = None if clip is None else float(clip)
    linear_before_reset = bool(a.attr("linear_before_reset", 0))
    acts = _activations(ctx, a, cell, directions)

    ys: list[Value] = []
    hs: list[Value] = []
    cs: list[Value] = []
    for d in range(directions):
        bias = None if b is None else _take(ctx, b, 0, d)
        dir_args = Direction(
            w=_take(ctx, w, 0, d),
            r=_take(ctx, r, 0, d),
            wb=None if bias is None else _slice(ctx, bias, 0, 0, gates * hidden),
            rb=None if bias is None else _slice(ctx, bias, 0, gates * hidden, 2 * gates * hidden),
            p=None if peepholes is None else _take(ctx, peepholes, 0, d),
            h0=_state(ctx, init_h, d, layout, batch, hidden, x),
            c0=_state(ctx, init_c, d, layout, batch, hidden, x) if op_type == "LSTM" else None,
            acts=acts[d],
            reverse=direction == "reverse" or d == 1,
        )
        # the input projection of every step at once: [S, B, I] x [G*H, I] -> [S, B, G*H]
        xw = ctx.op("dot", [x, dir_args.w], lhs_batch=(), rhs_batch=(), lhs_contract=(2,), rhs_contract=(1,))
        if dir_args.wb is not None:
            xw = ctx.op("add", [xw, ctx.broadcast_in_dims(dir_args.wb, xw.type.shape, (2,))])
        h, c = dir_args.h0, dir_args.c0
        steps: dict[int, Value] = {}
        order = range(seq - 1, -1, -1) if dir_args.reverse else range(seq)
        for t in order:
            h, c = _rnn_step(ctx, dir_args, _take(ctx, xw, 0, t), h, c, hidden, clip, op_type, linear_before_reset)
            steps[t] = h
        ys.append(_stack(ctx, [steps[t] for t in range(seq)], 0))  # [S, B, H]
        hs.append(h)
        cs.append(c)

    y = _stack(ctx, ys, 1)  # [S, D, B, H]
    y_h = _stack(ctx, hs, 0)  # [D, B, H]
    y_c = _stack(ctx, cs, 0) if op_type == "LSTM" else None
    if layout:
        y = ctx.transpose(y, (2, 0, 1, 3))  # [B, S, D, H]
        y_h = ctx.transpose(y_h, (1, 0, 2))  # [B, D, H]
        y_c = None if y_c is None else ctx.transpose(y_c, (1, 0, 2))
    outputs = [y, y_h]
    if op_type == "LSTM":
        outputs.append(y_c)
    return outputs


def _stack(ctx: Ctx, parts: Sequence[Value], axis: int) -> Value:
    """Stack equal-shaped values along a new `axis`."""
    shape = parts[0].type.shape
    expanded = [ctx.reshape(p, shape[:axis] + (1,) + shape[axis:]) for p in parts]
    if len(expanded) == 1:
        return expanded[0]
    return ctx.op("concat", expanded, axis=axis)


OPS["RNN"] = _recurrent_op
OPS["GRU"] = _recurrent_op
OPS["LSTM"] = _recurrent_op
