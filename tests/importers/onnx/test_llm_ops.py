"""The ONNX opset-23 LLM ops: RotaryEmbedding, RMSNormalization and Attention (23, 24).

Each attribute combination is imported, run by the reference interpreter and
compared with onnxruntime; where onnxruntime departs from the specification
(a position_ids batch of 1, a mask shorter than the keys, bfloat16 Mul) with
onnx's reference evaluator. A decoder block goes through the whole compiler
and the C runtime, and an attention graph's GPU kernels through the emulator.
"""
from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.driver import compile_model
from aot.errors import ModelError, RunError, UnsupportedError
from aot.importers.onnx import import_onnx
from aot.interpreter import interpret
from aot.runtime.session import Session
from gpu_util import emulated_matches_onnxruntime
from onnx_util import check_against_reference, check_node, compare, make_model, node_model, ort, vinfo

F32 = TensorProto.FLOAT


def randn(rng, *shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# -- RotaryEmbedding ------------------------------------------------------------------
def _rope_feeds(rng, three_d, rotary_dim, with_positions, dtype=np.float32):
    batch, heads, seq, head_size = 2, 3, 5, 8
    half = (rotary_dim or head_size) // 2
    x = randn(rng, batch, seq, heads * head_size, dtype=dtype) if three_d else randn(rng, batch, heads, seq, head_size, dtype=dtype)
    if with_positions:
        positions = rng.integers(0, 11, (batch, seq)).astype(np.int64)
        return {"x": x, "cos": randn(rng, 11, half, dtype=dtype), "sin": randn(rng, 11, half, dtype=dtype), "pos": positions}
    return {"x": x, "cos": randn(rng, batch, seq, half, dtype=dtype), "sin": randn(rng, batch, seq, half, dtype=dtype)}


def _rope_attrs(three_d, rotary_dim, interleaved):
    attrs = {"interleaved": interleaved}
    if rotary_dim:
        attrs["rotary_embedding_dim"] = rotary_dim
    if three_d:
        attrs["num_heads"] = 3
    return attrs


@pytest.mark.parametrize("three_d, rotary_dim, with_positions, interleaved",
                         list(itertools.product([False, True], [0, 4], [True, False], [0, 1])))
def test_rotary_embedding_matches_onnxruntime(rng, three_d, rotary_dim, with_positions, interleaved):
    feeds = _rope_feeds(rng, three_d, rotary_dim, with_positions)
    check_node("RotaryEmbedding", list(feeds), feeds, attrs=_rope_attrs(three_d, rotary_dim, interleaved), opset=23)


def test_rotary_embedding_float16(rng):
    feeds = _rope_feeds(rng, False, 0, True, dtype=np.float16)
    check_node("RotaryEmbedding", list(feeds), feeds, attrs={"interleaved": 1}, opset=23, rtol=1e-3, atol=1e-3)


def test_rotary_position_ids_broadcast_over_batch(rng):
    """position_ids [1, S] serve every batch row (the spec's numpy indexing; onnxruntime refuses it)."""
    feeds = _rope_feeds(rng, False, 0, True)
    feeds["pos"] = feeds["pos"][:1]
    check_against_reference(node_model("RotaryEmbedding", list(feeds), feeds, opset=23), feeds, rtol=1e-6, atol=1e-6)


def test_rotary_position_ids_gather_rows_at_run_time(rng):
    """A run-time position reads its cache row with a gather: O(batch * seq) rows, not a mask over the table."""
    feeds = _rope_feeds(rng, False, 0, True)
    graph = import_onnx(node_model("RotaryEmbedding", list(feeds), feeds, opset=23))
    assert sum(n.op == "gather" for n in graph.nodes) == 2
    # the only reductions are the range check's, over the positions
    assert all(n.inputs[0].type.shape == feeds["pos"].shape for n in graph.nodes if n.op == "reduce")


def test_rotary_position_id_out_of_range_fails_the_run(rng):
    feeds = _rope_feeds(rng, False, 0, True)
    feeds["pos"][1, 2] = 11
    graph = import_onnx(node_model("RotaryEmbedding", list(feeds), feeds, opset=23))
    with pytest.raises(RunError, match="RotaryEmbedding.*outside"):
        interpret(graph, feeds)


@pytest.mark.parametrize("attrs, cache_half, match", [
    ({}, 12, "num_heads"),
    ({"num_heads": 5}, 12, "not a multiple of num_heads"),
    ({"num_heads": 3, "rotary_embedding_dim": 5}, 12, "rotary_embedding_dim=5 must be even"),
    ({"num_heads": 3, "rotary_embedding_dim": 32}, 16, "at most the head size 24"),
    ({"num_heads": 3}, 8, "cos_cache's last dim is 8, not rotary_dim / 2 = 12"),
])
def test_rotary_refuses_malformed_nodes(rng, attrs, cache_half, match):
    feeds = {"x": randn(rng, 1, 4, 72), "cos": randn(rng, 1, 4, cache_half), "sin": randn(rng, 1, 4, cache_half)}
    node = helper.make_node("RotaryEmbedding", ["x", "cos", "sin"], ["y"], name="rope", **attrs)
    model = make_model([node], [vinfo(k, v) for k, v in feeds.items()], [vinfo("y", F32, (1, 4, 72))], opset=23)
    with pytest.raises(ModelError, match=f"node 'rope' \\(RotaryEmbedding.*{match}"):
        import_onnx(model)


# -- RMSNormalization -----------------------------------------------------------------
def _scale_shape(kind, x_shape, axis):
    normalized = x_shape[axis:]
    return {"normalized": normalized, "last": normalized[-1:], "leading_ones": (1,) * axis + normalized, "scalar": ()}[kind]


@pytest.mark.parametrize("dtype, stash_type", [(np.float32, None), (np.float16, None), (np.float64, None),
                                               (np.float32, 11), (np.float16, 1), (np.float64, 1)])
@pytest.mark.parametrize("axis", [-1, -2, 0])
@pytest.mark.parametrize("scale", ["normalized", "last", "leading_ones", "scalar"])
def test_rms_normalization_matches_onnxruntime(rng, dtype, stash_type, axis, scale):
    x = randn(rng, 2, 3, 7, dtype=dtype) * 3
    feeds = {"x": x, "s": randn(rng, *_scale_shape(scale, x.shape, axis % 3), dtype=dtype)}
    attrs = {"axis": axis, "epsilon": 1e-3} | ({} if stash_type is None else {"stash_type": stash_type})
    tol = 2e-3 if dtype == np.float16 else 1e-5
    check_node("RMSNormalization", ["x", "s"], feeds, attrs=attrs, opset=23, rtol=tol, atol=tol)


def test_rms_normalization_bfloat16(rng):
    """bfloat16 against onnx's reference (onnxruntime has no bfloat16 Mul); aot stashes in float32."""
    feeds = {"x": randn(rng, 2, 5, 16, dtype=ml_dtypes.bfloat16), "s": randn(rng, 16, dtype=ml_dtypes.bfloat16)}
    check_against_reference(node_model("RMSNormalization", ["x", "s"], feeds, opset=23), feeds, rtol=2e-2, atol=2e-2)


def test_rms_normalization_refuses_an_integer_stash_type(rng):
    feeds = {"x": randn(rng, 2, 8, dtype=np.float16), "s": randn(rng, 8, dtype=np.float16)}
    node = helper.make_node("RMSNormalization", ["x", "s"], ["y"], name="norm", stash_type=TensorProto.INT32)
    model = make_model([node], [vinfo(k, v) for k, v in feeds.items()], [vinfo("y", TensorProto.FLOAT16, (2, 8))], opset=23)
    with pytest.raises(UnsupportedError, match="node 'norm' \\(RMSNormalization.*stash_type=6"):
        import_onnx(model)


def test_rms_normalization_is_one_kernel(rng):
    """Square, mean, rsqrt and both multiplies fuse into one row kernel."""
    from aot.pipeline import run_pipeline

    model = node_model("RMSNormalization", ["x", "s"], {"x": randn(rng, 1, 7, 512)}, inits={"s": randn(rng, 512)}, opset=23)
    assert len(run_pipeline(import_onnx(model)).kernels) == 1


# -- Attention ------------------------------------------------------------------------
BATCH, Q_HEADS, SEQ, PAST, HEAD = 2, 4, 3, 2, 8


def _attention_model(feeds, attrs, opset=23, outputs=("y",), name="attn"):
    """One Attention node; `feeds` keys in input order (q, k, v, mask, past_k, past_v, nonpad), None-valued ones omitted."""
    order = ["q", "k", "v", "mask", "past_k", "past_v", "nonpad"]
    names = [k if feeds.get(k) is not None else "" for k in order]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("Attention", names, list(outputs), name=name, **attrs)
    inputs = [vinfo(k, v) for k, v in feeds.items() if v is not None]
    outs = [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None) for o in outputs if o]
    return make_model([node], inputs, outs, opset=opset)


