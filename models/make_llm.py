"""Write llama_tiny, a Llama-style decoder with a static KV cache, three ways (issue 15).

    python models/make_llm.py OUT_DIR [--small] [--jax-shapes 1x16,1x1] [--no-check]

OUT_DIR gets:
  llama_tiny.npz           the seeded weights, numpy, written once; every export reads them
  llama_tiny.onnx          a torch nn.Module written the way torch users write Llama, exported
                           by torch.onnx.export (dynamo=True) with dynamic batch and length
  llama_tiny_op23.onnx     the same decoder as an opset-23 graph built with onnx.helper around
                           RMSNormalization, RotaryEmbedding and Attention
  llama_tiny_bBtT.mlir     the same decoder in JAX, jax.jit(...).lower(...).as_text() at static
                           shapes, one file per (B, T) of --jax-shapes (weights as constants)

The interface every export shares (S = max_len, D = head_dim, L = layers):
  inputs:  input_ids int64 [B, T]; position int64 [] (cache slot of the first new token);
           past_keys, past_values float32 [L, B, KVH, S, D]
  outputs: logits float32 [B, T, vocab]; present_keys, present_values [L, B, KVH, S, D]:
           past with slots [position, position + T) overwritten by the new keys/values.
New token t sits at p = position + t and attends to slots 0..p (mask from iota against
position); slots after p are ignored whatever they hold.

Unless --no-check, the three exports are run on the same inputs (onnxruntime for the
ONNX files, JAX for the decoder the .mlir files come from) and must agree (rtol 1e-4
of each output's scale). torch, onnxscript and JAX make these files; aot does not
depend on them.
"""
from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

SEED = 15
NAME = "llama_tiny"
INPUTS = ("input_ids", "position", "past_keys", "past_values")
OUTPUTS = ("logits", "present_keys", "present_values")
ONNX_FILES = (f"{NAME}.onnx", f"{NAME}_torch23.onnx", f"{NAME}_op23.onnx")


@dataclass(frozen=True)
class Config:
    vocab: int = 8000
    hidden: int = 512
    layers: int = 4
    heads: int = 8
    kv_heads: int = 2
    head_dim: int = 64
    intermediate: int = 1376
    max_len: int = 256
    theta: float = 10000.0
    eps: float = 1e-5

    @property
    def groups(self) -> int:  # query heads per KV head
        return self.heads // self.kv_heads

    def cache_shape(self, batch: int) -> tuple[int, ...]:
        return (self.layers, batch, self.kv_heads, self.max_len, self.head_dim)

    def parameters(self) -> int:
        h, i = self.hidden, self.intermediate
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = 2 * h + h * q + 2 * h * kv + q * h + 3 * h * i
        return self.vocab * h + self.layers * per_layer + h


FULL = Config()  # about 15 M parameters, the shape
SMALL = Config(vocab=256, hidden=64, layers=2, heads=4, kv_heads=2, head_dim=16, intermediate=176, max_len=32)


# -- weights: one seeded numpy set, in torch's [out, in] layout for linear layers
def make_weights(cfg: Config, seed: int = SEED) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)

    def linear(out: int, inp: int) -> np.ndarray:
        return (rng.standard_normal((out, inp)) / np.sqrt(inp)).astype(np.float32)

    def norm() -> np.ndarray:  # not all ones: a dropped scale would still match otherwise
        return (1.0 + 0.1 * rng.standard_normal(cfg.hidden)).astype(np.float32)

    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    # embedding rows of norm 1/2: small beside what the layers add to the residual stream, so
    # greedy generation neither repeats the last token (tied logits favour it) nor settles on one
    w = {"embed": (0.5 * rng.standard_normal((cfg.vocab, cfg.hidden)) / np.sqrt(cfg.hidden)).astype(np.float32)}
    for i in range(cfg.layers):
        w[f"l{i}.attn_norm"] = norm()
        w[f"l{i}.wq"] = linear(q, cfg.hidden)
        w[f"l{i}.wk"] = linear(kv, cfg.hidden)
        w[f"l{i}.wv"] = linear(kv, cfg.hidden)
        w[f"l{i}.wo"] = linear(cfg.hidden, q)
        w[f"l{i}.mlp_norm"] = norm()
        w[f"l{i}.w_gate"] = linear(cfg.intermediate, cfg.hidden)
        w[f"l{i}.w_up"] = linear(cfg.intermediate, cfg.hidden)
        w[f"l{i}.w_down"] = linear(cfg.hidden, cfg.intermediate)
    w["final_norm"] = norm()
    return w


