"""Object files for a plan's CPU code: one LLVM module per distinct kernel body (and per
distinct helper function the bodies call), and one entry.

Each kernel's work is a body function over its operands' base pointers (kernel.py:
emit_kernel_body) in a module of its own, printed without the names that do not change
its code (canonical.py) and named after the hash of that text. Kernels doing the same
work on different buffers (a model's repeated blocks) share one body, built once; a
body's object is cached on disk by that text and the target (cache.py), so a rebuild
after a change that moves buffers still finds it. A body may call helper functions
(body.new_helper: the packed conv's band accumulation), each printed in a module of its
own and named after the hash of its text likewise, so bodies that differ only around a
helper's work (their epilogues) share its one object: resnet18's portable build gives LLVM
a quarter less to do (4.76 -> 3.52 s of CPU, the same modules' texts alternating). The
entry module holds every aot_kernel_<i> (its buffers' addresses, then a tail call of its
body), aot_model_entry, aot_model_checks and aot_code_info; link.py links the objects into
one shared object per variant, bodies in plan order (each followed by its helpers not
linked yet) then the entry.

The work runs in two rounds over worker processes: (1) one kernel of each (variant,
kernel fingerprint) (fingerprint.py: kernels of one fingerprint print one body) looks its
body (and its helpers) up in the cache by the fingerprint, else prints it and looks it up
by its text; (2) each distinct body or helper missing from the cache is optimized and
compiled, the largest first, beside each variant's entry (printed from the bodies' symbols;
it was compiled after them on the calling process alone). Why processes and not threads: llvmlite
serializes every call into LLVM behind one lock (llvmlite.binding.ffi), so threads would
run LLVM one at a time. The workers are forked once the plan exists and read it from
memory. Same plan, same bytes, whichever process built what
(tests/codegen/cpu/test_parallel_build.py). A forked worker runs only Python and LLVM:
a thread of the caller that holds llvmlite's lock at that moment would leave it held
in the worker, so a caller compiling from several threads sets AOT_JOBS=1 (no
workers; also what a daemonic process, which may not fork, gets).
"""
from __future__ import annotations

import gc
import hashlib
import multiprocessing
import os
import re
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import TypeVar

import llvmlite.binding as llvm
from llvmlite import ir

from aot.codegen.cpu.bodies import body_of
from aot.codegen.cpu.body import HELPER
from aot.codegen.cpu.cache import Alias, ObjectCache, object_key
from aot.codegen.cpu.canonical import numbered_constants
from aot.codegen.cpu.code_info import emit_code_info
from aot.codegen.cpu.fingerprint import kernel_fingerprints
from aot.codegen.cpu.kernel import body_type, emit_checks, emit_entry, emit_kernel_body, emit_kernel_call, kernel_work_items
from aot.codegen.cpu.symbols import check_module, check_object
from aot.codegen.cpu.target import CpuTarget
from aot.codegen.llvm_pipeline import OWN_VECTORS, module_text, optimize_text
from aot.codegen.math import MathLib
from aot.plan import ExecutionPlan

BODY = "aot_body"  # a body's name while it is printed; then aot_body_<hash of the text>
ENTRY = ""  # the entry module's key among the bodies' symbols in build_variants


def _define(name: str) -> re.Pattern[str]:
    return re.compile(rf'^define void @"?{name}"?\(', re.MULTILINE)


def _reference(name: str) -> re.Pattern[str]:
    return re.compile(rf'@"?{name}"?(?=[(\s,)])')


_BODY_DEFINE, _BODY_REFERENCE = _define(BODY), _reference(BODY)
_HELPER_DEFINE = _define(HELPER)


def kernel_symbol(index: int) -> str:
    return f"aot_kernel_{index}"


@dataclass(frozen=True)
class BodyText:
    """A kernel's body: its symbol and module text, and the (symbol, module text) of each
    helper function it calls (body.new_helper)."""

    symbol: str
    text: str
    helpers: tuple[tuple[str, str], ...] = ()

    @property
    def texts(self) -> list[str]:
        """Every module's text: the body's, then its helpers'."""
        return [self.text, *(text for _, text in self.helpers)]


def _named(text: str, define: re.Pattern[str], reference: re.Pattern[str], prefix: str) -> tuple[str, str]:
    """(prefix_<hash of text>, text with its function, defined hidden, and the calls of it so
    named). Hidden: the objects of one shared object call it, nothing outside does."""
    symbol = f"{prefix}_{hashlib.sha256(text.encode()).hexdigest()[:24]}"
    text = define.sub(f'define hidden void @"{symbol}"(', text, count=1)
    return symbol, reference.sub(f'@"{symbol}"', text)


