"""Shape rule and numpy reference of reduce_window with base and window dilations (aot/ir/ops/reduction.py)."""
from __future__ import annotations

import numpy as np
import pytest

from aot.errors import IRError
from aot.ir.types import DType, TensorType
from aot.ir.ops import infer_type
from ops_util import run


def test_reduce_window_dilations_by_hand():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    # base dilation 2: [1, id, 2, id, 3]; windows of 2 with window dilation 2: (0,2), (1,3), (2,4)
    got = run("reduce_window", x, kind="sum", window=(2,), strides=(1,), padding=((0, 0),), base_dilation=(2,), window_dilation=(2,))
    np.testing.assert_array_equal(got, [3.0, 0.0, 5.0])
    got = run("reduce_window", x, kind="max", window=(2,), strides=(1,), padding=((1, 0),), base_dilation=(2,))
    np.testing.assert_array_equal(got, [1.0, 1.0, 2.0, 2.0, 3.0])
    with pytest.raises(IRError, match="window_dilation"):
        infer_type("reduce_window", [TensorType(DType.F32, (3,))],
                   {"kind": "sum", "window": (2,), "strides": (1,), "padding": ((0, 0),), "window_dilation": (0,)})
