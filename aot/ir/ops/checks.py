"""Run-time checks: `%r = check(%ok) {message = "..."}` asserts a boolean scalar.

A check is the one op kept for its effect rather than its value: when `ok`
is false at run time the model's run fails with `message` (the C runtime's
AOT_ERR_CHECK_FAILED, a RunError in Python) instead of returning outputs.
Importers emit one where the compiled graph is only right for some run-time
values, e.g. an ONNX If whose other branch cannot run at the compiled shapes.

Its result is `ok` itself (a check that returned is a check that passed), so
it has a type like every node; nothing reads it. Passes treat checks as roots
(DCE keeps them), fusion materializes their operand, and codegen evaluates
every check, in graph order, after the last kernel.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from aot.errors import IRError, RunError
from aot.ir.types import DType, TensorType
from aot.ir.ops.registry import register

BOOL_SCALAR = TensorType(DType.BOOL, ())


def _check_infer(ins: Sequence[TensorType], attrs: dict[str, Any]) -> TensorType:
    (ok,) = ins
    if ok != BOOL_SCALAR:
        raise IRError(f"check asserts a boolean scalar ({BOOL_SCALAR}), got {ok}")
    message = attrs.get("message")
    if not isinstance(message, str) or not message:
        raise IRError(f"check needs a non-empty string attribute 'message', got {message!r}")
    return BOOL_SCALAR


def _check_ref(ins: Sequence[np.ndarray], attrs: dict[str, Any], out: TensorType) -> np.ndarray:
    if not bool(ins[0]):
        raise RunError(attrs["message"])
    return ins[0]


register("check", _check_infer, _check_ref, 1)
