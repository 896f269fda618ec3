"""Shape rule and numpy reference of conv with lhs_dilation (aot/ir/ops/linalg.py): the transposed conv."""
from __future__ import annotations

import numpy as np

from ops_util import run


def test_conv_lhs_dilation_equals_conv_of_spread_input(rng):
    x = rng.standard_normal((1, 2, 4, 3))
    w = rng.standard_normal((3, 2, 2, 3))
    attrs = dict(strides=(1, 2), padding=((1, 1), (2, 0)), dilation=(1, 1), groups=1)
    got = run("conv", x, w, lhs_dilation=(3, 2), **attrs)
    spread = np.zeros((1, 2, 10, 5))
    spread[:, :, ::3, ::2] = x
    np.testing.assert_allclose(got, run("conv", spread, w, **attrs))
    assert run("conv", x, w, lhs_dilation=(1, 1), **attrs).shape == run("conv", x, w, **attrs).shape


def test_conv_transposed_1d_by_hand():
    # stride-2 transposed conv of [1, 2] with kernel [1, 10, 100] (flipped: full correlation)
    x = np.array([[[1.0, 2.0]]])
    w = np.array([[[100.0, 10.0, 1.0]]])
    got = run("conv", x, w, strides=(1,), padding=((2, 2),), dilation=(1,), lhs_dilation=(2,), groups=1)
    np.testing.assert_allclose(got, [[[1.0, 10.0, 102.0, 20.0, 200.0]]])
