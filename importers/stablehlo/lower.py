"""syntax.Module -> IR Graph: inline every call into @main, unroll static whiles, inline if/case.

Lowering walks @main's body op by op; `func.call` lowers the callee's body
in place (private helpers have no identity in the IR), and `while` lowers its
condition and body again for every iteration: the loop counter of a
fori_loop/scan folds to a constant (Ctx.op), so the condition folds too and
decides whether to go on. A condition that does not fold is a loop with a
dynamic trip count: a clear error, not a guess. `if` and `case` inline their
branches (ops_control.py): the taken one when the predicate folds, all of
them and a select otherwise.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from aot.errors import IRError, ModelError, UnsupportedError, spelled
from aot.ir import Graph, Value
from aot.ir.types import TensorType
from aot.ir.verifier import verify_graph

from . import ops_chlo, ops_control, ops_elementwise, ops_index, ops_nn, ops_shape
from .context import DTYPES, Ctx
from .locations import simple_name
from .syntax import Block, Func, Module, Op, Symbol, TType

Lowering = Callable[[Ctx, Op, list[Value]], list[Value]]

OP_TABLE: dict[str, Lowering] = {}
for _module in (ops_elementwise, ops_shape, ops_nn, ops_index, ops_chlo):
    for _name, _fn in _module.OPS.items():
        assert _name not in OP_TABLE, _name
        OP_TABLE[_name] = _fn

RETURNS = ("return", "func.return", "stablehlo.return")
MAX_UNROLL = 4096  # iterations of one while; beyond this the artifact would be mostly copies
MAX_CALL_DEPTH = 64


def supported_ops() -> list[str]:
    return sorted(set(OP_TABLE) | {"func.call", "call", "stablehlo.while", "stablehlo.composite",
                                   "stablehlo.custom_call", *ops_control.CONTROL_OPS, *RETURNS})


class _Scope:
    """SSA names visible in a block; regions see their parents' names (implicit capture)."""

    def __init__(self, parent: _Scope | None = None):
        self.parent = parent
        self.values: dict[str, list[Value]] = {}

    def get(self, ref: str) -> Value | None:
        name, _, index = ref.partition("#")
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.values:
                results = scope.values[name]
                i = int(index) if index else 0
                return results[i] if i < len(results) else None
            scope = scope.parent
        return None


