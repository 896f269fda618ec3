"""A kernel's fingerprint: what its body's code depends on, hashed without emitting it.

Emitting and printing a body's LLVM IR costs more than half of a compile whose objects
are all cached (the microkernels are unrolled in Python). The cache (cache.py) therefore
also maps a kernel's fingerprint to its body's symbol and object key, so a compile of an
unchanged kernel skips the emitters too. The fingerprint covers:

- the kernel: each node's op, attributes and output type, its inputs as positions
  (a param's index or an earlier node's), its params' types and their producers' op
  and attributes (an emitter may look one step out, at a constant or a packed layout);
- the model's weight bytes (KernelContext.model_weight_bytes) and the target;
- the compiler itself as loaded: a digest of the aot modules' code and module-level
  values (compiler_digest), so a change to any emitter, on disk or monkeypatched in
  memory, misses instead of reusing code it would no longer emit.

Names are left out, so kernels doing the same work share it. An attribute of a type
the encoder does not know gives no fingerprint (None): that kernel is then emitted and
found by its IR text, as without fingerprints, never confused with another.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import marshal
import sys
import types
from typing import Any

import numpy as np

from aot.codegen.cpu.target import CpuTarget
from aot.ir.graph import Node, Value
from aot.plan import Kernel

class _Unknown(Exception):
    """An attribute the encoder cannot write down faithfully."""


def compiler_digest() -> str:
    """SHA-256 over the code of the CPU back end as loaded in this process: every module's
    functions and classes' methods (their bytecode, constants and defaults; marshal format 2, which writes no back-references, whose use follows reference counts) and its plain
    module-level values. What is loaded is what emits, so a source file edited after the
    import, or a function replaced at run time (a test's monkeypatch), changes the digest."""
    digest = hashlib.sha256()
    for name in sorted(n for n in sys.modules if _emits(n)):
        module = sys.modules[name]
        digest.update(f"module {name}\n".encode())
        for attr, value in sorted(vars(module).items()):
            digest.update(attr.encode() + b"=" + _code_digest(value, name, 0) + b"\n")
    return digest.hexdigest()


def _emits(module: str) -> bool:
    """Whether `module` is one whose code may shape a CPU kernel: the CPU back end and what
    it reads (loaded alike by every compile, so the digest does not depend on what else a
    process imported)."""
    if module.startswith("aot.codegen.nvptx"):
        return False
    return module.startswith(("aot.codegen", "aot.ir", "aot.arith")) or module in ("aot.plan", "aot.errors")


def _code_digest(value: Any, module: str, depth: int) -> bytes:
    """Bytes that change when `value` (a function, a class of `module` or a plain value) does."""
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__
    if isinstance(value, property):
        return b"property(" + b",".join(_code_digest(f, module, depth) for f in (value.fget, value.fset)) + b")"
    if isinstance(value, functools.partial):
        return b"partial(" + _code_digest(value.func, module, depth) + b")" + _plain(value.args).encode()
    if isinstance(value, types.FunctionType):
        return marshal.dumps(value.__code__, 2) + _plain(value.__defaults__).encode() + _plain(value.__kwdefaults__).encode()
    if isinstance(value, type):
        if value.__module__ != module or depth > 2:
            return f"class {value.__module__}.{value.__qualname__}".encode()
        return b"class{" + b";".join(k.encode() + b"=" + _code_digest(v, module, depth + 1)
                                       for k, v in sorted(vars(value).items()) if not k.startswith("__")) + b"}"
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}".encode()
    return _plain(value).encode()


def _plain(value: Any) -> str:
    """A module-level value as text, without addresses: what _encode knows, else its type."""
    try:
        return _encode(value, {})
    except _Unknown:
        return f"<{type(value).__module__}.{type(value).__qualname__}>"


def kernel_fingerprint(kernel: Kernel, target: CpuTarget, weight_bytes: int) -> str | None:
    """The kernel's fingerprint for `target`, or None when one of its attributes has a type
    the encoder does not know."""
    return kernel_fingerprints([kernel], [target], weight_bytes)[0][0]


def kernel_fingerprints(kernels: list[Kernel], targets: list[CpuTarget], weight_bytes: int) -> list[list[str | None]]:
    """kernel_fingerprint of each kernel (inner list) for each target (outer list); the
    compiler's digest and each kernel's description (its weights hashed) taken once."""
    digest = compiler_digest()
    described = [_describe(kernel) for kernel in kernels]
    fingerprints = []
    for target in targets:
        header = f"aot kernel fingerprint 2\n{digest}\n{target.triple}\n{target.cpu}\n{target.features}\n" \
                 f"weights {weight_bytes}\n"
        fingerprints.append([None if text is None else hashlib.sha256((header + text).encode()).hexdigest()
                             for text in described])
    return fingerprints


