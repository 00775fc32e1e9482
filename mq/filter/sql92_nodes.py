"""The SQL92 filter AST (immutable, hashable) and its JSON form, which the store's Lua evaluator runs.

JSON node format (every node is a list whose first item names it)::

    values      ["prop", name]  ["tags"]  ["str", s]  ["int", "123"]  ["float", 5.5]  ["bool", b]  ["null"]
    logic       ["and", c1, c2, ...]  ["or", c1, c2, ...]  ["not", c]
    comparison  ["cmp", op, v1, v2]                 op: "=" "<>" ">" ">=" "<" "<="
    range       ["between", v, lo, hi]  ["not_between", v, lo, hi]
    set         ["in", v, [s1, s2, ...]]  ["not_in", v, [s1, ...]]
    null test   ["is_null", v]  ["is_not_null", v]
    text        ["contains", v, s]  ["starts_with", v, s]  ["ends_with", v, s]
                ["not_contains", v, s]  ["not_starts_with", v, s]  ["not_ends_with", v, s]

``c`` is a condition (any logic/comparison/range/set/null/text node or ``["bool", b]``), ``v`` a value
node and ``s`` a plain JSON string. ``and``/``or`` are n-ary (a chain ``a AND b AND c`` is flat).
Integers are decimal *strings* because Redis's cjson would read JSON numbers as doubles and lose
64-bit precision; floats are finite JSON numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeAlias


@dataclass(frozen=True, slots=True)
class Prop:
    """A message property; NULL when the message lacks it."""

    name: str


@dataclass(frozen=True, slots=True)
class Tags:
    """``TAGS``: the message tag; NULL when it has none."""


@dataclass(frozen=True, slots=True)
class Str:
    """A string literal."""

    value: str


@dataclass(frozen=True, slots=True)
class Int:
    """A 64-bit integer literal."""

    value: int


@dataclass(frozen=True, slots=True)
class Float:
    """A decimal literal."""

    value: float


@dataclass(frozen=True, slots=True)
class Bool:
    """TRUE or FALSE: a value, and also a condition on its own."""

    value: bool


@dataclass(frozen=True, slots=True)
class Null:
    """The NULL literal."""


@dataclass(frozen=True, slots=True)
class And:
    """All operands (two or more), in Kleene logic."""

    operands: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Or:
    """Any operand (two or more), in Kleene logic."""

    operands: tuple[Condition, ...]


@dataclass(frozen=True, slots=True)
class Not:
    """Logical negation; NOT NULL is NULL."""

    operand: Condition


@dataclass(frozen=True, slots=True)
class Compare:
    """``left op right`` with op one of ``= <> > >= < <=``."""

    op: str
    left: Value
    right: Value


@dataclass(frozen=True, slots=True)
class Between:
    """``value [NOT] BETWEEN low AND high``, bounds inclusive, compared as numbers."""

    value: Value
    low: Value
    high: Value
    negated: bool = False


@dataclass(frozen=True, slots=True)
class In:
    """``value [NOT] IN ('s1', ...)``: exact string membership."""

    value: Value
    options: tuple[str, ...]
    negated: bool = False


@dataclass(frozen=True, slots=True)
class IsNull:
    """``value IS [NOT] NULL``."""

    value: Value
    negated: bool = False


@dataclass(frozen=True, slots=True)
class TextTest:
    """``value [NOT] CONTAINS|STARTSWITH|ENDSWITH 'pattern'``; op is ``contains``/``starts_with``/``ends_with``."""

    op: str
    value: Value
    pattern: str
    negated: bool = False


Value: TypeAlias = Prop | Tags | Str | Int | Float | Bool | Null
Condition: TypeAlias = And | Or | Not | Compare | Between | In | IsNull | TextTest | Bool
Node: TypeAlias = Value | Condition

VALUE_TYPES = (Prop, Tags, Str, Int, Float, Bool, Null)
CONDITION_TYPES = (And, Or, Not, Compare, Between, In, IsNull, TextTest, Bool)


def to_json(node: Node) -> list[Any]:
    """The node as the JSON-serialisable tree described in the module docstring."""
    neg = "not_" if getattr(node, "negated", False) else ""
    match node:
        case Prop(name):
            return ["prop", name]
        case Tags():
            return ["tags"]
        case Null():
            return ["null"]
        case Int(value):
            return ["int", str(value)]
        case Str() | Float() | Bool():
            return [type(node).__name__.lower(), node.value]
        case And(operands) | Or(operands):
            return [type(node).__name__.lower(), *map(to_json, operands)]
        case Not(operand):
            return ["not", to_json(operand)]
        case Compare(op, left, right):
            return ["cmp", op, to_json(left), to_json(right)]
        case Between(value, low, high):
            return [neg + "between", to_json(value), to_json(low), to_json(high)]
        case In(value, options):
            return [neg + "in", to_json(value), list(options)]
        case IsNull(value, negated):
            return ["is_not_null" if negated else "is_null", to_json(value)]
        case TextTest(op, value, pattern):
            return [neg + op, to_json(value), pattern]
    raise TypeError(f"not a filter node: {node!r}")


_TEXT_OPS = ("contains", "starts_with", "ends_with")


def from_json(tree: list[Any]) -> Node:
    """The node a :func:`to_json` tree describes (its inverse): how a filter that reached the store as
    JSON is evaluated in Python where Lua cannot run it (a tier segment's messages).

    Raises:
        ValueError: ``tree`` is not a node of the format above.
    """
    kind, args = tree[0], tree[1:]
    negated = kind.startswith("not_")
    base = kind.removeprefix("not_")
    match base:
        case "prop":
            return Prop(str(args[0]))
        case "tags":
            return Tags()
        case "null":
            return Null()
        case "int":
            return Int(int(args[0]))
        case "str":
            return Str(str(args[0]))
        case "float":
            return Float(float(args[0]))
        case "bool":
            return Bool(bool(args[0]))
        case "and" | "or":
            operands = tuple(_condition(a) for a in args)
            return And(operands) if base == "and" else Or(operands)
        case "not" if kind == "not":
            return Not(_condition(args[0]))
        case "cmp":
            return Compare(str(args[0]), _value(args[1]), _value(args[2]))
        case "between":
            return Between(_value(args[0]), _value(args[1]), _value(args[2]), negated)
        case "in":
            return In(_value(args[0]), tuple(str(o) for o in args[1]), negated)
        case "is_null":
            return IsNull(_value(args[0]))
        case "is_not_null" if kind == "is_not_null":
            return IsNull(_value(args[0]), True)
        case _ if base in _TEXT_OPS:
            return TextTest(base, _value(args[0]), str(args[1]), negated)
    raise ValueError(f"not a filter node: {tree!r}")


def _condition(tree: list[Any]) -> Condition:
    node = from_json(tree)
    if not isinstance(node, CONDITION_TYPES):
        raise ValueError(f"expected a condition, got {tree!r}")
    return node


def _value(tree: list[Any]) -> Value:
    node = from_json(tree)
    if not isinstance(node, VALUE_TYPES):
        raise ValueError(f"expected a value, got {tree!r}")
    return node
