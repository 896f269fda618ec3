"""benchmarks/peer_avx2.py: the onnxruntime copy that takes its AVX2 kernels differs from the
installed one only at its XGETBV instructions, and still runs models right (in a fresh process,
since the test process may have imported the installed onnxruntime already)."""
from __future__ import annotations

import platform
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import peer_avx2
from paths_util import ROOT

pytestmark = [
    pytest.mark.skipif(platform.machine() != "x86_64", reason="XGETBV is an x86-64 instruction"),
    pytest.mark.skipif(shutil.which("objdump") is None or shutil.which("readelf") is None,
                       reason="needs binutils (objdump, readelf)"),
]


def test_copy_differs_only_at_xgetbv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ort = pytest.importorskip("onnxruntime")
    monkeypatch.setattr(peer_avx2, "CACHE", tmp_path)
    root = peer_avx2.avx2_onnxruntime_dir()
    assert peer_avx2.avx2_onnxruntime_dir() == root  # cached: made once
    assert [p.name for p in tmp_path.iterdir()] == [root.name]  # no .partial left behind
    installed = next(Path(ort.__file__).parent.glob("capi/onnxruntime_pybind11_state*.so"))
    patched = root / "onnxruntime" / "capi" / installed.name
    before, after = installed.read_bytes(), patched.read_bytes()
    assert len(before) == len(after)
    offsets = peer_avx2._xgetbv_offsets(installed)
    assert offsets, "no XGETBV found"
    for offset in offsets:
        assert before[offset:offset + 3] == peer_avx2.XGETBV
        assert after[offset:offset + 3] == peer_avx2.XCR0_AVX_ONLY
    mask = bytearray(before)
    for offset in offsets:
        mask[offset:offset + 3] = peer_avx2.XCR0_AVX_ONLY
    assert bytes(mask) == after  # nothing else moved


def test_copy_runs_a_model_right(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / "benchmarks")!r})
        import numpy as np, onnx
        from onnx import TensorProto, helper
        import peer_avx2
        from pathlib import Path
        peer_avx2.CACHE = Path({str(tmp_path)!r})
        peer_avx2.use_avx2_onnxruntime()
        import onnxruntime as ort
        assert ort.__file__.startswith({str(tmp_path)!r}), ort.__file__
        rng = np.random.default_rng(0)
        w = rng.standard_normal((64, 48)).astype(np.float32)
        x = rng.standard_normal((8, 64)).astype(np.float32)
        graph = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["y"]), helper.make_node("Relu", ["y"], ["z"])], "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 64])],
            [helper.make_tensor_value_info("z", TensorProto.FLOAT, [8, 48])],
            [helper.make_tensor("w", TensorProto.FLOAT, [64, 48], w.ravel())])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        z = session.run(None, {{"x": x}})[0]
        np.testing.assert_allclose(z, np.maximum(x @ w, 0), rtol=1e-4, atol=1e-4)
        print("ok")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stdout + done.stderr
