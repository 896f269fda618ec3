"""The inputs a gate runs an artifact on: shapes from its manifest, values seeded random.

Every dim the manifest gives as a non-negative integer is fixed; any other (a symbolic
name, -1: a dynamic dim) must be given with `--shape NAME=1x3x224x224`. A `--shape` that
contradicts a fixed dim is refused: the artifact's code was generated for that shape.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from aot.errors import ArgumentError
from aot.feeds import seeded_inputs
from aot.ir.types import DType

Spec = tuple[str, tuple[int, ...], np.dtype]


def _fixed(dim: Any) -> bool:
    return type(dim) is int and dim >= 0


def _dims(dims: Any) -> str:
    return "x".join(str(d) for d in dims)


def input_specs(inputs: list[dict[str, Any]], shapes: Mapping[str, tuple[int, ...]]) -> list[Spec]:
    """(name, shape, numpy dtype) of each manifest input, `shapes` filling its dynamic dims."""
    names = [spec["name"] for spec in inputs]
    unknown = [name for name in shapes if name not in names]
    if unknown:
        raise ArgumentError(f"--shape {unknown[0]}: the artifact has no input of that name "
                            f"(inputs: {', '.join(names) or 'none'})")
    specs: list[Spec] = []
    for spec in inputs:
        name, dims = spec["name"], list(spec["shape"])
        dtype = DType.from_manifest_name(spec["dtype"])
        if dtype is None:
            raise ArgumentError(f"input '{name}': unknown dtype '{spec['dtype']}'")
        given = shapes.get(name)
        if given is None:
            if not all(_fixed(d) for d in dims):
                raise ArgumentError(f"input '{name}' has dynamic dims [{', '.join(map(str, dims))}]: "
                                    f"give its shape with --shape {name}=1x3x224x224")
            specs.append((name, tuple(dims), dtype.to_numpy()))
            continue
        clash = len(given) != len(dims) or any(_fixed(d) and d != g for d, g in zip(dims, given))
        if clash:
            raise ArgumentError(f"--shape {name}={_dims(given)}: the artifact was compiled for "
                                f"{name}={_dims(dims)} (compile another with aot-compile --shape)")
        specs.append((name, tuple(given), dtype.to_numpy()))
    return specs


def random_feeds(specs: list[Spec], seed: int) -> dict[str, np.ndarray]:
    """Seeded values for each input, drawn as `aot verify` draws them (aot/feeds.py)."""
    feeds, _ = seeded_inputs(specs, seed)
    return feeds
