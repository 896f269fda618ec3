"""Packed contractions: dot and conv over a weight laid out in blocks at compile time.

The layout pass (rewrite/layout.py) packs a constant weight once and writes
one of these ops in place of the dot or conv; codegen runs them on its
microkernels. The layout is the op's `Packing`, written as the op's
attributes `lanes` and `reversed`: a target that wants other blocks writes
another value of it, not another set of ops or of shape conventions.

A weight is packed features-first, the features being what the contraction
produces (a dot's N columns, a conv's O output channels):

    w [F, *R] -> wp [ceil(F/L), *R, L]      wp[b, *r, l] = w[b*L + l, *r]   (0 past F)
                                            wp[b, *r, l] = w[b*L + L-1-l, *r] when reversed

packed_dot(x, wp) {lhs_contract = [k], columns = N, lanes = L, reversed}
    x [.., K, ..] (K at dim k), wp [NB, K, L] -> x's other dims + [N]:
    dot(x, w) with w [N, K] the unpacked weight (contracting x's dim k with w's dim 1).

packed_conv(x, wp) {strides, padding, dilation, groups, channels = O, lanes = L, reversed}
    x [N, C, *S], wp [OB, C/g, *K, L] -> [N, O, *S']: conv(x, w) with w [O, C/g, *K]
    the unpacked weight. A block never straddles two groups: with several groups,
    L divides O/g.

Both results are the logical (unpacked) values: what reads them needs to know
nothing of the layout, and no rewrite of what follows can hide the packing.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aot.arith import ceil_div
from aot.errors import IRError
from aot.ir.types import TensorType
from aot.ir.ops.registry import get_op, register

PACKED = frozenset({"packed_dot", "packed_conv"})
# the attributes that spell a Packing on a packed op
PACKING_ATTRS = ("lanes", "reversed")


@dataclass(frozen=True)
class Packing:
    """Blocks of `lanes` features; `reversed`: lane l of a block holds feature L-1-l of it
    (the CPU conv body's order, see codegen/cpu/packed_conv.py)."""

    lanes: int
    reversed: bool = False

    @staticmethod
    def of(node_attrs: dict[str, Any]) -> Packing:
        """The Packing that a packed op's attributes spell."""
        lanes, reverse = (node_attrs.get(k) for k in PACKING_ATTRS)
        if not isinstance(lanes, int) or isinstance(lanes, bool) or lanes < 1 or not isinstance(reverse, bool):
            raise IRError(f"a packed op needs lanes >= 1 and reversed = true/false, got {lanes!r} and {reverse!r}")
        return Packing(lanes, reverse)

    def attrs(self) -> dict[str, Any]:
        return {"lanes": self.lanes, "reversed": self.reversed}

    def blocks(self, features: int) -> int:
        return ceil_div(features, self.lanes)

    def pack(self, w: np.ndarray) -> np.ndarray:
        """[F, *R] -> [ceil(F/L), *R, L], zero past F."""
        features = w.shape[0]
        padded = np.zeros((self.blocks(features) * self.lanes,) + w.shape[1:], dtype=w.dtype)
        padded[:features] = w
        grouped = padded.reshape((self.blocks(features), self.lanes) + w.shape[1:])
        if self.reversed:
            grouped = grouped[:, ::-1]
        return np.ascontiguousarray(np.moveaxis(grouped, 1, -1))

    def unpack(self, wp: np.ndarray, features: int) -> np.ndarray:
        """[FB, *R, L] -> [F, *R]: the inverse of `pack`."""
        grouped = np.moveaxis(wp, -1, 1)
        if self.reversed:
            grouped = grouped[:, ::-1]
        return grouped.reshape((wp.shape[0] * self.lanes,) + wp.shape[1:-1])[:features]


def _check_packed_weight(op: str, wp: TensorType, packing: Packing, features: Any, rank: int) -> int:
    if not isinstance(features, int) or isinstance(features, bool) or features < 1:
        raise IRError(f"{op} needs a feature count >= 1, got {features!r}")
    if wp.rank != rank or wp.shape[-1] != packing.lanes or wp.shape[0] != packing.blocks(features):
        raise IRError(f"{op}: packed weight {wp} does not hold {features} features in blocks of {packing.lanes} lanes")
    return features


def _unpacked(wp: TensorType, features: int) -> TensorType:
    return wp.with_shape((features,) + wp.shape[1:-1])


# -- packed_dot ----------------------------------------------------------------------
def _dot_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    """The plain dot of x with the unpacked weight [N, K]."""
    return {"lhs_batch": (), "rhs_batch": (), "lhs_contract": attrs.get("lhs_contract"), "rhs_contract": (1,)}


def _packed_dot_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    x, wp = ins
    contract = attrs.get("lhs_contract")
    if not (isinstance(contract, tuple) and len(contract) == 1):
        raise IRError(f"packed_dot contracts one dim of x, got lhs_contract = {contract!r}")
    columns = _check_packed_weight("packed_dot", wp, Packing.of(attrs), attrs.get("columns"), 3)
    return get_op("dot").infer([x, _unpacked(wp, columns)], _dot_attrs(attrs))


def _packed_dot_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x, wp = ins
    return get_op("dot").reference([x, Packing.of(attrs).unpack(wp, attrs["columns"])], _dot_attrs(attrs), out)


# -- packed_conv ---------------------------------------------------------------------
CONV_ATTRS = ("strides", "padding", "dilation", "groups")


def _conv_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: attrs.get(k) for k in CONV_ATTRS}


def _packed_conv_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    x, wp = ins
    packing = Packing.of(attrs)
    channels = _check_packed_weight("packed_conv", wp, packing, attrs.get("channels"), x.rank + 1)
    groups = attrs.get("groups")
    if isinstance(groups, int) and groups > 1 and (channels % groups or (channels // groups) % packing.lanes):
        raise IRError(f"packed_conv: blocks of {packing.lanes} lanes straddle the {groups} groups "
                      f"of {channels} channels")
    return get_op("conv").infer([x, _unpacked(wp, channels)], _conv_attrs(attrs))


def _packed_conv_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    x, wp = ins
    return get_op("conv").reference([x, Packing.of(attrs).unpack(wp, attrs["channels"])], _conv_attrs(attrs), out)


register("packed_dot", _packed_dot_infer, _packed_dot_ref, 2)
register("packed_conv", _packed_conv_infer, _packed_conv_ref, 2)