class Lowerer:
    def __init__(self, module: Module, graph: Graph):
        self.module = module
        self.cx = Ctx(graph, module)
        self.depth = 0

    # -- blocks ------------------------------------------------------------------------
    def run_block(self, block: Block, args: list[Value], parent: _Scope | None) -> list[Value]:
        scope = _Scope(parent)
        for (name, _), value in zip(block.args, args):
            scope.values[name] = [value]
        for op in block.ops:
            self.cx.current = op
            ins: list[Value] = []
            for ref in op.operands:
                value = scope.get(ref)
                if value is None:
                    raise self.cx.error(f"use of undefined value {ref}")
                ins.append(value)
            if op.name in RETURNS:
                return ins
            outs = self.lower_op(op, ins, scope)
            self.bind(op, outs, scope)
        raise ModelError(f"{self.module.source}: a block ends without a return")

    def bind(self, op: Op, outs: list[Value], scope: _Scope) -> None:
        self.cx.current = op
        if len(outs) != op.num_results:
            raise self.cx.error(f"lowered to {len(outs)} results, the op declares {op.num_results}")
        for i, (value, ttype) in enumerate(zip(outs, op.result_types)):
            _check_declared(self.cx, value.type, ttype, f"result {i}")
        k = 0
        for name, count in op.results:
            scope.values[name] = outs[k:k + count]
            k += count

    def lower_op(self, op: Op, ins: list[Value], scope: _Scope) -> list[Value]:
        if op.name in ("func.call", "call"):
            return self.call(op.attrs["callee"].name, ins)
        if op.name == "stablehlo.composite":
            target = op.attrs.get("decomposition")
            if not isinstance(target, Symbol):
                raise self.cx.unsupported("composite without a decomposition function")
            return self.call(target.name, ins)
        if op.name == "stablehlo.while":
            return self.while_loop(op, ins, scope)
        if op.name in ops_control.CONTROL_OPS:  # if/case: branches inlined in this scope
            return ops_control.lower_control(self.cx, op, ins, lambda block: self.run_block(block, [], scope))
        if op.name == "stablehlo.custom_call":
            return self.custom_call(op, ins)
        fn = OP_TABLE.get(op.name)
        if fn is None:
            raise self.cx.unsupported(f"op {op.name} is not supported")
        try:
            return fn(self.cx, op, ins)
        except IRError as err:  # a shape rule refusing the operands: the model is inconsistent
            raise self.cx.error(str(err)) from None

    # -- calls and loops ------------------------------------------------------------------
    def call(self, name: str, ins: list[Value]) -> list[Value]:
        func = self.module.funcs.get(name)
        if func is None:
            raise self.cx.error(f"call of undefined function @{name}")
        if len(ins) != len(func.args):
            raise self.cx.error(f"@{name} takes {len(func.args)} arguments, got {len(ins)}")
        if self.depth >= MAX_CALL_DEPTH:
            raise self.cx.unsupported(f"calls nest deeper than {MAX_CALL_DEPTH} (recursion through @{name}?)")
        caller = self.cx.current
        self.depth += 1
        try:
            outs = self.run_block(func.body, ins, None)
        finally:
            self.depth -= 1
            self.cx.current = caller
        return outs

    def while_loop(self, op: Op, ins: list[Value], scope: _Scope) -> list[Value]:
        cond, body = op.regions[0].blocks[0], op.regions[1].blocks[0]
        carried = ins
        for _ in range(MAX_UNROLL + 1):
            self.cx.current = op
            (flag,) = self.run_block(cond, carried, scope)[:1]
            value = self.cx.const(flag)
            self.cx.current = op
            if value is None:
                raise self.cx.unsupported(
                    "while loop condition does not fold to a constant: only loops with a static trip count "
                    "(fori_loop/scan with Python-int bounds) are supported, by unrolling")
            if not bool(value):
                return carried
            carried = self.run_block(body, carried, scope)
        raise self.cx.unsupported(f"while loop runs more than {MAX_UNROLL} iterations; too many to unroll")

    def custom_call(self, op: Op, ins: list[Value]) -> list[Value]:
        target = op.attrs.get("call_target_name", "")
        if target == "shape_assertion":
            holds = self.cx.const(ins[0])
            if holds is None:
                raise self.cx.unsupported("shape_assertion on a value that does not fold to a constant")
            if not bool(holds):
                values = [self.cx.const(v) for v in ins[1:]]
                message = str(op.attrs.get("error_message", "shape assertion failed"))
                for i, v in enumerate(values):
                    message = message.replace(f"{{{i}}}", str(v.item()) if v is not None else "?")
                raise self.cx.error(message)
            return []
        if target in ("Sharding", "SPMDFullToShardShape", "SPMDShardToFullShape") and len(ins) == 1:
            return ins  # layout annotations for multi-device runs: a single-device artifact ignores them
        raise self.cx.unsupported(f"custom_call target '{target}' is not supported")


def lower_module(module: Module, shapes: Mapping[str, tuple[int, ...]] | None) -> Graph:
    func = _entry(module)
    graph = Graph(_sanitize(module.name) or "main")
    lowerer = Lowerer(module, graph)
    args = _inputs(module, func, graph, dict(shapes or {}))
    outs = lowerer.run_block(func.body, args, None)
    lowerer.cx.current = None
    if len(outs) != len(func.result_types):
        raise ModelError(f"{module.source}: @{func.name} returns {len(outs)} values but declares {len(func.result_types)}")
    used: set[str] = set()
    for i, (value, attrs) in enumerate(zip(outs, func.result_attrs)):
        _check_declared(lowerer.cx, value.type, func.result_types[i], f"@{func.name} result {i}")
        # the model's own name ('result[0]'), kept exactly: only IR values need identifiers
        name = str(attrs.get("jax.result_info", "")) or f"out{i}"
        if name in used:
            name = f"{name}_{i}"
        used.add(name)
        graph.add_output(value, name)
    # unrolled loop conditions and folded shape arithmetic stay behind as dead
    # nodes: the pipeline's first step removes them (aot/pipeline.py)
    verify_graph(graph)
    return graph