def _describe(kernel: Kernel) -> str | None:
    """The kernel as text, names left out; None where an attribute cannot be encoded.

    Two kernels of one description compute the same values from the same params, so one
    body serves both: the nodes go in a canonical order (depth first from the root, the
    order the graph happened to list them in does not shape the code), and a param made
    by a constant is described by its type alone: the body reads it through its pointer,
    and its values are weights (mobilenetv2's inverted residual blocks differ only there:
    54 kernels, 32 bodies)."""
    positions: dict[int, str] = {id(p): f"p{i}" for i, p in enumerate(kernel.params)}
    parts = []
    try:
        for i, param in enumerate(kernel.params):
            producer = param.producer
            if producer is None:
                outside = "input"
            elif producer.op == "constant":  # its values left out: weights, read through the pointer
                outside = f"constant {_encode({k: v for k, v in producer.attrs.items() if k != 'value'}, positions)}"
            else:
                outside = f"{producer.op} {_encode(producer.attrs, positions)}"
            parts.append(f"p{i}: {_encode(param.type, positions)} from {outside}\n")
        for i, node in enumerate(_canonical_order(kernel)):
            inputs = ", ".join(_reference(v, positions) for v in node.inputs)
            parts.append(f"n{i} = {node.op}({inputs}) {_encode(node.attrs, positions)}: {_encode(node.out.type, positions)}\n")
            positions[id(node.out)] = f"n{i}"
        parts.append(f"root {_reference(kernel.root, positions)}\n")
    except _Unknown:
        return None
    return "".join(parts)


def _canonical_order(kernel: Kernel) -> list[Node]:
    """kernel.nodes depth first from the root (inputs in operand order), then any node the
    root does not reach, in their own order."""
    fused = {id(node): node for node in kernel.nodes}
    order: list[Node] = []
    placed: set[int] = set()

    def visit(node: Node) -> None:
        stack: list[tuple[Node, int]] = [(node, 0)]
        while stack:
            current, next_input = stack.pop()
            if next_input == 0 and id(current) in placed:
                continue
            inputs = [v.producer for v in current.inputs if v.producer is not None and id(v.producer) in fused]
            if next_input < len(inputs):
                stack.append((current, next_input + 1))
                if id(inputs[next_input]) not in placed:
                    stack.append((inputs[next_input], 0))
                continue
            if id(current) not in placed:
                placed.add(id(current))
                order.append(current)

    if kernel.root.producer is not None and id(kernel.root.producer) in fused:
        visit(kernel.root.producer)
    for node in kernel.nodes:
        visit(node)
    return order


def _reference(value: Value, positions: dict[int, str]) -> str:
    if id(value) not in positions:
        raise _Unknown  # a value neither a param nor computed here: not a kernel we know how to read
    return positions[id(value)]


def _encode(item: Any, positions: dict[int, str]) -> str:
    """A text that determines `item` exactly (types included), or _Unknown."""
    if item is None or isinstance(item, (bool, int, str, bytes)):
        return f"{type(item).__name__}:{item!r}"
    if isinstance(item, float):
        return f"float:{item.hex()}"
    if isinstance(item, enum.Enum):
        return f"{type(item).__qualname__}.{item.name}"
    if isinstance(item, np.ndarray):
        data = np.ascontiguousarray(item)
        return f"array:{data.dtype.str}:{data.shape}:{hashlib.sha256(data.tobytes()).hexdigest()}"
    if isinstance(item, np.generic):
        return f"{item.dtype.str}:{item.tobytes().hex()}"
    if isinstance(item, (tuple, list)):
        return f"{type(item).__name__}({', '.join(_encode(x, positions) for x in item)})"
    if isinstance(item, (set, frozenset)):
        return f"{type(item).__name__}{{{', '.join(sorted(_encode(x, positions) for x in item))}}}"
    if isinstance(item, dict):
        entries = sorted(f"{_encode(k, positions)}: {_encode(v, positions)}" for k, v in item.items())
        return f"dict{{{', '.join(entries)}}}"
    if isinstance(item, Value):
        return _reference(item, positions)
    if isinstance(item, Node):
        raise _Unknown
    if dataclasses.is_dataclass(item) and not isinstance(item, type):
        fields = ", ".join(f"{f.name}={_encode(getattr(item, f.name), positions)}" for f in dataclasses.fields(item))
        return f"{type(item).__module__}.{type(item).__qualname__}({fields})"
    raise _Unknown
