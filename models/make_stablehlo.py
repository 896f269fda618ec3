"""Write StableHLO test models with JAX: NAME.mlir plus NAME.npz (inputs in_*, JAX's outputs out_*).

    python models/make_stablehlo.py [OUT_DIR]     # default tests/data/stablehlo

JAX is a tool for making this data, not a dependency of aot: the files are
committed and the tests read them without JAX. Weights are seeded and small,
so the whole set stays a few hundred KB; large weights become hex blobs
(`dense<"0x...">`), which the parser must handle too.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jax import export, lax

ROOT = Path(__file__).resolve().parents[1]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _w(rng: np.random.Generator, *shape: int, scale: float = 1.0) -> jnp.ndarray:
    fan_in = shape[0] if len(shape) > 1 else 1
    return jnp.asarray(rng.standard_normal(shape).astype(np.float32) * scale / np.sqrt(fan_in))


def mlp() -> tuple[Callable, list[np.ndarray]]:
    rng = _rng(1)
    w1, b1, w2, b2 = _w(rng, 32, 64), _w(rng, 64), _w(rng, 64, 10), _w(rng, 10)

    def f(x):
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2

    return f, [rng.standard_normal((4, 32)).astype(np.float32)]


def cnn() -> tuple[Callable, list[np.ndarray]]:
    rng = _rng(2)
    k1, k2 = _w(rng, 3, 3, 3, 8, scale=0.5), _w(rng, 3, 3, 8, 8, scale=0.3)
    dense = _w(rng, 8 * 4 * 4, 5)

    def f(x):  # NHWC as JAX writes it; conv + max pool + avg pool via reduce_window
        y = lax.conv_general_dilated(x, k1, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        y = lax.conv_general_dilated(y, k2, (1, 1), ((1, 1), (1, 1)), dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = lax.reduce_window(y, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "SAME") / 4.0
        return y.reshape(y.shape[0], -1) @ dense

    return f, [rng.standard_normal((2, 16, 16, 3)).astype(np.float32)]


def transformer() -> tuple[Callable, list[np.ndarray]]:
    rng = _rng(3)
    d, h, ff = 16, 2, 32
    wq, wk, wv, wo = (_w(rng, d, d) for _ in range(4))
    w1, w2 = _w(rng, d, ff), _w(rng, ff, d)
    g1, g2 = jnp.ones(d) + _w(rng, d, scale=0.1), jnp.ones(d)

    def layer_norm(x, g):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) * lax.rsqrt(v + 1e-5) * g

    def f(x):
        b, t, _ = x.shape
        q, k, v = (jnp.reshape(x @ w, (b, t, h, d // h)) for w in (wq, wk, wv))
        att = jax.nn.softmax(jnp.einsum("bqhd,bkhd->bhqk", q, k) / np.sqrt(d // h), axis=-1)
        y = jnp.einsum("bhqk,bkhd->bqhd", att, v).reshape(b, t, d) @ wo
        x = layer_norm(x + y, g1)
        return layer_norm(x + jax.nn.gelu(x @ w1) @ w2, g2)

    return f, [rng.standard_normal((2, 5, 16)).astype(np.float32)]


def argmax() -> tuple[Callable, list[np.ndarray]]:
    rng = _rng(4)
    x = rng.standard_normal((3, 7)).astype(np.float32)
    x[1, 2] = x[1, 5] = 9.0  # a tie: the first index wins
    return (lambda x: (jnp.argmax(x, axis=1), jnp.argmin(x, axis=0))), [x]


def gather_scatter() -> tuple[Callable, list[np.ndarray]]:
    rng = _rng(5)

    def f(x, idx):
        return (jnp.take(x, idx, axis=0), x[idx, 1:3], x.at[idx].set(0.5), x.at[idx].add(1.0),
                jnp.sort(x, axis=1), jnp.argsort(x[0]))

    return f, [rng.standard_normal((6, 4)).astype(np.float32), np.array([4, 0, 2], np.int32)]


def fori() -> tuple[Callable, list[np.ndarray]]:
    rng = _rng(6)
    w = _w(rng, 8, 8)

    def f(x):
        return lax.fori_loop(0, 4, lambda i, c: jnp.tanh(c @ w) + i.astype(jnp.float32) * 0.1, x)

    return f, [rng.standard_normal((2, 8)).astype(np.float32)]


def bf16() -> tuple[Callable, list[np.ndarray]]:
    rng = _rng(7)
    w = _w(rng, 16, 8).astype(jnp.bfloat16)

    def f(x):
        return jax.nn.gelu(x @ w).sum(axis=-1)

    return f, [rng.standard_normal((4, 16)).astype(jnp.bfloat16)]


CASES: dict[str, Callable[[], tuple[Callable, list[np.ndarray]]]] = {
    "mlp": mlp, "cnn": cnn, "transformer": transformer, "argmax": argmax,
    "gather_scatter": gather_scatter, "fori": fori, "bf16": bf16,
}


def _save(out: Path, name: str, text: str, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
    (out / f"{name}.mlir").write_text(text)
    arrays = {f"in_{i}": np.asarray(a) for i, a in enumerate(inputs)}
    arrays.update({f"out_{i}": np.asarray(a) for i, a in enumerate(outputs)})
    # npz cannot hold bfloat16: store float32 and let the test convert back
    arrays = {k: v.astype(np.float32) if v.dtype.name == "bfloat16" else v for k, v in arrays.items()}
    np.savez_compressed(out / f"{name}.npz", **arrays)


def write_all(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, make in CASES.items():
        fn, inputs = make()
        jitted = jax.jit(fn)
        text = jitted.lower(*inputs).as_text(debug_info=name in ("mlp", "transformer"))
        outputs = jax.tree_util.tree_leaves(jitted(*inputs))
        _save(out, name, text, inputs, outputs)
    # shape-polymorphic export: batch dim 'b' left symbolic, fixed with --shape at compile time
    fn, inputs = mlp()
    (b,) = export.symbolic_shape("b")
    exported = export.export(jax.jit(fn))(jax.ShapeDtypeStruct((b, 32), jnp.float32))
    _save(out, "mlp_poly", exported.mlir_module(), inputs, [jax.jit(fn)(*inputs)])


if __name__ == "__main__":
    write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "stablehlo")