def _attention_feeds(rng, *, three_d=False, kv_heads=Q_HEADS, past=False, mask=None, seq=SEQ, dtype=np.float32):
    total = seq + (PAST if past else 0)
    if three_d:
        q, k, v = randn(rng, BATCH, seq, Q_HEADS * HEAD), randn(rng, BATCH, seq, kv_heads * HEAD), randn(rng, BATCH, seq, kv_heads * HEAD)
    else:
        q, k, v = randn(rng, BATCH, Q_HEADS, seq, HEAD), randn(rng, BATCH, kv_heads, seq, HEAD), randn(rng, BATCH, kv_heads, seq, HEAD)
    masks = {None: None,
             "bool_2d": rng.random((seq, total)) > 0.3,
             "bool_3d_per_head": rng.random((Q_HEADS, seq, total)) > 0.3,
             "float_4d": randn(rng, BATCH, 1, seq, total)}
    feeds = {"q": q.astype(dtype), "k": k.astype(dtype), "v": v.astype(dtype), "mask": masks[mask]}
    if mask == "float_4d":
        feeds["mask"] = feeds["mask"].astype(dtype)
    if past:
        feeds["past_k"] = randn(rng, BATCH, kv_heads, PAST, HEAD, dtype=dtype)
        feeds["past_v"] = randn(rng, BATCH, kv_heads, PAST, HEAD, dtype=dtype)
    return feeds