def rope_tables(cfg: Config) -> tuple[np.ndarray, np.ndarray]:
    """cos, sin [max_len, head_dim / 2] (Llama's rotate-half form: frequency j rotates dims j and j + D/2)."""
    inv_freq = 1.0 / cfg.theta ** (np.arange(0, cfg.head_dim, 2, dtype=np.float64) / cfg.head_dim)
    angles = np.outer(np.arange(cfg.max_len, dtype=np.float64), inv_freq)
    return np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)


def save_weights(path: Path, cfg: Config, weights: Mapping[str, np.ndarray]) -> None:
    config = {f"config.{k}": np.array(v) for k, v in asdict(cfg).items()}
    np.savez(path, **config, **weights)


def load_weights(path: Path) -> tuple[Config, dict[str, np.ndarray]]:
    with np.load(path) as data:
        fields = {k.removeprefix("config."): data[k].item() for k in data.files if k.startswith("config.")}
        weights = {k: data[k] for k in data.files if not k.startswith("config.")}
    return Config(**fields), weights


# -- inputs
def make_inputs(cfg: Config, batch: int, tokens: int, position: int, seed: int = 0,
                filled: bool = True) -> dict[str, np.ndarray]:
    """Feeds for one call. filled: the cache holds noise everywhere (slots before `position`
    as if earlier tokens wrote them, slots after it as stale junk the mask must ignore)."""
    rng = np.random.default_rng(seed)
    cache = cfg.cache_shape(batch)
    past = (lambda: rng.standard_normal(cache).astype(np.float32)) if filled else (lambda: np.zeros(cache, np.float32))
    return {"input_ids": rng.integers(0, cfg.vocab, (batch, tokens), dtype=np.int64),
            "position": np.array(position, np.int64), "past_keys": past(), "past_values": past()}


# -- torch: the module as torch users write Llama
# one step of a decoder: feeds -> logits, present keys, present values
Step = Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]


def generate(cfg: Config, step: Step, prompt: int, steps: int) -> tuple[list[np.ndarray], list[int]]:
    """Each step's logits and the greedy tokens: the prompt (seeded ids), then `steps` decode steps,
    each fed the token before and the cache the step before returned."""
    feeds = make_inputs(cfg, 1, prompt, 0, seed=7, filled=False)
    all_logits, tokens = [], []
    for _ in range(steps + 1):
        logits, keys, values = (np.asarray(a) for a in step(feeds))
        all_logits.append(logits)
        tokens.append(int(logits[0, -1].argmax()))
        position = int(feeds["position"]) + feeds["input_ids"].shape[1]
        feeds = {"input_ids": np.array([[tokens[-1]]], np.int64), "position": np.array(position, np.int64),
                 "past_keys": keys, "past_values": values}
    return all_logits, tokens


