"""Writer and reader of the .aot container (the Python side).

The byte layout is specified in packaging/FORMAT.md; the C reader in
runtime_c/src/container.c implements the same checks. Both treat an artifact
as hostile input: every offset, size and checksum is verified before a byte
of a section is used, and every problem is an ArtifactError naming the
section and what is wrong.

Both bound what a file can make them allocate before decoding anything: the
manifest is at most 16 MiB and 1.5 million JSON values (the C runtime's
parse tree at most 128 MiB), nested at most 64 deep; the weights must be the
size the manifest says; every other section (code, unknown) is at most
256 MiB; and the caller may cap the total (`max_memory_bytes`). The tooling
section (aot/tooling.py), which only this reader decodes, has the manifest's
JSON bounds.

Writing is deterministic: the same manifest dict (same insertion order) and
the same sections give the same bytes.
"""

from __future__ import annotations

import functools
import json
import os
import struct
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence, Union

import zstandard

from aot import tooling as tooling_section
from aot.arith import align_up
from aot.errors import ArtifactError
from aot.manifest_check import check_manifest

MAGIC = b"AOTMODEL"
# The artifact format's version: the header's and the manifest's format_version, and
# AOT_FORMAT_VERSION in runtime_c/include/aot_runtime.h (tests/project/test_shared_tables.py).
# Bumped whenever a reader of the old format would misread the new one; readers accept
# exactly this version. 2: the tooling section, a manifest of runtime fields only.
FORMAT_VERSION = 2
HEADER_SIZE = 64
ENTRY_SIZE = 64
MAX_SECTIONS = 64
SECTION_ALIGN = 64
NAME_SIZE = 24

# Limits (runtime_c/src/internal.h; packaging/FORMAT.md "Limits")
MAX_MANIFEST_BYTES = 16 << 20
# about what the C runtime's 128 MiB parse tree holds (88 bytes a value)
MAX_MANIFEST_VALUES = 1_500_000
MAX_MANIFEST_DEPTH = 64
# members of one manifest object (the C runtime's JSON reader); the tooling section has no such cap
MAX_MANIFEST_MEMBERS = 1024
# a section the manifest does not size: code (the runtime's limit) or one this reader does not know
MAX_SECTION_BYTES = 256 << 20

CODEC_NONE = 0
CODEC_ZSTD = 1
CODEC_NAMES = {CODEC_NONE: "none", CODEC_ZSTD: "zstd"}
CODEC_IDS = {name: cid for cid, name in CODEC_NAMES.items()}

# magic, version, section_count, table_offset, file_size, header_crc32, reserved
_HEADER = struct.Struct("<8sIIQQI28s")
# name, codec, reserved, offset, stored_size, raw_size, crc32, reserved
_ENTRY = struct.Struct("<24sIIQQQII")
_CRC_FIELD = slice(32, 36)

assert _HEADER.size == HEADER_SIZE
assert _ENTRY.size == ENTRY_SIZE


@dataclass(frozen=True)
class SectionInfo:
    name: str
    codec: str
    offset: int
    stored_size: int
    raw_size: int
    crc32: int


@dataclass
class Artifact:
    manifest: dict
    sections: Mapping[str, bytes] = field(default_factory=dict)  # decompressed, file order
    table: list[SectionInfo] = field(default_factory=list)

    @functools.cached_property
    def tooling(self) -> dict:
        """The tooling section's JSON (aot/tooling.py), checked; {} when the artifact has none.
        Decoded on first use: the runtime's fields never need it."""
        name = tooling_section.SECTION
        if name not in self.sections:
            return {}
        tooling = _parse_json(self.sections[name], name)  # its size bounded by read_artifact
        tooling_section.check_tooling(tooling, self.manifest)
        return tooling

    @property
    def annotated(self) -> dict:
        """The manifest with the tooling section's fields added: what a tool shows."""
        return tooling_section.annotated(self.manifest, self.tooling)


SectionSpec = Union[tuple[str, bytes], tuple[str, bytes, str]]


def _check_name(name: str) -> bytes:
    if not isinstance(name, str) or not name:
        raise ArtifactError(f"section name {name!r}: must be a non-empty string")
    try:
        raw = name.encode("ascii")
    except UnicodeEncodeError:
        raise ArtifactError(f"section name {name!r}: must be ASCII") from None
    if len(raw) > NAME_SIZE - 1:
        raise ArtifactError(f"section name {name!r}: longer than {NAME_SIZE - 1} characters")
    if any(b < 0x21 or b > 0x7E for b in raw):
        raise ArtifactError(f"section name {name!r}: must be printable ASCII without spaces")
    return raw


