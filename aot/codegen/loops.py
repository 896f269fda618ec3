"""Loop- and branch-building helpers on llvmlite's IRBuilder.

Every loop is top-tested: a range with zero trips runs no body and reads nothing.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from llvmlite import ir

from aot.codegen.constants import constant

I64 = ir.IntType(64)


def const_i64(value: int) -> ir.Constant:
    return constant(I64, value)


class _LoopId(ir.values.MDValue):
    """A loop's `llvm.loop` node: distinct and naming itself first, as LLVM requires of a
    loop ID (llvmlite's nodes are neither), then the loop's properties."""

    def descr(self, buf: list[str]) -> None:
        properties = ", ".join(op.get_reference() for op in self.operands)
        buf += (f"distinct !{{ {self.get_reference()}, {properties} }}", "\n")

    # distinct: never one node for two loops, which LLVM would take for one loop
    __eq__ = object.__eq__  # type: ignore[assignment]
    __hash__ = object.__hash__  # type: ignore[assignment]


def _no_unroll(module: ir.Module) -> _LoopId:
    disable = module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.disable")])
    return _LoopId(module, [disable], name=str(len(module.metadata)))


@contextmanager
def for_range(builder: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int, name: str,
              unroll: bool = True) -> Iterator[ir.Value]:
    """`for (i = start; i < stop; ++i)` (signed i64): yields i, leaves the builder after the loop.
    `unroll` False: LLVM leaves the loop rolled (a cold loop whose copies would cost compile
    time and no run time)."""
    with _loop(builder, start, stop, 1, name, signed=True, unroll=unroll) as index:
        yield index


@contextmanager
def strided_range(builder: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int, step: ir.Value | int,
                  name: str) -> Iterator[ir.Value]:
    """`for (i = start; i < stop; i += step)` over non-negative i64 (unsigned compare): a GPU
    thread's strided share of a range, a grid-stride loop. Yields i, leaves the builder after."""
    with _loop(builder, start, stop, step, name, signed=False) as index:
        yield index


@contextmanager
def _loop(builder: ir.IRBuilder, start: ir.Value | int, stop: ir.Value | int, step: ir.Value | int, name: str,
          signed: bool, unroll: bool = True) -> Iterator[ir.Value]:
    """The top-tested loop both ranges are: a signed one also promises the step does not wrap (nsw)."""
    start, stop, step = (const_i64(v) if isinstance(v, int) else v for v in (start, stop, step))
    before = builder.block
    header = builder.append_basic_block(f"{name}.header")
    body = builder.append_basic_block(f"{name}.body")
    done = builder.append_basic_block(f"{name}.end")
    builder.branch(header)
    builder.position_at_end(header)
    index = builder.phi(I64, name=name)
    index.add_incoming(start, before)
    compare = builder.icmp_signed if signed else builder.icmp_unsigned
    builder.cbranch(compare("<", index, stop, name=f"{name}.more"), body, done)
    builder.position_at_end(body)
    yield index
    following = builder.add(index, step, name=f"{name}.next", flags=["nuw", "nsw"] if signed else ["nuw"])
    index.add_incoming(following, builder.block)
    latch = builder.branch(header)
    if not unroll:
        latch.set_metadata("llvm.loop", _no_unroll(builder.module))
    builder.position_at_end(done)


@contextmanager
def if_present(builder: ir.IRBuilder, cond: ir.Value | None) -> Iterator[None]:
    """`if (cond) { ... }`, or the body unconditionally where `cond` is None (known true)."""
    if cond is None:
        yield
        return
    with builder.if_then(cond):
        yield


def branch(b: ir.IRBuilder, cond: ir.Value | None, then: Callable[[], None], otherwise: Callable[[], None]) -> None:
    """if (cond) then() else otherwise(); cond None means always `otherwise`."""
    if cond is None:
        otherwise()
        return
    with b.if_else(cond) as (on_true, on_false):
        with on_true:
            then()
        with on_false:
            otherwise()


@contextmanager
def for_nest(builder: ir.IRBuilder, extents: Sequence[int], name: str, level: int = 0) -> Iterator[list[ir.Value]]:
    """Nested constant-extent loops, outermost first; yields the index of each level."""
    if not extents:
        yield []
        return
    with for_range(builder, 0, extents[0], f"{name}{level}") as outer:
        with for_nest(builder, extents[1:], name, level + 1) as inner:
            yield [outer, *inner]


def delinearize(builder: ir.IRBuilder, linear: ir.Value, shape: Sequence[int], name: str) -> list[ir.Value]:
    """Row-major multi-index of `linear` in `shape` (dims of size 1 give constant 0)."""
    index: list[ir.Value] = []
    rest = linear
    for dim in reversed(range(len(shape))):
        size = shape[dim]
        if size == 1:
            index.append(const_i64(0))
            continue
        outer_size = 1
        for d in shape[:dim]:
            outer_size *= d
        if outer_size == 1:
            index.append(rest)  # the remaining quotient is already < size
            rest = const_i64(0)
            continue
        index.append(builder.urem(rest, const_i64(size), name=f"{name}.i{dim}"))
        rest = builder.udiv(rest, const_i64(size), name=f"{name}.q{dim}")
    return index[::-1]


def linearize(builder: ir.IRBuilder, index: Sequence[ir.Value], shape: Sequence[int], name: str) -> ir.Value:
    """Row-major linear offset of `index` in `shape`."""
    stride = 1
    terms: list[ir.Value] = []
    for dim in reversed(range(len(shape))):
        if shape[dim] != 1:
            term = index[dim] if stride == 1 else builder.mul(index[dim], const_i64(stride), name=f"{name}.s{dim}", flags=["nuw", "nsw"])
            terms.append(term)
        stride *= shape[dim]
    linear: ir.Value | None = None
    for term in reversed(terms):
        linear = term if linear is None else builder.add(linear, term, name=f"{name}.lin", flags=["nuw", "nsw"])
    return linear if linear is not None else const_i64(0)