def torch_module(cfg: Config, weights: Mapping[str, np.ndarray], fused: bool = False):
    """fused: nn.RMSNorm and SDPA's own GQA (enable_gqa), which torch's exporter turns into
    RMSNormalization and Attention at opset 23; else a hand-written RMSNorm and repeat_interleave."""
    import torch
    import torch.nn.functional as F
    from torch import nn

    class LlamaRMSNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(cfg.hidden))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + cfg.eps) * self.weight

    def RMSNorm() -> nn.Module:  # noqa: N802 (a module class either way)
        return nn.RMSNorm(cfg.hidden, eps=cfg.eps) if fused else LlamaRMSNorm()

    def rotate_half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    class Attention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q_proj = nn.Linear(cfg.hidden, cfg.heads * cfg.head_dim, bias=False)
            self.k_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
            self.v_proj = nn.Linear(cfg.hidden, cfg.kv_heads * cfg.head_dim, bias=False)
            self.o_proj = nn.Linear(cfg.heads * cfg.head_dim, cfg.hidden, bias=False)

        def forward(self, x, cos, sin, slots, mask, past_k, past_v):
            b, t, _ = x.shape
            q = self.q_proj(x).view(b, t, cfg.heads, cfg.head_dim).transpose(1, 2)
            k = self.k_proj(x).view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
            v = self.v_proj(x).view(b, t, cfg.kv_heads, cfg.head_dim).transpose(1, 2)
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            # the static cache: this step's keys/values written at their slots
            k_cache = past_k.index_copy(2, slots, k)
            v_cache = past_v.index_copy(2, slots, v)
            if fused:  # GQA inside SDPA: the opset-23 exporter emits one Attention
                y = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask, enable_gqa=True)
            else:
                k_all = k_cache.repeat_interleave(cfg.groups, dim=1)
                v_all = v_cache.repeat_interleave(cfg.groups, dim=1)
                y = F.scaled_dot_product_attention(q, k_all, v_all, attn_mask=mask)
            return self.o_proj(y.transpose(1, 2).reshape(b, t, -1)), k_cache, v_cache

    class MLP(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.gate_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
            self.up_proj = nn.Linear(cfg.hidden, cfg.intermediate, bias=False)
            self.down_proj = nn.Linear(cfg.intermediate, cfg.hidden, bias=False)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))

    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.input_layernorm = RMSNorm()
            self.self_attn = Attention()
            self.post_attention_layernorm = RMSNorm()
            self.mlp = MLP()

        def forward(self, x, cos, sin, slots, mask, past_k, past_v):
            y, k_cache, v_cache = self.self_attn(self.input_layernorm(x), cos, sin, slots, mask, past_k, past_v)
            x = x + y
            return x + self.mlp(self.post_attention_layernorm(x)), k_cache, v_cache

    class LlamaTiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed_tokens = nn.Embedding(cfg.vocab, cfg.hidden)
            self.layers = nn.ModuleList(Layer() for _ in range(cfg.layers))
            self.norm = RMSNorm()
            self.lm_head = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
            self.lm_head.weight = self.embed_tokens.weight  # tied
            cos, sin = rope_tables(cfg)
            self.register_buffer("cos_cached", torch.from_numpy(np.concatenate([cos, cos], -1)), persistent=False)
            self.register_buffer("sin_cached", torch.from_numpy(np.concatenate([sin, sin], -1)), persistent=False)

        def forward(self, input_ids, position, past_keys, past_values):
            t = input_ids.shape[1]
            slots = position + torch.arange(t, dtype=torch.int64)
            cos, sin = self.cos_cached[slots], self.sin_cached[slots]
            # new token t at slot p attends to slots 0..p
            mask = torch.arange(cfg.max_len, dtype=torch.int64)[None, :] <= slots[:, None]
            x = self.embed_tokens(input_ids)
            keys, values = [], []
            for i, layer in enumerate(self.layers):
                x, k_cache, v_cache = layer(x, cos, sin, slots, mask, past_keys[i], past_values[i])
                keys.append(k_cache)
                values.append(v_cache)
            return self.lm_head(self.norm(x)), torch.stack(keys), torch.stack(values)

    model = LlamaTiny().eval()
    state = {"embed_tokens.weight": weights["embed"], "norm.weight": weights["final_norm"]}
    names = {"attn_norm": "input_layernorm.weight", "mlp_norm": "post_attention_layernorm.weight",
             "wq": "self_attn.q_proj.weight", "wk": "self_attn.k_proj.weight", "wv": "self_attn.v_proj.weight",
             "wo": "self_attn.o_proj.weight", "w_gate": "mlp.gate_proj.weight", "w_up": "mlp.up_proj.weight",
             "w_down": "mlp.down_proj.weight"}
    for i in range(cfg.layers):
        state.update({f"layers.{i}.{theirs}": weights[f"l{i}.{ours}"] for ours, theirs in names.items()})
    state = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in state.items()}
    state["lm_head.weight"] = state["embed_tokens.weight"]
    model.load_state_dict(state, strict=True)
    return model


