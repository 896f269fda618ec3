"""Shrink a failing FuzzCase to a minimal graph that still fails the same way, and save it.

Greedy, as delta debugging does it: try each simplification in turn and keep it
when the case still fails; repeat until none applies or the trial budget runs out.
The simplifications, big steps first:
  - drop a graph output (one is kept);
  - end the graph early: an intermediate value becomes the only output;
  - cut a node out: its output becomes a graph input (what fed it may then die);
  - bypass a node: its consumers read one of its inputs of the same shape instead;
  - one thread instead of several.
After each change, nodes, initializers and inputs nothing reads are removed.
"""
from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import onnx
from onnx import helper, shape_inference

from aot.fuzz.generate import FuzzCase

Predicate = Callable[[FuzzCase], bool]


def shrink(case: FuzzCase, still_fails: Predicate, max_trials: int = 400) -> FuzzCase:
    trials = 0
    changed = True
    while changed and trials < max_trials:
        changed = False
        for candidate in _candidates(case):
            trials += 1
            if still_fails(candidate):
                case = candidate
                changed = True
                break
            if trials >= max_trials:
                break
    return case


def _candidates(case: FuzzCase) -> Iterator[FuzzCase]:
    graph = case.model.graph
    if len(graph.output) > 1:
        for i in range(len(graph.output)):
            yield _with_graph(case, outputs=[o for j, o in enumerate(graph.output) if j != i])
    shapes = _value_shapes(case.model)
    outputs = {o.name for o in graph.output}
    for node in graph.node:  # earliest first: the shortest graphs are tried first
        for name in node.output:
            if name in shapes and name not in outputs:
                yield _with_graph(case, outputs=[shapes[name]])
    for index in reversed(range(len(graph.node))):
        cut = _cut(case, index, shapes)
        if cut is not None:
            yield cut
    for index in reversed(range(len(graph.node))):
        yield from _bypasses(case, index, shapes)
    if case.threads > 1:
        yield replace(case, threads=1)


def _value_shapes(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    inferred = shape_inference.infer_shapes(model)
    infos = list(inferred.graph.value_info) + list(inferred.graph.input) + list(inferred.graph.output)
    return {vi.name: vi for vi in infos if vi.type.tensor_type.elem_type == onnx.TensorProto.FLOAT}


def _cut(case: FuzzCase, index: int, shapes: dict[str, onnx.ValueInfoProto]) -> FuzzCase | None:
    """Node `index` removed; its float outputs become graph inputs."""
    graph = case.model.graph
    node = graph.node[index]
    if any(out not in shapes for out in node.output if out):
        return None
    nodes = [n for i, n in enumerate(graph.node) if i != index]
    new_inputs = [shapes[out] for out in node.output if out]
    outputs = [o for o in graph.output if o.name not in set(node.output)]
    if not outputs:
        return None
    return _with_graph(case, nodes=nodes, inputs=list(graph.input) + new_inputs, outputs=outputs)


def _bypasses(case: FuzzCase, index: int, shapes: dict[str, onnx.ValueInfoProto]) -> Iterator[FuzzCase]:
    """Node `index` removed; readers of its (single) output read one of its same-shaped inputs."""
    graph = case.model.graph
    node = graph.node[index]
    if len(node.output) != 1 or node.output[0] not in shapes:
        return
    out_type = shapes[node.output[0]].type
    for source in dict.fromkeys(node.input):
        if source not in shapes or shapes[source].type != out_type or any(o.name == source for o in graph.output):
            continue
        nodes = []
        for i, n in enumerate(graph.node):
            if i == index:
                continue
            rewired = onnx.NodeProto()
            rewired.CopyFrom(n)
            for k, name in enumerate(rewired.input):
                if name == node.output[0]:
                    rewired.input[k] = source
            nodes.append(rewired)
        outputs = [o for o in graph.output if o.name != node.output[0]]  # the bypassed value stops being one
        if outputs:
            yield _with_graph(case, nodes=nodes, outputs=outputs)


def _with_graph(case: FuzzCase, nodes=None, inputs=None, outputs=None) -> FuzzCase:
    graph = case.model.graph
    nodes = list(graph.node) if nodes is None else nodes
    inputs = list(graph.input) if inputs is None else inputs
    outputs = list(graph.output) if outputs is None else outputs
    nodes = _live_nodes(nodes, {o.name for o in outputs})
    read = {name for n in nodes for name in n.input}
    new_graph = helper.make_graph(
        nodes, graph.name,
        [i for i in inputs if i.name in read or any(o.name == i.name for o in outputs)],
        outputs,
        [init for init in graph.initializer if init.name in read])
    model = helper.make_model(new_graph, opset_imports=list(case.model.opset_import), producer_name="aot.fuzz")
    model.ir_version = case.model.ir_version
    return replace(case, model=model)


def _live_nodes(nodes: list[onnx.NodeProto], wanted: set[str]) -> list[onnx.NodeProto]:
    live = set(wanted)
    kept = []
    for node in reversed(nodes):
        if any(out in live for out in node.output):
            kept.append(node)
            live.update(node.input)
    return kept[::-1]


def save_regression(case: FuzzCase, kind: str, detail: str, directory: Path) -> Path:
    """Write the case as `<kind>-<hash>.onnx` with what the test needs to replay it
    (seed, cpu, threads; for a GPU case its matmul precision, "fuzz.gpu") and what
    failed, in the model's metadata."""
    model = onnx.ModelProto()
    model.CopyFrom(case.model)
    del model.metadata_props[:]
    path_keys = (("fuzz.gpu", case.gpu),) if case.gpu else (("fuzz.cpu", case.cpu), ("fuzz.threads", str(case.threads)))
    keys = (("fuzz.seed", str(case.seed)), *path_keys, ("fuzz.failure", kind), ("fuzz.detail", detail[:2000]))
    for key, value in keys:
        model.metadata_props.add(key=key, value=value)
    data = model.SerializeToString()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{kind}-{hashlib.sha256(data).hexdigest()[:12]}.onnx"
    path.write_bytes(data)
    return path


def load_regression(path: Path) -> FuzzCase:
    model = onnx.load(str(path))
    meta = {p.key: p.value for p in model.metadata_props}
    return FuzzCase(int(meta.get("fuzz.seed", "0")), model, meta.get("fuzz.cpu", "native"),
                    int(meta.get("fuzz.threads", "1")), meta.get("fuzz.gpu", ""))
