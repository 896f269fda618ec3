"""The static object of --emit c (aot/codegen/cpu/static_entry.py): one global symbol, the weights
in an aligned read-only section of their own, the same results as the artifact's entry."""
from __future__ import annotations

import ctypes
import shutil
import subprocess
import tempfile

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from aot.codegen.cpu import CpuTarget
from aot.codegen.cpu.static_entry import STATIC_UNDEFINED, emit_static_object, entry_text
from aot.codegen.cpu.symbols import LOADER_RESOLVED, undefined_references
from aot.codegen.cpu.targets import plan_lanes
from aot.driver import import_model
from aot.errors import ArgumentError
from aot.pipeline import PipelineOptions, default_passes, run_pipeline
from codegen_util import Compiled

HOST = CpuTarget.host()


def _plan():
    """Two dense layers (weights, several kernels) over x [4, 24]."""
    rng = np.random.default_rng(0)
    w1, w2 = rng.standard_normal((24, 40)).astype(np.float32), rng.standard_normal((40, 7)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m"]), helper.make_node("Sigmoid", ["m"], ["y"])]
    graph = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 24])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 7])],
                              initializer=[numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    g, _, _ = import_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    return run_pipeline(g, PipelineOptions(passes=default_passes(plan_lanes([HOST]))))


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    plan = _plan()
    return plan, emit_static_object(plan, HOST, "two")


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed")
    return found


def test_only_the_entries_are_global_and_only_libc_and_the_pool_are_undefined(built, tmp_path):
    _, obj = built
    (tmp_path / "two.o").write_bytes(obj)
    listed = subprocess.run([_tool("nm"), "-g", "--defined-only", "two.o"], cwd=tmp_path, capture_output=True,
                            text=True, check=True).stdout.split()
    assert listed[1::3] == ["T", "T"] and listed[2::3] == ["two_run", "two_run_threads"], listed
    assert set(undefined_references(obj)) <= LOADER_RESOLVED | STATIC_UNDEFINED
    weak = subprocess.run([_tool("nm"), "-u", "two.o"], cwd=tmp_path, capture_output=True, text=True,
                          check=True).stdout.split()
    assert weak[weak.index("aot_pool_run") - 1] == "w", weak  # links without the runtime


def test_the_weights_are_an_aligned_read_only_section_holding_the_plans(built, tmp_path):
    plan, obj = built
    assert len(plan.weights) > 4000
    (tmp_path / "two.o").write_bytes(obj)
    sections = subprocess.run([_tool("readelf"), "-SW", "two.o"], cwd=tmp_path, capture_output=True, text=True,
                              check=True).stdout
    row = next(line for line in sections.splitlines() if ".rodata.two_weights" in line)
    fields = row.split("]", 1)[1].split()  # name type address offset size entsize flags link info align
    offset, size, flags, align = int(fields[3], 16), int(fields[4], 16), fields[6], int(fields[-1])
    assert (size, flags, align) == (len(plan.weights), "A", 64)  # allocated, neither writable nor code
    assert obj[offset:offset + size] == plan.weights


def test_same_plan_same_bytes(built):
    plan, obj = built
    assert emit_static_object(plan, HOST, "two") == obj


def test_the_entry_computes_what_the_artifacts_entry_does(built, tmp_path):
    """Linked into a shared object only to reach it from ctypes: the same bits as aot_model_entry."""
    plan, obj = built
    (tmp_path / "two.o").write_bytes(obj)
    subprocess.run([_tool("cc"), "-shared", "two.o", "-o", "two.so"], cwd=tmp_path, check=True)
    run = ctypes.CDLL(str(tmp_path / "two.so")).two_run
    run.restype = ctypes.c_int32
    x = np.random.default_rng(1).standard_normal((4, 24)).astype(np.float32)
    y = np.zeros((4, 7), np.float32)
    arena = np.zeros(plan.arena_bytes + 64, np.uint8)
    aligned = arena.ctypes.data + (-arena.ctypes.data) % 64
    assert run(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(y.ctypes.data), ctypes.c_void_p(aligned)) == 0
    (want,) = Compiled(plan).run({"x": x})
    np.testing.assert_array_equal(y, want)


def test_the_kernels_and_the_runtime_entry_are_internal(built):
    plan, _ = built
    text = entry_text(plan, HOST, "two", [f"body{i}" for i in range(len(plan.kernels))], HOST.target_machine())
    assert 'define i32 @"two_run"(i8* %"input0", i8* %"output0", i8* %"arena")' in text
    assert 'define internal void @"aot_model_entry"' in text
    assert text.count('define internal void @"aot_kernel_') == len(plan.kernels)


def test_a_cross_target_is_refused():
    other = CpuTarget.from_name("neoverse-v1" if HOST.arch == "x86_64" else "x86-64-v3")
    with pytest.raises(ArgumentError, match="builds for this host's architecture"):
        emit_static_object(_plan(), other, "two")


def test_a_temporary_folder_with_quotes_and_backslashes_in_its_name(built, tmp_path, monkeypatch):
    """The weights reach the assembler by path (.incbin): quoted for it, and for LLVM's string."""
    odd = tmp_path / 'we"ird\\dir $x'
    odd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(odd))
    plan, obj = built
    assert emit_static_object(plan, HOST, "two") == obj
