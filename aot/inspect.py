"""What is inside an artifact: manifest, tooling section, sections and their sizes."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aot.artifact import read_artifact
from aot.errors import AotError
from aot.tooling import annotated

# File names for sections when extracted; others keep their section name.
_EXTRACT_SUFFIX = {"manifest": ".json", "tooling": ".json", "weights": ".bin"}


def _section_suffix(name: str) -> str:
    if name in _EXTRACT_SUFFIX:
        return _EXTRACT_SUFFIX[name]
    if name.startswith("cpu."):
        return ".so"
    if name.startswith(("ptx.", "cubin.")):
        return "." + name.split(".", 1)[0]
    return ".bin"


def describe(path: str | Path) -> dict[str, Any]:
    """Manifest, tooling section, a section table and headline numbers, as JSON-ready data.
    The headline numbers come from the manifest annotated with the tooling section."""
    data = Path(path).read_bytes() if Path(path).is_file() else None
    artifact = read_artifact(path)
    manifest = artifact.annotated
    sections = [
        {"name": s.name, "codec": s.codec, "stored_bytes": s.stored_size, "raw_bytes": s.raw_size}
        for s in artifact.table
    ]
    code_bytes = {s.name: s.raw_size for s in artifact.table if s.name.startswith(("cpu.", "ptx.", "cubin."))}
    arena = manifest.get("arena", {})
    return {
        "file": str(path),
        "file_bytes": len(data) if data is not None else None,
        "model": manifest.get("model", {}),
        "inputs": manifest.get("inputs", []),
        "outputs": manifest.get("outputs", []),
        "kernels": manifest.get("kernels", []),
        "kernel_count": len(manifest.get("kernels", [])),
        "arena_bytes": arena.get("bytes"),
        "arena_lower_bound_bytes": arena.get("lower_bound_bytes"),
        "temporaries_bytes": arena.get("temporaries_bytes"),
        "weights_bytes": manifest.get("weights", {}).get("bytes"),
        "code_bytes": code_bytes,
        # the CPU code variants, best first, as the runtime chooses among them
        "cpu_variants": [{"arch": c.get("arch"), "cpu": c.get("cpu"), "section": c.get("section"),
                          "code_bytes": code_bytes.get(c.get("section")), "x86_features": c.get("x86_features")}
                         for c in manifest.get("cpu", [])],
        "cuda": manifest.get("cuda"),  # GPU code and launch plan, with ptxas's report (None: no GPU code)
        "donations": manifest.get("donations", []),  # outputs that take over inputs' buffers
        "memory_plan": manifest.get("memory_plan", []),
        "sections": sections,
        "manifest": artifact.manifest,
        "tooling": artifact.tooling,
    }


def _annotated(info: dict[str, Any]) -> dict[str, Any]:
    return annotated(info["manifest"], info["tooling"])


def display_name(name: str) -> str:
    """A tensor name as the model spells it; quoted (JSON) only where it would blur into the
    list around it: spaces, commas, quotes, control characters, or empty."""
    plain = name and name.isprintable() and not any(ch.isspace() or ch in ",'\"" for ch in name)
    return name if plain else json.dumps(name, ensure_ascii=False)


def _tensor(t: dict[str, Any]) -> str:
    return f"{display_name(t['name'])}: {t['dtype']}{t['shape']}"


def summary(info: dict[str, Any]) -> str:
    m = _annotated(info)
    lines = [
        f"{info['file']}: {info['file_bytes']} bytes, format {m.get('format_version')}, "
        f"compiled by {m.get('compiler', {}).get('name')} {m.get('compiler', {}).get('version')}",
        f"model {info['model'].get('name')} (sha256 {str(info['model'].get('source_sha256', ''))[:16]}...)",
        "inputs:  " + ", ".join(_tensor(t) for t in info["inputs"]),
        "outputs: " + ", ".join(_tensor(t) for t in info["outputs"]),
        f"arena {info['arena_bytes']} B (lower bound {info['arena_lower_bound_bytes']} B, "
        f"temporaries {info['temporaries_bytes']} B), weights {info['weights_bytes']} B",
    ]
    for d in m.get("donations", []):
        # an output that takes over an input's buffer (a KV cache updated in place): how and why
        source = "inferred from the names" if d.get("inferred") else "asked for"
        how = f": {d['how']}, {d['why']}" if "how" in d else ""
        lines.append(f"donated: {display_name(info['inputs'][d['input']]['name'])} -> "
                     f"{display_name(info['outputs'][d['output']]['name'])} ({source}){how}")
    variants = m.get("cpu", [])
    for index, target in enumerate(variants):
        # best first: the runtime loads the first of its architecture whose features the CPU has
        which = f"variant {index + 1} of {len(variants)}: " if len(variants) > 1 else ""
        features = target.get("x86_features")
        widest = f", up to {_widest(features)}" if features else ""
        lines.append(f"cpu code: {which}{target.get('arch')} {target.get('cpu')} ({target.get('triple')}) "
                     f"in {target.get('section')}{widest}")
    lines.append("sections:")
    for s in info["sections"]:
        lines.append(f"  {s['name']:<23} {s['codec']:<5} {s['stored_bytes']:>10} B stored {s['raw_bytes']:>10} B raw")
    lines.append(f"kernels ({len(info['kernels'])})" + (f", work of {variants[0].get('cpu')}:" if len(variants) > 1 else ":"))
    for k in info["kernels"]:
        # cost_ns: the compiler's estimate of all the kernel's items on one core (the runtime's thread split)
        cost = f"{k['cost_ns'] / 1000:>9.1f} us" if isinstance(k.get("cost_ns"), (int, float)) else " " * 12
        work = f"work {k['work']:>6}  est {cost}" if "work" in k else f"{'(GPU only)':<28}"
        lines.append(f"  {k.get('name', k.get('symbol')):<24} {work}  {'+'.join(k.get('ops', []))}")
    lines.extend(_gpu_lines(m.get("cuda")))
    return "\n".join(lines)


_WIDEST = {"avx512f": "AVX-512", "avx2": "AVX2", "avx": "AVX", "sse4.2": "SSE4.2"}


def _widest(features: list[str]) -> str:
    """The widest vector extension in a variant's x86_features, the one that tells x86 levels apart."""
    return next((shown for name, shown in _WIDEST.items() if name in features), f"{len(features)} features")