def export_torch(cfg: Config, weights: Mapping[str, np.ndarray], path: Path, opset: int | None = None) -> None:
    """torch.onnx.export with the default (dynamo) exporter; batch and length dynamic. With
    opset 23 the module uses nn.RMSNorm and SDPA's GQA, which that opset has ops for."""
    import torch
    from torch.export import Dim

    model = torch_module(cfg, weights, fused=opset is not None and opset >= 23)
    example = {k: torch.from_numpy(v) for k, v in make_inputs(cfg, 2, 3, 1).items()}
    batch, seq = Dim("batch", min=1, max=1024), Dim("seq", min=1, max=cfg.max_len)
    dynamic = {"input_ids": {0: batch, 1: seq}, "position": None,
               "past_keys": {1: batch}, "past_values": {1: batch}}
    with torch.no_grad():
        program = torch.onnx.export(model, (), kwargs=example, dynamo=True, dynamic_shapes=dynamic, opset_version=opset,
                                    input_names=list(INPUTS), output_names=list(OUTPUTS), verbose=False)
    program.save(str(path), external_data=False)


# -- ONNX opset 23: RMSNormalization, RotaryEmbedding and Attention
def export_op23(cfg: Config, weights: Mapping[str, np.ndarray], path: Path) -> None:
    """The decoder by hand at opset 23: the static cache through ScatterElements, GQA inside
    Attention (4-D inputs, a boolean [T, S] mask), RoPE on [B, T, heads * D] with position ids."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    nodes: list[onnx.NodeProto] = []
    # linear weights as [in, out] for MatMul (named NAME.T), the rest as they are
    inits = [numpy_helper.from_array(np.ascontiguousarray(v.T), f"{k}.T") if v.ndim == 2 and k != "embed"
             else numpy_helper.from_array(v, k) for k, v in weights.items()]
    counter = iter(range(1 << 30))

    def const(value: np.ndarray, hint: str) -> str:
        name = f"{hint}_{next(counter)}"
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(kind: str, *inputs: str, hint: str = "", **attrs) -> str:
        name = f"{hint or kind.lower()}_{next(counter)}"
        nodes.append(helper.make_node(kind, list(inputs), [name], **attrs))
        return name

    cos, sin = rope_tables(cfg)
    cos_name, sin_name = const(cos, "cos_cache"), const(sin, "sin_cache")
    hd = cfg.head_dim

    # slots = position + [0, T); position_ids [B, T]; allowed [T, S]: slot j <= position + t
    ids_shape = op("Shape", "input_ids", hint="ids_shape")
    t_len = op("Gather", ids_shape, const(np.array(1, np.int64), "one"), axis=0, hint="t_len")
    # Range over [0, T) and then + position: the length stays a shape, known once T is
    slots = op("Add", "position", op("Range", const(np.array(0, np.int64), "zero"), t_len,
                                     const(np.array(1, np.int64), "step")), hint="slots")
    position_ids = op("Expand", op("Unsqueeze", slots, const(np.array([0], np.int64), "ax0")), ids_shape,
                      hint="position_ids")
    iota = const(np.arange(cfg.max_len, dtype=np.int64).reshape(1, -1), "iota")
    allowed = op("LessOrEqual", iota, op("Unsqueeze", slots, const(np.array([1], np.int64), "ax1")), hint="allowed")
    # ScatterElements indices [B, KVH, T, D]: the new keys' slot along the cache's length axis
    bthd = op("Concat", op("Slice", ids_shape, const(np.array([0], np.int64), "s0"), const(np.array([1], np.int64), "e1")),
              const(np.array([cfg.kv_heads], np.int64), "kvh"), op("Unsqueeze", t_len, const(np.array([0], np.int64), "ax0")),
              const(np.array([hd], np.int64), "hd"), axis=0, hint="kv_new_shape")
    scatter_idx = op("Expand", op("Reshape", slots, const(np.array([1, 1, -1, 1], np.int64), "shape")), bthd,
                     hint="scatter_idx")

    def heads(x: str, n: int) -> str:  # [B, T, n*D] -> [B, n, T, D]
        return op("Transpose", op("Reshape", x, const(np.array([0, 0, n, hd], np.int64), "shape")), perm=[0, 2, 1, 3])

    x = op("Gather", "embed", "input_ids", axis=0, hint="embedded")
    presents_k, presents_v = [], []
    for i in range(cfg.layers):
        layer = const(np.array(i, np.int64), f"layer{i}")
        xn = op("RMSNormalization", x, f"l{i}.attn_norm", axis=-1, epsilon=cfg.eps, hint=f"l{i}_attn_in")
        q = op("RotaryEmbedding", op("MatMul", xn, f"l{i}.wq.T"), cos_name, sin_name, position_ids,
               num_heads=cfg.heads, interleaved=0, hint=f"l{i}_q")
        k = op("RotaryEmbedding", op("MatMul", xn, f"l{i}.wk.T"), cos_name, sin_name, position_ids,
               num_heads=cfg.kv_heads, interleaved=0, hint=f"l{i}_k")
        v = op("MatMul", xn, f"l{i}.wv.T", hint=f"l{i}_v")
        k_cache = op("ScatterElements", op("Gather", "past_keys", layer, axis=0), scatter_idx, heads(k, cfg.kv_heads),
                     axis=2, hint=f"l{i}_k_cache")
        v_cache = op("ScatterElements", op("Gather", "past_values", layer, axis=0), scatter_idx, heads(v, cfg.kv_heads),
                     axis=2, hint=f"l{i}_v_cache")
        presents_k.append(op("Unsqueeze", k_cache, const(np.array([0], np.int64), "ax0")))
        presents_v.append(op("Unsqueeze", v_cache, const(np.array([0], np.int64), "ax0")))
        y = op("Attention", heads(q, cfg.heads), k_cache, v_cache, allowed, hint=f"l{i}_attn")
        y = op("Reshape", op("Transpose", y, perm=[0, 2, 1, 3]), const(np.array([0, 0, -1], np.int64), "shape"))
        x = op("Add", x, op("MatMul", y, f"l{i}.wo.T"), hint=f"l{i}_attn_out")
        xn = op("RMSNormalization", x, f"l{i}.mlp_norm", axis=-1, epsilon=cfg.eps, hint=f"l{i}_mlp_in")
        gate = op("MatMul", xn, f"l{i}.w_gate.T")
        hidden = op("Mul", op("Mul", gate, op("Sigmoid", gate)), op("MatMul", xn, f"l{i}.w_up.T"))
        x = op("Add", x, op("MatMul", hidden, f"l{i}.w_down.T"), hint=f"l{i}_out")
    xn = op("RMSNormalization", x, "final_norm", axis=-1, epsilon=cfg.eps, hint="final")
    nodes.append(helper.make_node("MatMul", [xn, op("Transpose", "embed", perm=[1, 0])], ["logits"]))  # tied
    nodes.append(helper.make_node("Concat", presents_k, ["present_keys"], axis=0))
    nodes.append(helper.make_node("Concat", presents_v, ["present_values"], axis=0))

    cache = [cfg.layers, "batch", cfg.kv_heads, cfg.max_len, hd]
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    graph = helper.make_graph(
        nodes, NAME,
        [helper.make_tensor_value_info("input_ids", i64, ["batch", "seq"]),
         helper.make_tensor_value_info("position", i64, []),
         helper.make_tensor_value_info("past_keys", f32, cache),
         helper.make_tensor_value_info("past_values", f32, cache)],
        [helper.make_tensor_value_info("logits", f32, ["batch", "seq", cfg.vocab]),
         helper.make_tensor_value_info("present_keys", f32, cache),
         helper.make_tensor_value_info("present_values", f32, cache)],
        initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], producer_name="make_llm")
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, str(path))


# -- JAX: the decoder as JAX serving code writes it
@contextmanager
def _x64() -> Iterator[None]:
    """int64 ids and position as the interface says; JAX is 32-bit unless told otherwise."""
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", previous)


def jax_decoder(cfg: Config, weights: Mapping[str, np.ndarray]) -> Callable:
    """f(input_ids, position, past_keys, past_values) -> (logits, present_keys, present_values);
    the weights are closed over, so a lowering holds them as constants."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    w = {k: jnp.asarray(v) for k, v in weights.items()}
    cos_t, sin_t = (jnp.asarray(np.concatenate([c, c], -1)) for c in rope_tables(cfg))
    hd, half = cfg.head_dim, cfg.head_dim // 2

    def rms(x, g):
        return x * lax.rsqrt(jnp.mean(x * x, axis=-1, keepdims=True) + cfg.eps) * g

    def rope(x, cos, sin):  # x [B, T, heads, D]; cos, sin [T, D]
        rotated = jnp.concatenate([-x[..., half:], x[..., :half]], axis=-1)
        return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]

    def f(input_ids, position, past_keys, past_values):
        b, t = input_ids.shape
        slots = position + lax.iota(jnp.int64, t)
        cos, sin = jnp.take(cos_t, slots, axis=0), jnp.take(sin_t, slots, axis=0)
        allowed = lax.iota(jnp.int64, cfg.max_len)[None, :] <= slots[:, None]  # [T, S]
        x = jnp.take(w["embed"], input_ids, axis=0)
        keys, values = past_keys, past_values
        zero = jnp.zeros((), jnp.int64)
        for i in range(cfg.layers):
            xn = rms(x, w[f"l{i}.attn_norm"])
            q = rope((xn @ w[f"l{i}.wq"].T).reshape(b, t, cfg.heads, hd), cos, sin)
            k = rope((xn @ w[f"l{i}.wk"].T).reshape(b, t, cfg.kv_heads, hd), cos, sin)
            v = (xn @ w[f"l{i}.wv"].T).reshape(b, t, cfg.kv_heads, hd)
            start = (jnp.asarray(i, jnp.int64), zero, zero, position, zero)
            keys = lax.dynamic_update_slice(keys, k.transpose(0, 2, 1, 3)[None], start)
            values = lax.dynamic_update_slice(values, v.transpose(0, 2, 1, 3)[None], start)
            # GQA: query head h = kv * groups + g reads KV head kv
            qg = q.reshape(b, t, cfg.kv_heads, cfg.groups, hd)
            scores = jnp.einsum("btkgd,bksd->bkgts", qg, keys[i]) / np.float32(np.sqrt(hd))
            scores = jnp.where(allowed, scores, -jnp.inf)
            y = jnp.einsum("bkgts,bksd->btkgd", jax.nn.softmax(scores, axis=-1), values[i])
            x = x + y.reshape(b, t, cfg.heads * hd) @ w[f"l{i}.wo"].T
            xn = rms(x, w[f"l{i}.mlp_norm"])
            x = x + (jax.nn.silu(xn @ w[f"l{i}.w_gate"].T) * (xn @ w[f"l{i}.w_up"].T)) @ w[f"l{i}.w_down"].T
        return rms(x, w["final_norm"]) @ w["embed"].T, keys, values

    return f


