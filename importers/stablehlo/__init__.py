"""StableHLO front end: `import_stablehlo(path, shapes) -> Graph`.

    graph = import_stablehlo("model.mlir", shapes={"x": (8, 784)})

Reads the MLIR text `jax.jit(f).lower(...).as_text()` or `jax.export` writes,
with our own parser (no MLIR or jaxlib needed), inlines private functions,
unrolls while loops with static trip counts and lowers every op to the
primitive set. Errors name the .mlir line and column and, where the text
carries `loc(...)`, the Python source line JAX recorded.
"""
from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from aot.errors import ModelError
from aot.ir import Graph

from .lower import OP_TABLE, lower_module, supported_ops
from .parser import parse_module

__all__ = ["import_stablehlo", "parse_module", "supported_ops", "OP_TABLE"]


def import_stablehlo(model: str | os.PathLike, shapes: Mapping[str, tuple[int, ...]] | None = None) -> Graph:
    """Parse a .mlir/.stablehlo text file and lower it to a verified IR Graph.

    `shapes` fixes dynamic ('?') input dims (the CLI's --shape); inputs are
    named by JAX's `jax.arg_info`/argument locations, else arg0, arg1, ...
    (argN always works as a --shape name too).
    """
    path = Path(model)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ModelError(f"cannot read '{path}': {err.strerror}") from None
    except UnicodeDecodeError:
        raise ModelError(f"'{path}' is not UTF-8 text; StableHLO bytecode (.mlirbc) is not supported") from None
    return import_text(text, path.name, shapes)


def import_text(text: str, source: str = "<input>", shapes: Mapping[str, tuple[int, ...]] | None = None) -> Graph:
    return lower_module(parse_module(text, source), shapes)
