"""SQL92 message filters [RocketMQ ``MessageSelector.bySql``]: parser, three-valued evaluator, JSON form.

:func:`parse` turns an expression into an immutable AST (frozen dataclasses, :mod:`mq.filter.sql92_nodes`),
:func:`evaluate` runs it against a message's properties and tag (:mod:`mq.filter.sql92_eval`), and
:func:`to_json` gives the compact tree the store's Lua evaluator runs (node format in
:mod:`mq.filter.sql92_nodes`), so a message is filtered where it is stored.

Evaluation (semantics §7), as the Lua side must reproduce it:

- Values are NULL (a missing property; ``TAGS`` of an untagged message, i.e. tags None or ``""``),
  strings (properties, ``TAGS``, string literals), integers, floats or booleans (literals only).
  ``TAGS`` always means the message tag, never a property of that name.
- A string is *read as a number* when it matches ``[+-]?[0-9]+`` (an integer, any size) or
  ``[+-]?([0-9]+(\\.[0-9]*)?|\\.[0-9]+)([eE][+-]?[0-9]+)?`` (a double): no spaces, hex, ``L`` or NaN.
  Two integers compare exactly; otherwise both sides are compared as doubles.
- Comparisons, BETWEEN and IN are NULL when any operand is NULL. Otherwise ``=``/``<>`` compare two
  strings exactly, a string and a boolean as ``"true"``/``"false"`` (case-insensitive), and anything
  else as numbers; ``> >= < <=`` and BETWEEN always compare as numbers.
- **Decision**: a comparison whose operands cannot be compared (a string that is not a number, or not
  ``true``/``false`` against a boolean) is FALSE, and so are its negated *operators* ``<>`` and
  ``NOT BETWEEN``: "that comparison does not match" in both spellings. Logical ``NOT`` is plain
  three-valued logic, so ``NOT (a = 1)`` is TRUE where ``a <> 1`` is FALSE for ``a = 'x'``.
- BETWEEN is one comparison (``lo <= v <= hi``), not ``v >= lo AND v <= hi``.
- IS [NOT] NULL and [NOT] CONTAINS/STARTSWITH/ENDSWITH are never NULL: the text tests are FALSE on NULL,
  and FALSE with an empty pattern (``a CONTAINS ''`` and ``a NOT CONTAINS ''`` alike), as in RocketMQ.
- AND/OR/NOT are Kleene logic; only TRUE matches.

Comments are skipped as RocketMQ's grammar skips them: ``--`` to the end of the line (or of the
expression) and ``/* ... */`` (not nested; an unterminated one is refused). ``--`` always starts a
comment, also right after an operator: ``a = --5`` is ``a =`` and a comment, an error (RocketMQ's
comment rule needs a line end, so at the very end of its input it reads ``--5`` as two minus signs).

Parse-time refusals beyond the grammar (all raise :class:`FilterExpressionError` with the 0-based
position of the offending token): a bare value where a condition is expected (``a``, ``NOT a``; only
TRUE/FALSE may stand alone); a condition used as a value; unary ``+``/``-`` on anything but a numeric
literal (no arithmetic); integers outside 64 bits, with leading zeros (octal) or in hex; decimals that
overflow; NULL in any comparison or BETWEEN; a boolean compared with a number; string or boolean
literals in ``> >= < <=`` and BETWEEN; non-string IN items; a numeric/boolean/NULL left side of IN or
the text tests; constant BETWEEN bounds with low > high; LIKE; trailing tokens; nesting deeper than
:data:`MAX_NESTING`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import NamedTuple, TypeAlias

from mq.errors import FilterExpressionError
from mq.filter.sql92_eval import compare_numbers, evaluate
from mq.filter.sql92_nodes import (
    CONDITION_TYPES,
    VALUE_TYPES,
    And,
    Between,
    Bool,
    Compare,
    Condition,
    Float,
    In,
    Int,
    IsNull,
    Node,
    Not,
    Null,
    Or,
    Prop,
    Str,
    Tags,
    TextTest,
    Value,
    to_json,
)

__all__ = [
    "INT64_MAX",
    "INT64_MIN",
    "KEYWORDS",
    "MAX_NESTING",
    "And",
    "Between",
    "Bool",
    "Compare",
    "Condition",
    "Float",
    "In",
    "Int",
    "IsNull",
    "Node",
    "Not",
    "Null",
    "Or",
    "Prop",
    "Str",
    "Tags",
    "TextTest",
    "Token",
    "Value",
    "evaluate",
    "parse",
    "to_json",
    "tokenize",
]

KEYWORDS = frozenset({"NOT", "AND", "OR", "BETWEEN", "IN", "TRUE", "FALSE", "NULL", "IS", "CONTAINS", "STARTSWITH", "ENDSWITH"})
MAX_NESTING = 50
"""Deepest allowed nesting of parentheses and NOTs (keeps parsing and evaluation off the recursion limit)."""
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
_TEXT_OPS = {"CONTAINS": "contains", "STARTSWITH": "starts_with", "ENDSWITH": "ends_with"}


# --- tokenizer -----------------------------------------------------------------------------------


class Token(NamedTuple):
    """One token: ``kind`` is int/float/ident/keyword/string/op/eof; ``key`` is the keyword or operator."""

    kind: str
    text: str
    pos: int
    key: str = ""


_TOKEN_RE = re.compile(
    r"""
      (?P<space>[ \t\r\n\f]+)
    | (?P<comment>--[^\n\r]*|/\*[\s\S]*?\*/)
    | (?P<hex>0[xX][0-9A-Za-z]*)
    | (?P<float>(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+)
    | (?P<int>[0-9]+[lL]?)
    | (?P<ident>[A-Za-z_$][A-Za-z0-9_$]*)
    | (?P<string>'(?:[^']|'')*')
    | (?P<op><>|>=|<=|[=<>(),+-])
    """,
    re.VERBOSE,
)
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_$.]")
_BAD_CHARS = {
    "'": "unterminated string literal",
    '"': "string literals use single quotes",
    "!": "use <> for 'not equal'",
    "*": "arithmetic is not supported",
    "/": "arithmetic is not supported",
    "%": "arithmetic is not supported",
}


def _error(message: str, expression: str, pos: int) -> FilterExpressionError:
    return FilterExpressionError(message, expression=expression, position=pos)


def tokenize(expression: str) -> list[Token]:
    """The tokens of ``expression`` (without spaces and comments), ending with an ``eof`` token."""
    tokens: list[Token] = []
    pos = 0
    while pos < len(expression):
        match = _TOKEN_RE.match(expression, pos)
        if match is None and expression.startswith("/*", pos):
            raise _error("unterminated comment: /* without */", expression, pos)
        if match is None:
            raise _error(_BAD_CHARS.get(expression[pos], f"unexpected character {expression[pos]!r}"), expression, pos)
        kind, text = str(match.lastgroup), match.group()
        if kind not in ("space", "comment"):
            tokens.append(_checked_token(kind, text, pos, expression))
        pos = match.end()
    return [*tokens, Token("eof", "", len(expression))]


def _checked_token(kind: str, text: str, pos: int, expression: str) -> Token:
    """The token for a raw match, refusing hex, octal-looking and malformed numbers and LIKE."""
    end = pos + len(text)
    if kind == "hex":
        raise _error("hexadecimal literals are not supported", expression, pos)
    if kind in ("int", "float") and _NUMBER_TAIL.match(expression, end):
        raise _error("malformed number", expression, pos)
    if kind == "int" and len(text.rstrip("lL")) > 1 and text.startswith("0"):
        raise _error("integers cannot have leading zeros (octal is not supported)", expression, pos)
    upper = text.upper()
    if kind == "ident" and upper == "LIKE":
        raise _error("LIKE is not supported; use CONTAINS, STARTSWITH or ENDSWITH", expression, pos)
    if kind == "ident" and upper in KEYWORDS:
        return Token("keyword", text, pos, upper)
    return Token(kind, text, pos, text if kind == "op" else "")


# --- parser --------------------------------------------------------------------------------------

Parsed: TypeAlias = tuple[Node, int]
"""A parsed node and the position where it starts."""


class _Parser:
    """Recursive descent; precedence OR < AND < NOT < comparison < unary sign."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.tokens = tokenize(expression)
        self.index = 0
        self.depth = 0

    def error(self, message: str, pos: int) -> FilterExpressionError:
        return _error(message, self.expression, pos)

    def peek(self, ahead: int = 0) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.peek()
        self.index += token.kind != "eof"
        return token

    def accept(self, *keys: str) -> Token | None:
        """Consume and return the next token if it is one of the keywords/operators ``keys``."""
        return self.advance() if self.peek().key in keys else None

    def expect(self, key: str) -> Token:
        token = self.accept(key)
        if token is None:
            raise self.error(f"expected {key}, found {_describe(self.peek())}", self.peek().pos)
        return token

    @contextmanager
    def nested(self, pos: int) -> Iterator[None]:
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise self.error(f"expression nested deeper than {MAX_NESTING} levels", pos)
        try:
            yield
        finally:
            self.depth -= 1

    def condition(self, parsed: Parsed) -> Condition:
        node, pos = parsed
        if not isinstance(node, CONDITION_TYPES):
            raise self.error("expected a condition (a comparison, IN, IS NULL, …), found a value", pos)
        return node

    def value(self, parsed: Parsed) -> Value:
        node, pos = parsed
        if not isinstance(node, VALUE_TYPES):
            raise self.error("expected a value, found a condition", pos)
        return node

    def parse(self) -> Condition:
        node = self.condition(self.or_expr())
        if self.peek().kind != "eof":
            raise self.error(f"unexpected {_describe(self.peek())} after a complete expression", self.peek().pos)
        return node

    def or_expr(self) -> Parsed:
        return self.chain("OR", self.and_expr, Or)

    def and_expr(self) -> Parsed:
        return self.chain("AND", self.not_expr, And)

    def chain(self, keyword: str, operand: Callable[[], Parsed], cls: type[And] | type[Or]) -> Parsed:
        first = operand()
        parts: list[Condition] = []
        while self.accept(keyword) is not None:
            parts += [] if parts else [self.condition(first)]
            parts.append(self.condition(operand()))
        if not parts:
            return first
        flat = [op for part in parts for op in (part.operands if isinstance(part, cls) else (part,))]
        return cls(tuple(flat)), first[1]

    def not_expr(self) -> Parsed:
        token = self.accept("NOT")
        if token is None:
            return self.predicate()
        with self.nested(token.pos):
            return Not(self.condition(self.not_expr())), token.pos

    def predicate(self) -> Parsed:
        left = self.unary()
        negated = self.peek().key == "NOT"
        if negated and self.peek(1).key not in ("BETWEEN", "IN", *_TEXT_OPS):
            raise self.error("expected BETWEEN, IN, CONTAINS, STARTSWITH or ENDSWITH after NOT", self.peek(1).pos)
        op = self.peek(int(negated)).key
        if op not in _COMPARISONS and op not in ("BETWEEN", "IN", "IS", *_TEXT_OPS):
            return left
        self.index += 1 + int(negated)
        value = self.value(left)
        if op in _COMPARISONS:
            return self.comparison(op, (value, left[1])), left[1]
        if op == "BETWEEN":
            return self.between(value, left[1], negated), left[1]
        if op == "IS":
            return self.null_test(value), left[1]
        return self.string_operand_test(op, (value, left[1]), negated), left[1]

    def null_test(self, value: Value) -> IsNull:
        negated = self.accept("NOT") is not None
        self.expect("NULL")
        return IsNull(value, negated)

    def comparison(self, op: str, left: tuple[Value, int]) -> Compare:
        right_parsed = self.unary()
        right = (self.value(right_parsed), right_parsed[1])
        for node, pos in (left, right):
            if isinstance(node, Null):
                raise self.error("a comparison with NULL is never true; use IS [NOT] NULL", pos)
            if op not in ("=", "<>") and isinstance(node, Str | Bool):
                raise self.error(f"{op} compares numbers; string and boolean literals are not allowed", pos)
        kinds = {type(left[0]), type(right[0])}
        if Bool in kinds and kinds & {Int, Float}:
            raise self.error("a boolean cannot be compared with a number", right[1])
        return Compare(op, left[0], right[0])

    def between(self, value: Value, pos: int, negated: bool) -> Between:
        self.numeric_operand((value, pos))
        low = self.numeric_operand(self.unary())
        self.expect("AND")
        high = self.numeric_operand(self.unary())
        lo, hi = low[0], high[0]
        if isinstance(lo, Int | Float) and isinstance(hi, Int | Float) and compare_numbers(lo.value, hi.value) > 0:
            raise self.error("BETWEEN bounds are reversed (low > high)", low[1])
        return Between(value, low[0], high[0], negated)

    def numeric_operand(self, parsed: Parsed) -> tuple[Value, int]:
        node = self.value(parsed)
        if isinstance(node, Str | Bool | Null):
            raise self.error("BETWEEN compares numbers; string, boolean and NULL literals are not allowed", parsed[1])
        return node, parsed[1]

    def string_operand_test(self, op: str, left: tuple[Value, int], negated: bool) -> In | TextTest:
        if not isinstance(left[0], Prop | Tags | Str):
            raise self.error(f"{op} applies to a property, TAGS or a string literal", left[1])
        if op == "IN":
            return In(left[0], self.string_list(), negated)
        return TextTest(_TEXT_OPS[op], left[0], self.string_literal(f"{op} takes a string literal"), negated)

    def string_list(self) -> tuple[str, ...]:
        self.expect("(")
        items = [self.string_literal("IN takes string literals only")]
        while self.accept(","):
            items.append(self.string_literal("IN takes string literals only"))
        self.expect(")")
        return tuple(items)

    def string_literal(self, message: str) -> str:
        token = self.advance()
        if token.kind != "string":
            raise self.error(message, token.pos)
        return _unquote(token.text)

    def unary(self) -> Parsed:
        signs = []
        while (sign := self.accept("+", "-")) is not None:
            signs.append(sign)
        node, pos = self.primary()
        if signs:
            if not isinstance(node, Int | Float):
                raise self.error("unary + and - apply only to numeric literals (no arithmetic)", signs[0].pos)
            pos = signs[0].pos
            if [s.key for s in signs].count("-") % 2:
                node = Int(-node.value) if isinstance(node, Int) else Float(-node.value)
        if isinstance(node, Int) and not INT64_MIN <= node.value <= INT64_MAX:
            raise self.error("integer literal out of 64-bit range", pos)
        if self.peek().key in ("+", "-"):
            raise self.error("arithmetic is not supported", self.peek().pos)
        return node, pos

    def primary(self) -> Parsed:
        token = self.advance()
        if token.key == "(":
            with self.nested(token.pos):
                node = self.or_expr()[0]
            self.expect(")")
            return node, token.pos
        literal = _literal(token, self.expression)
        if literal is None:
            raise self.error(f"expected a value, found {_describe(token)}", token.pos)
        return literal, token.pos


