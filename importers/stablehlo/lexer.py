"""Tokens of MLIR text as StableHLO prints it, each with its line and column.

Types (`tensor<2x5xf32>`, `!stablehlo.token`) lex as one token: their
`2x5xf32` body would otherwise split into numbers and identifiers that only
the type grammar can reassemble.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from aot.errors import ModelError

# Strings are matched as runs of plain characters between escapes ("unrolled"): one
# alternative per character made a 34 MB dense<"0x..."> literal take 45 s to lex.
_TOKEN = re.compile(
    r"""(?P<ws>\s+|//[^\n]*)
      |(?P<value>%[A-Za-z0-9_.$\-]+(?:\#\d+)?)
      |(?P<block>\^[A-Za-z0-9_.$\-]+)
      |(?P<symbol>@(?:[A-Za-z0-9_.$\-]+|"[^"\\]*(?:\\.[^"\\]*)*"))
      |(?P<hash>\#[A-Za-z_][A-Za-z0-9_.$\-]*)
      |(?P<string>"[^"\\\n]*(?:\\.[^"\\\n]*)*")
      |(?P<number>0x[0-9A-Fa-f]+|[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)
      |(?P<ident>[A-Za-z_][A-Za-z0-9_.$]*)
      |(?P<punct>->|[(){}\[\]<>,=:?*+\-!|])
    """,
    re.VERBOSE,
)

# Identifiers that open a type whose body runs to the matching '>'.
TYPE_HEADS = ("tensor", "vector", "tuple", "complex", "memref")


@dataclass(frozen=True)
class Token:
    kind: str  # value, block, symbol, hash, string, number, ident, punct, type, eof
    text: str
    line: int
    col: int


class SyntaxErr(ModelError):
    """Malformed MLIR text: the message starts with file:line:column."""


def tokenize(text: str, source: str = "<input>") -> list[Token]:
    tokens: list[Token] = []
    pos, line, line_start = 0, 1, 0
    n = len(text)
    while pos < n:
        col = pos - line_start + 1
        m = _TOKEN.match(text, pos)
        if m is None:
            if text[pos] == '"':
                raise SyntaxErr(f"{source}:{line}:{col}: unterminated string")
            raise SyntaxErr(f"{source}:{line}:{col}: unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        end = m.end()
        if kind == "ident" and m.group() in TYPE_HEADS and end < n and text[end] == "<":
            end = _matching_angle(text, end, source, line, col)
            kind = "type"
        elif kind == "punct" and m.group() == "!" and end < n and (text[end].isalpha() or text[end] == "_"):
            ident = re.compile(r"[A-Za-z_][A-Za-z0-9_.$]*").match(text, end)
            end = ident.end() if ident else end
            if end < n and text[end] == "<":
                end = _matching_angle(text, end, source, line, col)
            kind = "type"
        chunk = text[pos:end]
        if kind != "ws":
            tokens.append(Token(kind, chunk, line, col))
        newlines = chunk.count("\n")
        if newlines:
            line += newlines
            line_start = pos + chunk.rfind("\n") + 1
        pos = end
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens


def _matching_angle(text: str, start: int, source: str, line: int, col: int) -> int:
    """Index just past the '>' matching the '<' at `start` ('->' inside does not close)."""
    depth = 0
    i = start
    while i < len(text):
        ch = text[i]
        if ch == "<":
            depth += 1
        elif ch == ">" and text[i - 1] != "-":
            depth -= 1
            if depth == 0:
                return i + 1
        elif ch == "\n":
            break
        i += 1
    raise SyntaxErr(f"{source}:{line}:{col}: unterminated type '{text[start - 6:start + 1].strip()}...': no closing '>' on this line")
