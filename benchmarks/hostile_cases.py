"""Hostile artifacts made from real ones (benchmarks/seed_artifacts.py), by family:

- seed: the artifacts as compiled, and repacked with other codecs (these must run);
- bitflip: random bits flipped anywhere, checksums left as they are;
- bitflip_crc: bits flipped in the header, table, manifest or weights, then every
  checksum recomputed (as anyone who edits a file can);
- truncate: cut at every boundary of the container (header, table, each section),
  with the header's size left as is or rewritten to match;
- size_field: header and table fields (counts, offsets, sizes, codecs) set to
  edge values, checksums recomputed;
- manifest: the manifest edited (empty inputs/outputs, null weights, huge kernel
  work, zero arena, wrong dtypes/shapes, deep nesting, huge strings, ...) and the
  artifact repacked, so every checksum is valid;
- code: the code section named wrongly, another model's code, or its ELF header
  damaged where the runtime checks it before loading;
- cuda: the GPU seeds' launch plans edited (grids, blocks, shared memory, argument
  kinds, offsets and indices, symbols, SMs, sections, the checks launch), each of
  which the runtime must refuse when it opens the artifact;
- bomb: small files whose zstd sections expand to hundreds of MB or many GB, and
  manifests that are huge once decoded or parsed.

Code bytes are never changed in a way the runtime would load: loading code is the
trust boundary (an artifact's code runs with the caller's rights), so the only
code edits are ELF header fields the loader rejects before dlopen.
"""
from __future__ import annotations

import copy
import json
import random
import struct
import zlib
from dataclasses import dataclass
from typing import Callable, Iterator

import zstandard

from aot.artifact import ENTRY_SIZE, HEADER_SIZE, manifest_bytes, pack_artifact
from seed_artifacts import Seed, fix_header_crc, pack_raw, repack

U64_MAX = (1 << 64) - 1
MiB = 1 << 20
GiB = 1 << 30
RLE_BLOCK = 128 * 1024  # zstd's largest block


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    data: bytes


def _entries(buf: bytes) -> list[dict]:
    count = min(struct.unpack_from("<I", buf, 12)[0], 64)
    out = []
    for i in range(count):
        at = HEADER_SIZE + i * ENTRY_SIZE
        if at + ENTRY_SIZE > len(buf):
            break
        name, codec, _, off, stored, raw, crc, _ = struct.unpack_from("<24sIIQQQII", buf, at)
        out.append({"at": at, "name": name.rstrip(b"\0").decode("latin-1"), "codec": codec,
                    "offset": off, "stored": stored, "raw": raw})
    return out


def repair(buf: bytearray, keep: tuple[str, ...] = ()) -> bytes:
    """Recompute each in-bounds section CRC (except sections named in `keep`) and the header CRC."""
    n = len(buf)
    for e in _entries(bytes(buf)):
        if e["name"] in keep or e["name"].startswith("cpu."):
            continue  # a code section's CRC is never forged: its bytes would be loaded
        if e["offset"] <= n and e["stored"] <= n - e["offset"]:
            crc = zlib.crc32(bytes(buf[e["offset"]:e["offset"] + e["stored"]])) & 0xFFFFFFFF
            struct.pack_into("<I", buf, e["at"] + 56, crc)
    return fix_header_crc(buf)


def _code_range(seed_bytes: bytes) -> range:
    for e in _entries(seed_bytes):
        if e["name"].startswith("cpu."):
            return range(e["offset"], e["offset"] + e["stored"])
    return range(0)


# ---------------------------------------------------------------- families

def bitflip(seed: Seed, rng: random.Random, count: int) -> Iterator[Case]:
    for i in range(count):
        buf = bytearray(seed.data)
        for _ in range(rng.choice((1, 1, 2, 8))):
            at = rng.randrange(len(buf))
            buf[at] ^= 1 << rng.randrange(8)
        yield Case("bitflip", f"{seed.name}.{i}", bytes(buf))


