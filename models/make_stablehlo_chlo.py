"""Write the chlo and control-flow test cases with JAX: NAME.mlir plus NAME.npz (inputs in_*, JAX's outputs out_*).

    python models/make_stablehlo_chlo.py [OUT_DIR]     # default tests/data/stablehlo/chlo

Each case is one jitted function over small arrays that reach every branch of
the decomposition (both sides of each cut-over point, zeros, poles, +-inf,
NaN). tests/importers/stablehlo/test_chlo.py compiles the .mlir with aot and compares
with the stored JAX outputs; JAX is only needed to regenerate the files.
Written with JAX 0.10 on CPU; the ops each case makes JAX write are listed.
"""
from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import jax.scipy.special as sp
import ml_dtypes
import numpy as np
from jax import lax

ROOT = Path(__file__).resolve().parents[1]
INF, NAN = np.inf, np.nan
Case = tuple[Callable, list[np.ndarray]]


def _values(seed: int, count: int, lo: float, hi: float, edges: list[float], dtype=np.float32) -> np.ndarray:
    """`edges` first, then `count` seeded uniform values in [lo, hi)."""
    rng = np.random.default_rng(seed)
    return np.concatenate([np.array(edges, np.float64), rng.uniform(lo, hi, count)]).astype(dtype)


def erfc() -> Case:
    """chlo.erfc: 1 - erf(x) below |x| = 1, the [1, 2) and [2, inf) polynomials beyond, 0 past underflow."""
    x = _values(1, 40, -10.0, 10.0, [0.0, -0.0, 0.5, -0.5, 0.999, 1.0, -1.0, 1.5, 1.999, 2.0, -2.0, 3.0, 9.2, 9.5,
                                     -9.5, 30.0, INF, -INF, NAN])
    return (lambda x: (lax.erfc(x), jax.nn.gelu(x, approximate=False))), [x]


def erf_inv() -> Case:
    """chlo.erf_inv: both polynomials (w < 5 and w >= 5), +-inf at +-1, NaN beyond."""
    x = _values(2, 40, -1.0, 1.0, [0.0, 0.5, -0.5, 0.9, 0.99, 0.9966, 0.9999, -0.99999, 1.0, -1.0, 1.5, NAN])
    return lax.erf_inv, [x]


def lgamma_digamma() -> Case:
    """chlo.lgamma and chlo.digamma: the reflection below 0.5, poles at 0, -1, -2, ..., +-inf."""
    x = _values(3, 40, -8.0, 30.0, [0.0, -1.0, -2.0, 0.5, 1.0, 1.5, 2.0, 2.5, -0.5, -2.5, -3.7, 1e-8, 1e10, 1e30,
                                    INF, -INF, NAN])
    return (lambda x: (lax.lgamma(x), lax.digamma(x))), [x]


def zeta_polygamma() -> Case:
    """chlo.zeta (Hurwitz, with its domain and pole rules) and chlo.polygamma (n = 0 is digamma)."""
    x = _values(4, 24, 1.0, 8.0, [1.0, 2.0, 2.0, 0.5, 3.0, 4.0, 3.0, 2.5])
    q = _values(5, 24, 0.1, 6.0, [1.0, 1.0, -2.0, 1.0, 0.0, -1.0, -1.0, -1.5])
    n = np.concatenate([[0, 1, 2, 3, 4, 1, 0, 2], np.arange(24) % 4]).astype(np.int32)
    y = _values(6, 24, -4.5, 8.0, [1.0, 2.0, 0.5, 0.25, 3.0, -1.5, -2.0, 0.0])
    return (lambda x, q, n, y: (sp.zeta(x, q), sp.polygamma(n, y))), [x, q, n, y]


def bessel_i1e() -> Case:
    """chlo.bessel_i1e: the two Chebyshev expansions either side of |x| = 8."""
    x = _values(7, 40, -30.0, 30.0, [0.0, 1e-20, 8.0, -8.0, 8.001, 100.0, INF, -INF, NAN])
    return lax.bessel_i1e, [x]