def kernel_body(plan: ExecutionPlan, target: CpuTarget, index: int, machine: llvm.TargetMachine) -> BodyText:
    """Kernel `index`'s body, and its helpers. Each symbol is the hash of its module's text,
    whose names are numbers (canonical.py), so equal work gives one symbol; a body's text
    names its helpers by their symbols, so its hash covers theirs."""
    module = ir.Module(name=BODY)
    module.triple = target.triple
    helpers: list[ir.Module] = []
    emit_kernel_body(module, MathLib(module, target), target, plan, plan.kernels[index], BODY, helpers)
    body = body_of(plan.kernels[index], target)
    marker = OWN_VECTORS if body is not None and body.own_vectors else ""
    text = numbered_constants(module_text(module, machine), module)
    named = []
    for helper in helpers:
        placeholder = helper.name  # body.new_helper: HELPER + its number among the body's helpers
        helper_text = marker + numbered_constants(module_text(helper, machine), helper)
        # hashed under one name whatever its place among the body's helpers
        helper_text = _define(placeholder).sub(f'define void @"{HELPER}"(', helper_text, count=1)
        symbol, helper_text = _named(helper_text, _HELPER_DEFINE, _reference(HELPER), HELPER)
        text = _reference(placeholder).sub(f'@"{symbol}"', text)
        named.append((symbol, helper_text))
    symbol, text = _named(marker + text, _BODY_DEFINE, _BODY_REFERENCE, BODY)
    return BodyText(symbol, text, tuple(named))


def entry_module(plan: ExecutionPlan, target: CpuTarget, kernels: Sequence[tuple[str, int]],
                 bodies: Sequence[str]) -> ir.Module:
    """aot_kernel_<i> (calling body `bodies[i]`, defined elsewhere), aot_model_entry,
    aot_model_checks (when the plan has checks) and aot_code_info."""
    module = ir.Module(name="aot_entry")
    module.triple = target.triple
    declared: dict[str, ir.Function] = {}
    functions = []
    for kernel, (symbol, items), body in zip(plan.kernels, kernels, bodies):
        if body not in declared:
            declared[body] = ir.Function(module, body_type(kernel), name=body)
        functions.append((emit_kernel_call(module, plan, kernel, symbol, declared[body]), items))
    entry = emit_entry(module, functions)
    checks = emit_checks(module, plan) if plan.checks else None
    emit_code_info(module, plan, entry, checks, functions)
    return module


@dataclass(frozen=True)
class Printed:
    """A module for one variant: its symbol, its text (None when the cache had its object by
    the kernel's fingerprint: it was never emitted), its object when the cache had it, and
    (a body's) the helper functions it calls, printed likewise."""

    symbol: str
    text: str | None
    cached: bytes | None
    helpers: tuple[Printed, ...] = ()


