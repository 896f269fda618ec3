"""Sample artifacts for the gate tests (tests/gates/): the bundled samples compiled once per module.

    artifacts = compile_samples(tmp_path_factory, {"lenet": {}, "lenet_v3": {"cpu": "x86-64-v3"}})

A name is a model's (a sample of models/make_samples.py, or `lenet_logits`: lenet without
its softmax, a changed model that compiles fast) or a model's followed by `_TAG`; the
options go to `aot.compile`. Every entry of the result is a Path; `MODEL.onnx` entries
name the source models.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import onnx
import pytest

import aot
import make_samples


def lenet_logits() -> onnx.ModelProto:
    """lenet ending at its last Gemm: one kernel fewer, another output name."""
    model = make_samples.make_sample("lenet")
    softmax = model.graph.node[-1]
    assert softmax.op_type == "Softmax"
    model.graph.output[0].name = softmax.input[0]
    del model.graph.node[-1]
    model.graph.name = "lenet_logits"
    return model


def compile_samples(factory: pytest.TempPathFactory, builds: dict[str, dict[str, Any]]) -> dict[str, Path]:
    out = factory.mktemp("gates")
    models = make_samples.write_samples(out)
    models["lenet_logits"] = out / "lenet_logits.onnx"
    onnx.save(lenet_logits(), models["lenet_logits"])
    paths: dict[str, Path] = {f"{name}.onnx": path for name, path in models.items()}
    for name, options in builds.items():
        paths[name] = out / f"{name}.aot"
        model = name if name in models else name.rpartition("_")[0]
        aot.compile(models[model], paths[name], **options)
    return paths


def damaged_copies(artifact: Path, out: Path) -> dict[str, Path]:
    """`truncated` (its first half), `flipped` (one byte of a section changed: a checksum
    mismatch) and `garbage` (no artifact at all)."""
    data = artifact.read_bytes()
    copies = {"truncated": data[:len(data) // 2], "garbage": b"not an artifact\n"}
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    copies["flipped"] = bytes(flipped)
    paths = {}
    for name, content in copies.items():
        paths[name] = out / f"{name}.aot"
        paths[name].write_bytes(content)
    return paths
