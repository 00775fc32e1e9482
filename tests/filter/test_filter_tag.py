"""Tag filters (semantics §4) and the MessageSelector wrapper: parsing, matching, refusals, wire form.

Plain unit tests: no Redis.
"""

from __future__ import annotations

import json

import pytest

from mq.errors import FilterExpressionError, MQClientError
from mq.filter import ExpressionType, MessageSelector, TagExpression, parse_tags


@pytest.mark.parametrize(
    ("expression", "tags"),
    [
        ("*", None),
        ("", None),
        (None, None),
        ("   ", None),
        (" * ", None),
        ("A", ("A",)),
        ("A||B", ("A", "B")),
        ("A || B", ("A", "B")),
        ("  A  ||  B  ", ("A", "B")),
        ("A\t||\nB", ("A", "B")),
        ("A || A", ("A",)),
        ("B || A || B", ("B", "A")),
        ("tag-1 || tag_2 || 标签", ("tag-1", "tag_2", "标签")),
        ("a.b:c", ("a.b:c",)),
    ],
)
def test_parse(expression: str | None, tags: tuple[str, ...] | None) -> None:
    parsed = parse_tags(expression)
    assert parsed == TagExpression(tags)
    assert parsed.matches_all is (tags is None)


@pytest.mark.parametrize(
    ("expression", "tags", "expected"),
    [
        ("*", None, True),
        ("*", "", True),
        ("*", "A", True),
        ("", "A", True),
        ("A", "A", True),
        ("A", "a", False),
        ("A", "B", False),
        ("A", None, False),
        ("A", "", False),
        ("A", " A", False),
        ("A || B", "A", True),
        ("A || B", "B", True),
        ("A || B", "C", False),
        ("A || B", "AB", False),
        ("A || B", "A || B", False),
        ("A || B", None, False),
    ],
)
def test_matches_exact_case_sensitive_and_untagged_only_star(expression: str, tags: str | None, expected: bool) -> None:
    assert parse_tags(expression).matches(tags) is expected
    assert MessageSelector.by_tag(expression).matches({}, tags) is expected


@pytest.mark.parametrize(
    ("expression", "position", "fragment"),
    [
        ("A ||", 4, "expected a tag"),
        ("|| A", 0, "expected a tag"),
        ("||", 0, "expected a tag"),
        ("|", 0, "expected a tag"),
        ("A || || B", 5, "expected a tag"),
        ("A |||| B", 4, "expected a tag"),
        ("A ||| B", 4, "expected a tag"),
        ("A | B", 2, "separated by '||'"),
        ("A|B", 1, "separated by '||'"),
        ("A B", 2, "separated by '||'"),
        ("A\tB", 2, "separated by '||'"),
        ("A || B C", 7, "separated by '||'"),
        ("A || *", 5, "'*'"),
        ("* || A", 0, "'*'"),
        ("A*", 1, "'*'"),
    ],
)
def test_refusals_report_the_position(expression: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterExpressionError) as info:
        parse_tags(expression)
    error = info.value
    assert isinstance(error, MQClientError)
    assert (error.expression, error.position) == (expression, position)
    assert fragment in str(error)
    with pytest.raises(FilterExpressionError, match="at position %d" % position):
        MessageSelector.by_tag(expression)


def test_non_string_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse_tags(5)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        MessageSelector.parse(5)  # type: ignore[arg-type]


@pytest.mark.parametrize(("expression", "wire"), [("*", ["*"]), (None, ["*"]), ("B || A || B", ["B", "A"])])
def test_tag_wire_list(expression: str | None, wire: list[str]) -> None:
    assert parse_tags(expression).to_wire() == wire


# --- MessageSelector -----------------------------------------------------------------------------


def test_by_tag_defaults_to_everything() -> None:
    selector = MessageSelector.by_tag()
    assert (selector.type, selector.expression) == (ExpressionType.TAG, "*")
    assert selector.matches({}) and selector.matches({}, "X")
    assert MessageSelector.by_tag(None) == MessageSelector.by_tag("") == MessageSelector.by_tag("  ") == selector


def test_parse_reads_strings_as_tags_and_keeps_selectors() -> None:
    sql = MessageSelector.by_sql("a = 1")
    assert MessageSelector.parse(sql) is sql
    assert MessageSelector.parse("A || B") == MessageSelector.by_tag("A || B")
    assert MessageSelector.parse(None) == MessageSelector.by_tag("*")
    with pytest.raises(FilterExpressionError, match="at position 5"):
        MessageSelector.parse("TAGS = 'A'")  # a plain string is a tag list, never SQL


def test_tag_selector_ignores_properties() -> None:
    assert not MessageSelector.by_tag("A").matches({"TAGS": "A"}, None)


def test_equality_hash_and_repr() -> None:
    tag = MessageSelector.by_tag("A || B")
    assert tag == MessageSelector.by_tag("A || B")
    assert tag != MessageSelector.by_tag("B || A")  # the expression as given
    assert tag != MessageSelector.by_sql("TAGS IN ('A', 'B')")
    assert tag != "A || B"
    assert len({tag, MessageSelector.by_tag("A || B"), MessageSelector.by_sql("a = 1")}) == 2
    assert repr(tag) == "MessageSelector.by_tag('A || B')"
    assert eval(repr(tag), {"MessageSelector": MessageSelector}) == tag


def test_selectors_are_immutable() -> None:
    selector = MessageSelector.by_tag("A")
    with pytest.raises(AttributeError):
        selector.expression = "B"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        selector.extra = 1  # type: ignore[attr-defined]


def test_tag_wire_form_round_trips() -> None:
    selector = MessageSelector.by_tag("A || B")
    wire = selector.to_wire()
    assert wire == {"type": "TAG", "expression": "A || B", "tags": ["A", "B"]}
    assert MessageSelector.from_wire(json.loads(json.dumps(wire))) == selector
    assert MessageSelector.by_tag().to_wire() == {"type": "TAG", "expression": "*", "tags": ["*"]}


@pytest.mark.parametrize(("kind", "expected"), [("TAG", ExpressionType.TAG), ("SQL92", ExpressionType.SQL92)])
def test_expression_type(kind: str, expected: ExpressionType) -> None:
    assert ExpressionType(kind) is expected
    assert expected == kind and expected.value == kind
    assert MessageSelector(kind, "*" if kind == "TAG" else "TRUE").type is expected


def test_unknown_expression_type_is_refused() -> None:
    with pytest.raises(FilterExpressionError, match="unknown expression type"):
        MessageSelector("XML", "a")
