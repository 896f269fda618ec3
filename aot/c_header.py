"""The C header of a statically linked model (`aot-compile --emit c`), and C identifiers for its names.

A model's names are arbitrary strings ("input.1", "x:0", "class"); the header needs C
identifiers that are valid, not keywords of C or C++ (the header is usable from both), not
reserved (a leading underscore), not a type the header uses, and unique even once
uppercased, since each also names macros (`<PREFIX>_<NAME>_SHAPE`). The originals stay in the
header's comments and in <prefix>.json.
"""
from __future__ import annotations

import re
import textwrap
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from aot.errors import ArgumentError

# C11, C23 and C++ keywords, and what the header itself names: a parameter spelled like a type
# would not compile
_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int long
register restrict return short signed sizeof static struct switch typedef union unsigned void volatile while
_Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert _Thread_local
alignas alignof bool constexpr false nullptr static_assert thread_local true typeof typeof_unqual
and and_eq asm bitand bitor catch char8_t char16_t char32_t class compl concept consteval constinit
const_cast co_await co_return co_yield decltype delete dynamic_cast explicit export friend mutable namespace
new noexcept not not_eq operator or or_eq private protected public reinterpret_cast requires static_cast
template this throw try typeid typename using virtual wchar_t xor xor_eq
int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t uint64_t size_t NULL
""".split())

# what each manifest dtype is in C: float16/bfloat16/float8 as their bits (C11 has no such type)
C_TYPES = {
    "float32": "float", "float64": "double",
    "int8": "int8_t", "int16": "int16_t", "int32": "int32_t", "int64": "int64_t",
    "uint8": "uint8_t", "uint16": "uint16_t", "uint32": "uint32_t", "uint64": "uint64_t",
    "bool": "uint8_t",  # one byte, 0 or 1
    "float16": "uint16_t", "bfloat16": "uint16_t",
    "float8e4m3fn": "uint8_t", "float8e4m3fnuz": "uint8_t", "float8e5m2": "uint8_t", "float8e5m2fnuz": "uint8_t",
}
# tensor names the header's own macros or parameters take (<PREFIX>_ARENA_BYTES, `arena`)
RESERVED = frozenset({"arena", "weights"})


def c_identifier(name: str, fallback: str = "t") -> str:
    """`name` made into a C identifier: other characters become '_', leading underscores go
    (reserved to the implementation), a leading digit or nothing left gets `fallback` + '_'
    before it, and a keyword gets a trailing '_'. Not unique: see unique_identifiers."""
    ident = re.sub(r"[^0-9A-Za-z_]", "_", name).lstrip("_")
    if not ident or ident[0].isdigit():
        ident = f"{fallback}_{ident}"
    if ident in _KEYWORDS:
        ident += "_"
    return ident


def unique_identifiers(names: Iterable[str], reserved: Iterable[str] = RESERVED) -> list[str]:
    """c_identifier of each name, the later of two that agree ignoring case (they name the
    same macros) or one that is `reserved` getting `_2`, `_3`, ... instead."""
    taken = {r.lower() for r in reserved}
    out = []
    for name in names:
        base = c_identifier(name)
        ident, n = base, 2
        while ident.lower() in taken:
            ident, n = f"{base}_{n}", n + 1
        taken.add(ident.lower())
        out.append(ident)
    return out


def check_prefix(name: str) -> str:
    """A --name the user gave: used as it is, so it must be a C identifier already."""
    if not re.fullmatch(r"[A-Za-z][0-9A-Za-z_]*", name) or name in _KEYWORDS:
        raise ArgumentError(f"--name {name!r} is not a usable C identifier (letters, digits and '_', starting with a "
                            f"letter, not a C or C++ keyword); e.g. --name {c_identifier(name, 'model')}")
    return name


@dataclass(frozen=True)
class CTensor:
    name: str  # the model's own
    ident: str  # its C identifier
    dtype: str  # manifest name
    shape: tuple[int, ...]
    nbytes: int

    @property
    def c_type(self) -> str:
        return C_TYPES[self.dtype]

    @property
    def size(self) -> int:
        count = 1
        for dim in self.shape:
            count *= dim
        return count


@dataclass(frozen=True)
class HeaderSpec:
    prefix: str
    source: str  # the model file's name, for the comment
    cpu: str
    arch: str
    features: tuple[str, ...]  # the CPU extensions the code uses
    inputs: Sequence[CTensor]
    outputs: Sequence[CTensor]
    arena_bytes: int
    arena_align: int
    weights_bytes: int
    donations: Sequence[tuple[int, int]]  # (input index, output index)
    checks: Sequence[str]  # each run-time check's message
    version: str


def c_string(text: str) -> str:
    """A C string literal of `text` (UTF-8), printable ASCII as is and the rest as octal escapes."""
    out = []
    for byte in text.encode():
        char = chr(byte)
        if char in '"\\?':  # '?' against trigraphs
            out.append("\\" + char)
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


def _comment(text: str) -> str:
    """`text` safe inside a /* */ comment: printable ASCII, no comment end."""
    safe = "".join(c if 32 <= ord(c) < 127 else "?" for c in text)
    return safe.replace("*/", "*\\/").replace("/*", "/\\*")


def _tensor_lines(spec: HeaderSpec, tensor: CTensor, what: str, index: int) -> list[str]:
    macro = f"{spec.prefix.upper()}_{tensor.ident.upper()}"
    dims = ", ".join(str(d) for d in tensor.shape)
    return [
        f"/* {what} {index} '{_comment(tensor.name)}': {tensor.dtype} [{dims}] as {tensor.c_type} */",
        f"#define {macro}_RANK {len(tensor.shape)}",
        *([f"#define {macro}_SHAPE {{{dims}}}"] if tensor.shape else []),  # {} is no initializer in C11
        f"#define {macro}_SIZE {tensor.size}",
        f"#define {macro}_BYTES {tensor.nbytes}",
    ]


def header_text(spec: HeaderSpec) -> str:
    """The header: what the object holds, the sizes as macros, and the entry's prototype."""
    p, P = spec.prefix, spec.prefix.upper()
    params = [f"const {t.c_type}* {t.ident}" for t in spec.inputs] + [f"{t.c_type}* {t.ident}" for t in spec.outputs]
    prototype = f"int32_t {p}_run({', '.join([*params, 'void* arena'])});"
    threaded = f"int32_t {p}_run_threads({', '.join([*params, 'void* arena', 'struct aot_pool* pool'])});"
    features = ", ".join(spec.features) if spec.features else "none beyond the base instruction set"
    donated = [f" *   output '{_comment(spec.outputs[o].ident)}' takes over input '{_comment(spec.inputs[i].ident)}': "
               f"pass one buffer for both to update it in place; given two, the run copies the input into the "
               f"output's buffer first." for i, o in spec.donations]
    lines = [
        f"/* {p}.h - generated by aot {spec.version} from '{_comment(spec.source)}' (aot-compile --emit c). Do not edit.",
        " *",
        f" * {p}.o (or lib{p}.a) holds the model's code and weights; link it into the program. It needs",
        " * no aot runtime, no loader and no allocation: only libc's memcpy, memset and memmove",
        f" * ({p}_run_threads uses the runtime's thread pool where the program links libaot_runtime).",
        " *",
        f" * {prototype}",
        " *   Buffers in the model's order, inputs then outputs, dense row-major, sizes below. Outputs",
        " *   must not overlap inputs (but a donated pair, below). `arena` holds every temporary:",
        f" *   {P}_ARENA_BYTES bytes aligned to {P}_ARENA_ALIGN (NULL when that is 0); there is no scratch",
        " *   buffer beyond it (kernels keep their small buffers on the stack). Returns 0, or 1 + the",
        f" *   index of the first run-time check that failed ({p}_status_message); then the outputs are",
        " *   unspecified.",
        " *   Thread safety: the code holds no mutable state; calls with their own arenas and output",
        " *   buffers may run concurrently. Each call runs on the calling thread only.",
        " *",
        f" * {threaded}",
        f" *   As {p}_run, with the kernels worth splitting spread over `pool`'s threads (aot_runtime.h:",
        " *   aot_pool_create; link libaot_runtime). With pool NULL, without the runtime linked (the",
        " *   reference to it is weak), or where the pool cannot take the run, it runs on the calling",
        " *   thread. Runs on one pool take turns; runs on different pools are concurrent.",
        *donated,
        " *",
        *(f" * {line}" for line in textwrap.wrap(
            f"Code for CPU '{spec.cpu}' ({spec.arch}), using: {features}. It does not check the CPU it runs on "
            f"(the runtime would refuse such a CPU): run it only where these are present.", 92)),
        " */",
        f"#ifndef {P}_H_",
        f"#define {P}_H_",
        "",
        "#include <stdint.h>",
        "",
        "#ifdef __cplusplus",
        'extern "C" {',
        "#endif",
        "",
        f"#define {P}_ARENA_BYTES {spec.arena_bytes}",
        f"#define {P}_ARENA_ALIGN {spec.arena_align}",
        f"#define {P}_WEIGHTS_BYTES {spec.weights_bytes} /* inside {p}.o */",
        f"#define {P}_INPUT_COUNT {len(spec.inputs)}",
        f"#define {P}_OUTPUT_COUNT {len(spec.outputs)}",
        f"#define {P}_CHECK_COUNT {len(spec.checks)}",
        "",
    ]
    for index, tensor in enumerate(spec.inputs):
        lines += [*_tensor_lines(spec, tensor, "input", index), ""]
    for index, tensor in enumerate(spec.outputs):
        lines += [*_tensor_lines(spec, tensor, "output", index), ""]
    lines += ["struct aot_pool; /* aot_runtime.h's aot_pool_t */", prototype, threaded, ""]
    lines += [f"/* What {p}_run's status means: NULL for 0 (success), else the failed check's message. */",
              f"static inline const char* {p}_status_message(int32_t status) {{",
              "  switch (status) {"]
    lines += [f"    case {i + 1}: return {c_string(message)};" for i, message in enumerate(spec.checks)]
    lines += ["    case 0: return (const char*)0;",
              '    default: return "unknown status";',
              "  }",
              "}",
              "",
              "#ifdef __cplusplus",
              "}",
              "#endif",
              "",
              f"#endif /* {P}_H_ */",
              ""]
    return "\n".join(lines)
