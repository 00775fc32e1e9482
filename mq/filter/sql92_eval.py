"""Three-valued evaluation of SQL92 filter ASTs; the rules are in :mod:`mq.filter.sql92`'s docstring."""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping
from typing import TypeAlias

from mq.filter.sql92_nodes import And, Between, Bool, Compare, Condition, In, IsNull, Not, Null, Or, Prop, Tags, TextTest, Value

Scalar: TypeAlias = str | int | float | bool | None
"""A value during evaluation: None is NULL."""

_INT_TEXT = re.compile(r"[+-]?[0-9]+")
_FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_ORDER: dict[str, Callable[[int, int], bool]] = {
    ">": operator.gt,
    ">=": operator.ge,
    "<": operator.lt,
    "<=": operator.le,
}
_TEXT_TESTS: dict[str, Callable[[str, str], bool]] = {
    "contains": operator.contains,
    "starts_with": str.startswith,
    "ends_with": str.endswith,
}


def as_number(value: Scalar) -> int | float | None:
    """``value`` as a number (a string by the patterns ``_INT_TEXT``/``_FLOAT_TEXT``), or None if it is not one."""
    if value is None or isinstance(value, bool):
        return None
    if not isinstance(value, str):
        return value
    if _INT_TEXT.fullmatch(value) and len(value) <= 4000:  # past that, int() refuses; a double is exact enough
        return int(value)
    return float(value) if _FLOAT_TEXT.fullmatch(value) else None


def compare_numbers(a: int | float, b: int | float) -> int:
    """-1, 0 or 1; two ints compare exactly, anything else as doubles (as Lua would)."""
    if not (isinstance(a, int) and isinstance(b, int)):
        a, b = _double(a), _double(b)
    return (a > b) - (a < b)


def _double(n: int | float) -> float:
    try:
        return float(n)
    except OverflowError:
        return math.copysign(math.inf, n)


def _equal(left: Scalar, right: Scalar) -> bool | None:
    """Whether two non-NULL values are equal, or None when they cannot be compared."""
    if isinstance(left, bool) or isinstance(right, bool):
        flag, other = (left, right) if isinstance(left, bool) else (right, left)
        if isinstance(other, bool):
            return flag == other
        text = other.lower() if isinstance(other, str) else None
        return (text == "true") == flag if text in ("true", "false") else None
    if isinstance(left, str) and isinstance(right, str):
        return left == right
    a, b = as_number(left), as_number(right)
    return None if a is None or b is None else compare_numbers(a, b) == 0


def _compare(op: str, left: Scalar, right: Scalar) -> bool | None:
    if left is None or right is None:
        return None
    if op in ("=", "<>"):
        same = _equal(left, right)
        return False if same is None else same == (op == "=")
    a, b = as_number(left), as_number(right)
    return False if a is None or b is None else _ORDER[op](compare_numbers(a, b), 0)


def _between(value: Scalar, low: Scalar, high: Scalar, negated: bool) -> bool | None:
    if value is None or low is None or high is None:
        return None
    v, lo, hi = as_number(value), as_number(low), as_number(high)
    if v is None or lo is None or hi is None:
        return False
    return (compare_numbers(lo, v) <= 0 <= compare_numbers(hi, v)) != negated


def _kleene(results: Iterable[bool | None], decisive: bool) -> bool | None:
    """AND (decisive=False) or OR (decisive=True) over three-valued results."""
    unknown = False
    for result in results:
        if result is decisive:
            return decisive
        unknown |= result is None
    return None if unknown else not decisive


class _Evaluator:
    """Evaluates nodes against one message."""

    def __init__(self, properties: Mapping[str, str], tags: str | None) -> None:
        self.properties = properties
        self.tags = tags or None

    def value(self, node: Value) -> Scalar:
        if isinstance(node, Prop):
            return self.properties.get(node.name)
        if isinstance(node, Tags):
            return self.tags
        return None if isinstance(node, Null) else node.value

    def condition(self, node: Condition) -> bool | None:
        match node:
            case Bool(value):
                return value
            case And(operands) | Or(operands):
                return _kleene((self.condition(c) for c in operands), isinstance(node, Or))
            case Not(operand):
                result = self.condition(operand)
                return None if result is None else not result
            case Compare(op, left, right):
                return _compare(op, self.value(left), self.value(right))
            case Between(value, low, high, negated):
                return _between(self.value(value), self.value(low), self.value(high), negated)
            case In(value, options, negated):
                text = self.value(value)
                return None if text is None else (text in options) != negated
            case IsNull(value, negated):
                return (self.value(value) is None) != negated
            case TextTest(op, value, pattern, negated):
                text = self.value(value)
                # an empty pattern never matches, in either form (RocketMQ's ContainsExpression & co.)
                return isinstance(text, str) and pattern != "" and _TEXT_TESTS[op](text, pattern) != negated
        raise TypeError(f"not a filter condition: {node!r}")


def evaluate(node: Condition, properties: Mapping[str, str], tags: str | None = None) -> bool | None:
    """Three-valued result of ``node`` for a message: True, False or None (NULL). Only True matches."""
    return _Evaluator(properties, tags).condition(node)
