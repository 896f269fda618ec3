"""`aot diff A B`: what changed between two artifacts, and where the bytes went.

Four groups of changes, each sorted by absolute change (the largest first; changes
without a size follow in the order found):
- sections: stored bytes of each section (code per CPU variant, PTX/cubin per SM,
  weights, manifest, tooling), raw bytes beside; a section of equal size whose bytes
  differ (CRC-32) is listed too;
- kernels: code bytes of each kernel per CPU variant (aot/gates/elf.py), the entry and
  the checks function; variants pair by section name, else in the manifest's order
  (best first), so `--cpu native` against portable still compares kernel by kernel;
- manifest: inputs, outputs (name, dtype, shape), format and compiler version, model
  name and source hash, the code targets (CPU variants, GPU SMs), donations;
- plan: arena bytes and its lower bound, kernel count, kernels added and removed
  (matched by their fused ops, since names carry an index that shifts).
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aot.artifact import Artifact
from aot.gates.artifact_file import read_checked
from aot.gates.elf import kernel_code_bytes, read_functions
from aot.gates.units import format_size

Value = int | str | None
GROUPS = ("sections", "kernels", "manifest", "plan")


@dataclass(frozen=True)
class Change:
    """`before`/`after` None: absent on that side. Two ints (or an int and None) are a size."""
    name: str
    before: Value
    after: Value
    note: str = ""

    @property
    def delta(self) -> int | None:
        sides = (self.before, self.after)
        if any(isinstance(v, str) for v in sides) or all(v is None for v in sides):
            return None
        return (self.after or 0) - (self.before or 0)  # type: ignore[operator]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "before": self.before, "after": self.after, "delta": self.delta, "note": self.note}


@dataclass(frozen=True)
class ArtifactDiff:
    a: str
    b: str
    a_bytes: int
    b_bytes: int
    groups: dict[str, list[Change]] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return self.a_bytes == self.b_bytes and not any(self.groups.values())

    def to_json(self) -> dict[str, Any]:
        return {"a": self.a, "b": self.b, "a_bytes": self.a_bytes, "b_bytes": self.b_bytes,
                "delta_bytes": self.b_bytes - self.a_bytes, "identical": self.empty,
                **{g: [c.to_json() for c in self.groups.get(g, [])] for g in GROUPS}}


def _by_size(changes: list[Change]) -> list[Change]:
    """Sizes by absolute change, largest first (name breaks ties); the rest after, as found."""
    sized = sorted((c for c in changes if c.delta is not None), key=lambda c: (-abs(c.delta or 0), c.name))
    return sized + [c for c in changes if c.delta is None]


def _sections(a: Artifact, b: Artifact) -> list[Change]:
    info_a = {s.name: s for s in a.table}
    info_b = {s.name: s for s in b.table}
    changes = []
    for name in [*info_a, *(n for n in info_b if n not in info_a)]:
        sa, sb = info_a.get(name), info_b.get(name)
        if sa is not None and sb is not None and (sa.stored_size, sa.raw_size, sa.crc32) == (sb.stored_size, sb.raw_size, sb.crc32):
            continue
        note = f"raw {_size(sa.raw_size if sa else None)} -> {_size(sb.raw_size if sb else None)}"
        if sa is not None and sb is not None and sa.stored_size == sb.stored_size:
            note += ", same size, contents differ"
        changes.append(Change(name, sa.stored_size if sa else None, sb.stored_size if sb else None, note))
    return changes


def _variant_pairs(a: Artifact, b: Artifact) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """CPU variants of A and B to compare: same section first, then the rest in order."""
    cpu_a, cpu_b = list(a.manifest.get("cpu", [])), list(b.manifest.get("cpu", []))
    pairs = []
    for va in list(cpu_a):
        vb = next((v for v in cpu_b if v["section"] == va["section"]), None)
        if vb is not None:
            pairs.append((va, vb))
            cpu_a.remove(va)
            cpu_b.remove(vb)
    return pairs + list(zip(cpu_a, cpu_b))


def _code_sizes(artifact: Artifact, variant: dict[str, Any]) -> tuple[dict[str, int], dict[str, int]]:
    """(kernel symbol -> code bytes, entry/checks label -> bytes) in one CPU variant."""
    section = variant["section"]
    image = artifact.sections.get(section)
    if image is None:
        return {}, {}
    symbols = [k["symbol"] for k in artifact.manifest.get("kernels", []) if "symbol" in k]
    kernels = kernel_code_bytes(image, symbols, section)
    _, functions = read_functions(image, section)
    roles = {f"({role}) {variant[role]}": functions[variant[role]].size
             for role in ("entry", "checks") if variant.get(role) in functions}
    return kernels, roles


def _kernels(a: Artifact, b: Artifact, pairs: list[KernelPair]) -> list[Change]:
    changes = []
    for va, vb in _variant_pairs(a, b):
        label = va["cpu"] if va["section"] == vb["section"] else f"{va['cpu']}->{vb['cpu']}"
        (kernels_a, roles_a), (kernels_b, roles_b) = _code_sizes(a, va), _code_sizes(b, vb)
        for ka, kb in pairs:
            before = kernels_a.get(ka["symbol"]) if ka else None
            after = kernels_b.get(kb["symbol"]) if kb else None
            if before != after:
                changes.append(Change(f"{label} {_pair_name(ka, kb)}", before, after))
        for name in [*roles_a, *(n for n in roles_b if n not in roles_a)]:
            if roles_a.get(name) != roles_b.get(name):
                changes.append(Change(f"{label} {name}", roles_a.get(name), roles_b.get(name)))
    return changes


def _tensors(manifest: dict[str, Any], key: str) -> dict[str, str]:
    return {t["name"]: f"{t['dtype']}{t['shape']}" for t in manifest.get(key, [])}


def _targets(manifest: dict[str, Any]) -> str:
    cpus = [f"{v.get('arch')} {v.get('cpu')}" for v in manifest.get("cpu", [])]
    sms = [s.get("sm") for s in (manifest.get("cuda") or {}).get("sms", [])]
    return ", ".join(cpus + [str(sm) for sm in sms]) or "none"


def _fields(manifest: dict[str, Any]) -> dict[str, str]:
    """The manifest's fields a diff names, as text (annotated with the tooling section)."""
    fields = {
        "format version": str(manifest.get("format_version")),
        "compiler": f"{manifest.get('compiler', {}).get('name', '?')} {manifest.get('compiler', {}).get('version', '?')}",
        "model name": str(manifest.get("model", {}).get("name")),
        # as `aot inspect` shows it: 64 bits tell two models apart
        "model sha256": str(manifest.get("model", {}).get("source_sha256"))[:16] + "...",
        "targets": _targets(manifest),
        "donations": ", ".join(f"{d['input']}->{d['output']}" for d in manifest.get("donations", [])) or "none",
    }
    for key in ("inputs", "outputs"):
        tensors = _tensors(manifest, key)
        fields[f"{key} (order)"] = ", ".join(tensors)
        fields.update({f"{key[:-1]} {name}": text for name, text in tensors.items()})
    return fields


