"""aot/gates/inputs.py: input shapes from a manifest, --shape for dynamic dims, seeded values."""
import numpy as np
import pytest

from aot.errors import ArgumentError
from aot.gates.inputs import input_specs, random_feeds

STATIC = [{"name": "x", "dtype": "float32", "shape": [1, 3, 8, 8]}, {"name": "ids", "dtype": "int64", "shape": [2, 5]}]
DYNAMIC = [{"name": "x", "dtype": "float32", "shape": ["N", 3, 8, 8]}]


def test_static_shapes_come_from_the_manifest():
    specs = input_specs(STATIC, {})
    assert specs == [("x", (1, 3, 8, 8), np.dtype(np.float32)), ("ids", (2, 5), np.dtype(np.int64))]


def test_a_shape_that_matches_is_accepted():
    assert input_specs(STATIC, {"x": (1, 3, 8, 8)})[0][1] == (1, 3, 8, 8)


def test_dynamic_dims_need_a_shape_option():
    with pytest.raises(ArgumentError, match=r"input 'x' has dynamic dims \[N, 3, 8, 8\]: give its shape with "
                                            r"--shape x=1x3x224x224"):
        input_specs(DYNAMIC, {})
    assert input_specs(DYNAMIC, {"x": (4, 3, 8, 8)})[0][1] == (4, 3, 8, 8)


@pytest.mark.parametrize("shape", [(2, 3, 8, 8), (1, 3, 8)])
def test_refuses_a_shape_that_contradicts_the_compiled_one(shape):
    with pytest.raises(ArgumentError, match="the artifact was compiled for x=1x3x8x8"):
        input_specs(STATIC, {"x": shape})


def test_refuses_a_shape_for_an_input_the_artifact_lacks():
    with pytest.raises(ArgumentError, match=r"--shape y: the artifact has no input of that name \(inputs: x, ids\)"):
        input_specs(STATIC, {"y": (1,)})


def test_feeds_are_seeded():
    specs = input_specs(STATIC, {})
    first, again, other = random_feeds(specs, 0), random_feeds(specs, 0), random_feeds(specs, 1)
    assert first["x"].shape == (1, 3, 8, 8) and first["x"].dtype == np.float32
    assert first["ids"].dtype == np.int64
    assert np.array_equal(first["x"], again["x"]) and not np.array_equal(first["x"], other["x"])