_COMPARISONS = ("=", "<>", ">", ">=", "<", "<=")
_KEYWORD_LITERALS: dict[str, Value] = {"TRUE": Bool(True), "FALSE": Bool(False), "NULL": Null()}


def _literal(token: Token, expression: str) -> Value | None:
    """The value a literal or identifier token stands for, or None for any other token."""
    if token.kind == "int":
        digits = token.text.rstrip("lL")
        if len(digits) > 19:
            raise _error("integer literal out of 64-bit range", expression, token.pos)
        return Int(int(digits))
    if token.kind == "float":
        if math.isinf(float(token.text)):
            raise _error("decimal literal out of range", expression, token.pos)
        return Float(float(token.text))
    if token.kind == "string":
        return Str(_unquote(token.text))
    if token.kind == "ident":
        return Tags() if token.text == "TAGS" else Prop(token.text)
    return _KEYWORD_LITERALS.get(token.key)


def _unquote(text: str) -> str:
    return text[1:-1].replace("''", "'")


def _describe(token: Token) -> str:
    return "the end of the expression" if token.kind == "eof" else repr(token.text)


def parse(expression: str) -> Condition:
    """Parse a SQL92 filter into an immutable AST.

    Raises:
        FilterExpressionError: the expression is malformed; ``position`` is the offending token's index.
    """
    if not isinstance(expression, str):
        raise TypeError(f"a SQL92 expression must be a str, got {type(expression).__name__}")
    return _Parser(expression).parse()