def jax_engine(cfg: Config, weights: Mapping[str, np.ndarray]) -> Callable[[Mapping[str, np.ndarray]], list[np.ndarray]]:
    """feeds -> outputs through one jax.jit of the decoder (compiled once per input shape)."""
    import jax

    jitted = jax.jit(jax_decoder(cfg, weights))

    def run(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        with _x64():
            return [np.asarray(o) for o in jitted(*(feeds[n] for n in INPUTS))]

    return run


def mlir_name(batch: int, tokens: int) -> str:
    return f"{NAME}_b{batch}t{tokens}.mlir"


def export_jax(cfg: Config, weights: Mapping[str, np.ndarray], out: Path, shapes: list[tuple[int, int]]) -> list[Path]:
    import jax
    import jax.numpy as jnp

    decoder = jax_decoder(cfg, weights)

    def named(input_ids, position, past_keys, past_values):  # outputs as result['logits'], ... (sorted keys)
        return dict(zip(OUTPUTS, decoder(input_ids, position, past_keys, past_values)))

    paths = []
    with _x64():
        jitted = jax.jit(named)
        for batch, tokens in shapes:
            cache = jax.ShapeDtypeStruct(cfg.cache_shape(batch), jnp.float32)
            lowered = jitted.lower(jax.ShapeDtypeStruct((batch, tokens), jnp.int64),
                                   jax.ShapeDtypeStruct((), jnp.int64), cache, cache)
            path = out / mlir_name(batch, tokens)
            path.write_text(lowered.as_text(debug_info=True))  # debug info: inputs keep their Python names
            paths.append(path)
    return paths


# -- the exports agree
def ort_session(path: Path, threads: int = 1):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3  # errors only
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def max_scaled_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| over max |want|: rtol against the output's scale, not each element's
    (logits near zero carry the same absolute error as the large ones)."""
    return float(np.abs(got.astype(np.float64) - want).max() / max(float(np.abs(want).max()), 1e-30))


def check_exports(out: Path, cfg: Config, weights: Mapping[str, np.ndarray], rtol: float = 1e-4) -> list[str]:
    """Problems found running the exports on the same inputs (a prefill at slot 0, a mid-cache
    step over stale slots, a decode step at batch 3); [] when they all agree within rtol."""
    problems = []
    cases = {"prefill": make_inputs(cfg, 1, 5, 0, seed=1, filled=False),
             "mid-cache": make_inputs(cfg, 2, 3, cfg.max_len // 2, seed=2),
             "decode": make_inputs(cfg, 3, 1, cfg.max_len - 1, seed=3)}
    jax_model = jax_engine(cfg, weights)
    sessions = {path: ort_session(out / path) for path in ONNX_FILES}
    for case, feeds in cases.items():
        results = {"jax": jax_model(feeds)}
        results.update({path: session.run(list(OUTPUTS), dict(feeds)) for path, session in sessions.items()})
        for engine in ONNX_FILES:
            for name, got, want in zip(OUTPUTS, results[engine], results["jax"]):
                err = max_scaled_error(got, want)
                if not err <= rtol:
                    problems.append(f"{case}: {engine} {name} differs from JAX by {err:.2e} of its scale")
    return problems


def write_all(out: Path, cfg: Config, jax_shapes: list[tuple[int, int]]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    weights_path = out / f"{NAME}.npz"
    save_weights(weights_path, cfg, make_weights(cfg))
    cfg, weights = load_weights(weights_path)  # every export reads the saved set
    export_torch(cfg, weights, out / f"{NAME}.onnx")
    export_torch(cfg, weights, out / f"{NAME}_torch23.onnx", opset=23)
    export_op23(cfg, weights, out / f"{NAME}_op23.onnx")
    export_jax(cfg, weights, out, jax_shapes)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    shapes = []
    for item in text.split(","):
        b, t = item.lower().split("x")
        shapes.append((int(b), int(t)))
    return shapes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--small", action="store_true", help="the test config (vocab 256, hidden 64, 2 layers)")
    parser.add_argument("--jax-shapes", default=None, type=parse_shapes,
                        help="BxT list for the .mlir files (default 1x16,1x1; --small: 1x8,1x1)")
    parser.add_argument("--no-check", action="store_true", help="skip running the exports against each other")
    args = parser.parse_args(argv)
    cfg = SMALL if args.small else FULL
    shapes = args.jax_shapes or ([(1, 8), (1, 1)] if args.small else [(1, 16), (1, 1)])
    write_all(args.out, cfg, shapes)
    print(f"{NAME}: {cfg.parameters() / 1e6:.2f} M parameters, written to {args.out}")
    if args.no_check:
        return 0
    problems = check_exports(args.out, cfg, load_weights(args.out / f"{NAME}.npz")[1])
    for problem in problems:
        print(problem, file=sys.stderr)
    print("exports agree" if not problems else f"{len(problems)} output(s) disagree")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
