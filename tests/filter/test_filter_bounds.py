"""Filter expressions are bounded when the selector is built (an unbounded one froze Redis): each bound
of mq/filter/limits.py on its own, and expressions at the limits accepted."""

from __future__ import annotations

import pytest


def test_filter_expressions_are_bounded_when_the_selector_is_built() -> None:
    from mq.errors import FilterExpressionError
    from mq.filter import MessageSelector, limits

    reproduced = [
        "a IN (" + ",".join(f"'{i}'" for i in range(20_000)) + ")",  # 2.5 s per pull before
        " OR ".join(f"a = {i}" for i in range(20_000)),  # 11 s
        "big CONTAINS '" + "x" * 20_000 + "'",  # 73 s against 200 KB property values
        "a IN (" + ",".join(f"'{i}'" for i in range(limits.MAX_IN_ITEMS + 1)) + ")"[: limits.MAX_EXPRESSION_LENGTH],
        " OR ".join(f"a = {i}" for i in range(100)),  # short, but over MAX_NODES
        "NOT " * 1000 + "a = 1",  # deeper than the parser could follow
        "big = '" + "x" * (limits.MAX_LITERAL_LENGTH + 1) + "'",
        "big CONTAINS '" + "x" * 100 + "' OR big ENDSWITH '" + "y" * (limits.MAX_PATTERN_CHARS - 99) + "'",
        " OR ".join(f"big CONTAINS 'ab{i}'" for i in range(limits.MAX_TEXT_TESTS + 1)),
    ]
    for expression in reproduced:
        with pytest.raises(FilterExpressionError):
            MessageSelector.by_sql(expression)
    with pytest.raises(FilterExpressionError):
        MessageSelector.by_tag(" || ".join(f"t{i}" for i in range(limits.MAX_IN_ITEMS + 1)))
    at_limits = [
        "a IN (" + ",".join(f"'{i}'" for i in range(limits.MAX_IN_ITEMS)) + ")",
        " OR ".join(f"a = {i}" for i in range(40)),
        "big CONTAINS '" + "x" * limits.MAX_PATTERN_CHARS + "'",
        " OR ".join(f"big CONTAINS 'ab{i}'" for i in range(limits.MAX_TEXT_TESTS)),
        "big = '" + "x" * limits.MAX_LITERAL_LENGTH + "'",
    ]
    for expression in at_limits:
        assert len(expression) <= limits.MAX_EXPRESSION_LENGTH
        MessageSelector.by_sql(expression)


def _over_one_filter_bound() -> list[tuple[str, str, str]]:
    """``(kind, expression, message)``: each expression over exactly one bound of mq/filter/limits.py
    (the cases above cross several, so one bound removed would still be refused by another)."""
    from mq.filter import limits

    return [
        ("sql", "a = 1" + " " * limits.MAX_EXPRESSION_LENGTH, "characters; the limit is"),
        ("sql", " OR ".join(f"a = {i}" for i in range(limits.MAX_NODES // 3 + 1)), "terms; the limit is"),
        ("sql", "NOT " * limits.MAX_DEPTH + "a = 1", "nested deeper than"),
        ("sql", "a IN (" + ",".join(f"'{i}'" for i in range(limits.MAX_IN_ITEMS + 1)) + ")", "an IN list of"),
        ("sql", "big = '" + "x" * (limits.MAX_LITERAL_LENGTH + 1) + "'", "a string literal of"),
        ("sql", " OR ".join(f"big CONTAINS 'ab{i}'" for i in range(limits.MAX_TEXT_TESTS + 1)), "STARTSWITH/ENDSWITH tests"),
        ("sql", "big CONTAINS '" + "x" * 100 + "' OR big ENDSWITH '" + "y" * (limits.MAX_PATTERN_CHARS - 99) + "'", "together"),
        ("tag", " || ".join(f"t{i}" for i in range(limits.MAX_IN_ITEMS + 1)), "tags; the limit is"),
        ("tag", "x" * (limits.MAX_LITERAL_LENGTH + 1), "a tag of"),
    ]


@pytest.mark.parametrize(("kind", "expression", "message"), _over_one_filter_bound(), ids=lambda v: str(v)[:24])
def test_each_filter_bound_is_enforced_on_its_own(kind: str, expression: str, message: str) -> None:
    from mq.errors import FilterExpressionError
    from mq.filter import MessageSelector

    with pytest.raises(FilterExpressionError, match=message):
        (MessageSelector.by_sql if kind == "sql" else MessageSelector.by_tag)(expression)
