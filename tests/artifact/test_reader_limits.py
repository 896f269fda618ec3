"""The Python reader (aot/artifact.py, `aot inspect`) against hostile artifacts: what a file
may make it allocate, and a clean ArtifactError, never a traceback, for every manifest the
C runtime would refuse (issue 11, item 3 and the reader's side of item 5)."""

import copy
import resource
import struct
import time
import zlib

import pytest
import zstandard
from click.testing import CliRunner

from aot import artifact
from aot.artifact import ArtifactError, pack_artifact, read_artifact
from aot.cli import main

MANIFEST = {
    "format_version": artifact.FORMAT_VERSION,
    "model": {"name": "tiny"},
    "inputs": [{"name": "x", "dtype": "float32", "shape": [4, 37]}],
    "outputs": [{"name": "y", "dtype": "float32", "shape": [4, 37]}, {"name": "s", "dtype": "float32", "shape": []}],
    "arena": {"bytes": 592, "alignment": 64},
    "weights": {"section": "weights", "bytes": 148, "alignment": 64},
    "cpu": [{"section": "cpu.x86_64", "arch": "x86_64", "entry": "aot_model_entry"}],
    "kernels": [{"name": "k0", "symbol": "aot_kernel_0", "work": 148, "cost_ns": 10}],
}
WEIGHTS = bytes(range(148))
CODE = b"\x7fELF" + bytes(200)


def _pack(manifest: dict, weights: bytes = WEIGHTS) -> bytes:
    return pack_artifact(manifest, [("weights", weights), ("cpu.x86_64", CODE)])