def _present(feeds):
    return ("y", "present_k", "present_v") if "past_k" in feeds else ("y",)


def _run_both(model, feeds):
    feeds = {k: v for k, v in feeds.items() if v is not None}
    ours = interpret(import_onnx(model), feeds)
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    return ours, theirs


@pytest.mark.parametrize("three_d", [False, True], ids=["4d", "3d"])
@pytest.mark.parametrize("kv_heads", [Q_HEADS, 2, 1], ids=["mha", "gqa", "mqa"])
@pytest.mark.parametrize("past", [False, True], ids=["", "past"])
@pytest.mark.parametrize("mask", [None, "bool_2d", "bool_3d_per_head", "float_4d"])
@pytest.mark.parametrize("is_causal", [0, 1], ids=["", "causal"])
def test_attention_matches_onnxruntime(rng, three_d, kv_heads, past, mask, is_causal):
    feeds = _attention_feeds(rng, three_d=three_d, kv_heads=kv_heads, past=past, mask=mask)
    attrs = {"is_causal": is_causal} | ({"q_num_heads": Q_HEADS, "kv_num_heads": kv_heads} if three_d else {})
    ours, theirs = _run_both(_attention_model(feeds, attrs, outputs=_present(feeds)), feeds)
    for mine, ref in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(mine, ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("opset", [23, 24])
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("scale, softcap, precision", [(None, 0.0, None), (0.3, 0.0, None), (None, 1.5, None),
                                                        (0.3, 1.5, TensorProto.FLOAT), (None, 0.0, TensorProto.DOUBLE)])
def test_attention_score_options_match_onnxruntime(rng, opset, mode, scale, softcap, precision):
    """scale, softcap, softmax_precision and each qk_matmul_output_mode (mode 0 with a softcap: the raw product)."""
    feeds = _attention_feeds(rng, kv_heads=2, past=True, mask="bool_2d")
    feeds["q"] *= 3  # scores large enough for the softcap to bite
    attrs = {"is_causal": 1, "qk_matmul_output_mode": mode, "softcap": softcap}
    if scale is not None:
        attrs["scale"] = scale
    if precision is not None:
        attrs["softmax_precision"] = precision
    ours, theirs = _run_both(_attention_model(feeds, attrs, opset, ("y", "present_k", "present_v", "qk")), feeds)
    lowest = np.finfo(np.float32).min
    for mine, ref in zip(ours, theirs, strict=True):
        # onnxruntime writes a masked score as the lowest float where the spec has -inf
        np.testing.assert_allclose(mine, np.where(ref == lowest, -np.inf, ref), rtol=1e-5, atol=1e-5)


def test_attention_float16_gqa_with_past(rng):
    feeds = _attention_feeds(rng, kv_heads=2, past=True, mask="float_4d", dtype=np.float16)
    ours, theirs = _run_both(_attention_model(feeds, {"is_causal": 1}, outputs=_present(feeds)), feeds)
    for mine, ref in zip(ours, theirs, strict=True):
        assert mine.dtype == np.float16
        np.testing.assert_allclose(mine.astype(np.float32), ref.astype(np.float32), rtol=2e-3, atol=2e-3)


def test_attention_decode_step_over_a_static_cache(rng):
    """One new token (GQA, 8 over 2 heads) against a 33-slot cache, slots after its position masked out."""
    position, slots = 20, 33
    feeds = {"q": randn(rng, 1, 8, 1, 16), "k": randn(rng, 1, 2, slots, 16), "v": randn(rng, 1, 2, slots, 16),
             "mask": (np.arange(slots) <= position).reshape(1, 1, 1, slots)}
    ours, theirs = _run_both(_attention_model(feeds, {}), feeds)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)


