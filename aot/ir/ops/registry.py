"""The op table: each primitive op's shape rule and numpy reference semantics.

The reference implementations are the interpreter used for constant folding
and the oracle in tests, so they favour clarity over speed.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from aot.errors import IRError, UnsupportedError
from aot.ir.types import TensorType

ShapeRule = Callable[[Sequence[TensorType], dict[str, Any]], TensorType]
Reference = Callable[[Sequence[np.ndarray], dict[str, Any], TensorType], np.ndarray]


@dataclass(frozen=True)
class OpDef:
    name: str
    infer: ShapeRule
    reference: Reference
    arity: int | None  # None: variadic (at least one input)


OPS: dict[str, OpDef] = {}


def register(name: str, infer: ShapeRule, reference: Reference, arity: int | None) -> None:
    if name in OPS:
        raise IRError(f"op '{name}' registered twice")
    OPS[name] = OpDef(name, infer, reference, arity)


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise UnsupportedError(f"unknown primitive op '{name}'") from None


def infer_type(op: str, inputs: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    """The output type of `op` on `inputs`, or IRError saying why the operands do not fit."""
    opdef = get_op(op)
    if opdef.arity is not None and len(inputs) != opdef.arity:
        raise IRError(f"{op} takes {opdef.arity} operand(s), got {len(inputs)}")
    if opdef.arity is None and not inputs:
        raise IRError(f"{op} needs at least one operand")
    return opdef.infer(inputs, attrs)


def evaluate(op: str, inputs: Sequence[np.ndarray], attrs: dict[str, Any], out_type: TensorType) -> np.ndarray:
    """Run the numpy reference of `op`; the result has exactly `out_type`."""
    result = get_op(op).reference(inputs, attrs, out_type)
    result = np.asarray(result).astype(out_type.dtype.to_numpy(), copy=False)
    if result.shape != out_type.shape:
        raise IRError(f"reference of {op} produced shape {result.shape}, expected {out_type.shape}")
    return result
