"""Small decoder-cache models for the buffer-donation tests (tests/planning/test_donation.py,
tests/runtime/test_donation.py) and benchmarks/bench_donation.py: a cache `past_keys`
[B, H, S, D] gets T new rows `new_keys` at `position` and comes out as `present_keys`; an
attention-like read of the whole updated cache gives `attn` = softmax(q present^T) present.

How the update is written, `update=`:
- "scatter_nd": ScatterND with (b, h, position + t) index vectors, as hand-written exports do;
- "elements": ScatterElements along the sequence axis;
- "index_copy": the torch exporter's pattern for `past.index_copy(2, position + arange(T), new)`:
  Transpose, ScatterND on the leading axis, Transpose back.
`extra=`: "old_sum" adds an output that reads the old cache (ReduceSum of past_keys: a reader
that must run before the update); "delta" adds present_keys - past_keys (a reader of both the
old and the new cache, so the update cannot be done in place).
"""
from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from onnx_util import make_model, vinfo

F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _const(name: str, array: np.ndarray):
    return numpy_helper.from_array(np.asarray(array), name)


def cache_model(shape=(1, 2, 16, 8), steps: int = 1, update: str = "scatter_nd", extra: str | None = None,
                names=("past_keys", "present_keys")):
    b, h, s, d = shape
    past, present = names
    inits = [_const("steps", np.arange(steps, dtype=np.int64))]
    nodes = [helper.make_node("Add", ["steps", "position"], ["rows"])]  # [T]: position + t
    if update == "scatter_nd":
        base = np.zeros((b, h, steps, 3), np.int64)
        base[..., 0] = np.arange(b)[:, None, None]
        base[..., 1] = np.arange(h)[None, :, None]
        base[..., 2] = np.arange(steps)[None, None, :]
        inits += [_const("base", base), _const("axis2", np.array([0, 0, 1], np.int64))]
        nodes += [helper.make_node("Mul", ["position", "axis2"], ["shift"]),
                  helper.make_node("Add", ["base", "shift"], ["index"]),
                  helper.make_node("ScatterND", [past, "index", "new_keys"], [present])]
    elif update == "elements":
        inits += [_const("row_shape", np.array([1, 1, steps, 1], np.int64)),
                  _const("update_shape", np.array([b, h, steps, d], np.int64))]
        nodes += [helper.make_node("Reshape", ["rows", "row_shape"], ["rows4"]),
                  helper.make_node("Expand", ["rows4", "update_shape"], ["index"]),
                  helper.make_node("ScatterElements", [past, "index", "new_keys"], [present], axis=2)]
    elif update == "index_copy":
        inits += [_const("one", np.array([1], np.int64))]
        nodes += [helper.make_node("Unsqueeze", ["rows", "one"], ["index"]),
                  helper.make_node("Transpose", [past], ["past_t"], perm=[2, 1, 0, 3]),
                  helper.make_node("Transpose", ["new_keys"], ["new_t"], perm=[2, 1, 0, 3]),
                  helper.make_node("ScatterND", ["past_t", "index", "new_t"], ["present_t"]),
                  helper.make_node("Transpose", ["present_t"], [present], perm=[2, 1, 0, 3])]
    else:
        raise ValueError(f"unknown update {update!r}")
    nodes += [helper.make_node("Transpose", [present], ["keys_t"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "keys_t"], ["scores"]),
              helper.make_node("Softmax", ["scores"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", present], ["attn"])]
    outputs = [vinfo(present, F32, shape), vinfo("attn", F32, (b, h, steps, d))]
    if extra == "old_sum":
        nodes.append(helper.make_node("ReduceSum", [past], ["old_sum"], keepdims=0))
        outputs.append(vinfo("old_sum", F32, ()))
    elif extra == "delta":
        nodes.append(helper.make_node("Sub", [present, past], ["delta"]))
        outputs.append(vinfo("delta", F32, shape))
    elif extra is not None:
        raise ValueError(f"unknown extra {extra!r}")
    inputs = [vinfo(past, F32, shape), vinfo("position", I64, ()), vinfo("new_keys", F32, (b, h, steps, d)),
              vinfo("q", F32, (b, h, steps, d))]
    return make_model(nodes, inputs, outputs, inits, opset=18)


def cache_feeds(shape=(1, 2, 16, 8), steps: int = 1, position: int = 5, seed: int = 0,
                past: str = "past_keys") -> dict[str, np.ndarray]:
    b, h, s, d = shape
    rng = np.random.default_rng(seed)
    return {past: rng.standard_normal(shape).astype(np.float32), "position": np.array(position, np.int64),
            "new_keys": rng.standard_normal((b, h, steps, d)).astype(np.float32),
            "q": rng.standard_normal((b, h, steps, d)).astype(np.float32)}


def stacked_cache_model(layers: int = 2, shape=(1, 2, 16, 8), steps: int = 1):
    """A cache of `layers` layers, past_keys [L, B, H, S, D], written as torch exports a
    decoder's stacked static cache: per layer, Gather the layer, index_copy_ its T new rows
    (Transpose, ScatterND, Transpose back), read it (attn_i, from that layer's q_i), and stack
    the layers back (Unsqueeze, Concat) as present_keys. Inputs: past_keys, position, and
    per layer new_i [B, H, T, D] and q_i."""
    b, h, s, d = shape
    inits = [_const("steps", np.arange(steps, dtype=np.int64)), _const("one", np.array([1], np.int64)),
             _const("zero", np.array([0], np.int64))]
    nodes = [helper.make_node("Add", ["steps", "position"], ["rows"]),
             helper.make_node("Unsqueeze", ["rows", "one"], ["index"])]
    inputs = [vinfo("past_keys", F32, (layers, *shape)), vinfo("position", I64, ())]
    outputs = [vinfo("present_keys", F32, (layers, *shape))]
    stacked = []
    for i in range(layers):
        inits.append(_const(f"layer{i}", np.array(i, np.int64)))
        nodes += [helper.make_node("Gather", ["past_keys", f"layer{i}"], [f"past{i}"], axis=0),
                  helper.make_node("Transpose", [f"past{i}"], [f"past{i}_t"], perm=[2, 1, 0, 3]),
                  helper.make_node("Transpose", [f"new{i}"], [f"new{i}_t"], perm=[2, 1, 0, 3]),
                  helper.make_node("ScatterND", [f"past{i}_t", "index", f"new{i}_t"], [f"cache{i}_t"]),
                  helper.make_node("Transpose", [f"cache{i}_t"], [f"cache{i}"], perm=[2, 1, 0, 3]),
                  helper.make_node("Transpose", [f"cache{i}"], [f"keys{i}_t"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", [f"q{i}", f"keys{i}_t"], [f"scores{i}"]),
                  helper.make_node("Softmax", [f"scores{i}"], [f"probs{i}"], axis=-1),
                  helper.make_node("MatMul", [f"probs{i}", f"cache{i}"], [f"attn{i}"]),
                  helper.make_node("Unsqueeze", [f"cache{i}", "zero"], [f"stack{i}"])]
        stacked.append(f"stack{i}")
        inputs += [vinfo(f"new{i}", F32, (b, h, steps, d)), vinfo(f"q{i}", F32, (b, h, steps, d))]
        outputs.append(vinfo(f"attn{i}", F32, (b, h, steps, d)))
    nodes.append(helper.make_node("Concat", stacked, ["present_keys"], axis=0))
    return make_model(nodes, inputs, outputs, inits, opset=18)


def stacked_cache_feeds(layers: int = 2, shape=(1, 2, 16, 8), steps: int = 1, position: int = 5,
                        seed: int = 0) -> dict[str, np.ndarray]:
    b, h, s, d = shape
    rng = np.random.default_rng(seed)
    feeds = {"past_keys": rng.standard_normal((layers, *shape)).astype(np.float32),
             "position": np.array(position, np.int64)}
    for i in range(layers):
        feeds[f"new{i}"] = rng.standard_normal((b, h, steps, d)).astype(np.float32)
        feeds[f"q{i}"] = rng.standard_normal((b, h, steps, d)).astype(np.float32)
    return feeds
