"""Small real artifacts compiled by aot: the seeds that benchmarks/hostile_artifacts.py
damages and that the runtime fuzzer (runtime_c/tests/fuzz_open.c) mutates.

Each seed is a few KB (a tiny ONNX graph, its weights and its code), so that a
mutation lands in the header, the table or the manifest as often as in the
payloads, and a fuzzer input stays small. `repack` writes the same sections with
other codecs: a manifest stored uncompressed lets byte mutations reach the JSON
parser and the manifest checks instead of the zstd decoder.
"""
from __future__ import annotations

import platform
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from aot.artifact import (ENTRY_SIZE, HEADER_SIZE, MAGIC, FORMAT_VERSION, SECTION_ALIGN, Artifact,
                          manifest_bytes, read_artifact)

# name, codec, reserved, offset, stored_size, raw_size, crc32, reserved (packaging/FORMAT.md)
ENTRY = struct.Struct("<24sIIQQQII")
HEADER = struct.Struct("<8sIIQQI28s")


@dataclass(frozen=True)
class Seed:
    name: str
    data: bytes  # the artifact as aot.compile wrote it
    artifact: Artifact  # parsed: manifest dict, decoded sections, table

    @property
    def has_cpu_code(self) -> bool:
        return any(s.startswith("cpu.") for s in self.artifact.sections)

    @property
    def code_section(self) -> str:
        return next(s for s in self.artifact.sections if s.startswith("cpu."))


def _model(name: str, nodes, inputs, outputs, weights=()) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in outputs],
        [numpy_helper.from_array(w, n) for n, w in weights])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def seed_models() -> dict[str, onnx.ModelProto]:
    """Five graphs that cover one and several inputs/outputs, weights, kernels, and a donated
    buffer (cache: past is updated in place into present, the pair inferred from the names)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    k = rng.standard_normal((2, 1, 3, 3)).astype(np.float32)
    return {
        "relu": _model("relu", [helper.make_node("Relu", ["x"], ["y"])], [("x", [2, 3])], [("y", [2, 3])]),
        "gemm": _model("gemm", [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
                                helper.make_node("Relu", ["a"], ["y"])],
                       [("x", [2, 8])], [("y", [2, 4])], [("w", w), ("b", b)]),
        "two_io": _model("two_io", [helper.make_node("Add", ["x", "z"], ["s"]), helper.make_node("Softmax", ["s"], ["p"]),
                                    helper.make_node("Relu", ["s"], ["r"])],
                         [("x", [2, 5]), ("z", [2, 5])], [("p", [2, 5]), ("r", [2, 5])]),
        "conv": _model("conv", [helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
                                helper.make_node("Relu", ["c"], ["y"])],
                       [("x", [1, 1, 6, 6])], [("y", [1, 2, 6, 6])], [("k", k)]),
        "cache": _model("cache", [helper.make_node("Add", ["past", "x"], ["present"]),
                                  helper.make_node("Softmax", ["present"], ["y"])],
                        [("past", [2, 8]), ("x", [2, 8])], [("present", [2, 8]), ("y", [2, 8])]),
    }


# seeds compiled for more than the CPU: name -> (seed model, --target); their PTX and cubin
# sections and the manifest's cuda entry (launch plan) are hostile input too
MORE_TARGETS = {"gemm_cuda": ("gemm", "cpu,cuda"), "gemm_gpu_only": ("gemm", "cuda")}
# seeds with several CPU code variants (--cpu portable on x86-64 hosts): name -> (seed model,
# --cpu); each variant's entry, kernels and code section are hostile input too
VARIANTS = {"conv_variants": ("conv", "x86-64-v4,x86-64-v3")}


def compile_seeds(out_dir: Path, cpu: str = "native", host_code: Path | None = None) -> list[Seed]:
    """Compile every seed model into out_dir/<name>.aot (and MORE_TARGETS' and VARIANTS') and return them parsed.
    With `host_code`, the host-code libraries of the GPU seeds' modules go there, for the test
    stand-in CUDA driver (aot/codegen/nvptx/host_library.py) to run them."""
    import aot
    from aot.codegen.nvptx.host_library import artifact_host_libraries

    out_dir.mkdir(parents=True, exist_ok=True)
    models = seed_models()
    builds = [(name, model, "cpu", cpu) for name, model in models.items()]
    builds += [(name, models[model], target, cpu) for name, (model, target) in MORE_TARGETS.items()]
    if platform.machine() == "x86_64":
        builds += [(name, models[model], "cpu", variants) for name, (model, variants) in VARIANTS.items()]
    seeds = []
    for name, model, target, cpus in builds:
        path = out_dir / f"{name}.aot"
        result = aot.compile(model, path, cpu=cpus if "cpu" in target.split(",") else None, target=target)
        if host_code is not None and "cuda" in target.split(","):
            artifact_host_libraries(result, host_code)
        data = path.read_bytes()
        seeds.append(Seed(name, data, read_artifact(data)))
    return seeds


def _align(n: int) -> int:
    return (n + SECTION_ALIGN - 1) // SECTION_ALIGN * SECTION_ALIGN


def pack_raw(sections: list[tuple[str, bytes, int, int]]) -> bytes:
    """An artifact of (name, stored bytes, codec id, raw size) exactly as given, CRCs computed.

    Unlike aot.artifact.pack_artifact this neither compresses nor checks: the
    stored bytes may be a hand-made zstd frame or a manifest that is not JSON.
    """
    table_end = HEADER_SIZE + ENTRY_SIZE * len(sections)
    offset = _align(table_end)
    entries, payloads = [], []
    for name, stored, codec, raw_size in sections:
        entries.append(ENTRY.pack(name.encode("ascii"), codec, 0, offset, len(stored), raw_size,
                                  zlib.crc32(stored) & 0xFFFFFFFF, 0))
        payloads.append((offset, stored))
        offset = _align(offset + len(stored))
    file_size = payloads[-1][0] + len(payloads[-1][1]) if payloads else table_end
    out = bytearray(file_size)
    out[HEADER_SIZE:table_end] = b"".join(entries)
    for off, stored in payloads:
        out[off:off + len(stored)] = stored
    out[0:HEADER_SIZE] = HEADER.pack(MAGIC, FORMAT_VERSION, len(sections), HEADER_SIZE, file_size, 0, bytes(28))
    return fix_header_crc(out)


def fix_header_crc(buf: bytearray) -> bytes:
    """Recompute the header CRC (over the header with its CRC field zeroed, and the table)."""
    count = struct.unpack_from("<I", buf, 12)[0]
    table_end = min(len(buf), HEADER_SIZE + ENTRY_SIZE * min(count, 64))
    buf[32:36] = b"\0\0\0\0"
    buf[32:36] = struct.pack("<I", zlib.crc32(bytes(buf[0:table_end])) & 0xFFFFFFFF)
    return bytes(buf)


def repack(seed: Seed, codecs: dict[str, str], manifest: dict | None = None) -> bytes:
    """The seed's sections (and manifest, or `manifest`) with codec "none" or "zstd" per section name."""
    import zstandard

    cctx = zstandard.ZstdCompressor(level=9, write_content_size=True)
    items = [("manifest", manifest_bytes(manifest if manifest is not None else seed.artifact.manifest))]
    items += [(n, d) for n, d in seed.artifact.sections.items() if n != "manifest"]
    out = []
    for name, raw in items:
        if codecs.get(name, "zstd") == "zstd" and raw:
            out.append((name, cctx.compress(raw), 1, len(raw)))
        else:
            out.append((name, raw, 0, len(raw)))
    return pack_raw(out)
