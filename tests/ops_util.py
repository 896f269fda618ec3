"""Helpers for op tests: an op's shape rule and numpy reference, run on arrays."""
import numpy as np

from aot.ir.builder import normalize_attr
from aot.ir.types import DType, TensorType
from aot.ir.ops import evaluate, infer_type


def run(op: str, *arrays: np.ndarray, **attrs) -> np.ndarray:
    """`op` on `arrays`: its type from the shape rule, its value from the reference."""
    attrs = {k: normalize_attr(v) for k, v in attrs.items()}
    out = infer_type(op, [TensorType(DType.from_numpy(a.dtype), a.shape) for a in arrays], attrs)
    return evaluate(op, list(arrays), attrs, out)
