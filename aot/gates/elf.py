"""Code bytes per kernel, read from the symbol table of an artifact's CPU code.

A `cpu.<arch>` section is a 64-bit little-endian ELF shared object (x86-64 or aarch64).
Each kernel is exported as `aot_kernel_N`, a few instructions that tail-call its body,
`aot_body_<hash>`, a local function; kernels of one fingerprint share one body. So a
kernel's code is its wrapper plus the functions the wrapper branches to, found by
decoding the wrapper's direct branches (x86 `call`/`jmp rel32`, aarch64 `b`/`bl`) and
keeping those that land on a function's first byte. A body shared by several kernels
counts in each of them.

The section is hostile input like the rest of the artifact: every offset and size is
checked, in a form that cannot wrap, before it is used; a malformed image is an
ArtifactError naming the section.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from aot.errors import ArtifactError

_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")  # Elf64_Ehdr
_SECTION = struct.Struct("<IIQQQQIIQQ")  # Elf64_Shdr
_SYMBOL = struct.Struct("<IBBHQQ")  # Elf64_Sym
_SHT_SYMTAB = 2
_SHT_DYNSYM = 11
_STT_FUNC = 2
_EM_X86_64 = 62
_EM_AARCH64 = 183


@dataclass(frozen=True)
class Function:
    name: str
    address: int
    size: int
    code: bytes


def _within(image: bytes, offset: int, size: int) -> bool:
    return offset <= len(image) and size <= len(image) - offset


def _name(strings: bytes, offset: int) -> str | None:
    end = strings.find(b"\0", offset)
    if offset >= len(strings) or end < 0:
        return None
    return strings[offset:end].decode("utf-8", "replace")


def read_functions(image: bytes, where: str) -> tuple[int, dict[str, Function]]:
    """(e_machine, the named functions of non-zero size by name), from .symtab (or .dynsym
    when the image is stripped)."""
    def bad(what: str) -> ArtifactError:
        return ArtifactError(f"section '{where}': {what}")

    if len(image) < _HEADER.size or image[:4] != b"\x7fELF":
        raise bad("not an ELF image")
    ident, _, machine, _, _, _, shoff, _, _, _, _, shentsize, shnum, _ = _HEADER.unpack_from(image)
    if ident[4] != 2 or ident[5] != 1:
        raise bad("not a 64-bit little-endian ELF image")
    if shentsize != _SECTION.size or shoff > len(image) or shnum > (len(image) - shoff) // _SECTION.size:
        raise bad("ELF section headers outside the image")
    sections = [_SECTION.unpack_from(image, shoff + i * _SECTION.size) for i in range(shnum)]
    table = next((s for s in sections if s[1] == _SHT_SYMTAB), None) or next(
        (s for s in sections if s[1] == _SHT_DYNSYM), None)
    if table is None:
        return machine, {}
    _, _, _, _, offset, size, link, _, _, entsize = table
    if entsize != _SYMBOL.size or not _within(image, offset, size) or link >= shnum:
        raise bad("malformed ELF symbol table")
    str_offset, str_size = sections[link][4], sections[link][5]
    if not _within(image, str_offset, str_size):
        raise bad("ELF string table outside the image")
    strings = image[str_offset:str_offset + str_size]
    functions: dict[str, Function] = {}
    for i in range(size // _SYMBOL.size):
        name_at, info, _, shndx, value, fsize = _SYMBOL.unpack_from(image, offset + i * _SYMBOL.size)
        if info & 0xF != _STT_FUNC or fsize == 0 or shndx >= shnum:
            continue
        name = _name(strings, name_at)
        section_addr, section_offset, section_size = sections[shndx][3], sections[shndx][4], sections[shndx][5]
        start = value - section_addr
        if not name or start < 0 or start > section_size or fsize > section_size - start:
            raise bad(f"ELF function {name or i} outside its section")
        if not _within(image, section_offset + start, fsize):
            raise bad(f"ELF function {name} outside the image")
        at = section_offset + start
        functions[name] = Function(name, value, fsize, image[at:at + fsize])
    return machine, functions


def branch_targets(machine: int, function: Function) -> list[int]:
    """Addresses a function's direct calls and jumps may reach (decoded at every byte on x86:
    a false hit must also land exactly on a function's start to count)."""
    code, base = function.code, function.address
    targets: list[int] = []
    if machine == _EM_X86_64:
        for i in range(len(code) - 4):
            if code[i] in (0xE8, 0xE9):
                (rel,) = struct.unpack_from("<i", code, i + 1)
                targets.append(base + i + 5 + rel)
    elif machine == _EM_AARCH64:
        for i in range(0, len(code) - 3, 4):
            (word,) = struct.unpack_from("<I", code, i)
            if word & 0x7C000000 == 0x14000000:  # b / bl imm26
                imm = word & 0x03FFFFFF
                imm -= (1 << 26) if imm & (1 << 25) else 0
                targets.append(base + i + 4 * imm)
    return targets


def kernel_code_bytes(image: bytes, symbols: list[str], where: str) -> dict[str, int]:
    """Bytes of each kernel symbol's code: its wrapper and the functions it branches to.
    A symbol the image lacks is left out."""
    machine, functions = read_functions(image, where)
    by_address = {f.address: f for f in functions.values()}
    sizes: dict[str, int] = {}
    for symbol in symbols:
        wrapper = functions.get(symbol)
        if wrapper is None:
            continue
        reached = {t for t in branch_targets(machine, wrapper) if t in by_address and t != wrapper.address}
        sizes[symbol] = wrapper.size + sum(by_address[t].size for t in sorted(reached))
    return sizes
