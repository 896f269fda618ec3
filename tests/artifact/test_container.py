"""The .aot container: round trip, determinism, and damaged files."""

import json
import struct
import zlib

import numpy as np
import pytest
import zstandard

from aot.artifact import (
    FAST_LEVEL,
    FORMAT_VERSION,
    HEADER_SIZE,
    LARGE_SECTION_BYTES,
    LEVEL,
    ArtifactError,
    SectionInfo,
    pack_artifact,
    read_artifact,
    section_level,
    write_artifact,
)

MANIFEST = {
    "format_version": FORMAT_VERSION,
    "model": {"name": "tiny"},
    "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 3]}],
    "outputs": [{"name": "y", "dtype": "float32", "shape": []}],
    "arena": {"bytes": 0, "alignment": 64},
    "weights": {"section": "weights", "bytes": 4000, "alignment": 64},
    "cpu": [{"section": "cpu.x86_64", "arch": "x86_64", "entry": "aot_model_entry"}],
    "kernels": [{"name": "k0", "symbol": "aot_kernel_0", "work": 3}],
    "zeta": "insertion order is kept, é",
}
WEIGHTS = bytes(range(250)) * 16
CODE = b"\x7fELF" + bytes(range(256)) * 3  # not compressible much: may be stored raw
SECTIONS = [("weights", WEIGHTS), ("cpu.x86_64", CODE), ("empty", b""), ("raw", b"abc" * 50, "none")]


@pytest.fixture(scope="module")
def blob() -> bytes:
    return pack_artifact(MANIFEST, SECTIONS)


def _owner(blob: bytes, i: int) -> str:
    art_table = read_artifact(blob).table
    for info in art_table:
        if info.offset <= i < info.offset + info.stored_size:
            return info.name
    return "header" if i < HEADER_SIZE + 64 * len(art_table) else "padding"


def test_round_trip(blob):
    art = read_artifact(blob)
    assert art.manifest == MANIFEST
    assert list(art.manifest) == list(MANIFEST)  # order kept
    assert list(art.sections) == ["manifest", "weights", "cpu.x86_64", "empty", "raw"]
    assert art.sections["weights"] == WEIGHTS
    assert art.sections["cpu.x86_64"] == CODE
    assert art.sections["empty"] == b""
    assert art.sections["raw"] == b"abc" * 50
    info = {t.name: t for t in art.table}
    assert info["weights"].codec == "zstd" and info["weights"].stored_size < len(WEIGHTS)
    assert info["raw"].codec == "none"
    assert info["empty"] == SectionInfo("empty", "none", info["empty"].offset, 0, 0, 0)
    for t in art.table:
        assert t.offset % 64 == 0
    assert json.loads(art.sections["manifest"]) == MANIFEST


def test_layout_matches_spec(blob):
    magic, version, count, table_off, size, crc = struct.unpack_from("<8sIIQQI", blob)
    assert (magic, version, count, table_off, size) == (b"AOTMODEL", 2, 5, 64, len(blob))
    assert blob[36:64] == bytes(28)
    zeroed = blob[:32] + b"\0\0\0\0" + blob[36:64] + blob[64:64 + 64 * count]
    assert zlib.crc32(zeroed) == crc
    name, codec, _, off, stored, raw, scrc, _ = struct.unpack_from("<24sIIQQQII", blob, 64 + 64)
    assert name.rstrip(b"\0") == b"weights" and codec == 1
    frame = blob[off:off + stored]
    assert zlib.crc32(frame) == scrc
    assert zstandard.get_frame_parameters(frame).content_size == raw == len(WEIGHTS)


def test_deterministic(blob):
    assert pack_artifact(dict(MANIFEST), list(SECTIONS)) == blob


def test_large_sections_take_the_fast_level_only_where_the_slow_one_gains_nothing():
    rng = np.random.default_rng(0)
    count = LARGE_SECTION_BYTES // 4 + 1000
    dense = rng.normal(0, 1, count).astype(np.float32).tobytes()  # trained f32 weights look like this
    bf16_valued = (np.frombuffer(dense, np.uint32) & 0xFFFF0000).tobytes()  # level 9 gains ~10% here
    assert section_level(dense) == FAST_LEVEL
    assert section_level(bf16_valued) == LEVEL
    assert section_level(dense[:LARGE_SECTION_BYTES - 4]) == LEVEL  # small sections: always the best level
    assert len(zstandard.ZstdCompressor(level=LEVEL).compress(bf16_valued)) < 0.95 * len(
        zstandard.ZstdCompressor(level=FAST_LEVEL).compress(bf16_valued))
    manifest = {**MANIFEST, "weights": {**MANIFEST["weights"], "bytes": len(dense)}}
    for data in (dense, bf16_valued):
        art = read_artifact(pack_artifact(manifest, [("weights", data), ("cpu.x86_64", CODE)]))
        assert bytes(art.sections["weights"]) == data


def test_write_artifact_atomic(tmp_path, blob):
    path = tmp_path / "m.aot"
    n = write_artifact(path, MANIFEST, SECTIONS)
    assert n == len(blob) and path.read_bytes() == blob
    assert read_artifact(path).manifest == MANIFEST
    assert [p.name for p in tmp_path.iterdir()] == ["m.aot"]  # no temp file left
    with pytest.raises(ArtifactError):
        write_artifact(path, MANIFEST, [("bad name", b"")])
    assert path.read_bytes() == blob and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize(
    "sections, match",
    [
        ([("manifest", b"")], "written from the manifest dict"),
        ([("a", b""), ("a", b"")], "duplicate"),
        ([("x" * 24, b"")], "longer than 23"),
        ([("", b"")], "non-empty"),
        ([("a", b"", "lz4")], "unknown codec"),
        ([(f"s{i}", b"") for i in range(64)], "too many sections"),
    ],
)
def test_pack_rejects(sections, match):
    with pytest.raises(ArtifactError, match=match):
        pack_artifact(MANIFEST, sections)