def elementary() -> Case:
    """chlo.{asin,acos,atan,sinh,cosh,asinh,acosh,atanh,square} over their domains and just outside."""
    unit = _values(8, 30, -1.0, 1.0, [0.0, 1.0, -1.0, 0.9999, -0.5, 1.5, NAN])
    wide = _values(9, 30, -20.0, 20.0, [0.0, 1e-30, 0.5, -0.999, 1.0, 88.0, 89.0, -89.5, 1e19, -3e38, INF, -INF, NAN])
    above_one = _values(10, 30, 1.0, 50.0, [1.0, 1.0001, 0.5, 1e20, 3e38, INF, NAN])

    def f(unit, wide, above_one):
        return (jnp.arcsin(unit), jnp.arccos(unit), jnp.arctan(wide), jnp.sinh(wide), jnp.cosh(wide),
                jnp.arcsinh(wide), jnp.arccosh(above_one), jnp.arctanh(unit), jnp.square(wide))

    return f, [unit, wide, above_one]


def next_after() -> Case:
    """chlo.next_after, bit-exact: signed zeros, subnormals, the top of the range, +-inf, NaN; f32, f16 and bf16.

    No subnormal x stepping to a zero of the other sign: XLA's CPU code compares with
    subnormals as zero (DAZ), aot as IEEE (and std::nextafter) do.
    """
    edges_x = [0.0, 0.0, -0.0, 1.0, 1.0, 2.0, -2.0, 1.1754944e-38, 1.1754944e-38, 1e-45, 1e-45, -1e-45,
               3.4028235e38, 3.4028235e38, INF, -INF, NAN, 1.0, 1.0, 6.1e-5, 65504.0]
    edges_y = [1.0, -1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 1.0, -1.0,
               INF, 0.0, 0.0, 0.0, 1.0, NAN, 1.0, 0.0, INF]
    x = _values(11, 20, -10.0, 10.0, edges_x)
    y = _values(12, 20, -10.0, 10.0, edges_y)
    with np.errstate(over="ignore"):
        x16, y16 = x.astype(np.float16), y.astype(np.float16)
    xb, yb = x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16)
    return (lambda x, y, x16, y16, xb, yb: (jnp.nextafter(x, y), jnp.nextafter(x16, y16),
                                            jnp.nextafter(xb, yb))), [x, y, x16, y16, xb, yb]


