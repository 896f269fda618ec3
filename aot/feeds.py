"""Seeded inputs for running a model: shared by `aot verify` and the kernel runner.

By dtype: floats ~ N(0, 1), bools 0/1, ints in [0, 4) -- except ints that index a
Gather (token ids into an embedding), which stay below the table's rows, and inputs
named like masks, which are all ones.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from aot.ir.types import DType

_MASK_NAME = re.compile(r"mask", re.IGNORECASE)


def manifest_specs(tensors: list[dict[str, Any]]) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    """(name, shape, numpy dtype) of a checked manifest's inputs or outputs."""
    specs = []
    for spec in tensors:
        dtype = DType.from_manifest_name(spec["dtype"])
        assert dtype is not None, spec  # read_artifact has checked every name
        specs.append((spec["name"], tuple(spec["shape"]), dtype.to_numpy()))
    return specs


def index_bounds(proto: Any) -> dict[str, int]:
    """Input name -> rows of the smallest table it indexes through Gather (via casts and reshapes)."""
    from onnx import shape_inference

    try:
        proto = shape_inference.infer_shapes(proto)
    except Exception:  # shape inference is a hint here, not a requirement
        pass
    graph = proto.graph
    shapes = {init.name: list(init.dims) for init in graph.initializer}
    for vi in list(graph.value_info) + list(graph.input):
        dims = vi.type.tensor_type.shape.dim
        shapes.setdefault(vi.name, [d.dim_value if d.HasField("dim_value") else 0 for d in dims])
    producer = {out: node for node in graph.node for out in node.output}
    inputs = {i.name for i in graph.input}
    bounds: dict[str, int] = {}
    for node in graph.node:
        if node.op_type != "Gather" or len(node.input) < 2:
            continue
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        table = shapes.get(node.input[0])
        if not table or not (-len(table) <= axis < len(table)) or table[axis] <= 0:
            continue
        source = node.input[1]
        while source not in inputs and source in producer and producer[source].op_type in (
                "Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"):
            source = producer[source].input[0]
        if source in inputs:
            bounds[source] = min(bounds.get(source, table[axis]), table[axis])
    return bounds


def seeded_inputs(specs: list[tuple[str, tuple[int, ...], np.dtype]], seed: int,
                  index_bounds: Mapping[str, int] | None = None) -> tuple[dict[str, np.ndarray], dict[str, str]]:
    """(feeds by name, how each was drawn)."""
    rng = np.random.default_rng(seed)
    bounds = index_bounds or {}
    feeds, how = {}, {}
    for name, shape, dtype in specs:
        if dtype.kind == "f":
            feeds[name], how[name] = rng.standard_normal(shape).astype(dtype), "N(0, 1)"
        elif dtype.kind == "b":
            feeds[name], how[name] = rng.integers(0, 2, shape).astype(dtype), "0/1"
        elif _MASK_NAME.search(name):
            feeds[name], how[name] = np.ones(shape, dtype), "ones (a mask)"
        elif name in bounds:
            feeds[name], how[name] = rng.integers(0, bounds[name], shape).astype(dtype), f"[0, {bounds[name]}) (indexes a table of {bounds[name]} rows)"
        else:
            feeds[name], how[name] = rng.integers(0, 4, shape).astype(dtype), "[0, 4)"
    return feeds, how
