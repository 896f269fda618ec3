"""Turn `loc(...)` tokens (with `#locN` aliases) into a short source description.

JAX writes `loc("jit(f)/add"(#loc19))`, `#loc19 = loc(callsite(#loc11 at #loc18))`,
`#loc11 = loc("<lambda>"(#loc3))`, `#loc3 = loc("model.py":7:37 to :42)`. The
first file position reached depth-first is the innermost user frame; the
first name is the JAX op path.
"""
from __future__ import annotations

from collections.abc import Mapping

_MAX_DEPTH = 64


def describe(loc: tuple[str, ...], aliases: Mapping[str, tuple[str, ...]]) -> str:
    """'model.py:7:37 (jit(f)/add)', 'model.py:7:37', 'jit(f)/add' or ''."""
    names: list[str] = []
    files: list[str] = []
    _walk(loc, aliases, names, files, 0)
    if files and names:
        return f"{files[0]} ({names[0]})"
    return files[0] if files else (names[0] if names else "")


def simple_name(loc: tuple[str, ...]) -> str | None:
    """The name of a plain `loc("x")` (JAX's name for a function argument), else None."""
    if len(loc) == 1 and loc[0].startswith('"'):
        return loc[0][1:-1]
    return None


def _walk(toks: tuple[str, ...], aliases: Mapping[str, tuple[str, ...]], names: list[str], files: list[str], depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    i = 0
    while i < len(toks):
        tok = toks[i]
        if tok.startswith("#") and tok in aliases:
            _walk(aliases[tok], aliases, names, files, depth + 1)
        elif tok.startswith('"'):
            text = tok[1:-1]
            if i + 4 < len(toks) + 1 and toks[i + 1:i + 2] == (":",) and i + 4 <= len(toks) and toks[i + 3] == ":":
                files.append(f"{text}:{toks[i + 2]}:{toks[i + 4]}" if i + 4 < len(toks) else f"{text}:{toks[i + 2]}")
                i += 4
            elif text:
                names.append(text)
        i += 1