def top_k() -> Case:
    """chlo.top_k along the last dim, ties in index order (and jnp.argpartition, which JAX writes as top_k)."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((4, 9)).astype(np.float32)
    x[1, 3] = x[1, 6] = x[1, 7] = 2.5  # ties: lower index first
    x[2, 0] = INF
    return (lambda x: (*lax.top_k(x, 3), jnp.argpartition(-x, 2, axis=-1)[..., :2])), [x]


def special_f64() -> Case:
    """The f64 coefficients of erfc, erf_inv and bessel_i1e, and lgamma/digamma/zeta in f64."""
    x = _values(14, 30, -6.0, 6.0, [0.0, 0.5, 1.0, -1.0, 2.0, 7.9, 8.1, 27.0, INF, NAN], np.float64)
    u = _values(15, 30, -1.0, 1.0, [0.0, 0.9, 0.9999, -0.99999999, 1.0, -1.0], np.float64)
    g = _values(16, 30, -6.0, 25.0, [0.5, 1.5, 2.5, -2.5, 0.0, -1.0, 1e10], np.float64)
    s = _values(17, 20, 1.5, 6.0, [2.0, 3.0], np.float64)
    q = _values(18, 20, 0.5, 6.0, [1.0, 2.0], np.float64)
    return (lambda x, u, g, s, q: (lax.erfc(x), lax.bessel_i1e(x), lax.erf_inv(u), lax.lgamma(g), lax.digamma(g),
                                   sp.zeta(s, q))), [x, u, g, s, q]


def special_bf16() -> Case:
    """bf16 through the f32 decompositions (CHLO upcasts narrow floats): erfc, lgamma, digamma, sinh, erf_inv."""
    x = _values(19, 30, -5.0, 12.0, [0.0, 0.5, 1.0, 2.0, -2.5, 9.5, INF, NAN], ml_dtypes.bfloat16)
    u = _values(20, 20, -1.0, 1.0, [0.0, 0.5, 0.99, 1.0], ml_dtypes.bfloat16)
    return (lambda x, u: (lax.erfc(x), lax.lgamma(x), lax.digamma(x), jnp.sinh(x), lax.erf_inv(u))), [x, u]


def cond() -> Case:
    """lax.cond with a run-time predicate (stablehlo.case on an i32 index): both branches inlined, then selected."""
    x = np.array([0.75, -1.5, 2.0, 0.25, -3.0], np.float32)
    y = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)

    def f(x, y):
        big = lax.cond(x[0] > 0.5, lambda x, y: (x * 2.0, y @ y), lambda x, y: (x - 1.0, y.T), x, y)
        small = lax.cond(x[1] > 0.5, lambda x: jnp.sin(x), lambda x: jnp.cos(x), x)
        return (*big, small)

    return f, [x, y]


def switch() -> Case:
    """lax.switch over three branches with a run-time index (clamped by JAX, then stablehlo.case)."""
    x = np.array([1.0, -0.5, 2.0, 0.25], np.float32)
    i = np.array([2, 0, 1, 7], np.int32)

    def f(x, i):
        return tuple(lax.switch(i[k], [lambda x: x * 3.0, lambda x: x - 1.0, jnp.tanh], x) for k in range(4))

    return f, [x, i]


def bessel_jn() -> Case:
    """jax.scipy.special.bessel_jn: a fori loop whose body holds a stablehlo.case on a loop-derived index."""
    x = np.array([0.5, 1.0, 2.5, 4.0, 7.5], np.float32)
    # a short recurrence: a deep one fused into one kernel makes codegen slow (exponential in the depth)
    return (lambda x: sp.bessel_jn(x, v=2, n_iter=6)), [x]


CASES: dict[str, Callable[[], Case]] = {
    "erfc": erfc, "erf_inv": erf_inv, "lgamma_digamma": lgamma_digamma, "zeta_polygamma": zeta_polygamma,
    "bessel_i1e": bessel_i1e, "elementary": elementary, "next_after": next_after, "top_k": top_k,
    "special_f64": special_f64, "special_bf16": special_bf16, "cond": cond, "switch": switch,
    "bessel_jn": bessel_jn,
}
NEEDS_X64 = {"special_f64"}


def _save(out: Path, name: str, text: str, inputs: list[np.ndarray], outputs: list[np.ndarray]) -> None:
    (out / f"{name}.mlir").write_text(text)
    arrays = {f"in_{i}": np.asarray(a) for i, a in enumerate(inputs)}
    arrays.update({f"out_{i}": np.asarray(a) for i, a in enumerate(outputs)})
    # npz cannot hold bfloat16: store its bits as uint16 (exact, NaN payloads included) under a bf16_ prefix
    stored = {}
    for key, value in arrays.items():
        if value.dtype == ml_dtypes.bfloat16:
            stored[f"bf16_{key}"] = value.view(np.uint16)
        else:
            stored[key] = value
    np.savez_compressed(out / f"{name}.npz", **stored)


def write_all(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for name, make in CASES.items():
        jax.config.update("jax_enable_x64", name in NEEDS_X64)
        fn, inputs = make()
        jitted = jax.jit(fn)
        text = jitted.lower(*inputs).as_text()
        outputs = jax.tree_util.tree_leaves(jitted(*inputs))
        _save(out, name, text, inputs, [np.asarray(o) for o in outputs])
    jax.config.update("jax_enable_x64", False)


if __name__ == "__main__":
    write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "tests" / "data" / "stablehlo" / "chlo")
