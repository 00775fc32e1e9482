"""Bounds on filter expressions, checked when a selector is built (before anything reaches the store).

The store evaluates a subscription's filter against every message a pull scans, inside one Lua
script, which blocks Redis for everyone while it runs. These bounds cap the work per message (with
the message limits of :mod:`mq.model.validation`: properties of at most 16 KiB) so that a pull at the
limits stays within tens of milliseconds (measured by ``bench/limits.py``; figures in
docs/benchmarks.md). They are checked on the JSON tree the store receives, so they hold whatever
the parser accepts.
"""

from __future__ import annotations

from typing import Any

from mq.errors import FilterExpressionError

#: Longest filter expression, characters.
MAX_EXPRESSION_LENGTH = 4096
#: Most nodes (conditions, operands and values) of a SQL92 expression tree.
MAX_NODES = 256
#: Deepest nesting of a SQL92 expression tree.
MAX_DEPTH = 32
#: Most items of one ``IN (…)`` list, and most tags of one TAG expression.
MAX_IN_ITEMS = 256
#: Longest string literal (``'…'``, a ``CONTAINS`` / ``STARTSWITH`` / ``ENDSWITH`` pattern, an ``IN``
#: item, a tag), characters.
MAX_LITERAL_LENGTH = 256
#: Most ``CONTAINS`` / ``STARTSWITH`` / ``ENDSWITH`` tests of one expression: each may search every
#: byte of a property value, so a pull's cost grows with tests × bytes scanned (bench/limits.py).
MAX_TEXT_TESTS = 2
#: Most characters of all those tests' patterns together.
MAX_PATTERN_CHARS = 128

_TEXT_TESTS = {"contains", "starts_with", "ends_with", "not_contains", "not_starts_with", "not_ends_with"}


def check_expression_length(expression: str | None) -> None:
    """Refuse an expression longer than :data:`MAX_EXPRESSION_LENGTH` (checked before parsing)."""
    if expression is not None and len(expression) > MAX_EXPRESSION_LENGTH:
        raise FilterExpressionError(
            f"the expression is {len(expression)} characters; the limit is {MAX_EXPRESSION_LENGTH}",
            expression=expression[:64] + "…",
            position=MAX_EXPRESSION_LENGTH,
        )


def check_tags(expression: str, tags: list[str]) -> None:
    """Refuse a TAG expression with too many or too long tags."""
    if len(tags) > MAX_IN_ITEMS:
        raise FilterExpressionError(f"{len(tags)} tags; the limit is {MAX_IN_ITEMS}", expression=expression)
    for tag in tags:
        if len(tag) > MAX_LITERAL_LENGTH:
            raise FilterExpressionError(
                f"a tag of {len(tag)} characters; the limit is {MAX_LITERAL_LENGTH}",
                expression=expression,
                position=expression.find(tag),
            )


def check_tree(expression: str, tree: list[Any]) -> None:
    """Refuse a SQL92 tree (the store's JSON form) over the node, depth, ``IN`` or literal bounds."""
    nodes = pattern_chars = text_tests = 0
    stack: list[tuple[Any, int]] = [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        if not isinstance(node, list) or not node or not isinstance(node[0], str):
            continue
        nodes += 1
        if nodes > MAX_NODES:
            raise FilterExpressionError(f"more than {MAX_NODES} terms; the limit is {MAX_NODES}", expression=expression)
        if depth > MAX_DEPTH:
            raise FilterExpressionError(f"nested deeper than {MAX_DEPTH} levels", expression=expression)
        kind = node[0]
        if kind == "str":
            _literal(expression, node[1])
        elif kind in ("in", "not_in"):
            if len(node[2]) > MAX_IN_ITEMS:
                raise FilterExpressionError(
                    f"an IN list of {len(node[2])} items; the limit is {MAX_IN_ITEMS}", expression=expression
                )
            for item in node[2]:
                _literal(expression, item)
        elif kind in _TEXT_TESTS:
            _literal(expression, node[2])
            text_tests += 1
            if text_tests > MAX_TEXT_TESTS:
                raise FilterExpressionError(
                    f"more than {MAX_TEXT_TESTS} CONTAINS/STARTSWITH/ENDSWITH tests", expression=expression[:64] + "…"
                )
            pattern_chars += len(node[2])
            if pattern_chars > MAX_PATTERN_CHARS:
                raise FilterExpressionError(
                    f"CONTAINS/STARTSWITH/ENDSWITH patterns of more than {MAX_PATTERN_CHARS} characters together",
                    expression=expression[:64] + "…",
                )
        stack.extend((child, depth + 1) for child in node[1:] if isinstance(child, list))


def _literal(expression: str, value: Any) -> None:
    if isinstance(value, str) and len(value) > MAX_LITERAL_LENGTH:
        raise FilterExpressionError(
            f"a string literal of {len(value)} characters; the limit is {MAX_LITERAL_LENGTH}",
            expression=expression[:64] + "…",
            position=max(0, expression.find(value[:16])),
        )
