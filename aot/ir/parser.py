"""Parser for the IR text form (see printer.py). Errors give line and column."""
from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from aot.errors import IRError
from aot.ir.graph import Graph, Value
from aot.ir.types import DType, TensorType

_TOKEN = re.compile(
    r"""(?P<ws>\s+|//[^\n]*)
      |(?P<value>%[A-Za-z0-9_.]+)
      |(?P<symbol>@[A-Za-z0-9_.]+)
      |(?P<string>"(?:[^"\\]|\\.)*")
      |(?P<number>-?(?:inf(?![\w])|nan(?![\w])|\d+(?:\.\d*)?(?:[eE][-+]?\d+)?))
      |(?P<ident>[A-Za-z_][A-Za-z0-9_]*)
      |(?P<punct>->|[(){}\[\],=:<>])
    """,
    re.VERBOSE,
)


class _Token:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind: str, text: str, line: int, col: int):
        self.kind, self.text, self.line, self.col = kind, text, line, col


class _Dense:
    """A dense literal waiting for the constant's type to become known."""

    def __init__(self, data: Any):
        self.data = data


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            raise IRError(f"line {line}, column {pos - line_start + 1}: unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append(_Token(kind, m.group(), line, pos - line_start + 1))
        newlines = m.group().count("\n")
        if newlines:
            line += newlines
            line_start = m.start() + m.group().rfind("\n") + 1
        pos = m.end()
    tokens.append(_Token("eof", "", line, pos - line_start + 1))
    return tokens


class _Parser:
    def __init__(self, text: str, blobs: dict[str, np.ndarray] | None):
        self.tokens = _tokenize(text)
        self.pos = 0
        self.blobs = blobs
        self.values: dict[str, Value] = {}

    # -- token helpers ------------------------------------------------------
    def peek(self) -> _Token:
        return self.tokens[self.pos]

    def error(self, message: str, token: _Token | None = None) -> IRError:
        tok = token or self.peek()
        found = tok.text or "end of input"
        return IRError(f"line {tok.line}, column {tok.col}: {message} (found {found!r})")

    def next(self) -> _Token:
        tok = self.tokens[self.pos]
        self.pos += 1
        return tok

    def expect(self, text: str) -> _Token:
        tok = self.peek()
        if tok.text != text:
            raise self.error(f"expected {text!r}")
        return self.next()

    def accept(self, text: str) -> bool:
        if self.peek().text == text:
            self.pos += 1
            return True
        return False

    def expect_kind(self, kind: str, what: str) -> _Token:
        tok = self.peek()
        if tok.kind != kind:
            raise self.error(f"expected {what}")
        return self.next()

    # -- grammar ------------------------------------------------------------
    def parse_type(self) -> TensorType:
        tok = self.expect_kind("ident", "a tensor type like f32[2,3]")
        try:
            dtype = DType.parse(tok.text)
        except IRError:
            raise self.error("unknown dtype", tok) from None
        self.expect("[")
        dims: list[int] = []
        while not self.accept("]"):
            if dims:
                self.expect(",")
            dims.append(int(self.expect_kind("number", "a dimension").text))
        return TensorType(dtype, tuple(dims))

    def use(self) -> Value:
        tok = self.expect_kind("value", "a %value")
        value = self.values.get(tok.text[1:])
        if value is None:
            raise self.error(f"use of undefined value {tok.text}", tok)
        return value

    def parse_scalar(self, tok: _Token) -> Any:
        if tok.kind == "ident" and tok.text in ("true", "false"):
            return tok.text == "true"
        if tok.kind != "number":
            raise self.error("expected a number", tok)
        text = tok.text
        if any(c in text for c in ".eEn") or "inf" in text:
            return float(text)
        return int(text)

    def parse_literal(self) -> Any:
        if self.accept("["):
            items = []
            while not self.accept("]"):
                if items:
                    self.expect(",")
                items.append(self.parse_literal())
            return items
        return self.parse_scalar(self.next())

    def parse_attr_value(self) -> Any:
        tok = self.peek()
        if tok.text == "[":
            self.next()
            items = []
            while not self.accept("]"):
                if items:
                    self.expect(",")
                items.append(self.parse_attr_value())
            return tuple(items)
        if tok.kind == "string":
            return json.loads(self.next().text)
        if tok.kind == "ident" and tok.text == "dense":
            self.next()
            self.expect("<")
            data = self.parse_literal()
            self.expect(">")
            return _Dense(data)
        if tok.kind == "ident" and tok.text == "blob":
            self.next()
            self.expect("<")
            key_tok = self.expect_kind("string", "a blob name")
            self.expect(">")
            key = json.loads(key_tok.text)
            if self.blobs is None or key not in self.blobs:
                raise self.error(f"blob {key!r} has no data (pass blobs= to the parser)", key_tok)
            return self.blobs[key]
        if tok.kind == "ident" and tok.text not in ("true", "false"):
            try:
                return DType.parse(self.next().text)
            except IRError:
                raise self.error("unknown attribute value", tok) from None
        return self.parse_scalar(self.next())

    def parse_node(self, graph: Graph) -> None:
        out_tok = self.expect_kind("value", "a %result")
        self.expect("=")
        op_tok = self.expect_kind("ident", "an op name")
        self.expect("(")
        inputs: list[Value] = []
        while not self.accept(")"):
            if inputs:
                self.expect(",")
            inputs.append(self.use())
        attrs: dict[str, Any] = {}
        if self.accept("{"):
            while not self.accept("}"):
                if attrs:
                    self.expect(",")
                key = self.expect_kind("ident", "an attribute name").text
                self.expect("=")
                attrs[key] = self.parse_attr_value()
        self.expect(":")
        out_type = self.parse_type()
        loc = ""
        if self.peek().text == "loc":
            self.next()
            self.expect("(")
            loc = json.loads(self.expect_kind("string", "a location string").text)
            self.expect(")")
        for key, value in list(attrs.items()):
            if isinstance(value, _Dense):
                array = np.array(value.data, dtype=np.float64 if out_type.dtype.is_float else None)
                attrs[key] = np.array(np.broadcast_to(array, out_type.shape), dtype=out_type.dtype.to_numpy(), order="C")
        name = out_tok.text[1:]
        if name in self.values:
            raise self.error(f"value {out_tok.text} defined twice", out_tok)
        node = graph.make_node(op_tok.text, inputs, attrs, out_type, name=name, loc=loc)
        self.values[name] = node.out

    def parse_graph(self) -> Graph:
        self.expect("graph")
        graph = Graph(self.expect_kind("symbol", "@name").text[1:])
        self.expect("(")
        while not self.accept(")"):
            if graph.inputs:
                self.expect(",")
            tok = self.expect_kind("value", "a %parameter")
            self.expect(":")
            if tok.text[1:] in self.values:
                raise self.error(f"parameter {tok.text} defined twice", tok)
            value = graph.add_input(tok.text[1:], self.parse_type())
            if self.accept("as"):
                graph.input_names[-1] = json.loads(self.expect_kind("string", "an input name").text)
            self.values[tok.text[1:]] = value
        self.expect("{")
        while self.peek().text != "return":
            if self.peek().kind == "eof":
                raise self.error("expected 'return' before the end of the graph")
            self.parse_node(graph)
        self.next()
        while True:
            value = self.use()
            name = value.name
            if self.accept("as"):
                name = json.loads(self.expect_kind("string", "an output name").text)
            graph.add_output(value, name)
            if not self.accept(","):
                break
        self.expect("}")
        self.expect_kind("eof", "end of input")
        return graph


def parse_graph(text: str, blobs: dict[str, np.ndarray] | None = None, *, verify: bool = True) -> Graph:
    """Parse IR text into a Graph; verify it unless told not to."""
    graph = _Parser(text, blobs).parse_graph()
    if verify:
        from aot.ir.verifier import verify_graph

        verify_graph(graph)
    return graph
