"""A kernel body's LLVM assembly without the names that do not change its code.

The emitters name every value and block after its IR node (`%"x.ptr"`, `"k3_max"`),
and a constant's global after its value (`@"const.w"`), so that dumps read well. Two
kernels doing the same work on different values then print differently. `canonical`
renames, in order of first appearance, every local name to `%vN` and every constant's
global to `@"const.N"`: two bodies that do the same work print the same, so they are
built once and share a cache entry (build.py). A renaming is one-to-one and keeps
local and global names apart, so the module means what it meant; byte strings
(`c"..."`) are left as they are, whatever they hold.

    before: %"x.ptr" = bitcast i8* %"x.base" to float*
    after:  %v0 = bitcast i8* %v1 to float*
"""
from __future__ import annotations

import re

# one alternative per kind of token; a byte string first, so nothing inside it is renamed
_TOKEN = re.compile(
    r'(?P<bytes>c"[^"]*")'
    r'|(?P<const>@"const\.[^"]*"|@const\.[-\w.$]+)'
    r'|(?P<local>%"[^"]*"|%[-\w.$]+)'
    r'|^(?P<label>"[^"]*"|[-\w.$]+):',
    re.MULTILINE,
)


def canonical(text: str) -> str:
    """`text` with local and constant names numbered in order of first appearance."""
    locals_: dict[str, str] = {}
    consts: dict[str, str] = {}

    def local(name: str) -> str:
        name = name[1:-1] if name.startswith('"') else name
        if name not in locals_:
            locals_[name] = f"v{len(locals_)}"
        return locals_[name]

    def rename(match: re.Match[str]) -> str:
        kind = match.lastgroup
        token = match.group(0)
        if kind == "bytes":
            return token
        if kind == "const":
            if token not in consts:
                consts[token] = f'@"const.{len(consts)}"'
            return consts[token]
        if kind == "local":
            return f"%{local(token[1:])}"
        return f"{local(match.group('label'))}:"

    return _TOKEN.sub(rename, text)