def _manifest(a: Artifact, b: Artifact) -> list[Change]:
    fa, fb = _fields(a.annotated), _fields(b.annotated)
    changes = []
    for name in [*fa, *(n for n in fb if n not in fa)]:
        if fa.get(name) != fb.get(name):
            if name.endswith("(order)") and set(fa[name].split(", ")) != set(fb[name].split(", ")):
                continue  # names added or removed: said by their own rows
            changes.append(Change(name, fa.get(name), fb.get(name)))
    return changes


KernelPair = tuple[dict[str, Any] | None, dict[str, Any] | None]


def _kernel_label(kernel: dict[str, Any]) -> str:
    ops = "+".join(kernel.get("ops", []))
    return f"{kernel.get('name', kernel.get('symbol'))} ({ops})" if ops else str(kernel.get("name"))


def _kernel_key(kernel: dict[str, Any]) -> str:
    """What a kernel is, less its index: its fused ops, else its name without `kN_`."""
    ops = kernel.get("ops")
    return "+".join(ops) if ops else str(kernel.get("name", "")).partition("_")[2]


def _pair_name(ka: dict[str, Any] | None, kb: dict[str, Any] | None) -> str:
    names = [str(k.get("name", k.get("symbol"))) for k in (ka, kb) if k is not None]
    return names[0] if len(set(names)) == 1 else "->".join(names)