def test_attention_nonpad_kv_seqlen(rng):
    """Opset 24's external cache: per-batch valid lengths, causal from each batch's frontier."""
    feeds = _attention_feeds(rng, kv_heads=2, seq=1) | {"k": randn(rng, BATCH, 2, 6, HEAD), "v": randn(rng, BATCH, 2, 6, HEAD)}
    feeds["nonpad"] = np.array([3, 6], np.int64)
    ours, theirs = _run_both(_attention_model(feeds, {"is_causal": 1}, opset=24), feeds)
    np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)


def test_attention_short_mask_is_padded_with_masked_keys(rng):
    """A mask shorter than past + new keys masks the missing ones (the spec; onnxruntime refuses it)."""
    feeds = _attention_feeds(rng, kv_heads=2, past=True)
    feeds["mask"] = rng.random((Q_HEADS, SEQ, SEQ + PAST - 2)) > 0.2
    model = _attention_model(feeds, {}, outputs=_present(feeds))
    check_against_reference(model, {k: v for k, v in feeds.items() if v is not None}, rtol=1e-5, atol=1e-5)


def test_attention_fully_masked_row_is_zero(rng):
    feeds = _attention_feeds(rng, mask="bool_2d")
    feeds["mask"][1] = False
    ours = interpret(import_onnx(_attention_model(feeds, {"qk_matmul_output_mode": 3}, outputs=("y", "", "", "qk"))), feeds)
    assert not np.isnan(ours[0]).any()
    assert (ours[0][:, :, 1] == 0).all() and (ours[1][:, :, 1] == 0).all()


def test_gqa_reads_each_kv_head_once(rng):
    """Grouped-query attention dots each kv head with its group of query heads: no [B, Hq, T, D] copy of the cache."""
    feeds = _attention_feeds(rng, kv_heads=1, past=True)
    graph = import_onnx(_attention_model(feeds, {"is_causal": 1}, outputs=_present(feeds)))
    dots = [n for n in graph.nodes if n.op == "dot"]
    assert len(dots) == 2
    assert all(n.inputs[1].type.shape[1] == 1 for n in dots)
    assert not [n for n in graph.nodes if n.out.type.shape == (BATCH, Q_HEADS, SEQ + PAST, HEAD)]