def _entry(module: Module) -> Func:
    if "main" in module.funcs:
        return module.funcs["main"]
    public = [f for f in module.funcs.values() if f.visibility == "public"]
    if len(public) != 1:
        raise ModelError(f"{module.source}: no @main and {len(public)} public functions; cannot tell the entry point")
    return public[0]


def _inputs(module: Module, func: Func, graph: Graph, shapes: dict[str, tuple[int, ...]]) -> list[Value]:
    values = []
    known: list[str] = []
    forwarded = _forwarded_names(module, func)
    for i, (ssa, ttype, attrs, loc) in enumerate(func.args):
        name = _arg_name(attrs, loc) or forwarded.get(ssa, "") or f"arg{i}"
        if name in known:  # two arguments from one Python name: feeds need distinct names
            name = f"arg{i}"
        known.append(name)
        given = shapes.pop(name, None)
        alias = shapes.pop(f"arg{i}", None)
        given = given if given is not None else alias
        where = f"{module.source}: input '{name}' ({ssa}: {ttype})"
        if ttype.shape is None:
            raise UnsupportedError(f"{where}: only tensor arguments are supported")
        dtype = DTYPES.get(ttype.elem)
        if dtype is None:
            raise UnsupportedError(f"{where}: element type {ttype.elem} is not supported")
        if given is None:
            if not ttype.is_static:
                example = {name: tuple("N" if d is None else d for d in ttype.shape)}
                raise spelled(ModelError, lambda s: f"{where} has dynamic dims; give its shape with {s.shapes(example)}")
            shape = tuple(int(d) for d in ttype.shape)
        else:
            shape = tuple(int(d) for d in given)
            fits = len(shape) == len(ttype.shape) and all(d is None or d == s for d, s in zip(ttype.shape, shape))
            if not fits:
                raise spelled(ModelError, lambda s: f"{where}: {s.shape(name, shape)} does not fit its type")
        values.append(graph.add_input(name, TensorType(dtype, shape)))
    if shapes:
        unknown = sorted(shapes)
        raise spelled(ModelError, lambda s: f"{module.source}: {s.option} names unknown input(s) {unknown}; inputs are {known}")
    return values


def _arg_name(attrs: dict, loc: tuple[str, ...]) -> str:
    return str(attrs.get("jax.arg_info", "")) or simple_name(loc) or ""


def _forwarded_names(module: Module, func: Func) -> dict[str, str]:
    """Names of entry arguments passed straight to a named argument of a callee.

    jax.export's @main takes unnamed arguments and forwards them to
    @_wrapped_jax_export_main, whose arguments carry the Python names.
    """
    names: dict[str, str] = {}
    for op in func.body.ops:
        callee = op.attrs.get("callee")
        if op.name not in ("func.call", "call") or not isinstance(callee, Symbol) or callee.name not in module.funcs:
            continue
        for ref, (_, _, attrs, loc) in zip(op.operands, module.funcs[callee.name].args):
            if _arg_name(attrs, loc):
                names.setdefault(ref, _arg_name(attrs, loc))
    return names


def _check_declared(cx: Ctx, got: TensorType, declared: TType, what: str) -> None:
    """A declared static type must equal the inferred one; '?' dims accept any size."""
    if declared.shape is None:
        return
    dtype = cx.dtype(declared.elem)
    fits = got.dtype is dtype and len(got.shape) == len(declared.shape) and all(
        d is None or d == s for d, s in zip(declared.shape, got.shape))
    if not fits:
        raise cx.error(f"{what} is declared {declared} but computes to {got}")


def _sanitize(name: str) -> str:
    cleaned = "".join(ch if ch.isascii() and (ch.isalnum() or ch in "_.") else "_" for ch in name)
    return cleaned.strip("_")


__all__ = ["lower_module", "supported_ops", "OP_TABLE"]
