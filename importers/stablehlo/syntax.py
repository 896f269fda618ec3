"""The parsed module: functions, ops, regions, types and attribute values.

Pretty and generic op forms parse to the same `Op`: attribute names are the
generic ones (`broadcast_dimensions`, `comparison_direction`, ...), so a
lowering never asks which form the text used.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class TType:
    """A tensor type as written: element type name and dims (None for '?').

    Non-tensor types (`!stablehlo.token`, tuples) keep their text in `elem`
    with `shape` None.
    """

    elem: str
    shape: tuple[int | None, ...] | None

    @property
    def is_static(self) -> bool:
        return self.shape is not None and all(d is not None for d in self.shape)

    def __str__(self) -> str:
        if self.shape is None:
            return self.elem
        dims = "".join(f"{'?' if d is None else d}x" for d in self.shape)
        return f"tensor<{dims}{self.elem}>"


@dataclass(frozen=True)
class Pos:
    """Where an op is: its line and column in the .mlir text, and its `loc(...)` tokens (raw)."""

    line: int
    col: int
    loc: tuple[str, ...] = ()


@dataclass(frozen=True)
class Enum:
    """An enum attribute: `#stablehlo<comparison_direction GT>` or a bare `GT` in pretty form."""

    value: str


@dataclass(frozen=True)
class Symbol:
    name: str


@dataclass
class DenseLit:
    """`dense<...>` before its type is applied: a nested list, a scalar, or hex bytes."""

    data: Any
    hex_blob: bytes | None = None


@dataclass
class Block:
    args: list[tuple[str, TType]]
    ops: list[Op]


@dataclass
class Region:
    blocks: list[Block]


@dataclass
class Op:
    name: str  # full name: stablehlo.add, func.call, func.return
    results: list[tuple[str, int]]  # (%name, count) per result group
    operands: list[str]  # %name or %name#i
    attrs: dict[str, Any]
    regions: list[Region]
    operand_types: list[TType]
    result_types: list[TType]
    pos: Pos
    extra: dict[str, Any] = field(default_factory=dict)  # pretty-form payloads (e.g. reduce's `applies`)

    @property
    def num_results(self) -> int:
        return sum(count for _, count in self.results)


@dataclass
class Func:
    name: str
    visibility: str
    args: list[tuple[str, TType, dict[str, Any], tuple[str, ...]]]  # (%name, type, attrs, loc)
    result_types: list[TType]
    result_attrs: list[dict[str, Any]]
    body: Block
    pos: Pos


@dataclass
class Module:
    name: str
    funcs: dict[str, Func]
    order: list[str]
    loc_aliases: dict[str, tuple[str, ...]]  # '#loc3' -> tokens of its loc(...)
    source: str
