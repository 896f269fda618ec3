"""LLVM constants made once per process: `constant(type, value)` is `ir.Constant(type, value)`,
memoized.

llvmlite formats a constant each time a new ir.Constant is printed, element by element
(a vector splat's zero vector and lane mask, a shuffle's mask, a loop's bounds); an
ir.Constant caches its text, so one shared object per (type, value) is formatted once.
Formatting fresh constants was ~20% of printing a conv body's module (mobilenetv2: 24,000
vector constants). A constant belongs to no module or function, so sharing it is safe.
"""
from __future__ import annotations

import struct
from typing import Any

from llvmlite import ir

# kept small: a long-lived process compiling many models does not grow without bound
_MAX_ENTRIES = 1 << 14
_made: dict[tuple[str, Any], ir.Constant] = {}
_UNCACHED = object()  # _key's answer for a value it does not know


def constant(ty: ir.Type, value: Any) -> ir.Constant:
    """ir.Constant(ty, value), the same object for an equal (type, value)."""
    key = _key(value)
    if key is _UNCACHED:
        return ir.Constant(ty, value)
    full = (str(ty), key)
    found = _made.get(full)
    if found is None:
        if len(_made) >= _MAX_ENTRIES:
            _made.clear()
        found = _made[full] = _zero(ty, key) or ir.Constant(ty, value)
    return found


def _zero(ty: ir.Type, key: Any) -> ir.Constant | None:
    """A floating-point zero (+0.0) or zero vector in LLVM's short spellings, else None.
    llvmlite spells a float 0.0 as `float` and 0x0 padded to 18 columns, 22 characters per
    lane, and a zero vector lane by lane: a 16-lane one took 360 characters (accumulator
    starts, select and masked-load fills, splat bases), a fifth of a depthwise conv body's
    text, which is printed, hashed, rewritten (canonical.py) and parsed."""
    floats = (ir.FloatType, ir.DoubleType)
    if not (key is None or (type(key) is tuple and key[0] is float and not any(key[1]))):
        return None  # not all +0.0 (a float's or a float vector's key: float and its bits)
    if isinstance(ty, ir.VectorType) and isinstance(ty.element, floats):
        return _Zero(ty, "zeroinitializer")
    return _Zero(ty, "0.0") if isinstance(ty, floats) else None


class _Zero(ir.Constant):
    """The zero of `ty` (its .constant as ir.Constant(ty, None) has it), spelled `text`."""

    def __init__(self, ty: ir.Type, text: str):
        super().__init__(ty, None)
        self._text = text

    def _get_reference(self) -> str:
        return self._text


def _key(value: Any) -> Any:
    """A hashable key telling apart every value that formats differently: floats by their
    bits (0.0 from -0.0, one NaN from another), True from 1; _UNCACHED for what it does not
    know (IR values, byte strings)."""
    kind = type(value)
    if kind is list or kind is tuple:
        # the common vectors in one step: all ints (lane masks, shuffles) or all floats
        if value and all(type(v) is int for v in value):
            return (int, tuple(value))
        if value and all(type(v) is float for v in value):
            return (float, struct.pack(f"<{len(value)}d", *value))
        if value and all(type(v) is bool for v in value):  # lane masks of selects and masked loads
            return (bool, tuple(value))
        keys = tuple(_key(v) for v in value)
        return _UNCACHED if any(k is _UNCACHED for k in keys) else keys
    if value is None or value is ir.Undefined:
        return value if value is None else "undef"
    if isinstance(value, bool):
        return (bool, value)
    if isinstance(value, int):
        return (int, value)
    if isinstance(value, float):
        return (float, struct.pack("<d", value))
    return _UNCACHED
