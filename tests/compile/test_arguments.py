"""aot.compile's arguments (issue 11): a wrong one is an ArgumentError in the API's own terms,
raised before any work; the output never overwrites the model."""
import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import aot
from aot import driver
from aot.errors import AotError, ArgumentError


def _model(dims=("batch", 4)):
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(dims))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the compile starts: argument errors come first."""
    def started(*args, **kwargs):
        raise AssertionError("the model was imported before the arguments were checked")

    monkeypatch.setattr(driver, "import_model", started)


@pytest.mark.parametrize("shapes, message", [
    ({"x": "8x4"}, r"shapes\['x'\] must be a tuple of ints like \(8, 4\), \(\) for a scalar, got the str '8x4' "
                   r"\(write \(8, 4\); NAME=8x4 is the command line's --shape form\)"),
    ({"x": (None, 4)}, r"shapes\['x'\] = \(None, 4\): dim 0 is None: aot compiles static shapes, so every dim needs a size"),
    ({"x": (8, 4.0)}, r"shapes\['x'\] = \(8, 4.0\): dim 1 is 4.0, not an int"),
    ({"x": (8, True)}, r"dim 1 is True, not an int"),
    ({"x": (8, -1)}, r"dim 1 is -1; sizes are >= 0"),
    ({"x": 8}, r"shapes\['x'\] must be a tuple of ints .*, got int 8"),
    ({"x": b"\x08\x04"}, r"shapes\['x'\] must be a tuple of ints .*, got bytes"),
    ({1: (8, 4)}, r"shapes keys are the model's input names \(str\); got int 1"),
    ([("x", (8, 4))], r"shapes must be a dict of input name -> .*e.g. \{'x': \(1, 3, 224, 224\)\}; got list"),
])
def test_bad_shapes_are_argument_errors_in_api_terms(shapes, message, no_work):
    with pytest.raises(ArgumentError, match=message) as info:
        aot.compile(_model(), shapes=shapes)
    assert isinstance(info.value, AotError) and aot.ArgumentError is ArgumentError


def test_shapes_take_any_int_sequence():
    for dims in [(8, 4), [8, 4], np.array([8, 4]), (np.int64(8), np.int32(4))]:
        result = aot.compile(_model(), shapes={"x": dims})
        assert result.manifest["inputs"][0]["shape"] == [8, 4]


def test_verify_checks_shapes_too(tmp_path):
    from aot.verify import verify

    model = tmp_path / "m.onnx"
    model.write_bytes(_model().SerializeToString())
    with pytest.raises(ArgumentError, match=r"shapes\['x'\] = \(None, 4\)"):
        verify(model, shapes={"x": (None, 4)})


def test_a_dynamic_dim_names_the_api_fix():
    with pytest.raises(aot.UnsupportedError) as info:
        aot.compile(_model())
    assert str(info.value) == "input 'x' dim 0 ('batch') is dynamic; fix it with shapes={'x': (1, 4)}"
    assert info.value.cli_message == "input 'x' dim 0 ('batch') is dynamic; fix it with --shape x=1x4"
    with pytest.raises(aot.ModelError, match=r"shapes\['x'\] = \(2, 4, 1\) has rank 3, but input 'x' has rank 2"):
        aot.compile(_model(), shapes={"x": (2, 4, 1)})
    with pytest.raises(aot.ModelError, match=r"^shapes names unknown input\(s\) 'z'; the model's inputs are: 'x'$"):
        aot.compile(_model(), shapes={"z": (2, 4)})


def test_output_paths_are_checked_before_the_compile(tmp_path, no_work):
    model = tmp_path / "m.onnx"
    model.write_bytes(_model().SerializeToString())
    (tmp_path / "link.onnx").symlink_to(model)
    with pytest.raises(ArgumentError, match="is the model file .* itself: writing it would destroy the model; "
                                            "write the artifact elsewhere, e.g. '.*m.aot'"):
        aot.compile(model, tmp_path / "link.onnx", shapes={"x": (1, 4)})
    with pytest.raises(ArgumentError, match="is the model file"):
        aot.compile(str(tmp_path / "link.onnx"), str(model))
    with pytest.raises(ArgumentError, match=r"cannot write '.*x.aot': the directory '.*missing' does not exist"):
        aot.compile(model, tmp_path / "missing" / "x.aot")
    with pytest.raises(ArgumentError, match="it is a directory"):
        aot.compile(model, tmp_path)
    with pytest.raises(ArgumentError, match="output_path must be a path"):
        aot.compile(model, 42)
    with pytest.raises(ArgumentError, match="unknown CPU 'pentium9'"):
        aot.compile(model, tmp_path / "x.aot", cpu="pentium9")
    with pytest.raises(ArgumentError, match="target 'gpu' is not supported"):
        aot.compile(model, tmp_path / "x.aot", target="gpu")
    with pytest.raises(ArgumentError, match="bind must be a dict"):
        aot.compile(model, tmp_path / "x.aot", shapes={"x": (1, 4)}, bind=[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.onnx", "m.onnx"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into any directory")
def test_a_directory_without_write_permission_is_refused(tmp_path, no_work):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ArgumentError, match="no permission to create files in"):
        aot.compile(_model(), locked / "x.aot", shapes={"x": (1, 4)})


def test_the_artifact_is_written_through_a_temp_file(tmp_path):
    out = tmp_path / "m.aot"
    result = aot.compile(_model(), out, shapes={"x": (1, 4)})
    assert out.read_bytes() == result.artifact and result.path == out
    assert [p.name for p in tmp_path.iterdir()] == ["m.aot"]
