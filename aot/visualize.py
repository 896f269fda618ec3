"""Pictures of a compiled model: the arena plan and the kernel graph.

Each function takes the manifest annotated with the tooling section
(`Artifact.annotated`, aot/tooling.py), where the plan, the fused ops and
where each value lives are recorded.

Hand-written SVG (and DOT text for the graph), so no graphviz is needed:

    memory_plan_svg(manifest)  one rectangle per arena buffer: kernel steps
                               across, arena offset down, the lower bound marked
    kernel_graph_dot(manifest) kernels as boxes listing their fused ops,
    kernel_graph_svg(manifest) edges from the kernel (or graph input) that
                               writes a value to each kernel that reads it

Output is deterministic: same manifest, same bytes.
"""
from __future__ import annotations

import json
from html import escape
from typing import Any

FONT = 'font-family="monospace" font-size="11"'


def _colour(index: int) -> str:
    hue = (index * 137) % 360  # golden-angle steps keep neighbours apart
    return f"hsl({hue},60%,70%)"


def _human(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024  # type: ignore[assignment]
    return str(n)


def memory_plan_svg(manifest: dict[str, Any], width: int = 900, height: int = 500) -> str:
    buffers = manifest.get("memory_plan", [])
    arena = manifest.get("arena", {})
    arena_bytes = max(int(arena.get("bytes", 0)), 1)
    lower = int(arena.get("lower_bound_bytes", 0))
    steps = max(len(manifest.get("kernels", [])), max((b["end"] + 1 for b in buffers), default=1), 1)
    left, top, right, bottom = 70, 30, 20, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    sx, sy = plot_w / steps, plot_h / arena_bytes
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}">',
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="18" {FONT}>arena {_human(arena_bytes)} ({arena_bytes} B), lower bound '
        f'{_human(lower)}, {len(buffers)} buffers over {steps} kernel steps</text>',
        f'<rect x="{left}" y="{top}" width="{plot_w}" height="{plot_h}" fill="none" stroke="black"/>',
    ]
    for i, b in enumerate(buffers):
        x = left + b["start"] * sx
        w = max((b["end"] - b["start"] + 1) * sx, 1.0)
        y = top + b["offset"] * sy
        h = max(b["size"] * sy, 1.0)
        names = ", ".join("%" + v for v in b["values"])
        tip = f'{b["buffer"]}: {names}; {b["size"]} B at offset {b["offset"]}, steps {b["start"]}..{b["end"]}'
        out.append(f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" fill="{_colour(i)}" '
                   f'stroke="#333" stroke-width="0.5"><title>{escape(tip)}</title></rect>')
        if h >= 12 and w >= 40:
            label = b["values"][0] if b["values"] else b["buffer"]
            out.append(f'<text x="{x + 2:.2f}" y="{y + 11:.2f}" {FONT}>{escape(label)}</text>')
    if lower:
        y = top + lower * sy
        out.append(f'<line x1="{left}" y1="{y:.2f}" x2="{left + plot_w}" y2="{y:.2f}" stroke="red" stroke-dasharray="4 3"/>')
        out.append(f'<text x="{left + plot_w - 90}" y="{y - 3:.2f}" {FONT} fill="red">lower bound</text>')
    out.append(f'<text x="{left}" y="{height - 12}" {FONT}>kernel step (time) -&gt;</text>')
    out.append(f'<text x="4" y="{top + 10}" {FONT}>offset 0</text>')
    out.append(f'<text x="4" y="{top + plot_h}" {FONT}>{escape(_human(arena_bytes))}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _graph(manifest: dict[str, Any]) -> tuple[list[dict[str, Any]], list[tuple[str, str, str]]]:
    """Nodes (graph inputs, kernels) and edges (from, to, value) of the kernel graph."""
    kernels = manifest.get("kernels", [])
    values: dict[str, dict[str, Any]] = manifest.get("values", {})
    nodes: list[dict[str, Any]] = []
    writer: dict[str, str] = {}
    for i, t in enumerate(manifest.get("inputs", [])):
        nodes.append({"id": f"in{i}", "title": f"input {t['name']}", "lines": [f"{t['dtype']}{t['shape']}"]})
    input_ids = [f"in{i}" for i in range(len(manifest.get("inputs", [])))]
    for name, v in values.items():
        if v.get("kind") == "input" and 0 <= v.get("index", -1) < len(input_ids):
            writer[name] = input_ids[v["index"]]
    names = [k.get("name", k["symbol"]) for k in kernels]
    for k, name in zip(kernels, names):
        writer[k.get("output", name)] = name
    edges: list[tuple[str, str, str]] = []
    for k, name in zip(kernels, names):
        weights = sum(1 for v in k.get("inputs", []) if values.get(v, {}).get("kind") == "weights")
        lines = _wrap("+".join(k.get("ops", [])), 32)
        if weights:
            lines.append(f"{weights} weight(s)")
        nodes.append({"id": name, "title": name, "lines": lines})
        for v in k.get("inputs", []):
            if v in writer:
                edges.append((writer[v], name, v))
    return nodes, edges


def _wrap(text: str, width: int) -> list[str]:
    lines, line = [], ""
    for part in text.split("+"):
        piece = part if not line else "+" + part
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = part
        else:
            line += piece
    return lines + ([line] if line else [])


def kernel_graph_dot(manifest: dict[str, Any]) -> str:
    nodes, edges = _graph(manifest)
    out = ["digraph kernels {", '  node [shape=box, fontname="monospace", fontsize=10];']
    for n in nodes:
        label = "\n".join([n["title"], *n["lines"]])  # json writes the newline as \n, DOT's line break
        out.append(f"  {json.dumps(n['id'])} [label={json.dumps(label)}];")
    for src, dst, value in edges:
        out.append(f"  {json.dumps(src)} -> {json.dumps(dst)} [label={json.dumps('%' + value)}];")
    out.append("}")
    return "\n".join(out) + "\n"


def kernel_graph_svg(manifest: dict[str, Any]) -> str:
    """Layered drawing: each node one layer below the deepest node it reads from."""
    nodes, edges = _graph(manifest)
    layer: dict[str, int] = {}
    preds: dict[str, list[str]] = {}
    for src, dst, _ in edges:
        preds.setdefault(dst, []).append(src)
    for n in nodes:  # nodes are in execution order, so predecessors come first
        layer[n["id"]] = 1 + max((layer.get(p, 0) for p in preds.get(n["id"], [])), default=-1)
    rows: dict[int, list[dict[str, Any]]] = {}
    for n in nodes:
        rows.setdefault(layer[n["id"]], []).append(n)
    box_w, line_h, gap_x, gap_y = 220, 14, 30, 40
    heights = {n["id"]: (len(n["lines"]) + 1) * line_h + 8 for n in nodes}
    pos: dict[str, tuple[float, float]] = {}
    y = 20.0
    width = 0.0
    for level in sorted(rows):
        row_h = max(heights[n["id"]] for n in rows[level])
        for i, n in enumerate(rows[level]):
            pos[n["id"]] = (20 + i * (box_w + gap_x), y)
        width = max(width, 20 + len(rows[level]) * (box_w + gap_x))
        y += row_h + gap_y
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{y:.0f}" viewBox="0 0 {width:.0f} {y:.0f}">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
        'orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>',
        f'<rect x="0" y="0" width="{width:.0f}" height="{y:.0f}" fill="white"/>',
    ]
    for src, dst, value in edges:
        (x1, y1), (x2, y2) = pos[src], pos[dst]
        out.append(f'<line x1="{x1 + box_w / 2:.1f}" y1="{y1 + heights[src]:.1f}" x2="{x2 + box_w / 2:.1f}" '
                   f'y2="{y2:.1f}" stroke="#555" marker-end="url(#arrow)"><title>%{escape(value)}</title></line>')
    for n in nodes:
        x, y0 = pos[n["id"]]
        fill = "#dde8ff" if n["id"].startswith("in") and n["title"].startswith("input") else "#fff4d6"
        out.append(f'<g><rect x="{x:.1f}" y="{y0:.1f}" width="{box_w}" height="{heights[n["id"]]}" rx="4" '
                   f'fill="{fill}" stroke="#333"/>')
        out.append(f'<text x="{x + 6:.1f}" y="{y0 + line_h:.1f}" {FONT} font-weight="bold">{escape(n["title"])}</text>')
        for j, text in enumerate(n["lines"]):
            out.append(f'<text x="{x + 6:.1f}" y="{y0 + (j + 2) * line_h:.1f}" {FONT}>{escape(text)}</text>')
        out.append("</g>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