def test_pack_rejects_nan_manifest():
    with pytest.raises(ArtifactError, match="strict JSON"):
        pack_artifact({"format_version": FORMAT_VERSION, "x": float("nan")}, [])


def test_missing_file(tmp_path):
    with pytest.raises(ArtifactError, match="cannot open"):
        read_artifact(tmp_path / "nope.aot")


def test_bad_magic(blob):
    with pytest.raises(ArtifactError, match="bad magic"):
        read_artifact(b"NOTMODEL" + blob[8:])


def test_older_and_newer_format_versions_say_which_side_to_update(blob):
    older = blob[:8] + struct.pack("<I", FORMAT_VERSION - 1) + blob[12:]
    with pytest.raises(ArtifactError, match=f"^format version {FORMAT_VERSION - 1}; this reader reads "
                                            f"{FORMAT_VERSION}: recompile the model$"):
        read_artifact(older)
    newer = blob[:8] + struct.pack("<I", FORMAT_VERSION + 1) + blob[12:]
    with pytest.raises(ArtifactError, match=f"format version {FORMAT_VERSION + 1}; .*a newer aot wrote it"):
        read_artifact(newer)


@pytest.mark.parametrize("version", [FORMAT_VERSION - 1, FORMAT_VERSION + 5, "2"])
def test_a_manifest_version_other_than_the_headers_is_malformed(version):
    with pytest.raises(ArtifactError, match=f"section 'manifest': format_version {version!r}, not the header's"):
        read_artifact(pack_artifact(dict(MANIFEST, format_version=version), SECTIONS))


def test_every_truncation_point(blob):
    art = read_artifact(blob)
    first = art.table[0].offset
    for n in range(len(blob)):
        with pytest.raises(ArtifactError) as ei:
            read_artifact(blob[:n])
        msg = str(ei.value)
        if n < HEADER_SIZE:
            assert "header alone needs 64" in msg
        else:
            assert f"truncated: file is {n} bytes, header says {len(blob)}" in msg
    # the classes covered: inside the header, inside the table, inside a section
    assert HEADER_SIZE < first < len(blob)


def test_trailing_data(blob):
    with pytest.raises(ArtifactError, match="trailing data"):
        read_artifact(blob + b"\0")


def test_flipped_byte_in_every_position(blob):
    for i in range(len(blob)):
        bad = bytearray(blob)
        bad[i] ^= 0x10
        owner = _owner(blob, i)
        with pytest.raises(ArtifactError) as ei:
            read_artifact(bytes(bad))
        msg = str(ei.value)
        if owner == "header":
            assert ("header" in msg or "magic" in msg or "version" in msg or "truncated" in msg
                    or "trailing" in msg), (i, msg)
        elif owner == "padding":
            assert "padding" in msg, (i, msg)
        else:
            assert f"section '{owner}'" in msg, (i, msg)
            assert "checksum mismatch (stored 0x" in msg, (i, msg)


def _reseal(buf: bytearray, count: int) -> bytes:
    """Recompute the header CRC after an edit (to reach checks behind it)."""
    buf[32:36] = b"\0\0\0\0"
    crc = zlib.crc32(bytes(buf[:64 + 64 * count]))
    buf[32:36] = struct.pack("<I", crc)
    return bytes(buf)


def test_section_bounds_checked_behind_crc(blob):
    count = 5
    entry = 64 + 64 * 1  # weights
    bad = bytearray(blob)
    struct.pack_into("<Q", bad, entry + 40, 2**64 - 1)  # stored_size wraps off + n
    with pytest.raises(ArtifactError, match="section 'weights': bytes .* lie outside the file"):
        read_artifact(_reseal(bad, count))
    bad = bytearray(blob)
    struct.pack_into("<Q", bad, entry + 32, 8)  # into the header
    with pytest.raises(ArtifactError, match="section 'weights': offset 8"):
        read_artifact(_reseal(bad, count))
    bad = bytearray(blob)
    struct.pack_into("<Q", bad, entry + 48, 5)  # wrong raw size
    with pytest.raises(ArtifactError, match="section 'weights': zstd frame content size"):
        read_artifact(_reseal(bad, count))
    bad = bytearray(blob)
    bad[entry:entry + 24] = b"x" * 24  # no NUL
    with pytest.raises(ArtifactError, match="section 1: name is not NUL-terminated"):
        read_artifact(_reseal(bad, count))


def test_manifest_strict_json():
    with pytest.raises(ArtifactError, match="not valid UTF-8 JSON"):
        blob = pack_artifact({"format_version": FORMAT_VERSION}, [])
        # build a manifest with a duplicate key by hand, resealing CRCs
        text = b'{"format_version": 2, "format_version": 2}'
        hdr = bytearray(blob[:128])
        struct.pack_into("<IIQQQI", hdr, 64 + 24, 0, 0, 128, len(text), len(text), zlib.crc32(text))
        struct.pack_into("<Q", hdr, 24, 128 + len(text))
        read_artifact(_reseal(hdr, 1) + text)
