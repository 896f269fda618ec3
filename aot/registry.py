"""Name -> function tables filled by a decorator (importer op tables)."""
from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

F = TypeVar("F", bound=Callable[..., object])


def registry() -> tuple[dict[str, F], Callable[..., Callable[[F], F]]]:
    """A fresh table and its `@register("name", ...)` decorator."""
    table: dict[str, F] = {}

    def register(*names: str) -> Callable[[F], F]:
        def add(fn: F) -> F:
            for name in names:
                table[name] = fn
            return fn

        return add

    return table, register