def _align(n: int) -> int:
    return -(-n // 64) * 64


def _pack_frames(manifest: dict, frames: list[tuple[str, bytes, int]]) -> bytes:
    """An artifact whose sections after the manifest are ready-made zstd frames (name, frame,
    raw size), written per packaging/FORMAT.md: a bomb needs no raw bytes to build."""
    text = artifact.manifest_bytes(manifest)
    items = [("manifest", 0, text, len(text))] + [(name, 1, frame, raw) for name, frame, raw in frames]
    offset = _align(64 + 64 * len(items))
    table, payloads = b"", []
    for name, codec, stored, raw in items:
        table += struct.pack("<24sIIQQQII", name.encode(), codec, 0, offset, len(stored), raw, zlib.crc32(stored), 0)
        payloads.append((offset, stored))
        offset = _align(offset + len(stored))
    file_size = payloads[-1][0] + len(payloads[-1][1])
    out = bytearray(file_size)
    out[:64] = struct.pack("<8sIIQQI28s", b"AOTMODEL", artifact.FORMAT_VERSION, len(items), 64, file_size, 0, bytes(28))
    out[64:64 + len(table)] = table
    out[32:36] = struct.pack("<I", zlib.crc32(bytes(out[:64 + len(table)])))
    for off, stored in payloads:
        out[off:off + len(stored)] = stored
    return bytes(out)


def _zeros_frame(n: int) -> bytes:
    """A zstd frame of n zero bytes that records its content size, built in 1 MiB steps."""
    cobj = zstandard.ZstdCompressor(level=1, write_content_size=True).compressobj(size=n)
    chunk = bytes(1 << 20)
    parts = [cobj.compress(chunk) for _ in range(n // len(chunk))]
    return b"".join(parts) + cobj.compress(bytes(n % len(chunk))) + cobj.flush()


def _peak_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def _with_raw_manifest(monkeypatch, text: bytes) -> bytes:
    """An artifact whose manifest section is `text`, as written."""
    monkeypatch.setattr(artifact, "manifest_bytes", lambda manifest: text)
    return _pack(MANIFEST)


def test_the_plain_manifest_reads():
    art = read_artifact(_pack(MANIFEST))
    assert art.manifest == MANIFEST and art.sections["weights"] == WEIGHTS


def test_manifest_over_16_mib_is_refused_before_it_is_decoded():
    manifest = dict(MANIFEST, pad=" " * (16 << 20))
    with pytest.raises(ArtifactError, match=r"section 'manifest': raw size \d+ is over the 16777216 bytes a manifest"):
        read_artifact(_pack(manifest))


def test_manifest_of_millions_of_values_is_refused_before_it_is_parsed():
    manifest = dict(MANIFEST, pad=[0] * 2_000_000)
    with pytest.raises(ArtifactError, match=r"about \d+ JSON values, over the 1500000 a manifest may hold"):
        read_artifact(_pack(manifest))


@pytest.mark.parametrize("depth", [65, 100_000])
def test_deep_nesting_is_an_artifact_error(monkeypatch, depth):
    text = b'{"format_version": 2, "x": ' + b"[" * depth + b"]" * depth + b"}"
    with pytest.raises(ArtifactError, match="nesting deeper than 64"):
        read_artifact(_with_raw_manifest(monkeypatch, text))


def test_a_manifest_object_of_more_than_1024_members_is_refused_as_the_runtime_refuses_it():
    assert read_artifact(_pack(dict(MANIFEST, pad={f"k{i}": i for i in range(1024)})))
    with pytest.raises(ArtifactError, match="section 'manifest': .*more than 1024 members"):
        read_artifact(_pack(dict(MANIFEST, pad={f"k{i}": i for i in range(1025)})))


def test_nesting_of_64_is_allowed(monkeypatch):
    manifest = copy.deepcopy(MANIFEST)
    manifest["pad"] = nested = []
    for _ in range(62):  # the manifest object is level 1, "pad" level 2
        nested.append([])
        nested = nested[0]
    assert read_artifact(_pack(manifest)).manifest == manifest


def test_weights_bomb_is_not_decoded_by_reading_the_manifest():
    """1.5 GB of zeros in a 46 KB frame: reading (what `aot inspect` does) takes no
    memory for them; the caller's limit refuses them; decoding them is asked for."""
    n = 1_500_000_000
    manifest = dict(MANIFEST, weights={"section": "weights", "bytes": n})
    blob = _pack_frames(manifest, [("weights", _zeros_frame(n), n), ("cpu.x86_64", zstandard.compress(CODE), len(CODE))])
    assert len(blob) < 64_000
    before, start = _peak_mib(), time.perf_counter()
    art = read_artifact(blob)
    assert art.manifest["weights"]["bytes"] == n and art.sections["cpu.x86_64"] == CODE
    assert time.perf_counter() - start < 1.0 and _peak_mib() - before < 64
    with pytest.raises(ArtifactError, match=r"section 'weights': 1500000000 bytes would bring the sections to "
                                            r"\d+ bytes, over max_memory_bytes 100000000"):
        read_artifact(blob, max_memory_bytes=100_000_000)


def test_weights_frame_must_be_the_size_the_manifest_says():
    manifest = dict(MANIFEST, weights={"section": "weights", "bytes": 148})
    blob = _pack_frames(manifest, [("weights", _zeros_frame(1 << 30), 1 << 30),
                                   ("cpu.x86_64", zstandard.compress(CODE), len(CODE))])
    with pytest.raises(ArtifactError, match="section 'weights': raw size 1073741824 != 148 bytes in the manifest"):
        read_artifact(blob)


@pytest.mark.parametrize("name", ["cpu.x86_64", "unknown"])
def test_section_the_manifest_does_not_size_is_bounded(name):
    n = (256 << 20) + 1
    code = ("cpu.x86_64", zstandard.compress(CODE), len(CODE))
    frames = [("weights", zstandard.compress(WEIGHTS), len(WEIGHTS)), (name, _zeros_frame(n), n)]
    if name != "cpu.x86_64":
        frames.append(code)
    with pytest.raises(ArtifactError, match=f"section '{name}': raw size 268435457 is over the 268435456 bytes"):
        read_artifact(_pack_frames(MANIFEST, frames))


def _edit(path: str, value):
    """MANIFEST with the field at dotted `path` set to `value` (a key deleted for ...)."""
    manifest = copy.deepcopy(MANIFEST)
    *parents, last = path.split(".")
    node = manifest
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is ...:
        del node[last]
    elif isinstance(node, list):
        node[int(last)] = value
    else:
        node[last] = value
    return manifest


DAMAGED = [
    ("inputs", ..., '"inputs" must be an array'),
    ("inputs", {"x": 1}, '"inputs" must be an array'),
    ("inputs.0", "x", r"inputs\[0\]: must be an object"),
    ("inputs.0.name", "", r"inputs\[0\]: empty name"),
    ("inputs.0.name", "a\0b", r'inputs\[0\]: "name" must be a string without NULs'),
    ("inputs.0.dtype", "complex64", r'unknown dtype "complex64"'),
    ("inputs.0.shape", [4, -1], r"shape\[1\] must be a non-negative integer"),
    ("inputs.0.shape", [4, 1.5], r"shape\[1\] must be a non-negative integer"),
    ("inputs.0.shape", [True], r"shape\[0\] must be a non-negative integer"),
    ("inputs.0.shape", [1] * 33, "at most 32 ints"),
    ("inputs.0.shape", [2**32, 2**32], "byte size overflows"),
    ("outputs", [], '"outputs" is empty'),
    ("outputs.1.name", "y", r"outputs\[1\]: duplicate name 'y'"),
    ("arena", ..., '"arena" must be an object'),
    ("arena", None, '"arena" must be an object'),
    ("arena.bytes", ..., 'arena: missing "bytes"'),
    ("arena.bytes", -1, r'arena: "bytes" must be an integer in \[0, 9223372036854775807\]'),
    ("arena.alignment", 3, "arena: alignment 3 is not a power of two"),
    ("arena.alignment", 8192, r'"alignment" must be an integer in \[1, 4096\]'),
    ("weights", None, '"weights" must be an object'),
    ("weights", ..., '"weights" must be an object'),
    ("weights.bytes", 149, "section 'weights': raw size 148 != 149 bytes in the manifest"),
    ("weights.section", "w2", "section 'w2': missing"),
    ("cpu", ..., '"cpu" must be an array'),
    ("cpu.0.section", "cpu.nope", "section 'cpu.nope': missing"),
    ("cpu.0.arch", 7, r'cpu\[0\]: "arch" must be a string'),
    ("cpu.0.entry", None, r'cpu\[0\]: "entry" must be a string'),
    ("kernels", ..., '"kernels" must be an array'),
    ("kernels", None, '"kernels" must be an array'),
    ("kernels.0", 1, r"kernels\[0\]: must be an object"),
    ("kernels.0.symbol", ..., r'kernels\[0\]: missing "symbol"'),
    ("kernels.0.work", 2**61, r'kernels\[0\]: "work" must be an integer in \[0, 2305843009213693951\]'),
    ("kernels.0.work", 1.5, r'"work" must be an integer'),
    ("kernels.0.cost_ns", -3, r'"cost_ns" must be an integer'),
    ("model.name", 5, r'model: "name" must be a string'),
    ("checks", [{"message": ""}], r"checks\[0\]: empty message"),
    ("checks", {}, '"checks" must be an array'),
]


@pytest.mark.parametrize("path, value, message", DAMAGED, ids=[f"{p}={v!r}"[:40] for p, v, _ in DAMAGED])
def test_damaged_manifest_is_an_artifact_error(path, value, message):
    with pytest.raises(ArtifactError, match=message):
        read_artifact(_pack(_edit(path, value)))


@pytest.mark.parametrize("path, value, message", DAMAGED[::3], ids=[f"{p}={v!r}"[:40] for p, v, _ in DAMAGED[::3]])
def test_inspect_reports_a_damaged_manifest_without_a_traceback(tmp_path, path, value, message):
    bad = tmp_path / "bad.aot"
    bad.write_bytes(_pack(_edit(path, value)))
    for args in (["inspect", str(bad)], ["inspect", "--json", str(bad)]):
        result = CliRunner().invoke(main, args)
        assert result.exit_code != 0 and isinstance(result.exception, SystemExit), result.output
        assert "Traceback" not in result.output and "section" in result.output, result.output


def test_inspect_shows_a_manifest_that_checks_out(tmp_path):
    good = tmp_path / "good.aot"
    good.write_bytes(_pack(MANIFEST))
    result = CliRunner().invoke(main, ["inspect", str(good)])
    assert result.exit_code == 0, result.output
    assert "k0" in result.output
