"""MLIR text (StableHLO as JAX prints it) -> syntax.Module.

Recursive descent over lexer tokens. Generic ops (`"stablehlo.x"(...) <{...}>
({...}) : (...) -> ...`) share one parser; pretty forms get a parser per
shape of syntax, and their keywords are renamed to the generic attribute
names (PRETTY_KEYS) so lowerings see one spelling. Every error starts with
file:line:column.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .dense import dense_array, hex_bytes
from .lexer import SyntaxErr, Token, tokenize
from .syntax import Block, DenseLit, Enum, Func, Module, Op, Pos, Region, Symbol, TType


class DimsPair(tuple):
    """`[0] x [1]` (dot dims) or `[b, 0, f]x[0, i, o]->[b, 0, f]` (conv dims) in pretty form."""


# pretty keyword -> generic attribute name, per op (ops not listed keep their keywords)
PRETTY_KEYS: dict[str, dict[str, str]] = {
    "stablehlo.broadcast_in_dim": {"dims": "broadcast_dimensions"},
    "stablehlo.dynamic_broadcast_in_dim": {"dims": "broadcast_dimensions"},
    "stablehlo.transpose": {"dims": "permutation"},
    "stablehlo.reverse": {"dims": "dimensions"},
    "stablehlo.iota": {"dim": "iota_dimension"},
    "stablehlo.dynamic_iota": {"dim": "iota_dimension"},
    "stablehlo.concatenate": {"dim": "dimension"},
    "stablehlo.get_dimension_size": {"dim": "dimension"},
    "stablehlo.dynamic_slice": {"sizes": "slice_sizes"},
    "stablehlo.pad": {"low": "edge_padding_low", "high": "edge_padding_high", "interior": "interior_padding"},
    "stablehlo.dot_general": {"precision": "precision_config"},
    "stablehlo.dot": {"precision": "precision_config"},
    "stablehlo.reduce": {"dimensions": "dimensions"},
    "stablehlo.convolution": {"dim_numbers": "dimension_numbers"},
}
_WINDOW_KEYS = {"stride": "window_strides", "pad": "padding", "lhs_dilate": "lhs_dilation",
                "rhs_dilate": "rhs_dilation", "reverse": "window_reversal"}
_RETURNS = ("return", "func.return", "stablehlo.return")
_CALLS = ("call", "func.call")


def parse_module(text: str, source: str = "<input>") -> Module:
    """Parse a whole .mlir file; SyntaxErr (a ModelError) points at line and column."""
    return _Parser(text, source).module()


class _Parser:
    def __init__(self, text: str, source: str):
        self.source = source
        self.tokens = tokenize(text, source)
        self.pos = 0
        self.loc_aliases: dict[str, tuple[str, ...]] = {}
        self.pretty: dict[str, Callable[[Op], None]] = {
            **{name: self.p_return for name in _RETURNS},
            **{name: self.p_call for name in _CALLS},
            "stablehlo.constant": self.p_constant,
            "stablehlo.reduce": self.p_reduce,
            "stablehlo.while": self.p_while,
            "stablehlo.convolution": self.p_convolution,
            "stablehlo.slice": self.p_slice,
            "stablehlo.custom_call": self.p_custom_call,
            "chlo.constant": self.p_constant,
            "chlo.top_k": self.p_top_k,
        }

    # -- tokens -----------------------------------------------------------------
    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.pos + ahead, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.tokens[self.pos]
        if tok.kind != "eof":
            self.pos += 1
        return tok

    def error(self, message: str, tok: Token | None = None) -> SyntaxErr:
        tok = tok or self.peek()
        found = repr(tok.text) if tok.text else "end of input"
        return SyntaxErr(f"{self.source}:{tok.line}:{tok.col}: {message}, found {found}")

    def at(self, text: str) -> bool:
        return self.peek().text == text and self.peek().kind not in ("string",)

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.pos += 1
            return True
        return False

    def expect(self, text: str, what: str = "") -> Token:
        if not self.at(text):
            raise self.error(f"expected {what or repr(text)}")
        return self.next()

    def expect_kind(self, kind: str, what: str) -> Token:
        if self.peek().kind != kind:
            raise self.error(f"expected {what}")
        return self.next()

    def comma_list(self, close: str, item: Callable[[], Any]) -> list[Any]:
        """Items separated by ',' up to and including `close`."""
        items: list[Any] = []
        if self.accept(close):
            return items
        while True:
            items.append(item())
            if self.accept(close):
                return items
            self.expect(",", f"',' or {close!r}")

    # -- module and functions ------------------------------------------------------
    def module(self) -> Module:
        funcs: dict[str, Func] = {}
        order: list[str] = []
        name = "main"
        saw_module = False
        while self.peek().kind != "eof":
            tok = self.peek()
            if tok.kind == "hash" and self.peek(1).text == "=":
                self.alias_def()
            elif tok.text == "module" and not saw_module:
                saw_module = True
                self.next()
                if self.peek().kind == "symbol":
                    name = _symbol_name(self.next().text)
                if self.accept("attributes"):
                    self.attr_dict()
                self.expect("{", "'{' opening the module body")
                while not self.accept("}"):
                    self.func_into(funcs, order)
                self.loc()
            elif tok.text == "func.func":
                self.func_into(funcs, order)
            else:
                raise self.error("expected 'module', 'func.func' or a '#alias = ...' definition")
        if not funcs:
            raise SyntaxErr(f"{self.source}: no func.func in the module")
        return Module(name, funcs, order, self.loc_aliases, self.source)

    def alias_def(self) -> None:
        name = self.next().text
        self.expect("=")
        if self.at("loc"):
            self.loc_aliases[name] = self.loc()
        else:
            self.attr_value()

    def func_into(self, funcs: dict[str, Func], order: list[str]) -> None:
        tok = self.peek()
        if tok.text != "func.func":
            raise self.error("expected 'func.func' or '}' closing the module")
        func = self.func()
        if func.name in funcs:
            raise SyntaxErr(f"{self.source}:{tok.line}:{tok.col}: function @{func.name} defined twice")
        funcs[func.name] = func
        order.append(func.name)

    def func(self) -> Func:
        start = self.expect("func.func")
        visibility = "public"
        if self.peek().kind == "ident" and self.peek().text in ("public", "private", "nested"):
            visibility = self.next().text
        name = _symbol_name(self.expect_kind("symbol", "a function name like @main").text)
        self.expect("(", "'(' opening the argument list")
        args = self.comma_list(")", self.func_arg)
        result_types: list[TType] = []
        result_attrs: list[dict[str, Any]] = []
        if self.accept("->"):
            if self.accept("("):
                for ttype, attrs in self.comma_list(")", self.func_result):
                    result_types.append(ttype)
                    result_attrs.append(attrs)
            else:  # a bare result type carries no attributes: '{' opens the body
                result_types.append(self.type())
                result_attrs.append({})
        if self.accept("attributes"):
            self.attr_dict()
        body = self.region_body(allow_args=False)
        body.args = [(arg[0], arg[1]) for arg in args]
        loc = self.loc()
        return Func(name, visibility, args, result_types, result_attrs, body, Pos(start.line, start.col, loc))

    def func_arg(self) -> tuple[str, TType, dict[str, Any], tuple[str, ...]]:
        name = self.expect_kind("value", "an argument like %arg0").text
        self.expect(":", "':' and the argument type")
        ttype = self.type()
        attrs = self.attr_dict() if self.at("{") else {}
        return name, ttype, attrs, self.loc()

    def func_result(self) -> tuple[TType, dict[str, Any]]:
        ttype = self.type()
        attrs = self.attr_dict() if self.at("{") else {}
        self.loc()
        return ttype, attrs

    # -- locations -------------------------------------------------------------------
    def loc(self) -> tuple[str, ...]:
        """`loc(...)` as its raw token texts (resolved lazily by locations.describe); () if absent."""
        if not (self.at("loc") and self.peek(1).text == "("):
            return ()
        self.next()
        open_tok = self.next()
        depth = 1
        texts: list[str] = []
        while True:
            tok = self.next()
            if tok.kind == "eof":
                raise self.error("unterminated loc(...)", open_tok)
            if tok.text == "(" and tok.kind == "punct":
                depth += 1
            elif tok.text == ")" and tok.kind == "punct":
                depth -= 1
                if depth == 0:
                    return tuple(texts)
            texts.append(tok.text)

    # -- types ---------------------------------------------------------------------------
    def type(self) -> TType:
        tok = self.peek()
        if tok.kind != "type":
            raise self.error("expected a type like tensor<2x3xf32>")
        self.next()
        return parse_type_text(tok.text, lambda msg: self.error(msg, tok))

    def type_list(self) -> list[TType]:
        """`T` or `T, T` (no parentheses)."""
        types = [self.type()]
        while self.at(",") and self.peek(1).kind == "type":
            self.next()
            types.append(self.type())
        return types

    def function_type(self) -> tuple[list[TType], list[TType]]:
        self.expect("(", "'(' opening the operand types")
        ins = self.comma_list(")", self.type)
        self.expect("->", "'->' and the result types")
        if self.accept("("):
            outs = self.comma_list(")", self.type)
        else:
            outs = [self.type()]
        return ins, outs

    def op_signature(self, op: Op) -> None:
        """`: (ins) -> outs`, `: T, T -> outs` (chlo), or `: T` / `: T, T` (the last type is the single result's)."""
        self.expect(":", "':' and the op's type")
        if self.at("("):
            op.operand_types, op.result_types = self.function_type()
            return
        types = self.type_list()
        if self.accept("->"):
            op.operand_types = types
            op.result_types = self.comma_list(")", self.type) if self.accept("(") else [self.type()]
            return
        op.operand_types = types if len(types) > 1 else [types[0]] * len(op.operands)
        op.result_types = [types[-1]] * op.num_results if op.num_results <= 1 else types

    # -- attributes -----------------------------------------------------------------------
    def attr_dict(self) -> dict[str, Any]:
        self.expect("{", "'{' opening an attribute dictionary")
        attrs: dict[str, Any] = {}
        if self.accept("}"):
            return attrs
        while True:
            key_tok = self.next()
            if key_tok.kind not in ("ident", "string"):
                raise self.error("expected an attribute name", key_tok)
            key = json.loads(key_tok.text) if key_tok.kind == "string" else key_tok.text
            attrs[key] = self.attr_value(typed=True) if self.accept("=") else True
            if self.accept("}"):
                return attrs
            self.expect(",", "',' or '}' in an attribute dictionary")

    def attr_value(self, typed: bool = False) -> Any:
        """One attribute value; `typed` lets a trailing `: type` (as in `1 : i64`) belong to it."""
        tok = self.peek()
        if tok.text == "[" and tok.kind == "punct":
            self.next()
            value: Any = tuple(self.comma_list("]", self.attr_value))
            return self.dims_pair(value)
        if tok.text == "{" and tok.kind == "punct":
            return self.attr_dict()
        if tok.kind == "ident" and tok.text == "dense" and self.peek(1).text == "<":
            lit = self.dense_literal()
            if typed and self.at(":") and self.peek(1).kind == "type":
                self.next()
                ttype = self.type()
                try:
                    return dense_array(lit, ttype)
                except ValueError as err:
                    raise self.error(str(err), tok) from None
            return lit
        if tok.kind == "ident" and tok.text == "array" and self.peek(1).text == "<":
            return self.array_attr()
        if tok.kind == "hash":
            return self.hash_attr()
        if tok.kind == "symbol":
            return Symbol(_symbol_name(self.next().text))
        if tok.kind == "string":
            return _unquote(self.next().text)
        if tok.kind == "type":
            return self.type()
        if tok.kind == "number":
            value = _number(self.next().text)
            self.skip_scalar_type(typed)
            return value
        if tok.kind == "ident":
            self.next()
            if tok.text in ("true", "false"):
                self.skip_scalar_type(typed)
                return tok.text == "true"
            if tok.text == "unit":
                return True
            return Enum(tok.text)
        if tok.text == "?":
            self.next()
            return None
        raise self.error("expected an attribute value")

    def skip_scalar_type(self, typed: bool) -> None:
        if typed and self.at(":") and self.peek(1).kind in ("ident", "type"):
            self.next()
            self.next()

    def dims_pair(self, first: tuple) -> Any:
        """After a list: `x [..]` (and `-> [..]`) make a DimsPair; otherwise the list itself."""
        if not (self.peek().kind == "ident" and self.peek().text == "x" and self.peek(1).text == "["):
            return first
        self.next()
        self.expect("[")
        parts = [first, tuple(self.comma_list("]", self.attr_value))]
        if self.accept("->"):
            self.expect("[", "'[' opening the output dims")
            parts.append(tuple(self.comma_list("]", self.attr_value)))
        return DimsPair(parts)

    def dense_literal(self) -> DenseLit:
        self.next()
        self.expect("<")
        tok = self.peek()
        if tok.kind == "string":
            self.next()
            text = _unquote(tok.text)
            if not re.fullmatch(r"0x(?:[0-9A-Fa-f]{2})*", text):  # no capture: a group per byte was 6 s on 16 MiB
                raise self.error("expected a hex blob like \"0x0000803F\"", tok)
            self.expect(">", "'>' closing dense<...>")
            return DenseLit(None, hex_bytes(text))
        data = self.dense_element()
        self.expect(">", "'>' closing dense<...>")
        return DenseLit(data)

    def dense_element(self) -> Any:
        tok = self.next()
        if tok.text == "[" and tok.kind == "punct":
            return self.comma_list("]", self.dense_element)
        if tok.kind == "number":
            return tok.text if tok.text.lower().startswith("0x") else _number(tok.text)
        if tok.kind == "ident" and tok.text in ("true", "false"):
            return tok.text == "true"
        if tok.text == "(":
            raise self.error("complex literals are not supported", tok)
        raise self.error("expected a number, true/false or '[' in a dense literal", tok)

    def array_attr(self) -> tuple:
        self.next()
        self.expect("<")
        self.expect_kind("ident", "an element type like i64")
        items: list[Any] = []
        if self.accept(":"):
            items = self.comma_list(">", self.attr_value)
        else:
            self.expect(">", "':' or '>' in array<...>")
        return tuple(items)

    def hash_attr(self) -> Any:
        tok = self.next()
        if not self.at("<"):
            return Enum(tok.text)  # an alias reference such as #loc3 or #map
        self.next()
        if "." not in tok.text:  # #stablehlo<comparison_direction GT>
            self.expect_kind("ident", "an enum kind")
            value = self.expect_kind("ident", "an enum value").text
            self.expect(">", "'>' closing the enum")
            return Enum(value)
        if self.at("["):  # #stablehlo.conv<[b, 0, f]x[...]->[...]>
            value = self.attr_value()
            self.expect(">")
            return value
        fields: dict[str, Any] = {}
        if self.accept(">"):
            return fields
        while True:
            key = self.expect_kind("ident", f"a field name in {tok.text}<...>").text
            fields[key] = self.attr_value(typed=True) if self.accept("=") else True
            if self.accept(">"):
                return fields
            self.expect(",", f"',' or '>' in {tok.text}<...>")

    # -- regions and ops ----------------------------------------------------------------------
    def region_body(self, allow_args: bool = True) -> Block:
        open_tok = self.expect("{", "'{' opening a region")
        args: list[tuple[str, TType]] = []
        if self.peek().kind == "block":
            label = self.next()
            if not allow_args:
                raise self.error("block labels are not expected here", label)
            if self.accept("("):
                args = self.comma_list(")", self.block_arg)
            self.expect(":", "':' after the block label")
        ops: list[Op] = []
        while not self.accept("}"):
            if self.peek().kind == "eof":
                raise self.error(f"unterminated region opened at line {open_tok.line}, column {open_tok.col}: expected '}}'")
            if self.peek().kind == "block":
                raise self.error("regions with several blocks are not supported")
            ops.append(self.op())
        return Block(args, ops)

    def block_arg(self) -> tuple[str, TType]:
        name = self.expect_kind("value", "a block argument").text
        self.expect(":")
        ttype = self.type()
        self.loc()
        return name, ttype

    def op(self) -> Op:
        start = self.peek()
        results: list[tuple[str, int]] = []
        if start.kind == "value":
            while True:
                name_tok = self.expect_kind("value", "a result name")
                if "#" in name_tok.text:
                    raise self.error("a result name cannot carry '#'", name_tok)
                count = 1
                if self.accept(":"):
                    count = int(self.expect_kind("number", "a result count").text)
                results.append((name_tok.text, count))
                if not self.accept(","):
                    break
            self.expect("=", "'=' after the results")
        name_tok = self.next()
        op = Op("", results, [], {}, [], [], [], Pos(start.line, start.col))
        if name_tok.kind == "string":
            op.name = _unquote(name_tok.text)
            self.generic(op)
        elif name_tok.kind == "ident":
            op.name = name_tok.text
            self.pretty.get(op.name, self.p_default)(op)
        else:
            raise self.error("expected an op name", name_tok)
        op.pos = Pos(start.line, start.col, self.loc())
        return op

    def operand(self) -> str:
        return self.expect_kind("value", "an operand like %0").text

    def generic(self, op: Op) -> None:
        self.expect("(", "'(' opening the operands")
        op.operands = self.comma_list(")", self.operand)
        if self.at("<") and self.peek(1).text == "{":
            self.next()
            op.attrs.update(self.attr_dict())
            self.expect(">", "'>' closing the properties")
        if self.at("(") and self.peek(1).text == "{":
            self.next()
            op.regions = [Region([b]) for b in self.comma_list(")", self.region_body)]
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        self.expect(":", "':' and the op's function type")
        op.operand_types, op.result_types = self.function_type()

    # -- pretty forms ---------------------------------------------------------------------------
    def p_default(self, op: Op) -> None:
        """`%a, %b, key = value, ENUM {attrs} : types`: the shape most pretty ops share."""
        renames = PRETTY_KEYS.get(op.name, {})
        positional: list[Any] = []
        if not self.at(":") and not self.at("{") and not self.at("loc"):
            while True:
                tok = self.peek()
                if tok.kind == "value":
                    op.operands.append(self.next().text)
                elif tok.kind == "ident" and self.peek(1).text == "=":
                    self.next()
                    self.next()
                    key = renames.get(tok.text, tok.text)
                    op.attrs[key] = self.attr_value()
                elif tok.kind in ("ident", "string", "symbol", "number"):
                    positional.append(self.attr_value())
                else:
                    raise self.error(f"unexpected token in {op.name}")
                if not self.accept(","):
                    break
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        _apply_positional(op, positional)
        _normalize_dot(op)
        self.op_signature(op)

    def p_return(self, op: Op) -> None:
        if self.peek().kind == "value":
            op.operands = [self.operand()]
            while self.accept(","):
                op.operands.append(self.operand())
            self.expect(":", "':' and the returned types")
            op.operand_types = self.type_list()

    def p_call(self, op: Op) -> None:
        op.attrs["callee"] = Symbol(_symbol_name(self.expect_kind("symbol", "a callee like @f").text))
        self.expect("(", "'(' opening the call's operands")
        op.operands = self.comma_list(")", self.operand)
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        self.expect(":", "':' and the callee's function type")
        op.operand_types, op.result_types = self.function_type()

    def p_custom_call(self, op: Op) -> None:
        op.attrs["call_target_name"] = _symbol_name(self.expect_kind("symbol", "a target like @name").text)
        self.expect("(", "'(' opening the operands")
        op.operands = self.comma_list(")", self.operand)
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        self.expect(":", "':' and the function type")
        self.expect("(", "'(' opening the operand types")
        op.operand_types = self.comma_list(")", self.type)
        self.expect("->", "'->' and the result types")
        if self.accept("("):
            op.result_types = self.comma_list(")", self.type)
        else:
            op.result_types = [self.type()]

    def p_top_k(self, op: Op) -> None:
        """`chlo.top_k(%x, k = 2[, is_stable = true]) : T -> (T, T)`."""
        self.expect("(", "'(' opening top_k's operand")
        op.operands = [self.operand()]
        while self.accept(","):
            key = self.expect_kind("ident", "'k =' or 'is_stable ='").text
            self.expect("=")
            op.attrs[key] = self.attr_value(typed=True)
        self.expect(")", "')' closing top_k's operand and attributes")
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        self.op_signature(op)

    def p_constant(self, op: Op) -> None:
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        tok = self.peek()
        lit = self.attr_value()
        self.expect(":", "':' and the constant's type")
        ttype = self.type()
        op.result_types = [ttype]
        if isinstance(lit, DenseLit):
            try:
                op.attrs["value"] = dense_array(lit, ttype)
            except ValueError as err:
                raise self.error(str(err), tok) from None
        else:
            raise self.error("expected a dense<...> constant", tok)

    def p_slice(self, op: Op) -> None:
        op.operands = [self.operand()]
        self.expect("[", "'[' opening the slice ranges")
        start: list[int] = []
        limit: list[int] = []
        stride: list[int] = []

        def one_range() -> None:
            start.append(self.int_token())
            self.expect(":", "':' in start:limit[:stride]")
            limit.append(self.int_token())
            stride.append(self.int_token() if self.accept(":") else 1)

        self.comma_list("]", one_range)
        op.attrs.update(start_indices=tuple(start), limit_indices=tuple(limit), strides=tuple(stride))
        self.op_signature(op)

    def int_token(self) -> int:
        tok = self.expect_kind("number", "an integer")
        try:
            return int(tok.text, 0)
        except ValueError:
            raise self.error("expected an integer", tok) from None

    def p_reduce(self, op: Op) -> None:
        inputs: list[str] = []
        inits: list[str] = []

        def pair() -> None:
            inputs.append(self.operand())
            self.expect("init", "'init:'")
            self.expect(":")
            inits.append(self.operand())

        while self.accept("("):
            pair()
            self.expect(")")
            if not self.accept(","):
                break
        if not inputs:
            raise self.error("expected '(%x init: %i)'")
        op.operands = inputs + inits
        if self.accept("applies"):
            op.extra["applies"] = self.expect_kind("ident", "an op name like stablehlo.add").text
        self.expect("across", "'across dimensions = [...]'")
        self.expect("dimensions")
        self.expect("=")
        op.attrs["dimensions"] = self.attr_value()
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        self.op_signature(op)
        if "applies" in op.extra:
            return
        self.expect("reducer", "'reducer' and the reduction body")
        groups: list[list[tuple[str, TType]]] = []
        while self.accept("("):
            groups.append(self.comma_list(")", self.block_arg))
        if any(len(g) != 2 for g in groups) or len(groups) != len(inputs):
            raise self.error(f"expected {len(inputs)} reducer argument pairs")
        body = self.region_body(allow_args=False)
        # region arguments are all accumulators first, then all new elements
        body.args = [g[0] for g in groups] + [g[1] for g in groups]
        op.regions = [Region([body])]

    def p_while(self, op: Op) -> None:
        self.expect("(", "'(' opening the loop-carried values")
        names: list[str] = []

        def carried() -> None:
            names.append(self.expect_kind("value", "%iterArg").text)
            self.expect("=")
            op.operands.append(self.operand())

        self.comma_list(")", carried)
        if self.accept("attributes"):
            op.attrs.update(self.attr_dict())
        self.expect(":", "':' and the loop-carried types")
        types = self.type_list()
        if len(types) != len(names):
            raise self.error(f"while has {len(names)} carried values but {len(types)} types")
        op.operand_types = op.result_types = types
        self.expect("cond", "'cond' and the condition region")
        cond = self.region_body(allow_args=False)
        self.expect("do", "'do' and the body region")
        body = self.region_body(allow_args=False)
        for block in (cond, body):
            block.args = list(zip(names, types))
        op.regions = [Region([cond]), Region([body])]

    def p_convolution(self, op: Op) -> None:
        self.expect("(", "'(' opening the operands")
        op.operands = self.comma_list(")", self.operand)
        while self.peek().kind == "ident" and self.peek(1).text == "=":
            key = self.next().text
            self.next()
            value = self.attr_value()
            if key == "window":
                for wkey, wvalue in value.items():
                    op.attrs[_WINDOW_KEYS.get(wkey, wkey)] = wvalue
            else:
                op.attrs[PRETTY_KEYS["stablehlo.convolution"].get(key, key)] = value
            self.accept(",")
        if self.at("{"):
            op.attrs.update(self.attr_dict())
        self.op_signature(op)


def parse_type_text(text: str, fail: Callable[[str], Exception]) -> TType:
    if not text.startswith("tensor<"):
        return TType(text, None)
    body = text[len("tensor<"):-1]
    depth = 0
    for i, ch in enumerate(body):  # drop an encoding: tensor<?x4xf32, #stablehlo.bounds<8, ?>>
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            body = body[:i]
            break
    parts = body.strip().split("x")
    dims: list[int | None] = []
    while len(parts) > 1 and (parts[0].isdigit() or parts[0] == "?"):
        dims.append(None if parts[0] == "?" else int(parts[0]))
        parts.pop(0)
    elem = "x".join(parts).strip()
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_<>]*", elem):
        raise fail(f"malformed tensor type {text!r}")
    return TType(elem, tuple(dims))