def _kernel_pairs(a: Artifact, b: Artifact) -> list[KernelPair]:
    """Kernels of A and B matched in order by what they compute (their names carry an index
    that shifts when one is added); the unmatched ones pair with None."""
    ka, kb = a.annotated.get("kernels", []), b.annotated.get("kernels", [])
    matcher = difflib.SequenceMatcher(a=[_kernel_key(k) for k in ka], b=[_kernel_key(k) for k in kb], autojunk=False)
    pairs: list[KernelPair] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            pairs.extend(zip(ka[i1:i2], kb[j1:j2]))
            continue
        pairs.extend((k, None) for k in ka[i1:i2])
        pairs.extend((None, k) for k in kb[j1:j2])
    return pairs


def _plan(a: Artifact, b: Artifact, pairs: list[KernelPair]) -> list[Change]:
    ma, mb = a.annotated, b.annotated
    changes = []
    for name, key in (("arena bytes", "bytes"), ("arena lower bound bytes", "lower_bound_bytes")):
        before, after = ma.get("arena", {}).get(key), mb.get("arena", {}).get(key)
        if before != after:
            changes.append(Change(name, before, after))
    count_a, count_b = len(ma.get("kernels", [])), len(mb.get("kernels", []))
    if count_a != count_b:
        changes.append(Change("kernel count", count_a, count_b))
    for ka, kb in pairs:
        if kb is None and ka is not None:
            changes.append(Change("kernel removed", _kernel_label(ka), None))
        elif ka is None and kb is not None:
            changes.append(Change("kernel added", None, _kernel_label(kb)))
    return changes


def diff_artifacts(a: Path, b: Path) -> ArtifactDiff:
    """Compare two artifacts; each is read and checked whole first (ArtifactError if damaged)."""
    art_a, art_b = read_checked(a), read_checked(b)
    bytes_a, bytes_b = a.stat().st_size, b.stat().st_size
    pairs = _kernel_pairs(art_a, art_b)
    groups = {"sections": _sections(art_a, art_b), "kernels": _kernels(art_a, art_b, pairs),
              "manifest": _manifest(art_a, art_b), "plan": _plan(art_a, art_b, pairs)}
    return ArtifactDiff(str(a), str(b), bytes_a, bytes_b, {g: _by_size(c) for g, c in groups.items()})


def _size(value: int | None) -> str:
    return "-" if value is None else f"{value:,} B"


def _value(value: Value) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else value


def _values(change: Change) -> str:
    """`before -> after`; a text on one side only is said as added or removed (a kernel's row
    says so in its name already)."""
    one_side = (change.before is None) != (change.after is None)
    if change.delta is not None or not one_side:
        return f"{_value(change.before)} -> {_value(change.after)}"
    present = _value(change.after if change.before is None else change.before)
    if change.name in ("kernel added", "kernel removed"):
        return present
    return f"{'added' if change.before is None else 'removed'}: {present}"


def _delta(change: Change) -> str:
    if change.delta is None:
        return ""
    before = change.before if isinstance(change.before, int) else 0
    pct = f" ({change.delta / before * 100:+.1f}%)" if before else ""
    return f"{change.delta:+,}{pct}"


_TITLES = {"sections": "sections (stored bytes)", "kernels": "kernel code (bytes, per CPU variant)",
           "manifest": "manifest", "plan": "plan"}


def format_diff(diff: ArtifactDiff) -> str:
    if diff.empty:
        return "no differences"
    change = diff.b_bytes - diff.a_bytes
    pct = f", {change / diff.a_bytes * 100:+.1f}%" if diff.a_bytes else ""
    lines = [f"{diff.a} -> {diff.b}: {format_size(diff.a_bytes)} -> {format_size(diff.b_bytes)} "
             f"({change:+,} B{pct})"]
    for group in GROUPS:
        changes = diff.groups.get(group, [])
        if not changes:
            continue
        lines.append(_TITLES[group])
        width = max(len(c.name) for c in changes)
        for c in changes:
            row = f"  {c.name:<{width}}  {_values(c)}"
            extra = "  ".join(part for part in (_delta(c), c.note) if part)
            lines.append(f"{row}  {extra}" if extra else row)
    return "\n".join(lines)