def manifest_bytes(manifest: dict, what: str = "manifest") -> bytes:
    """The exact bytes of the manifest section for `manifest` (or of the tooling section:
    the same JSON form)."""
    if not isinstance(manifest, dict):
        raise ArtifactError(f"{what} must be a dict")
    try:
        text = json.dumps(manifest, indent=1, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ArtifactError(f"{what} is not serialisable as strict JSON: {e}") from None
    return text.encode("utf-8")


# zstd levels: LEVEL for every section, except that a section of at least LARGE_SECTION_BYTES
# whose sample (SAMPLE_SLICES slices of SAMPLE_SLICE_BYTES spread over it) LEVEL does not
# shrink by SAMPLE_GAIN more than FAST_LEVEL does takes FAST_LEVEL. Dense f32 weights gain
# nothing from level 9 (resnet18's 46.8 MB: 43.06 MB at levels 1 and 9, 0.12 against 0.23 s);
# pruned or bf16-valued ones gain 6-12% and keep it.
LEVEL = 9
FAST_LEVEL = 1
LARGE_SECTION_BYTES = 4 << 20
SAMPLE_SLICES = 4
SAMPLE_SLICE_BYTES = 256 << 10
SAMPLE_GAIN = 0.01


def section_level(data: bytes) -> int:
    """The zstd level for a section's bytes (see LEVEL)."""
    if len(data) < LARGE_SECTION_BYTES:
        return LEVEL
    stride = len(data) // SAMPLE_SLICES
    sample = b"".join(data[i * stride:i * stride + SAMPLE_SLICE_BYTES] for i in range(SAMPLE_SLICES))
    fast = len(zstandard.ZstdCompressor(level=FAST_LEVEL).compress(sample))
    best = len(zstandard.ZstdCompressor(level=LEVEL).compress(sample))
    return FAST_LEVEL if best > fast * (1 - SAMPLE_GAIN) else LEVEL


def pack_artifact(manifest: dict, sections: Sequence[SectionSpec], *, tooling: dict | None = None) -> bytes:
    """Return the bytes of an artifact.

    `sections` is a list of `(name, data)` or `(name, data, codec)` with codec
    "zstd" (default) or "none". The manifest section is written first, from
    the dict; the tooling section (aot/tooling.py), when given, last. A zstd
    section whose frame would not be smaller than the data is stored
    uncompressed ("none"); empty data is always stored as "none".
    """
    items: list[tuple[str, bytes, str]] = [("manifest", manifest_bytes(manifest), "zstd")]
    for spec in sections:
        if len(spec) == 2:
            name, data = spec  # type: ignore[misc]
            codec = "zstd"
        elif len(spec) == 3:
            name, data, codec = spec  # type: ignore[misc]
        else:
            raise ArtifactError(f"section spec {spec!r}: expected (name, data[, codec])")
        if name == "manifest":
            raise ArtifactError("section 'manifest' is written from the manifest dict; do not pass it")
        if codec not in CODEC_IDS:
            raise ArtifactError(f"section {name!r}: unknown codec {codec!r} (known: none, zstd)")
        items.append((name, bytes(data), codec))
    if tooling is not None:
        items.append((tooling_section.SECTION, manifest_bytes(tooling, "tooling"), "zstd"))
    if len(items) > MAX_SECTIONS:
        raise ArtifactError(f"too many sections: {len(items)} > {MAX_SECTIONS}")
    seen: set[str] = set()
    for name, _, _ in items:
        _check_name(name)
        if name in seen:
            raise ArtifactError(f"section {name!r}: duplicate name")
        seen.add(name)

    table_end = HEADER_SIZE + ENTRY_SIZE * len(items)
    offset = align_up(table_end, SECTION_ALIGN)
    entries: list[bytes] = []
    payloads: list[tuple[int, bytes]] = []
    for name, data, codec in items:
        codec_id = CODEC_IDS[codec]
        stored = data
        if codec_id == CODEC_ZSTD and data:
            frame = zstandard.ZstdCompressor(level=section_level(data), write_content_size=True,
                                             write_checksum=False).compress(data)
            if len(frame) < len(data):
                stored = frame
            else:
                codec_id = CODEC_NONE
        else:
            codec_id = CODEC_NONE
        crc = zlib.crc32(stored) & 0xFFFFFFFF
        entries.append(_ENTRY.pack(name.encode("ascii"), codec_id, 0, offset, len(stored), len(data), crc, 0))
        payloads.append((offset, stored))
        offset = align_up(offset + len(stored), SECTION_ALIGN)
    # The file ends right after the last section's bytes (no trailing pad).
    last_off, last_data = payloads[-1]
    file_size = last_off + len(last_data)

    table = b"".join(entries)
    header = bytearray(_HEADER.pack(MAGIC, FORMAT_VERSION, len(items), HEADER_SIZE, file_size, 0, bytes(28)))
    crc = zlib.crc32(bytes(header) + table) & 0xFFFFFFFF
    header[_CRC_FIELD] = struct.pack("<I", crc)

    # one join: the sections' bytes are copied once (a zeroed buffer filled and then copied
    # into bytes moved resnet18's 43 MB twice)
    parts: list[bytes] = [bytes(header), table]
    at = table_end
    for off, data in payloads:
        parts.append(bytes(off - at))  # zero padding up to the section's aligned offset
        parts.append(data)
        at = off + len(data)
    return b"".join(parts)


def write_artifact(path: Union[str, os.PathLike], manifest: dict, sections: Sequence[SectionSpec], **kw) -> int:
    """Pack and write an artifact atomically; returns the number of bytes written."""
    data = pack_artifact(manifest, sections, **kw)
    write_atomically(path, data)
    return len(data)


def write_atomically(path: Union[str, os.PathLike], data: bytes) -> None:
    """Write `data` to `path` through a temp file in the same dir and os.replace.

    On any error no file (half or whole) is left at the temp name, and an
    existing `path` is untouched.
    """
    path = Path(path)
    directory = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _decode_name(raw: bytes, index: int) -> str:
    nul = raw.find(b"\0")
    if nul < 0:
        raise ArtifactError(f"section {index}: name is not NUL-terminated")
    if nul == 0:
        raise ArtifactError(f"section {index}: empty name")
    if any(raw[nul:]):
        raise ArtifactError(f"section {index}: bytes after the name's NUL are not zero")
    name = raw[:nul]
    if any(b < 0x21 or b > 0x7E for b in name):
        raise ArtifactError(f"section {index}: name {name!r} is not printable ASCII")
    return name.decode("ascii")


def _check_frame(name: str, stored: bytes, raw_size: int) -> None:
    """The zstd frame header: valid, with its content size, equal to the raw size."""
    try:
        params = zstandard.get_frame_parameters(stored)
    except zstandard.ZstdError as e:
        raise ArtifactError(f"section {name!r}: bad zstd frame header: {e}") from None
    if params.content_size == zstandard.CONTENTSIZE_UNKNOWN:
        raise ArtifactError(f"section {name!r}: zstd frame lacks its content size")
    if params.content_size != raw_size:
        raise ArtifactError(
            f"section {name!r}: zstd frame content size {params.content_size} != raw size {raw_size}"
        )


def _decompress_zstd(name: str, stored: bytes, raw_size: int) -> bytes:
    """One frame whose header says raw_size bytes (_check_frame), decoded in one call into a
    buffer of that size: the output cannot grow past it."""
    try:
        data = zstandard.ZstdDecompressor().decompress(stored, allow_extra_data=False)
    except zstandard.ZstdError as e:
        if "unused data" in str(e):
            raise ArtifactError(f"section {name!r}: trailing bytes after the zstd frame") from None
        raise ArtifactError(f"section {name!r}: zstd decompression failed: {e}") from None
    if len(data) != raw_size:
        raise ArtifactError(f"section {name!r}: decompressed to {len(data)} bytes, raw size says {raw_size}")
    return data


def parse_table(buf: bytes) -> list[SectionInfo]:
    """Validate header and section table of `buf`; return the table.

    Checks everything except the section payload checksums and codecs.
    """
    n = len(buf)
    if n < HEADER_SIZE:
        raise ArtifactError(f"truncated: file is {n} bytes, the header alone needs {HEADER_SIZE}")
    magic, version, count, table_off, file_size, header_crc, reserved = _HEADER.unpack_from(buf, 0)
    if magic != MAGIC:
        raise ArtifactError(f"bad magic {magic!r}: not an aot artifact (expected {MAGIC!r})")
    if version != FORMAT_VERSION:
        raise ArtifactError(version_mismatch(version))
    if file_size > n:
        raise ArtifactError(f"truncated: file is {n} bytes, header says {file_size}")
    if file_size < n:
        raise ArtifactError(f"trailing data: file is {n} bytes, header says {file_size}")
    if count < 1 or count > MAX_SECTIONS:
        raise ArtifactError(f"header: bad section count {count} (must be 1..{MAX_SECTIONS})")
    if table_off != HEADER_SIZE:
        raise ArtifactError(f"header: bad section table offset {table_off} (must be {HEADER_SIZE})")
    table_end = HEADER_SIZE + count * ENTRY_SIZE
    if table_end > n:
        raise ArtifactError(f"truncated: file is {n} bytes, section table ends at {table_end}")
    zeroed = bytearray(buf[0:HEADER_SIZE])
    zeroed[_CRC_FIELD] = b"\0\0\0\0"
    computed = zlib.crc32(bytes(zeroed) + bytes(buf[HEADER_SIZE:table_end])) & 0xFFFFFFFF
    if computed != header_crc:
        raise ArtifactError(f"header: checksum mismatch (stored 0x{header_crc:08x}, computed 0x{computed:08x})")
    if any(reserved):
        raise ArtifactError("header: reserved bytes are not zero")

    table: list[SectionInfo] = []
    seen: set[str] = set()
    prev_end = table_end
    for i in range(count):
        raw_name, codec, res0, off, stored, raw_size, crc, res1 = _ENTRY.unpack_from(buf, HEADER_SIZE + i * ENTRY_SIZE)
        name = _decode_name(raw_name, i)
        where = f"section {name!r}"
        if name in seen:
            raise ArtifactError(f"{where}: duplicate name")
        seen.add(name)
        if codec not in CODEC_NAMES:
            raise ArtifactError(f"{where}: unknown codec {codec}")
        if res0 or res1:
            raise ArtifactError(f"{where}: reserved fields are not zero")
        if off % SECTION_ALIGN:
            raise ArtifactError(f"{where}: offset {off} is not {SECTION_ALIGN}-byte aligned")
        if off < prev_end:
            raise ArtifactError(f"{where}: offset {off} overlaps the table or the previous section (ends at {prev_end})")
        if not (off <= n and stored <= n - off):
            raise ArtifactError(f"{where}: bytes [{off}, {off}+{stored}) lie outside the file ({n} bytes)")
        if codec == CODEC_NONE and raw_size != stored:
            raise ArtifactError(f"{where}: raw size {raw_size} != stored size {stored} for codec none")
        if any(buf[prev_end:off]):
            raise ArtifactError(f"{where}: padding before it is not zero")
        prev_end = off + stored
        table.append(SectionInfo(name, CODEC_NAMES[codec], off, stored, raw_size, crc))
    return table


def _reject_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _object_hook(max_members: int | None):
    """json's object_pairs_hook: no duplicate keys, at most `max_members` members."""
    def build(pairs: list[tuple[str, object]]) -> dict:
        if max_members is not None and len(pairs) > max_members:
            raise ValueError(f"an object has more than {max_members} members")
        out: dict = {}
        for k, v in pairs:
            if k in out:
                raise ValueError(f"duplicate key {k!r}")
            out[k] = v
        return out
    return build


def _nesting_depth(value: object) -> int:
    """Depth of arrays and objects in a parsed JSON value (a scalar is 0), without recursion."""
    deepest = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest


def _parse_json(raw: bytes, section: str, max_members: int | None = None) -> Any:
    """A JSON section (manifest, tooling): strict, and bounded like the C runtime's parser."""
    where = f"section {section!r}"
    holder = "a manifest" if section == "manifest" else f"a {section} section"
    # a value costs at least one of these bytes (a member's or element's comma, a
    # bracket), so this bounds the tree before json builds it
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{") + 1
    if values > MAX_MANIFEST_VALUES:
        raise ArtifactError(f"{where}: about {values} JSON values, over the {MAX_MANIFEST_VALUES} {holder} "
                            f"may hold")
    try:
        parsed = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant,
                            object_pairs_hook=_object_hook(max_members))
    except RecursionError:
        raise ArtifactError(f"{where}: nesting deeper than {MAX_MANIFEST_DEPTH}") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise ArtifactError(f"{where}: not valid UTF-8 JSON: {e}") from None
    if _nesting_depth(parsed) > MAX_MANIFEST_DEPTH:
        raise ArtifactError(f"{where}: nesting deeper than {MAX_MANIFEST_DEPTH}")
    return parsed


def version_mismatch(version: object) -> str:
    """What a reader of FORMAT_VERSION says of an artifact of `version`."""
    if type(version) is int and version < FORMAT_VERSION:
        return f"format version {version}; this reader reads {FORMAT_VERSION}: recompile the model"
    return (f"format version {version!r}; this reader reads {FORMAT_VERSION}: a newer aot wrote it, "
            f"read it with that one")


def _parse_manifest(raw: bytes) -> dict:
    """The manifest's JSON, strict and bounded like the C runtime's parser."""
    manifest = _parse_json(raw, "manifest", MAX_MANIFEST_MEMBERS)
    if not isinstance(manifest, dict):
        raise ArtifactError("section 'manifest': top level is not a JSON object")
    version = manifest.get("format_version")
    if type(version) is not int or version != FORMAT_VERSION:
        raise ArtifactError(f"section 'manifest': format_version {version!r}, not the header's {FORMAT_VERSION}")
    return manifest


def _check_bounds(table: list[SectionInfo], manifest: dict, max_memory_bytes: int | None) -> None:
    """Every section's raw size against what may be decoded, before any is."""
    weights = manifest["weights"]["section"]  # its size is checked against the manifest's
    total = 0
    for info in table:
        if info.name == tooling_section.SECTION and info.raw_size > MAX_MANIFEST_BYTES:
            raise ArtifactError(f"section {info.name!r}: raw size {info.raw_size} is over the "
                                f"{MAX_MANIFEST_BYTES} bytes a JSON section may have")
        if info.name not in ("manifest", weights) and info.raw_size > MAX_SECTION_BYTES:
            raise ArtifactError(f"section {info.name!r}: raw size {info.raw_size} is over the "
                                f"{MAX_SECTION_BYTES} bytes a section may have")
        total += info.raw_size
        if max_memory_bytes is not None and total > max_memory_bytes:
            raise ArtifactError(f"section {info.name!r}: {info.raw_size} bytes would bring the sections to "
                                f"{total} bytes, over max_memory_bytes {max_memory_bytes}")


def _decode(buf: bytes, info: SectionInfo) -> bytes:
    stored = buf[info.offset:info.offset + info.stored_size]
    if info.codec == "zstd":
        return _decompress_zstd(info.name, stored, info.raw_size)
    return stored


class _Sections(Mapping[str, bytes]):
    """An artifact's sections by name, in file order, each decoded on first use.

    read_artifact has checked every checksum, frame header and size bound before this
    exists; decoding waits until a section is asked for, so reading the manifest (`aot
    inspect`) never decompresses the weights or the code.
    """

    def __init__(self, buf: bytes, table: list[SectionInfo], decoded: dict[str, bytes]):
        self._buf = buf
        self._by_name = {info.name: info for info in table}
        self._decoded = dict(decoded)

    def __getitem__(self, name: str) -> bytes:
        data = self._decoded.get(name)
        if data is None:
            data = self._decoded[name] = _decode(self._buf, self._by_name[name])
        return data

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)