def _apply_positional(op: Op, positional: list[Any]) -> None:
    """Bare words of pretty forms: compare's direction and type, composite's name."""
    if not positional:
        return
    if op.name == "stablehlo.compare":
        op.attrs["comparison_direction"] = positional[0]
        if len(positional) > 1:
            op.attrs["compare_type"] = positional[1]
        return
    if op.name == "stablehlo.composite":
        op.attrs["name"] = positional[0]
        return
    op.attrs["_positional"] = tuple(positional)


def _normalize_dot(op: Op) -> None:
    """Pretty dot_general `batching_dims = [0] x [0], contracting_dims = [2] x [1]` -> generic dict."""
    if op.name != "stablehlo.dot_general" or "dot_dimension_numbers" in op.attrs:
        return
    batch = op.attrs.pop("batching_dims", ((), ()))
    contract = op.attrs.pop("contracting_dims", ((), ()))
    op.attrs["dot_dimension_numbers"] = {
        "lhs_batching_dimensions": tuple(batch[0]), "rhs_batching_dimensions": tuple(batch[1]),
        "lhs_contracting_dimensions": tuple(contract[0]), "rhs_contracting_dimensions": tuple(contract[1]),
    }


def _symbol_name(text: str) -> str:
    body = text[1:]
    return _unquote(body) if body.startswith('"') else body


def _unquote(text: str) -> str:
    """An MLIR string literal: `\\"`, `\\\\`, `\\n` and two-digit hex escapes."""
    body = text[1:-1]
    return re.sub(r"\\([0-9A-Fa-f]{2}|.)", _unescape, body)


def _unescape(m: re.Match) -> str:
    code = m.group(1)
    if len(code) == 2:
        return chr(int(code, 16))
    return {"n": "\n", "t": "\t"}.get(code, code)


def _number(text: str) -> int | float:
    if text.lower().startswith("0x"):
        return int(text, 16)
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)