def _gpu_lines(cuda: dict[str, Any] | None) -> list[str]:
    """Per SM: its sections, then per kernel its launch and what ptxas reported ('-' where
    ptxas did not run at compile time)."""
    if not cuda:
        return []
    arena = cuda.get("arena", {})
    lines = [f"gpu code: device arena {arena.get('bytes')} B (lower bound {arena.get('lower_bound_bytes')} B), "
             f"weights from section '{cuda.get('weights')}'"]
    for entry in cuda.get("sms", []):
        cubin = f"cubin {entry['cubin']} (ptxas {entry.get('ptxas', '?')})" if "cubin" in entry else "no cubin (ptxas was not installed)"
        lines.append(f"  {entry['sm']}: ptx {entry['ptx']}, {cubin}")
        lines.append(f"    {'symbol':<16} {'kernel':<24} {'body':<12} {'grid':>8} {'block':>6} {'regs':>5} "
                     f"{'spills':>8} {'shared':>8}")
        for k in entry.get("kernels", []):
            report = k.get("ptxas", {})
            spills = (f"{report['spill_store_bytes']}/{report['spill_load_bytes']}"
                      if "spill_store_bytes" in report else "-")
            shared = k.get("shared_bytes", 0) + report.get("shared_bytes", k.get("static_shared_bytes", 0))
            lines.append(f"    {k['symbol']:<16} {k.get('name', ''):<24} {k.get('body', '?'):<12} {k['grid'][0]:>8} "
                         f"{k['block'][0]:>6} {report.get('registers', '-'):>5} {spills:>8} {shared:>8}")
    return lines


def extract_sections(path: str | Path, out_dir: Path) -> list[Path]:
    """Write each section (decompressed) to out_dir; the manifest as pretty JSON."""
    artifact = read_artifact(path)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, data in artifact.sections.items():
        target = out_dir / f"{name}{_section_suffix(name)}"
        if name == "manifest":
            data = (json.dumps(artifact.manifest, indent=2) + "\n").encode()
        elif name == "tooling":
            data = (json.dumps(artifact.tooling, indent=2) + "\n").encode()
        target.write_bytes(data)
        written.append(target)
    return written


def write_memory_plan(info: dict[str, Any], path: Path) -> None:
    """SVG of the arena plan; needs the tooling section's memory_plan."""
    from aot.visualize import memory_plan_svg

    annotated = _annotated(info)
    if "memory_plan" not in annotated:
        raise AotError(f"{info['file']}: the artifact has no memory_plan (no tooling section); recompile it")
    _write(path, memory_plan_svg(annotated))


def write_graph(info: dict[str, Any], path: Path) -> None:
    """The kernel graph as DOT text (`.dot`) or SVG (anything else)."""
    from aot.visualize import kernel_graph_dot, kernel_graph_svg

    annotated = _annotated(info)
    text = kernel_graph_dot(annotated) if path.suffix == ".dot" else kernel_graph_svg(annotated)
    _write(path, text)


def _write(path: Path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as err:
        raise AotError(f"cannot write '{path}': {err.strerror}") from None