class ObjectBuilder:
    """Prints and compiles modules; the state a forked worker inherits."""

    def __init__(self, plan: ExecutionPlan, targets: Sequence[CpuTarget], cache: ObjectCache | None):
        self.plan = plan
        self.targets = list(targets)
        self.cache = cache
        self.kernels = [[(kernel_symbol(i), kernel_work_items(k, t)) for i, k in enumerate(plan.kernels)]
                        for t in self.targets]
        # taken here, before the workers fork: the compiler's digest once per compile. Also
        # without a cache: kernels of one fingerprint print one body, so it is printed once.
        self.fingerprints = kernel_fingerprints(plan.kernels, self.targets, len(plan.weights))
        self._machines: dict[CpuTarget, llvm.TargetMachine] = {}

    def machine(self, target: CpuTarget) -> llvm.TargetMachine:
        if target not in self._machines:
            self._machines[target] = target.target_machine()
        return self._machines[target]

    def print_body(self, variant: int, kernel: int) -> Printed:
        """Kernel `kernel`'s body for variant `variant`: from the cache by the kernel's
        fingerprint without emitting it, else emitted, printed and looked up by its text."""
        target = self.targets[variant]
        fingerprint = None
        if self.cache is not None:
            fingerprint = self.fingerprints[variant][kernel]
            alias = self.cache.get_alias(fingerprint) if fingerprint else None
            if alias is not None:
                objects = [self.cache.get(key) for key in (alias.key, *(key for _, key in alias.helpers))]
                if all(obj is not None for obj in objects):
                    helpers = tuple(Printed(symbol, None, obj) for (symbol, _), obj in zip(alias.helpers, objects[1:]))
                    return Printed(alias.symbol, None, objects[0], helpers)
        body = kernel_body(self.plan, target, kernel, self.machine(target))
        if self.cache is None:
            return Printed(body.symbol, body.text, None, tuple(Printed(s, t, None) for s, t in body.helpers))
        keys = [object_key(text, target) for text in body.texts]
        if fingerprint:
            self.cache.put_alias(fingerprint, Alias(body.symbol, keys[0], tuple(
                (symbol, key) for (symbol, _), key in zip(body.helpers, keys[1:]))))
        helpers = tuple(Printed(symbol, text, self.cache.get(key)) for (symbol, text), key in zip(body.helpers, keys[1:]))
        return Printed(body.symbol, body.text, self.cache.get(keys[0]), helpers)

    def print_entry(self, variant: int, bodies: Sequence[str]) -> Printed:
        target = self.targets[variant]
        text = module_text(entry_module(self.plan, target, self.kernels[variant], bodies), self.machine(target))
        return Printed("", text, self.cache.get(object_key(text, target)) if self.cache else None)

    def compile(self, variant: int, text: str, linked: frozenset[str]) -> bytes:
        """Optimize and compile one module's text; `linked`: symbols other objects define."""
        target = self.targets[variant]
        machine = self.machine(target)
        optimized = optimize_text(text, machine, "CPU")
        check_module(optimized, linked)
        obj = machine.emit_object(optimized)
        check_object(obj, linked)  # instruction selection can add libcalls the module does not show
        if self.cache is not None:
            self.cache.put(object_key(text, target), obj)
        return obj


@dataclass(frozen=True)
class VariantObjects:
    """One variant's objects, in link order (distinct bodies in plan order, each followed by
    the helpers it calls that no body before it did, then the entry), and each kernel's body
    symbol."""

    objects: list[bytes]
    bodies: list[str]

    def texts(self, builder: ObjectBuilder, variant: int) -> list[str]:
        """The modules' texts, in the objects' order, printed again (a body found by its
        fingerprint never was)."""
        machine = builder.machine(builder.targets[variant])
        kernels = range(len(builder.plan.kernels))
        first = {symbol: k for k, symbol in reversed(list(zip(kernels, self.bodies)))}
        texts: dict[str, str] = {}
        for symbol in dict.fromkeys(self.bodies):
            body = kernel_body(builder.plan, builder.targets[variant], first[symbol], machine)
            for name, text in ((body.symbol, body.text), *body.helpers):
                texts.setdefault(name, text)
        entry = builder.print_entry(variant, self.bodies).text
        assert entry is not None
        return [*texts.values(), entry]


def build_variants(builder: ObjectBuilder, workers: int, advance: Callable[[int], None] = lambda n: None) -> list[VariantObjects]:
    """Every variant's objects. `advance(n)`: n more kernels have their object."""
    variants = range(len(builder.targets))
    kernels = range(len(builder.plan.kernels))
    # one print per (variant, fingerprint): kernels with one fingerprint have one body
    first: dict[tuple[int, str | int], tuple[int, int]] = {}
    for v in variants:
        for k in kernels:
            first.setdefault((v, builder.fingerprints[v][k] or k), (v, k))
    with _executor(builder, workers) as run:
        calls = list(first.values())
        found = dict(zip(calls, run(_print_body, calls)))
        printed = {(v, k): found[first[v, builder.fingerprints[v][k] or k]] for v in variants for k in kernels}
        # one compile per distinct (variant, body) the cache lacks; the largest first
        users: dict[tuple[int, str], int] = {}  # kernels waiting for each compile
        for (v, _), p in printed.items():
            if p.cached is None:
                users[v, p.symbol] = users.get((v, p.symbol), 0) + 1
        advance(sum(1 for p in printed.values() if p.cached is not None))
        missing: dict[tuple[int, str], str] = {}
        linked: dict[tuple[int, str], frozenset[str]] = {}  # what each module calls in other objects
        for (v, _), p in printed.items():
            for module in (p, *p.helpers):  # a helper two bodies call is compiled once
                if module.cached is None and module.text is not None:
                    missing[v, module.symbol] = module.text
                    linked[v, module.symbol] = frozenset(h.symbol for h in module.helpers)
        order = sorted(missing, key=lambda key: (-len(missing[key]), key))
        # each variant's entry calls the bodies by the symbols printed above, so it is compiled
        # beside them rather than after them on this process alone; first, being quick
        bodies = {v: [printed[v, k].symbol for k in kernels] for v in variants}
        entries = {v: builder.print_entry(v, bodies[v]) for v in variants}
        for v, entry in reversed(entries.items()):
            if entry.cached is None:
                assert entry.text is not None
                key = (v, ENTRY)
                missing[key], linked[key] = entry.text, frozenset(bodies[v])
                order.insert(0, key)
        compiled: dict[tuple[int, str], bytes] = {}
        for key, obj in zip(order, run(_compile, [(key[0], missing[key], linked[key]) for key in order],
                                       lambda i: advance(users.get(order[i], 0)))):
            compiled[key] = obj
    results = []
    for v in variants:
        distinct = list(dict.fromkeys(bodies[v]))
        first = {symbol: bodies[v].index(symbol) for symbol in distinct}
        objects: dict[str, bytes] = {}
        for symbol in distinct:
            p = printed[v, first[symbol]]
            for module in (p, *p.helpers):
                if module.symbol not in objects:
                    objects[module.symbol] = module.cached or compiled[v, module.symbol]
        objects[ENTRY] = entries[v].cached or compiled[v, ENTRY]
        results.append(VariantObjects(list(objects.values()), bodies[v]))
    return results