def bitflip_crc(seed: Seed, rng: random.Random, count: int) -> Iterator[Case]:
    plain = repack(seed, {"manifest": "none", "weights": "none"})
    for i in range(count):
        base = plain if i % 2 else seed.data
        code = _code_range(base)
        buf = bytearray(base)
        for _ in range(rng.choice((1, 2, 4))):
            at = rng.randrange(len(buf))
            while at in code or 32 <= at < 36:
                at = rng.randrange(len(buf))
            buf[at] ^= 1 << rng.randrange(8)
        yield Case("bitflip_crc", f"{seed.name}.{'plain' if i % 2 else 'zstd'}.{i}", repair(buf))


def truncate(seed: Seed) -> Iterator[Case]:
    n = len(seed.data)
    cuts = {0, 1, 8, 12, 24, 32, 36, 63, HEADER_SIZE, HEADER_SIZE + 1, n - 1}
    entries = _entries(seed.data)
    table_end = HEADER_SIZE + ENTRY_SIZE * len(entries)
    cuts |= {table_end - 1, table_end, table_end + 1}
    for e in entries:
        cuts |= {HEADER_SIZE + (e["at"] - HEADER_SIZE) + k for k in (24, 32, 40, 48, 56)}
        off, stored = e["offset"], e["stored"]
        cuts |= {off - 1, off, off + 1, off + stored // 2, off + stored - 1, off + stored}
    for cut in sorted(c for c in cuts if 0 <= c < n):
        yield Case("truncate", f"{seed.name}.at{cut}", seed.data[:cut])
        if cut >= 32:  # the header's file_size rewritten to match, header CRC recomputed
            buf = bytearray(seed.data[:cut])
            struct.pack_into("<Q", buf, 24, cut)
            if cut >= 36:
                buf = bytearray(fix_header_crc(buf))
            yield Case("truncate", f"{seed.name}.at{cut}.sized", bytes(buf))


def size_field(seed: Seed) -> Iterator[Case]:
    n = len(seed.data)

    def edited(name: str, fmt: str, at: int, value: int) -> Case:
        buf = bytearray(seed.data)
        struct.pack_into(fmt, buf, at, value & ((1 << (8 * struct.calcsize(fmt))) - 1))
        return Case("size_field", f"{seed.name}.{name}={value}", repair(buf))

    for v in (0, 2, 63, 64, 65, 0xFFFFFFFF, 0x80000000):
        yield edited("count", "<I", 12, v)
    for v in (0, 2):
        yield edited("version", "<I", 8, v)
    for v in (0, 63, 128, 1 << 32, U64_MAX):
        yield edited("table_offset", "<Q", 16, v)
    for v in (0, n - 1, n + 1, 1 << 32, U64_MAX):
        yield edited("file_size", "<Q", 24, v)
    for e in _entries(seed.data):
        tag = e["name"]
        for v in (0, 64, e["offset"] - 64, e["offset"] + 64, n, 1 << 63, U64_MAX):
            yield edited(f"{tag}.offset", "<Q", e["at"] + 32, v)
        for v in (0, 1, e["stored"] - 1, e["stored"] + 1, n, 1 << 63, U64_MAX):
            yield edited(f"{tag}.stored", "<Q", e["at"] + 40, v)
        for v in (0, 1, e["raw"] - 1, e["raw"] + 1, e["raw"] * 1000, 1 << 40, U64_MAX - 4096, U64_MAX):
            yield edited(f"{tag}.raw", "<Q", e["at"] + 48, v)
        for v in (0, 1, 2, 0xFFFFFFFF):
            if v != e["codec"]:
                yield edited(f"{tag}.codec", "<I", e["at"] + 24, v)
        yield edited(f"{tag}.reserved", "<I", e["at"] + 28, 1)


def _manifest_edits(m: dict) -> dict[str, Callable[[dict], object]]:
    """name -> function editing a copy of the manifest in place (or returning a replacement)."""
    def setp(path: str, value):
        def f(d: dict):
            *head, last = path.split(".")
            for k in head:
                d = d[int(k)] if isinstance(d, list) else d[k]
            if isinstance(d, list):
                d[int(last)] = value
            else:
                d[last] = value
        return f

    def delp(path: str):
        def f(d: dict):
            *head, last = path.split(".")
            for k in head:
                d = d[int(k)] if isinstance(d, list) else d[k]
            d.pop(last, None)
        return f

    def code_kernels(d: dict) -> list[dict]:
        """Every kernel entry that gives code fields: the top-level ones and each CPU variant's."""
        lists = [d.get("kernels") or []] + [c.get("kernels") or [] for c in d.get("cpu") or [] if isinstance(c, dict)]
        return [k for ks in lists if isinstance(ks, list) for k in ks if isinstance(k, dict)]

    def each_kernel(key: str, value):
        def f(d: dict):
            for k in code_kernels(d):
                k[key] = value
        return f

    edits: dict[str, Callable[[dict], object]] = {
        "inputs_empty": setp("inputs", []),
        "outputs_empty": setp("outputs", []),
        "inputs_missing": delp("inputs"),
        "outputs_null": setp("outputs", None),
        "weights_null": setp("weights", None),
        "weights_missing": delp("weights"),
        "weights_bytes_0": setp("weights.bytes", 0),
        "weights_bytes_plus1": lambda d: d["weights"].__setitem__("bytes", d["weights"]["bytes"] + 1),
        "weights_bytes_huge": setp("weights.bytes", 1 << 62),
        "weights_section_code": setp("weights.section", m["cpu"][0]["section"]),
        "weights_section_manifest": setp("weights.section", "manifest"),
        "weights_section_absent": setp("weights.section", "nope"),
        "weights_alignment_3": setp("weights.alignment", 3),
        "weights_alignment_huge": setp("weights.alignment", 1 << 40),
        "arena_bytes_0": setp("arena.bytes", 0),
        # a donated pair the code was not built for (or outside the inputs/outputs), or one dropped
        "donations_first_pair": setp("donations", [{"input": 0, "output": 0}]),
        "donations_out_of_range": setp("donations", [{"input": 99, "output": 0}]),
        "donations_dropped": setp("donations", []),
        "arena_bytes_1": setp("arena.bytes", 1),
        "arena_bytes_half": lambda d: d["arena"].__setitem__("bytes", d["arena"]["bytes"] // 2),
        "arena_bytes_huge": setp("arena.bytes", 1 << 62),
        "arena_bytes_max": setp("arena.bytes", (1 << 63) - 1),
        "arena_alignment_0": setp("arena.alignment", 0),
        "arena_alignment_4096": setp("arena.alignment", 4096),
        "arena_missing": delp("arena"),
        "arena_null": setp("arena", None),
        "kernels_work_0": each_kernel("work", 0),
        "kernels_work_0_split": lambda d: [k.update(work=0, cost_ns=10**9) for k in code_kernels(d)],
        "kernels_work_2^61": each_kernel("work", 1 << 61),
        "kernels_work_2^61_split": lambda d: [k.update(work=1 << 61, cost_ns=10**12) for k in code_kernels(d)],
        "kernels_work_x1000": lambda d: [k.update(work=k["work"] * 1000) for k in code_kernels(d)],
        "kernels_work_plus1_split": lambda d: [k.update(work=k["work"] + 1, cost_ns=10**9) for k in code_kernels(d)],
        "kernels_work_negative": each_kernel("work", -1),
        "kernels_work_float": each_kernel("work", 1.5),
        "kernels_cost_huge": each_kernel("cost_ns", (1 << 63) - 1),
        "kernels_split": each_kernel("cost_ns", 10**9),
        "kernels_empty": setp("kernels", []),
        "kernels_null": setp("kernels", None),
        "kernels_reversed": lambda d: [ks.reverse() for ks in [d["kernels"]] + [c.get("kernels") or [] for c in d["cpu"]]],
        "kernels_doubled": lambda d: d["kernels"].extend(copy.deepcopy(d["kernels"])),
        "kernel_symbol_entry": each_kernel("symbol", "aot_model_entry"),
        "kernel_symbol_absent": each_kernel("symbol", "aot_kernel_999"),
        "kernel_symbol_libc": each_kernel("symbol", "memcpy"),
        "kernel_symbol_empty": each_kernel("symbol", ""),
        "format_version_0": setp("format_version", 0),
        "format_version_3": setp("format_version", 3),
        "format_version_string": setp("format_version", "1"),
        "format_version_float": setp("format_version", 1.0),
        "top_level_array": lambda d: [d],
        "top_level_string": lambda d: "manifest",
        "cpu_empty": setp("cpu", []),
        "cpu_aarch64": lambda d: [c.update(arch="aarch64") for c in d["cpu"]],
        "cpu_section_absent": lambda d: [c.update(section="cpu.none") for c in d["cpu"]],
        "cpu_section_weights": lambda d: [c.update(section="weights") for c in d["cpu"]],
        "cpu_section_manifest": lambda d: [c.update(section="manifest") for c in d["cpu"]],
        "cpu_entry_absent": lambda d: [c.update(entry="nope") for c in d["cpu"]],
        "cpu_entry_kernel": lambda d: [c.update(entry="aot_kernel_0") for c in d["cpu"]],
        "cpu_duplicated": lambda d: d["cpu"].extend(copy.deepcopy(d["cpu"])),
        # the CPU variants: each one's own kernels (symbol, work, cost_ns), name and features
        "cpu_kernels_null": lambda d: [c.update(kernels=None) for c in d["cpu"]],
        "cpu_kernels_dropped": lambda d: [c.pop("kernels", None) for c in d["cpu"]],
        "cpu_kernels_short": lambda d: [c["kernels"].pop() for c in d["cpu"] if c.get("kernels")],
        "cpu_kernels_doubled": lambda d: [c["kernels"].extend(copy.deepcopy(c["kernels"])) for c in d["cpu"]
                                          if c.get("kernels")],
        "cpu_kernels_not_objects": lambda d: [c.update(kernels=[7] * len(c.get("kernels") or [])) for c in d["cpu"]],
        "cpu_kernels_swapped": lambda d: d["cpu"][0].update(kernels=d["cpu"][-1].get("kernels")),
        "cpu_kernels_reversed": lambda d: [c["kernels"].reverse() for c in d["cpu"] if c.get("kernels")],
        "cpu_sections_swapped": lambda d: d["cpu"][0].update(section=d["cpu"][-1]["section"]),
        "cpu_variants_reversed": lambda d: d["cpu"].reverse(),
        "cpu_name_int": lambda d: [c.update(cpu=7) for c in d["cpu"]],
        "cpu_name_nul": lambda d: [c.update(cpu="x86-64-v3\0") for c in d["cpu"]],
        "cpu_features_unknown": lambda d: [c.update(x86_features=["avx9000"]) for c in d["cpu"]],
        "cpu_features_first_unknown": lambda d: d["cpu"][0].update(x86_features=["avx9000"]),
        "cpu_features_not_list": lambda d: [c.update(x86_features="avx2") for c in d["cpu"]],
        "cpu_features_empty_name": lambda d: [c.update(x86_features=[""]) for c in d["cpu"]],
        "checks_bogus": lambda d: d.update(format_version=2, checks=[{"message": "x"}]),
        "checks_empty_message": lambda d: d.update(format_version=2, checks=[{"message": ""}]),
        "input_dtype_float64": lambda d: d["inputs"][0].update(dtype="float64"),
        "input_dtype_int8": lambda d: d["inputs"][0].update(dtype="int8"),
        "input_dtype_bool": lambda d: d["inputs"][0].update(dtype="bool"),
        "input_dtype_unknown": lambda d: d["inputs"][0].update(dtype="float128"),
        "output_dtype_float16": lambda d: d["outputs"][0].update(dtype="float16"),
        "output_dtype_float64": lambda d: d["outputs"][0].update(dtype="float64"),
        "input_shape_scalar": lambda d: d["inputs"][0].update(shape=[]),
        "input_shape_zero": lambda d: d["inputs"][0].update(shape=[0]),
        "input_shape_bigger": lambda d: d["inputs"][0].update(shape=[64, 64]),
        "input_shape_smaller": lambda d: d["inputs"][0].update(shape=[1]),
        "input_shape_huge": lambda d: d["inputs"][0].update(shape=[1 << 20, 1 << 20]),
        "input_shape_overflow": lambda d: d["inputs"][0].update(shape=[1 << 62, 1 << 62]),
        "input_shape_negative": lambda d: d["inputs"][0].update(shape=[-1, 3]),
        "input_shape_rank33": lambda d: d["inputs"][0].update(shape=[1] * 33),
        "input_shape_not_list": lambda d: d["inputs"][0].update(shape=6),
        "output_shape_bigger": lambda d: d["outputs"][0].update(shape=[64, 64]),
        "output_shape_smaller": lambda d: d["outputs"][0].update(shape=[1]),
        "output_shape_huge": lambda d: d["outputs"][0].update(shape=[1 << 16, 1 << 16]),
        "input_name_empty": lambda d: d["inputs"][0].update(name=""),
        "input_name_nul": lambda d: d["inputs"][0].update(name="x\0y"),
        "input_duplicated": lambda d: d["inputs"].append(copy.deepcopy(d["inputs"][0])),
        "input_extra": lambda d: d["inputs"].append({"name": "extra", "dtype": "float32", "shape": [4]}),
        "output_extra": lambda d: d["outputs"].append({"name": "extra", "dtype": "float32", "shape": [4]}),
        "model_name_huge": lambda d: d["model"].update(name="n" * (8 * MiB)),
        "input_name_huge": lambda d: d["inputs"][0].update(name="x" * (8 * MiB)),
        "deep_nesting_63": lambda d: d.update(deep=_nested(62)),
        "deep_nesting_65": lambda d: d.update(deep=_nested(65)),
        "many_inputs_2000": lambda d: d.update(inputs=[{"name": f"i{i}", "dtype": "float32", "shape": [1]} for i in range(2000)]),
        "many_kernels_100000": lambda d: d.update(kernels=[{"name": f"k{i}", "symbol": d["kernels"][0]["symbol"], "work": 1}
                                                          for i in range(100000)]),
    }
    if not m.get("kernels"):
        for name in [k for k in edits if k.startswith(("kernels_", "kernel_"))]:
            del edits[name]
    if "weights" not in m or not m["weights"]:
        for name in [k for k in edits if k.startswith("weights_")]:
            del edits[name]
    return edits


def _nested(depth: int) -> list:
    v: list = []
    for _ in range(depth - 1):
        v = [v]
    return v


def manifest(seed: Seed) -> Iterator[Case]:
    for name, edit in _manifest_edits(seed.artifact.manifest).items():
        m = copy.deepcopy(seed.artifact.manifest)
        replaced = edit(m)
        if name.startswith("top_level_"):
            m = replaced
        yield Case("manifest", f"{seed.name}.{name}", _pack_any_manifest(seed, m))


def _pack_any_manifest(seed: Seed, m) -> bytes:
    """Repack with `m` as the manifest, even when m is not a dict (json text written as is)."""
    if isinstance(m, dict):
        return repack(seed, {}, manifest=m)
    text = json.dumps(m).encode()
    others = [(n, zstandard.ZstdCompressor().compress(d), 1, len(d)) for n, d in seed.artifact.sections.items()
              if n != "manifest"]
    return pack_raw([("manifest", text, 0, len(text)), *others])


def _cuda_edits() -> dict[str, Callable[[dict], object]]:
    """name -> function editing a copy of a manifest's cuda entry in place; each makes it malformed."""
    def launch(key: str, value):
        def f(c: dict):
            c["sms"][0]["kernels"][0][key] = value
        return f

    def arg(value):
        def f(c: dict):
            c["sms"][0]["kernels"][0]["args"][0] = value
        return f

    return {
        "cuda_null_sms": lambda c: c.__setitem__("sms", None),
        "cuda_no_sms": lambda c: c.__setitem__("sms", []),
        "cuda_17_sms": lambda c: c.__setitem__("sms", [dict(c["sms"][0], sm=f"sm_{80 + i}") for i in range(17)]),
        "cuda_sm_name": lambda c: c["sms"][0].__setitem__("sm", "sm_x0"),
        "cuda_sm_huge": lambda c: c["sms"][0].__setitem__("sm", "sm_99999999999"),
        "cuda_sm_twice": lambda c: c.__setitem__("sms", [c["sms"][0], c["sms"][0]]),
        "cuda_ptx_absent": lambda c: c["sms"][0].__setitem__("ptx", "ptx.sm_10"),
        "cuda_ptx_missing": lambda c: c["sms"][0].pop("ptx"),
        "cuda_cubin_is_manifest": lambda c: c["sms"][0].__setitem__("cubin", "nope"),
        "cuda_arena_differs": lambda c: c["arena"].__setitem__("bytes", c["arena"]["bytes"] + 64),
        "cuda_arena_missing": lambda c: c.pop("arena"),
        "cuda_weights_other": lambda c: c.__setitem__("weights", "manifest"),
        "cuda_launch_missing": lambda c: c["sms"][0]["kernels"].pop(),
        "cuda_launch_extra": lambda c: c["sms"][0]["kernels"].append(c["sms"][0]["kernels"][0]),
        "cuda_grid_zero": launch("grid", [0, 1, 1]),
        "cuda_grid_huge": launch("grid", [1 << 31, 1, 1]),
        "cuda_grid_y_huge": launch("grid", [1, 65536, 1]),
        "cuda_grid_two": launch("grid", [1, 1]),
        "cuda_grid_float": launch("grid", [1.0, 1, 1]),
        "cuda_block_1025": launch("block", [1025, 1, 1]),
        "cuda_block_product": launch("block", [64, 32, 1]),
        "cuda_block_z_65": launch("block", [1, 1, 65]),
        "cuda_shared_huge": launch("shared_bytes", 1 << 20),
        "cuda_shared_negative": launch("shared_bytes", -1),
        "cuda_symbol_space": launch("symbol", "aot kernel"),
        "cuda_symbol_empty": launch("symbol", ""),
        "cuda_symbol_long": launch("symbol", "k" * 300),
        "cuda_symbol_digit": launch("symbol", "0kernel"),
        "cuda_args_empty": launch("args", []),
        "cuda_args_513": launch("args", [{"kind": "arena", "offset": 0}] * 513),
        "cuda_arg_kind": arg({"kind": "heap", "offset": 0}),
        "cuda_arg_arena_past": lambda c: c["sms"][0]["kernels"][0]["args"].__setitem__(
            0, {"kind": "arena", "offset": c["arena"]["bytes"] + 64}),
        "cuda_arg_arena_unaligned": arg({"kind": "arena", "offset": 8}),
        "cuda_arg_weights_past": arg({"kind": "weights", "offset": 1 << 40}),
        "cuda_arg_input_past": arg({"kind": "input", "index": 7}),
        "cuda_arg_output_negative": arg({"kind": "output", "index": -1}),
        "cuda_arg_status_in_kernel": arg({"kind": "status"}),
        "cuda_arg_not_object": arg(3),
        "cuda_checks_without_checks": lambda c: c["sms"][0].__setitem__(
            "checks", {"symbol": "aot_model_checks", "grid": [1, 1, 1], "block": [1, 1, 1], "shared_bytes": 0,
                       "args": [{"kind": "status"}]}),
    }


def cuda(seed: Seed) -> Iterator[Case]:
    """The launch plan edited, every checksum valid: each must be refused at open."""
    for name, edit in _cuda_edits().items():
        m = copy.deepcopy(seed.artifact.manifest)
        edit(m["cuda"])
        yield Case("cuda", f"{seed.name}.{name}", repack(seed, {}, manifest=m))


def code(seed: Seed, others: list[Seed]) -> Iterator[Case]:
    """Another model's code under this manifest, and ELF header edits the loader rejects."""
    code_name = seed.code_section
    for other in others:
        if other.name == seed.name:
            continue
        sections = [(n, other.artifact.sections[other.code_section] if n == code_name else d, "zstd")
                    for n, d in seed.artifact.sections.items() if n != "manifest"]
        yield Case("code", f"{seed.name}.code_of_{other.name}", pack_artifact(seed.artifact.manifest, sections))
    image = seed.artifact.sections[code_name]
    # (offset, bytes) edits check_elf rejects before dlopen: magic, class, byte order, type, machine, phoff
    for name, at, value in (("magic", 1, b"X"), ("class32", 4, b"\x01"), ("big_endian", 5, b"\x02"),
                            ("type_exec", 16, b"\x02\x00"), ("machine_arm", 18, b"\x28\x00"),
                            ("phoff_huge", 32, struct.pack("<Q", 1 << 62)), ("phnum_huge", 56, b"\xff\xff")):
        bad = image[:at] + value + image[at + len(value):]
        sections = [(n, bad if n == code_name else d, "zstd") for n, d in seed.artifact.sections.items()
                    if n != "manifest"]
        yield Case("code", f"{seed.name}.elf_{name}", pack_artifact(seed.artifact.manifest, sections))
    yield Case("code", f"{seed.name}.elf_truncated_header",
               _with_section(seed, code_name, image[:40]))


def _with_section(seed: Seed, name: str, data: bytes) -> bytes:
    return pack_artifact(seed.artifact.manifest, [(n, data if n == name else d, "zstd")
                                                 for n, d in seed.artifact.sections.items() if n != "manifest"])


# ---------------------------------------------------------------- bombs

def zstd_frame(prefix: bytes, fill: int, fill_byte: bytes = b"\0") -> bytes:
    """A zstd frame (content size stated) of `prefix` then `fill` copies of fill_byte, in raw and RLE
    blocks: 4 bytes per 128 KiB, so a few KB stand for GBs."""
    out = bytearray(b"\x28\xb5\x2f\xfd\xe0" + struct.pack("<Q", len(prefix) + fill))
    blocks: list[bytes] = []
    for at in range(0, len(prefix), RLE_BLOCK):
        chunk = prefix[at:at + RLE_BLOCK]
        blocks.append(bytes([0]) + chunk)  # type marker 0: raw
    while fill:
        n = min(fill, RLE_BLOCK)
        blocks.append(bytes([1]) + n.to_bytes(4, "little") + fill_byte)
        fill -= n
    if not blocks:
        blocks.append(bytes([0]))
    for i, b in enumerate(blocks):
        last = i == len(blocks) - 1
        if b[0] == 0:
            payload = b[1:]
            out += (len(payload) << 3 | last).to_bytes(3, "little") + payload
        else:
            n = int.from_bytes(b[1:5], "little")
            out += (n << 3 | 1 << 1 | last).to_bytes(3, "little") + b[5:]
    return bytes(out)


def bomb(seed: Seed) -> Iterator[Case]:
    m = seed.artifact.manifest
    sections = seed.artifact.sections
    cctx = zstandard.ZstdCompressor(level=19, write_content_size=True)

    def packed(manifest_stored: tuple[bytes, int, int], weights: tuple[bytes, int, int] | None) -> bytes:
        items = [("manifest", *manifest_stored)]
        for n, d in sections.items():
            if n == "manifest":
                continue
            if n == "weights" and weights is not None:
                items.append((n, *weights))
            else:
                items.append((n, cctx.compress(d), 1, len(d)) if d else (n, d, 0, 0))
        if weights is not None and "weights" not in sections:
            items.append(("weights", *weights))
        return pack_raw(items)

    def text_of(d: dict) -> tuple[bytes, int, int]:
        raw = manifest_bytes(d)
        return cctx.compress(raw), 1, len(raw)

    for size in (600 * MiB, 900 * MiB, 3 * GiB // 2, 4 * GiB, 64 * GiB):
        w = dict(m.get("weights") or {}, section="weights", bytes=size, alignment=64)
        stated = dict(m, weights=w)
        frame = zstd_frame(b"", size)
        yield Case("bomb", f"{seed.name}.weights_{size // MiB}MiB", packed(text_of(stated), (frame, 1, size)))
        # the manifest keeps its own weights size; only the section claims the big one
        yield Case("bomb", f"{seed.name}.weights_{size // MiB}MiB_unstated", packed(text_of(m), (frame, 1, size)))
    raw = manifest_bytes(m)
    for size in (100 * MiB, 600 * MiB, 3 * GiB // 2):
        # valid JSON: the real manifest followed by whitespace
        yield Case("bomb", f"{seed.name}.manifest_spaces_{size // MiB}MiB",
                   packed((zstd_frame(raw, size, b" "), 1, len(raw) + size), None))
    for count in (2_000_000, 20_000_000):
        text = raw[:-1] + b', "pad": [' + b"0," * (count - 1) + b"0]}"
        yield Case("bomb", f"{seed.name}.manifest_{count // 1_000_000}M_values",
                   packed((zstandard.ZstdCompressor(level=3).compress(text), 1, len(text)), None))
    deep = raw[:-1] + b', "deep": ' + b"[" * 1_000_000 + b"]" * 1_000_000 + b"}"
    yield Case("bomb", f"{seed.name}.manifest_depth_1M", packed((cctx.compress(deep), 1, len(deep)), None))
    for count in (40_000, 150_000):  # a quadratic name check takes 14 s on the first
        many = dict(m, inputs=[{"name": f"in{i}", "dtype": "float32", "shape": [1]} for i in range(count)])
        yield Case("bomb", f"{seed.name}.inputs_{count}", packed(text_of(many), None))


# ---------------------------------------------------------------- all

FAMILIES = ("seed", "bitflip", "bitflip_crc", "truncate", "size_field", "manifest", "code", "cuda", "bomb")


def generate(seeds: list[Seed], seed: int = 0, flips: int = 12) -> list[Case]:
    """Every case for these seeds; the same inputs give the same cases."""
    rng = random.Random(seed)
    cases: list[Case] = []
    for s in seeds:
        cases.append(Case("seed", s.name, s.data))
        cases.append(Case("seed", f"{s.name}.plain", repack(s, {"manifest": "none", "weights": "none"})))
        cases += bitflip(s, rng, flips)
        cases += bitflip_crc(s, rng, 2 * flips)
        cases += truncate(s)
        cases += size_field(s)
        if s.has_cpu_code:  # these edit the CPU entry and its code
            cases += manifest(s)
            cases += code(s, [o for o in seeds if o.has_cpu_code])
        if "cuda" in s.artifact.manifest:
            cases += cuda(s)
    # bombs are alike for every seed: one with weights, one without
    for s in seeds[:2]:
        cases += bomb(s)
    return cases