@pytest.mark.parametrize("attrs, kv_heads, drop, error, match", [
    ({"qk_matmul_output_mode": 4}, Q_HEADS, None, UnsupportedError, "qk_matmul_output_mode=4"),
    ({"softmax_precision": TensorProto.INT32}, Q_HEADS, None, UnsupportedError, "softmax_precision=6"),
    ({}, 3, None, ModelError, "4 query heads do not divide into 3 kv heads"),
    ({}, Q_HEADS, "past_v", ModelError, "past_key and past_value must be given together"),
    ({"q_num_heads": 2}, Q_HEADS, None, ModelError, "q_num_heads=2 contradicts"),
])
def test_attention_refuses_what_it_cannot_honour(rng, attrs, kv_heads, drop, error, match):
    feeds = _attention_feeds(rng, kv_heads=kv_heads, past=True)
    if drop:
        feeds[drop] = None
    with pytest.raises(error, match=f"node 'attn' \\(Attention.*{match}"):
        import_onnx(_attention_model(feeds, attrs))


# -- through the compiler ---------------------------------------------------------------
def _decoder_block(rng, seq, past):
    """RMSNorm -> q/k/v projections -> RoPE on q and k (3-D, position_ids) -> GQA Attention with a KV cache."""
    hidden, heads, kv_heads, head = 64, 4, 2, 16
    weights = {"norm": randn(rng, hidden) + 1, "wq": randn(rng, hidden, heads * head) / 8,
               "wk": randn(rng, hidden, kv_heads * head) / 8, "wv": randn(rng, hidden, kv_heads * head) / 8,
               "cos": np.cos(np.outer(np.arange(64), 10000.0 ** (-np.arange(8) / 8))).astype(np.float32),
               "sin": np.sin(np.outer(np.arange(64), 10000.0 ** (-np.arange(8) / 8))).astype(np.float32)}
    nodes = [helper.make_node("RMSNormalization", ["x", "norm"], ["h"], epsilon=1e-6),
             helper.make_node("MatMul", ["h", "wq"], ["q0"]), helper.make_node("MatMul", ["h", "wk"], ["k0"]),
             helper.make_node("MatMul", ["h", "wv"], ["v"]),
             helper.make_node("RotaryEmbedding", ["q0", "cos", "sin", "pos"], ["q"], num_heads=heads),
             helper.make_node("RotaryEmbedding", ["k0", "cos", "sin", "pos"], ["k"], num_heads=kv_heads),
             helper.make_node("Attention", ["q", "k", "v", "", "past.key", "past.value"], ["y", "present.key", "present.value"],
                              is_causal=1, q_num_heads=heads, kv_num_heads=kv_heads)]
    inputs = [vinfo("x", F32, (1, seq, hidden)), vinfo("pos", TensorProto.INT64, (1, seq)),
              vinfo("past.key", F32, (1, kv_heads, past, head)), vinfo("past.value", F32, (1, kv_heads, past, head))]
    outputs = [vinfo("y", F32, (1, seq, heads * head)), vinfo("present.key", F32, (1, kv_heads, past + seq, head)),
               vinfo("present.value", F32, (1, kv_heads, past + seq, head))]
    model = make_model(nodes, inputs, outputs, [numpy_helper.from_array(w, name) for name, w in weights.items()], opset=23)
    feeds = {"x": randn(rng, 1, seq, hidden), "pos": np.arange(past, past + seq, dtype=np.int64)[None],
             "past.key": randn(rng, 1, kv_heads, past, head), "past.value": randn(rng, 1, kv_heads, past, head)}
    return model, feeds


@pytest.mark.parametrize("seq, past", [(5, 0), (1, 9)], ids=["prefill", "decode"])
def test_decoder_block_compiled_matches_onnxruntime(rng, seq, past):
    model, feeds = _decoder_block(rng, seq, past)
    compare(model, feeds, rtol=1e-5, atol=1e-5)
    ours = Session(compile_model(model).artifact, threads=1).run(None, feeds)
    theirs = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for mine, ref in zip(ours, theirs, strict=True):
        np.testing.assert_allclose(mine, ref, rtol=1e-4, atol=1e-5)


def test_attention_gpu_kernels_match_onnxruntime(rng):
    """A GQA decode step with a cache and a boolean mask, its GPU kernels emulated on the host."""
    feeds = _attention_feeds(rng, kv_heads=2, past=True, mask="bool_2d", seq=1)
    model = _attention_model(feeds, {"is_causal": 1}, outputs=_present(feeds))
    emulated_matches_onnxruntime(model, feeds, rtol=1e-5, atol=1e-5)