def default_jobs() -> int:
    """Worker processes: $AOT_JOBS, else the cores this process may run on."""
    asked = os.environ.get("AOT_JOBS", "")
    if asked.isdigit() and int(asked) > 0:
        return int(asked)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_WORKER: ObjectBuilder | None = None  # the builder the calls below use: a forked worker's, or this process's
T = TypeVar("T")
Run = Callable[..., list]

# A forked worker leaves Python's cyclic garbage collector off: an emitted module is a web of
# cycles (every instruction points at its block, every block at its function), so each body
# leaves tens of thousands of objects that only a collection frees, and the collections took
# 0.4-0.5 s of CPU per portable resnet18 or mobilenetv2 compile (a tenth of its codegen).
# The worker exits without freeing them (multiprocessing's os._exit); it collects only once
# this many tracked objects have piled up (about 170 B each: ~170 MB), which a big model's
# worker may reach.
WORKER_GARBAGE_LIMIT = 1_000_000


def _install(builder: ObjectBuilder) -> None:
    global _WORKER
    _WORKER = builder
    gc.disable()


def _collect_if_piled_up() -> None:
    if not gc.isenabled() and gc.get_count()[0] > WORKER_GARBAGE_LIMIT:
        gc.collect()


def _print_body(variant: int, kernel: int) -> Printed:
    assert _WORKER is not None
    _collect_if_piled_up()
    return _WORKER.print_body(variant, kernel)


def _compile(variant: int, text: str, linked: frozenset[str]) -> bytes:
    assert _WORKER is not None
    _collect_if_piled_up()
    return _WORKER.compile(variant, text, linked)


def _can_fork() -> bool:
    # a daemonic process (a multiprocessing pool's worker) may not have children
    return "fork" in multiprocessing.get_all_start_methods() and not multiprocessing.current_process().daemon


class _executor:
    """`run(fn, argument tuples, done=None) -> results in order` over forked workers, or in
    this process with one worker (or where it cannot fork); `done(i)` as call i finishes."""

    def __init__(self, builder: ObjectBuilder, workers: int):
        self.builder = builder
        self.workers = workers
        self.pool: Executor | None = None

    def __enter__(self) -> Run:
        if self.workers > 1 and _can_fork():
            # fork: the workers read the plan from memory, nothing is pickled on the way in
            self.pool = ProcessPoolExecutor(max_workers=self.workers, mp_context=multiprocessing.get_context("fork"),
                                            initializer=_install, initargs=(self.builder,))
        return self.run

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def run(self, fn: Callable[..., T], calls: Iterable[tuple], done: Callable[[int], None] | None = None) -> list[T]:
        calls = list(calls)
        if self.pool is None or len(calls) <= 1:
            global _WORKER
            before, _WORKER = _WORKER, self.builder
            try:
                results = []
                for i, args in enumerate(calls):
                    results.append(fn(*args))
                    if done:
                        done(i)
                return results
            finally:
                _WORKER = before
        futures: dict[Future[T], int] = {self.pool.submit(fn, *args): i for i, args in enumerate(calls)}
        found: dict[int, T] = {}
        for future in as_completed(futures):
            found[futures[future]] = future.result()  # the first error is the answer: __exit__ cancels the rest
            if done:
                done(futures[future])
        return [found[i] for i in range(len(calls))]
