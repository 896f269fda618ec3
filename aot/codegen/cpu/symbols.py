"""The only external symbols generated CPU code may use, and the checks that it uses no other.

The shared object is linked against nothing (link.py) and dlopen'ed by the C
runtime with RTLD_NOW, so an undefined symbol resolves only if the process
already has it: libc's memcpy, memset and memmove (LLVM emits them for its
mem intrinsics and for loops it recognises as copies or fills). Anything else
LLVM falls back to (libgcc's __truncdfhf2 for an f64 -> f16 fptrunc on x86,
libm's fmodf for frem, __powisf2 for llvm.powi, ...) would load as "undefined
symbol" on the user's machine; these checks make it a compile error instead,
once on the optimized module (a declared non-intrinsic function) and once on
the object (a call the instruction selector introduced).
"""
from __future__ import annotations

import struct
from typing import NamedTuple

import llvmlite.binding as llvm

from aot.errors import CodegenError

# resolved at dlopen time from the process's libc
LOADER_RESOLVED = frozenset({"memcpy", "memset", "memmove"})

# what usually makes LLVM call each libgcc/libm routine, to point at the emitter to fix
_CAUSES = {
    "__truncdfhf2": "an f64 -> f16 fptrunc; x86 converts to f16 only from f32",
    "__truncxfhf2": "an x86_fp80 -> f16 fptrunc",
    "__truncsfhf2": "an f32 -> f16 fptrunc without F16C",
    "__extendhfsf2": "an f16 -> f32 fpext without F16C",
    "__truncdfbf2": "an f64 -> bf16 fptrunc",
    "__truncsfbf2": "an f32 -> bf16 fptrunc",
    "roundevenf": "llvm.roundeven without SSE4.1",
    "floorf": "llvm.floor without SSE4.1",
    "ceilf": "llvm.ceil without SSE4.1",
    "fmaf": "llvm.fma without FMA",
    "fmod": "an f64 frem",
    "fmodf": "an f32 frem",
    "__powisf2": "llvm.powi.f32",
    "__powidf2": "llvm.powi.f64",
}

_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
_SHT_SYMTAB = 2
_SHT_RELA = 4
_STT_FUNC = 2
_SHN_UNDEF = 0


class _Section(NamedTuple):  # Elf64_Shdr
    name: int
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    addralign: int
    entsize: int


class _Symbol(NamedTuple):  # Elf64_Sym
    name: int
    info: int
    other: int
    shndx: int
    value: int
    size: int


class _Rela(NamedTuple):  # Elf64_Rela
    offset: int
    info: int
    addend: int


_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
_RELA = struct.Struct("<QQq")


def _describe(symbol: str, users: list[str]) -> str:
    cause = _CAUSES.get(symbol)
    return f"'{symbol}'" + (f" (usually {cause})" if cause else "") + (f" in {', '.join(users)}" if users else "")


def _error(found: list[str], where: str) -> CodegenError:
    allowed = ", ".join(sorted(LOADER_RESOLVED))
    return CodegenError(f"{where} references undefined symbols the runtime cannot resolve: {'; '.join(found)}. "
                        f"The shared object links against nothing and only {allowed} resolve when it is loaded")


def check_module(module: llvm.ModuleRef, linked: frozenset[str] = frozenset()) -> None:
    """Raise CodegenError if `module` declares a function or global that is neither an LLVM
    intrinsic nor loader-resolved (an emitter called or referenced something external).
    `linked`: symbols another object of the same shared object defines (the entry module
    calls the kernels, each built in a module of its own)."""
    allowed = LOADER_RESOLVED | linked
    found = [_describe(fn.name, []) for fn in module.functions
             if fn.is_declaration and not fn.name.startswith("llvm.") and fn.name not in allowed]
    found += [_describe(variable.name, []) for variable in module.global_variables
              if variable.is_declaration and variable.name not in linked]
    if found:
        raise _error(found, "the optimized LLVM module")


def _c_string(table: bytes, offset: int) -> str:
    end = table.find(b"\0", offset)
    if offset >= len(table) or end < 0:
        raise CodegenError(f"object file: symbol name offset {offset} outside its string table")
    return table[offset:end].decode("utf-8", "replace")


def _entries(obj: bytes, section: _Section, layout: struct.Struct, what: str) -> list[tuple]:
    """The fixed-size entries of a symbol or relocation section, bounds-checked."""
    if section.entsize != layout.size or section.offset > len(obj) or section.size > len(obj) - section.offset:
        raise CodegenError(f"object file: malformed {what} section")
    return [layout.unpack_from(obj, section.offset + i * layout.size) for i in range(section.size // layout.size)]


def undefined_references(obj: bytes) -> dict[str, list[str]]:
    """The undefined symbols of a 64-bit little-endian ELF relocatable object (the only kind the
    runtime loads: runtime_c/src/loader.c), each with the functions whose code refers to it."""
    if len(obj) < _ELF_HEADER.size or obj[:4] != b"\x7fELF":
        raise CodegenError("object file: not an ELF image")
    ident, _, _, _, _, _, shoff, _, _, _, _, shentsize, shnum, _ = _ELF_HEADER.unpack_from(obj)
    if ident[4] != 2 or ident[5] != 1:
        raise CodegenError("object file: not a 64-bit little-endian ELF (the only kind the runtime loads)")
    if shentsize != _SECTION.size or shoff > len(obj) or shnum > (len(obj) - shoff) // _SECTION.size:
        raise CodegenError("object file: section headers outside the image")
    sections = [_Section(*_SECTION.unpack_from(obj, shoff + i * _SECTION.size)) for i in range(shnum)]
    symtab = next((s for s in sections if s.type == _SHT_SYMTAB), None)
    if symtab is None:
        return {}
    if symtab.link >= shnum:
        raise CodegenError("object file: symbol table without a string table")
    strings = sections[symtab.link]
    if strings.offset > len(obj) or strings.size > len(obj) - strings.offset:
        raise CodegenError("object file: string table outside the image")
    names = obj[strings.offset:strings.offset + strings.size]
    symbols = [_Symbol(*e) for e in _entries(obj, symtab, _SYMBOL, "symbol table")]
    # entry 0 is the null symbol; an unnamed undefined symbol needs no resolving
    undefined = {i: _c_string(names, s.name) for i, s in enumerate(symbols) if i and s.shndx == _SHN_UNDEF and s.name}
    functions = [s for s in symbols if s.info & 0xF == _STT_FUNC]
    users: dict[str, set[str]] = {name: set() for name in undefined.values()}
    for section in sections:
        if section.type != _SHT_RELA:
            continue
        for rela in (_Rela(*e) for e in _entries(obj, section, _RELA, "relocation")):
            name = undefined.get(rela.info >> 32)
            if name is None:
                continue
            users[name].update(_c_string(names, fn.name) for fn in functions
                               if fn.shndx == section.info and fn.value <= rela.offset < fn.value + fn.size)
    return {name: sorted(found) for name, found in users.items()}


def check_object(obj: bytes, linked: frozenset[str] = frozenset()) -> None:
    """Raise CodegenError if the object leaves a symbol undefined that neither the loader nor
    another object of the shared object (`linked`) resolves (LLVM lowered an operation to a
    libgcc/libm call)."""
    references = undefined_references(obj)
    found = [_describe(name, users) for name, users in sorted(references.items())
             if name not in LOADER_RESOLVED and name not in linked]
    if found:
        raise _error(found, "the emitted CPU object")