def read_artifact(path_or_bytes: Union[str, os.PathLike, bytes, bytearray, memoryview], *,
                  max_memory_bytes: int | None = None) -> Artifact:
    """Read and fully validate an artifact; raise ArtifactError on any problem.

    The manifest is decoded first, bounded, and checked as the C runtime checks it
    (aot/manifest_check.py); every other section's size is then bounded (by the manifest,
    or MAX_SECTION_BYTES, and in total by `max_memory_bytes` when given). The other
    sections are decoded when first used (`sections[name]`), each into exactly its raw
    size; a frame damaged behind a valid checksum is an ArtifactError then.
    """
    if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
        buf = bytes(path_or_bytes)
    else:
        try:
            buf = Path(path_or_bytes).read_bytes()
        except OSError as e:
            raise ArtifactError(f"cannot open {os.fspath(path_or_bytes)!r}: {e.strerror or e}") from None
    table = parse_table(buf)
    for info in table:
        stored = buf[info.offset:info.offset + info.stored_size]
        computed = zlib.crc32(stored) & 0xFFFFFFFF
        if computed != info.crc32:
            raise ArtifactError(
                f"section {info.name!r}: checksum mismatch (stored 0x{info.crc32:08x}, computed 0x{computed:08x})"
            )
        if info.codec == "zstd":
            _check_frame(info.name, stored, info.raw_size)
    by_name = {info.name: info for info in table}
    if "manifest" not in by_name:
        raise ArtifactError("section 'manifest': missing")
    if by_name["manifest"].raw_size > MAX_MANIFEST_BYTES:
        raise ArtifactError(f"section 'manifest': raw size {by_name['manifest'].raw_size} is over the "
                            f"{MAX_MANIFEST_BYTES} bytes a manifest may have")
    manifest_raw = _decode(buf, by_name["manifest"])
    manifest = _parse_manifest(manifest_raw)
    check_manifest(manifest, {info.name: info.raw_size for info in table})
    _check_bounds(table, manifest, max_memory_bytes)
    return Artifact(manifest=manifest, sections=_Sections(buf, table, {"manifest": manifest_raw}), table=table)
