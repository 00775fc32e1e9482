"""SQL92 filters (semantics §7): literals, operators, NULL logic, coercion, refusals and the JSON form.

Plain unit tests: no Redis. ``T``/``F``/``N`` are TRUE, FALSE and NULL (None).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from mq.errors import FilterExpressionError, MQClientError
from mq.filter import ExpressionType, MessageSelector
from mq.filter.sql92 import (
    INT64_MAX,
    INT64_MIN,
    MAX_NESTING,
    And,
    Between,
    Bool,
    Compare,
    Float,
    In,
    Int,
    IsNull,
    Not,
    Or,
    Prop,
    Str,
    Tags,
    TextTest,
    evaluate,
    parse,
    to_json,
)
from tests import sql92_rocketmq_cases as rocketmq

T, F, N = True, False, None
A1 = ["cmp", "=", ["prop", "a"], ["int", "1"]]
B1 = ["cmp", "=", ["prop", "b"], ["int", "1"]]
C1 = ["cmp", "=", ["prop", "c"], ["int", "1"]]
PA = ["prop", "a"]


def run(expression: str, properties: dict[str, str] | None = None, tags: str | None = None) -> bool | None:
    """The three-valued result of ``expression`` for one message."""
    return evaluate(parse(expression), properties or {}, tags)


# --- literals, identifiers, keywords -------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "node"),
    [
        ("5", Int(5)),
        ("5L", Int(5)),
        ("5l", Int(5)),
        ("0", Int(0)),
        ("0L", Int(0)),
        ("-5", Int(-5)),
        ("+5", Int(5)),
        ("- -5", Int(5)),
        ("-(5)", Int(-5)),
        ("(5)", Int(5)),
        ("9223372036854775807", Int(INT64_MAX)),
        ("-9223372036854775808", Int(INT64_MIN)),
        ("5.5", Float(5.5)),
        (".5", Float(0.5)),
        ("5.", Float(5.0)),
        ("00.5", Float(0.5)),
        ("5E10", Float(5e10)),
        ("5e-3", Float(0.005)),
        ("1.5E+2", Float(150.0)),
        ("-.5", Float(-0.5)),
        ("'x'", Str("x")),
        ("''", Str("")),
        ("'it''s'", Str("it's")),
        ("''''", Str("'")),
        ("'a b ( ) AND <> -- é'", Str("a b ( ) AND <> -- é")),
        ("TRUE", Bool(True)),
        ("true", Bool(True)),
        ("False", Bool(False)),
    ],
)
def test_literal_forms(source: str, node: Any) -> None:
    assert parse(f"a = {source}") == Compare("=", Prop("a"), node)


def test_int_and_decimal_literals_stay_distinct() -> None:
    assert parse("a = 5") != parse("a = 5.0")
    assert parse("a = TRUE") != parse("a = 1")  # bool is an int in Python; not in the AST


@pytest.mark.parametrize(
    ("source", "node"),
    [
        ("a", Prop("a")),
        ("_x$1", Prop("_x$1")),
        ("$", Prop("$")),
        ("Region_2", Prop("Region_2")),
        ("TAGS", Tags()),
        ("tags", Prop("tags")),
        ("Tags", Prop("Tags")),
    ],
)
def test_identifiers(source: str, node: Any) -> None:
    assert parse(f"{source} IS NULL") == IsNull(node)


SAME_EXPRESSION = [
    # keywords are case-insensitive
    ("a between 1 and 2", "a BETWEEN 1 AND 2"),
    ("a Not Between 1 And 2", "a NOT BETWEEN 1 AND 2"),
    ("a not in ('x')", "a NOT IN ('x')"),
    ("a is not null", "a IS NOT NULL"),
    ("a contains 'x'", "a CONTAINS 'x'"),
    ("a startsWith 'x' or a endswith 'y'", "a STARTSWITH 'x' OR a ENDSWITH 'y'"),
    ("not a = true", "NOT a = TRUE"),
    ("a = false", "a = FALSE"),
    ("null is null", "NULL IS NULL"),
    # comments are skipped: -- to the end of the line or expression, /* */ anywhere between tokens
    ("a = 1 -- one", "a = 1"),
    ("a = 1 --", "a = 1"),
    ("a = 1 -- one\n", "a = 1"),
    ("a = 1 -- one\nAND b = 2", "a = 1 AND b = 2"),
    ("a = 1 -- one\rAND b = 2", "a = 1 AND b = 2"),
    ("a = 1 -- one\r\n-- two\n OR b = 2 -- three", "a = 1 OR b = 2"),
    ("-- first line\na = 1", "a = 1"),
    ("a--x\n=1", "a = 1"),
    ("a = 1 -- AND b = 2", "a = 1"),
    ("a = 1 -- it's", "a = 1"),
    ("a = 1 /* one */", "a = 1"),
    ("a /**/ = /* ** */ 1", "a = 1"),
    ("a = 1 /* AND\nb = 2 */ OR c = 3", "a = 1 OR c = 3"),
    ("a = 1 /* -- */ AND b = 2", "a = 1 AND b = 2"),
    ("a = '-- x' -- y", "a = '-- x'"),
    ("a = '/* x */'", "a = '/* x */'"),
    ("a = - -5 -- spaced signs are two minuses", "a = 5"),
    # blanks do not matter (RocketMQ's ParserTest.testEquals)
    *rocketmq.PARSE_EQUAL,
]


@pytest.mark.parametrize(("spelling", "canonical"), SAME_EXPRESSION)
def test_equivalent_spellings(spelling: str, canonical: str) -> None:
    assert parse(spelling) == parse(canonical)


@pytest.mark.parametrize("spaced", ["a=1", "a = 1", "  a\t=\n1  ", "\ra =\f1", "(a=1)", "((a = 1))"])
def test_whitespace_and_parentheses(spaced: str) -> None:
    assert parse(spaced) == Compare("=", Prop("a"), Int(1))


@pytest.mark.parametrize(
    ("expression", "tree"),
    [
        ("a = 1 OR b = 1 AND c = 1", ["or", A1, ["and", B1, C1]]),
        ("(a = 1 OR b = 1) AND c = 1", ["and", ["or", A1, B1], C1]),
        ("NOT a = 1 AND b = 1", ["and", ["not", A1], B1]),
        ("NOT (a = 1 AND b = 1)", ["not", ["and", A1, B1]]),
        ("NOT NOT a = 1", ["not", ["not", A1]]),
        ("a = 1 AND b = 1 AND c = 1", ["and", A1, B1, C1]),
        ("a = 1 OR (b = 1 OR c = 1)", ["or", A1, B1, C1]),
        ("a BETWEEN 1 AND 2 AND b = 1", ["and", ["between", PA, ["int", "1"], ["int", "2"]], B1]),
        ("a = 1 AND TRUE", ["and", A1, ["bool", True]]),
    ],
)
def test_precedence_or_and_not_comparison(expression: str, tree: list[Any]) -> None:
    assert to_json(parse(expression)) == tree


# --- comparisons and coercion --------------------------------------------------------------------

COMPARISONS = [
    # two strings: exact
    ("a = 'x'", {"a": "x"}, T),
    ("a = 'x'", {"a": "X"}, F),
    ("a = 'x'", {"a": "x "}, F),
    ("a <> 'x'", {"a": "y"}, T),
    ("a <> 'x'", {"a": "x"}, F),
    ("a = '5'", {"a": "5.0"}, F),
    ("a = b", {"a": "1", "b": "1.0"}, F),
    ("a = b", {"a": "x", "b": "x"}, T),
    # a string against a numeric literal is read as a number
    ("a = 5", {"a": "5"}, T),
    ("a = 5", {"a": "5.0"}, T),
    ("a = 5.0", {"a": "5"}, T),
    ("a = 5", {"a": "05"}, T),
    ("a = 5", {"a": "+5"}, T),
    ("a = -5", {"a": "-5"}, T),
    ("a = 1000", {"a": "1e3"}, T),
    ("a = 0.5", {"a": ".5"}, T),
    ("a = 5L", {"a": "5"}, T),
    ("a <> 5", {"a": "6"}, T),
    ("a <> 5", {"a": "5.0"}, F),
    # not a number: the comparison does not match, in either spelling (decision: <> is FALSE too)
    ("a = 5", {"a": "five"}, F),
    ("a <> 5", {"a": "five"}, F),
    ("a = 5", {"a": "5L"}, F),
    ("a = 5", {"a": " 5"}, F),
    ("a = 16", {"a": "0x10"}, F),
    ("a = 5", {"a": "NaN"}, F),
    ("a > 5", {"a": "Infinity"}, F),
    ("a = 0", {"a": ""}, F),
    ("NOT a = 5", {"a": "five"}, T),  # logical NOT is plain logic over FALSE
    # > >= < <= compare as numbers, also two strings
    ("a > 5", {"a": "6"}, T),
    ("a > 5", {"a": "5"}, F),
    ("a >= 5", {"a": "5"}, T),
    ("a >= 5", {"a": "4"}, F),
    ("a < 5", {"a": "4"}, T),
    ("a < 5", {"a": "5"}, F),
    ("a <= 5", {"a": "5"}, T),
    ("a <= 5", {"a": "6"}, F),
    ("a > 5.5", {"a": "5.6"}, T),
    ("a < 1E3", {"a": "999"}, T),
    ("a > -1", {"a": "-0.5"}, T),
    ("a > b", {"a": "10", "b": "9"}, T),  # as text "10" < "9"
    ("a < b", {"a": "x", "b": "9"}, F),
    ("a > 5", {"a": "abc"}, F),
    ("a <= 5", {"a": "abc"}, F),
    # 64-bit integers compare exactly; a decimal on either side makes it a double comparison
    ("a = 9223372036854775807", {"a": "9223372036854775806"}, F),
    ("a < 9223372036854775807", {"a": "9223372036854775806"}, T),
    ("a > 9007199254740992", {"a": "9007199254740993"}, T),
    ("a > 9223372036854775807", {"a": "99999999999999999999999"}, T),
    ("a = 9007199254740993", {"a": "9007199254740992.0"}, T),
    # booleans: "true"/"false", case-insensitive; anything else does not compare
    ("a = TRUE", {"a": "true"}, T),
    ("a = TRUE", {"a": "TRUE"}, T),
    ("a = true", {"a": "True"}, T),
    ("a = TRUE", {"a": "false"}, F),
    ("a = FALSE", {"a": "FALSE"}, T),
    ("a = TRUE", {"a": "yes"}, F),
    ("a = TRUE", {"a": "1"}, F),
    ("a <> TRUE", {"a": "yes"}, F),
    ("a <> TRUE", {"a": "false"}, T),
    ("a <> TRUE", {"a": "true"}, F),
    # a comparison with NULL (a missing property) is NULL
    ("a = 5", {}, N),
    ("a <> 5", {}, N),
    ("a > 5", {}, N),
    ("a <= 5", {}, N),
    ("a = 'x'", {}, N),
    ("a <> 'x'", {}, N),
    ("a = TRUE", {}, N),
    ("a = b", {"a": "1"}, N),
    ("a > b", {"b": "1"}, N),
    # constants
    ("1 = 1", {}, T),
    ("1 = 1.0", {}, T),
    ("5L = 5", {}, T),
    ("'5' = 5", {}, T),
    ("'a' = 'a'", {}, T),
    ("'a' <> 'b'", {}, T),
    ("TRUE = TRUE", {}, T),
    ("TRUE <> FALSE", {}, T),
    ("'true' = TRUE", {}, T),
    ("1 < 2", {}, T),
    ("-1 < -2", {}, F),
    ("TRUE", {}, T),
    ("FALSE", {}, F),
]


@pytest.mark.parametrize(("expression", "properties", "expected"), COMPARISONS)
def test_comparisons_and_coercion(expression: str, properties: dict[str, str], expected: bool | None) -> None:
    assert run(expression, properties) is expected


@pytest.mark.parametrize(
    ("expression", "properties", "expected"),
    [
        ("a BETWEEN 1 AND 5", {"a": "1"}, T),
        ("a BETWEEN 1 AND 5", {"a": "5"}, T),
        ("a BETWEEN 1 AND 5", {"a": "3"}, T),
        ("a BETWEEN 1 AND 5", {"a": "1.0"}, T),
        ("a BETWEEN 1 AND 5", {"a": "0"}, F),
        ("a BETWEEN 1 AND 5", {"a": "6"}, F),
        ("a BETWEEN 1 AND 5", {"a": "5.5"}, F),
        ("a BETWEEN 1 AND 5", {"a": "abc"}, F),
        ("a BETWEEN 1 AND 5", {}, N),
        ("a BETWEEN 5 AND 5", {"a": "5"}, T),
        ("a BETWEEN -1.5 AND 1.5", {"a": "-1.5"}, T),
        ("a NOT BETWEEN 1 AND 5", {"a": "0"}, T),
        ("a NOT BETWEEN 1 AND 5", {"a": "6"}, T),
        ("a NOT BETWEEN 1 AND 5", {"a": "3"}, F),
        ("a NOT BETWEEN 1 AND 5", {"a": "1"}, F),
        ("a NOT BETWEEN 1 AND 5", {"a": "abc"}, F),  # decision: not a number → no match, NOT form too
        ("a NOT BETWEEN 1 AND 5", {}, N),
        ("a BETWEEN b AND c", {"a": "5", "b": "1", "c": "10"}, T),
        ("a BETWEEN b AND c", {"a": "5", "b": "1"}, N),
        ("a BETWEEN b AND c", {"a": "5", "b": "x", "c": "10"}, F),
        ("a NOT BETWEEN b AND c", {"a": "50", "b": "x", "c": "10"}, F),  # one comparison, not two
        ("a BETWEEN 1 AND b", {"a": "0"}, N),
    ],
)
def test_between(expression: str, properties: dict[str, str], expected: bool | None) -> None:
    assert run(expression, properties) is expected


@pytest.mark.parametrize(
    ("expression", "properties", "tags", "expected"),
    [
        ("a IN ('x', 'y')", {"a": "x"}, None, T),
        ("a IN ('x', 'y')", {"a": "y"}, None, T),
        ("a IN ('x', 'y')", {"a": "z"}, None, F),
        ("a IN ('x', 'y')", {"a": "X"}, None, F),
        ("a IN ('x', 'y')", {"a": "x "}, None, F),
        ("a IN ('x', 'y')", {}, None, N),
        ("a IN ('1')", {"a": "1.0"}, None, F),
        ("a IN ('it''s')", {"a": "it's"}, None, T),
        ("a NOT IN ('x', 'y')", {"a": "z"}, None, T),
        ("a NOT IN ('x', 'y')", {"a": "x"}, None, F),
        ("a NOT IN ('x', 'y')", {}, None, N),
        ("TAGS IN ('a', 'b')", {}, "b", T),
        ("TAGS IN ('a', 'b')", {}, None, N),
        ("'x' IN ('x')", {}, None, T),
    ],
)
def test_in(expression: str, properties: dict[str, str], tags: str | None, expected: bool | None) -> None:
    assert run(expression, properties, tags) is expected


@pytest.mark.parametrize(
    ("expression", "properties", "tags", "expected"),
    [
        ("a IS NULL", {}, None, T),
        ("a IS NULL", {"a": ""}, None, F),
        ("a IS NULL", {"a": "x"}, None, F),
        ("a IS NOT NULL", {}, None, F),
        ("a IS NOT NULL", {"a": ""}, None, T),
        ("TAGS IS NULL", {}, None, T),
        ("TAGS IS NULL", {}, "", T),
        ("TAGS IS NULL", {}, "x", F),
        ("TAGS IS NOT NULL", {}, "x", T),
        ("NULL IS NULL", {}, None, T),
        ("5 IS NOT NULL", {}, None, T),
    ],
)
def test_is_null_is_never_null(expression: str, properties: dict[str, str], tags: str | None, expected: bool) -> None:
    assert run(expression, properties, tags) is expected


@pytest.mark.parametrize(
    ("expression", "properties", "expected"),
    [
        ("a CONTAINS 'b'", {"a": "abc"}, T),
        ("a CONTAINS 'b'", {"a": "xyz"}, F),
        ("a CONTAINS 'b'", {"a": "ABC"}, F),
        ("a CONTAINS 'b'", {}, F),
        ("a NOT CONTAINS 'b'", {"a": "xyz"}, T),
        ("a NOT CONTAINS 'b'", {"a": "abc"}, F),
        ("a NOT CONTAINS 'b'", {}, F),
        ("a STARTSWITH 'ab'", {"a": "abc"}, T),
        ("a STARTSWITH 'ab'", {"a": "cab"}, F),
        ("a STARTSWITH 'ab'", {}, F),
        ("a NOT STARTSWITH 'ab'", {"a": "cab"}, T),
        ("a NOT STARTSWITH 'ab'", {}, F),
        ("a ENDSWITH 'bc'", {"a": "abc"}, T),
        ("a ENDSWITH 'bc'", {"a": "bca"}, F),
        ("a ENDSWITH 'bc'", {}, F),
        ("a NOT ENDSWITH 'bc'", {"a": "bca"}, T),
        ("a NOT ENDSWITH 'bc'", {}, F),
        # an empty pattern never matches, in either form (as RocketMQ's ExpressionTest..._hasEmpty)
        ("a CONTAINS ''", {"a": "x"}, F),
        ("a STARTSWITH ''", {"a": "x"}, F),
        ("a ENDSWITH ''", {"a": "x"}, F),
        ("a CONTAINS ''", {"a": ""}, F),
        ("a NOT CONTAINS ''", {"a": "x"}, F),
        ("a NOT STARTSWITH ''", {"a": ""}, F),
        ("a NOT ENDSWITH ''", {"a": "x"}, F),
        ("NOT a CONTAINS ''", {"a": "x"}, T),  # logical NOT of FALSE
        ("a CONTAINS '%'", {"a": "50%"}, T),
        ("a STARTSWITH 'a%'", {"a": "abc"}, F),  # no wildcards
        ("TAGS CONTAINS 'x'", {}, F),
        ("NOT a CONTAINS 'x'", {}, T),  # NOT of FALSE; unlike "a NOT CONTAINS 'x'"
    ],
)
def test_string_operators_are_never_null(expression: str, properties: dict[str, str], expected: bool) -> None:
    assert run(expression, properties) is expected


# --- comments ------------------------------------------------------------------------------------


def test_comment_text_is_not_evaluated() -> None:
    assert run("a = 'x' -- ' OR TRUE", {"a": "y"}) is F
    assert run("a = 'x' /* ') OR (TRUE */", {"a": "y"}) is F
    assert run("a = '--'", {"a": "--"}) is T


# --- three-valued logic --------------------------------------------------------------------------

AND_TABLE = {(T, T): T, (T, F): F, (T, N): N, (F, T): F, (F, F): F, (F, N): F, (N, T): N, (N, F): F, (N, N): N}
OR_TABLE = {(T, T): T, (T, F): T, (T, N): T, (F, T): T, (F, F): F, (F, N): N, (N, T): T, (N, F): N, (N, N): N}


def truths(**values: bool | None) -> dict[str, str]:
    """Properties making ``name = 1`` TRUE, FALSE or NULL as asked."""
    return {name: "1" if value else "0" for name, value in values.items() if value is not None}


@pytest.mark.parametrize(("p", "q"), list(AND_TABLE))
def test_and_truth_table(p: bool | None, q: bool | None) -> None:
    assert run("p = 1 AND q = 1", truths(p=p, q=q)) is AND_TABLE[p, q]


@pytest.mark.parametrize(("p", "q"), list(OR_TABLE))
def test_or_truth_table(p: bool | None, q: bool | None) -> None:
    assert run("p = 1 OR q = 1", truths(p=p, q=q)) is OR_TABLE[p, q]


@pytest.mark.parametrize(("p", "expected"), [(T, F), (F, T), (N, N)])
def test_not_truth_table(p: bool | None, expected: bool | None) -> None:
    assert run("NOT p = 1", truths(p=p)) is expected


@pytest.mark.parametrize(
    ("values", "expected_and", "expected_or"),
    [((T, N, F), F, T), ((T, N, T), N, T), ((F, N, F), F, N), ((T, T, T), T, T)],
)
def test_flat_chains(values: tuple[bool | None, ...], expected_and: bool | None, expected_or: bool | None) -> None:
    props = truths(p=values[0], q=values[1], r=values[2])
    assert run("p = 1 AND q = 1 AND r = 1", props) is expected_and
    assert run("p = 1 OR q = 1 OR r = 1", props) is expected_or


# --- TAGS and whole expressions ------------------------------------------------------------------

EXAMPLE = "TAGS = 'a' AND region IN ('HZ','SH')"


@pytest.mark.parametrize(
    ("expression", "properties", "tags", "expected"),
    [
        ("TAGS = 'a'", {}, "a", T),
        ("TAGS = 'a'", {}, "b", F),
        ("TAGS = 'a'", {}, "A", F),
        ("TAGS = 'a'", {}, None, N),
        ("TAGS = 'a'", {}, "", N),
        ("TAGS = 'a'", {"TAGS": "a"}, None, N),  # TAGS is the tag, never a property
        ("tags = 'a'", {"tags": "a"}, None, T),
        (EXAMPLE, {"region": "HZ"}, "a", T),
        (EXAMPLE, {"region": "SH"}, "a", T),
        (EXAMPLE, {"region": "BJ"}, "a", F),
        (EXAMPLE, {}, "a", N),
        (EXAMPLE, {"region": "SH"}, None, N),
        (EXAMPLE, {"region": "BJ"}, None, F),
        (EXAMPLE, {"region": "HZ"}, "b", F),
    ],
)
def test_tags_and_combined_expressions(
    expression: str, properties: dict[str, str], tags: str | None, expected: bool | None
) -> None:
    assert run(expression, properties, tags) is expected


@pytest.mark.parametrize(
    ("expression", "properties", "matches"),
    [("a = 1", {"a": "1"}, T), ("a = 1", {"a": "2"}, F), ("a = 1", {}, F), ("NOT a = 1", {}, F), ("a IS NULL", {}, T)],
)
def test_only_true_matches(expression: str, properties: dict[str, str], matches: bool) -> None:
    assert MessageSelector.by_sql(expression).matches(properties) is matches


def test_selector_with_tags() -> None:
    selector = MessageSelector.by_sql(EXAMPLE)
    assert selector.type is ExpressionType.SQL92
    assert selector.matches({"region": "HZ"}, "a")
    assert not selector.matches({"region": "HZ"})
    assert not selector.matches({"region": "HZ"}, "b")


def test_long_chains_do_not_recurse() -> None:
    expression = " OR ".join(f"a = {i}" for i in range(3000))
    node = parse(expression)
    assert isinstance(node, Or) and len(node.operands) == 3000
    assert run(expression, {"a": "2999"}) is T
    assert run(expression, {"a": "3000"}) is F


def test_nesting_up_to_the_limit() -> None:
    deep = "(" * MAX_NESTING + "a = 1" + ")" * MAX_NESTING
    assert run(deep, {"a": "1"}) is T
    nots = "NOT " * MAX_NESTING + "a = 1"
    assert run(nots, {"a": "1"}) is (MAX_NESTING % 2 == 0)


@pytest.mark.parametrize(
    ("expression", "position"),
    [
        ("(" * (MAX_NESTING + 1) + "a = 1" + ")" * (MAX_NESTING + 1), MAX_NESTING),
        ("NOT " * (MAX_NESTING + 1) + "a = 1", 4 * MAX_NESTING),
    ],
)
def test_nesting_past_the_limit(expression: str, position: int) -> None:
    with pytest.raises(FilterExpressionError, match="nested deeper") as info:
        parse(expression)
    assert info.value.position == position


# --- refusals ------------------------------------------------------------------------------------

REFUSALS = [
    ("", 0, "expected a value, found the end"),
    ("   ", 3, "expected a value, found the end"),
    ("a", 0, "expected a condition"),
    ("5", 0, "expected a condition"),
    ("'x'", 0, "expected a condition"),
    ("NULL", 0, "expected a condition"),
    ("a = 1 AND b", 10, "expected a condition"),
    ("NOT a", 4, "expected a condition"),
    ("(a = 1) = TRUE", 0, "expected a value, found a condition"),
    ("(a = 1) IS NULL", 0, "expected a value, found a condition"),
    ("a = 'x", 4, "unterminated string"),
    ('a = "x"', 4, "single quotes"),
    ("a LIKE 'x%'", 2, "LIKE is not supported"),
    ("a like 'x%'", 2, "LIKE is not supported"),
    ("a = 1 + 2", 6, "arithmetic"),
    ("a + 1 = 2", 2, "arithmetic"),
    ("a - 1 = 2", 2, "arithmetic"),
    ("a * 2 = 4", 2, "arithmetic"),
    ("a / 2 = 4", 2, "arithmetic"),
    ("a % 2 = 0", 2, "arithmetic"),
    ("-a = 1", 0, "only to numeric literals"),
    ("a = -'x'", 4, "only to numeric literals"),
    ("a = -TRUE", 4, "only to numeric literals"),
    ("a = 0x1F", 4, "hexadecimal"),
    ("a = 0X1f", 4, "hexadecimal"),
    ("a = 010", 4, "leading zeros"),
    ("a = 5abc", 4, "malformed number"),
    ("a = 5.5.5", 4, "malformed number"),
    ("a = 5.5L", 4, "malformed number"),
    ("a = 1e", 4, "malformed number"),
    ("a = 9223372036854775808", 4, "64-bit"),
    ("a = -9223372036854775809", 4, "64-bit"),
    ("a = 99999999999999999999999", 4, "64-bit"),
    ("a = 1e400", 4, "out of range"),
    ("a = NULL", 4, "use IS [NOT] NULL"),
    ("a <> NULL", 5, "use IS [NOT] NULL"),
    ("NULL = a", 0, "use IS [NOT] NULL"),
    ("a > NULL", 4, "use IS [NOT] NULL"),
    ("a > 'x'", 4, "compares numbers"),
    ("a >= 'x'", 5, "compares numbers"),
    ("'x' < a", 0, "compares numbers"),
    ("a <= TRUE", 5, "compares numbers"),
    ("TRUE = 5", 7, "boolean cannot be compared with a number"),
    ("5 = TRUE", 4, "boolean cannot be compared with a number"),
    ("a BETWEEN 'x' AND 'y'", 10, "BETWEEN compares numbers"),
    ("a BETWEEN 1 AND 'y'", 16, "BETWEEN compares numbers"),
    ("a BETWEEN NULL AND 1", 10, "BETWEEN compares numbers"),
    ("a BETWEEN TRUE AND 1", 10, "BETWEEN compares numbers"),
    ("'x' BETWEEN 1 AND 2", 0, "BETWEEN compares numbers"),
    ("a BETWEEN 5 AND 1", 10, "reversed"),
    ("a NOT BETWEEN 5.5 AND 5", 14, "reversed"),
    ("a BETWEEN 1 OR 2", 12, "expected AND"),
    ("a BETWEEN 1", 11, "expected AND, found the end"),
    ("a IN (1, 2)", 6, "string literals only"),
    ("a IN ('x', 2)", 11, "string literals only"),
    ("a IN ('x', b)", 11, "string literals only"),
    ("a IN ()", 6, "string literals only"),
    ("a IN ('x',)", 10, "string literals only"),
    ("a IN 'x'", 5, "expected ("),
    ("a IN ('x'", 9, "expected )"),
    ("5 IN ('5')", 0, "applies to a property"),
    ("a CONTAINS b", 11, "CONTAINS takes a string literal"),
    ("a STARTSWITH 5", 13, "STARTSWITH takes a string literal"),
    ("a ENDSWITH NULL", 11, "ENDSWITH takes a string literal"),
    ("5 CONTAINS 'x'", 0, "applies to a property"),
    ("a IS 5", 5, "expected NULL"),
    ("a IS NOT 5", 9, "expected NULL"),
    ("a NOT = 1", 6, "after NOT"),
    ("a NOT NULL", 6, "after NOT"),
    ("a IS NULL NOT", 10, "unexpected 'NOT'"),
    ("a = 1 b = 2", 6, "unexpected 'b'"),
    ("a = 1)", 5, "unexpected ')'"),
    ("a = 1 = 2", 6, "unexpected '='"),
    ("(a = 1", 6, "expected ), found the end"),
    ("a = 1 AND", 9, "expected a value, found the end"),
    ("AND a = 1", 0, "expected a value, found 'AND'"),
    ("a = 1 OR OR b = 1", 9, "expected a value, found 'OR'"),
    ("and = 1", 0, "expected a value, found 'and'"),
    ("a =", 3, "expected a value, found the end"),
    ("a == 1", 3, "expected a value, found '='"),
    ("a = 1 @ b", 6, "unexpected character '@'"),
    ("a = é", 4, "unexpected character 'é'"),
    ("a != 1", 2, "use <>"),
    ("a = 1 /* x", 6, "unterminated comment"),
    ("a = 1 /*/", 6, "unterminated comment"),
    ("-- only a comment", 17, "expected a value, found the end"),
    ("a = --5", 7, "expected a value, found the end"),  # -- starts a comment, also after an operator
    ("a = 1 -- x\n b", 12, "unexpected 'b'"),
]


@pytest.mark.parametrize(("expression", "position", "fragment"), REFUSALS)
def test_refusals_report_the_position(expression: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterExpressionError) as info:
        parse(expression)
    error = info.value
    assert isinstance(error, MQClientError)
    assert (error.expression, error.position) == (expression, position)
    assert fragment in str(error)
    assert f"at position {position}" in str(error)


@pytest.mark.parametrize(("expression", "position", "fragment"), REFUSALS[:12])
def test_selector_refuses_when_built(expression: str, position: int, fragment: str) -> None:
    with pytest.raises(FilterExpressionError, match="at position %d" % position):
        MessageSelector.by_sql(expression)


def test_non_string_expression_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        parse(5)  # type: ignore[arg-type]


# --- RocketMQ's own filter tests (data in tests/sql92_rocketmq_cases.py; Lua side in test_filter_store.py) ---


@pytest.mark.parametrize("case", rocketmq.CASES, ids=lambda case: repr(case.expression)[:60])
def test_rocketmq_expression_cases(case: rocketmq.Case) -> None:
    assert MessageSelector.by_sql(case.expression).matches(case.properties, case.tags) is case.expected


@pytest.mark.parametrize("expression", rocketmq.PARSE_VALID)
def test_rocketmq_valid_expressions_parse(expression: str) -> None:
    assert MessageSelector.by_sql(expression).expression == expression


@pytest.mark.parametrize("expression", rocketmq.PARSE_INVALID, ids=lambda e: repr(e)[:40])
def test_rocketmq_invalid_expressions_are_refused(expression: str) -> None:
    with pytest.raises(FilterExpressionError):
        parse(expression)


def test_rocketmq_different_expressions_differ() -> None:
    assert all(parse(a) != parse(b) for a, b in rocketmq.PARSE_NOT_EQUAL)


# --- AST and JSON form ---------------------------------------------------------------------------


def test_ast_is_immutable_and_hashable() -> None:
    node = parse("a = 1 AND b IN ('x') AND c NOT BETWEEN 1 AND 2 AND d NOT CONTAINS 'y' AND e IS NULL")
    assert node == And(
        (
            Compare("=", Prop("a"), Int(1)),
            In(Prop("b"), ("x",)),
            Between(Prop("c"), Int(1), Int(2), negated=True),
            TextTest("contains", Prop("d"), "y", negated=True),
            IsNull(Prop("e")),
        )
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.operands = ()  # type: ignore[misc]
    assert hash(node) == hash(parse("a = 1 AND b IN ('x') AND c NOT BETWEEN 1 AND 2 AND d NOT CONTAINS 'y' AND e IS NULL"))
    assert parse("NOT TRUE") == Not(Bool(True))


@pytest.mark.parametrize(
    ("expression", "tree"),
    [
        ("a = 'x'", ["cmp", "=", PA, ["str", "x"]]),
        ("TAGS <> 'x'", ["cmp", "<>", ["tags"], ["str", "x"]]),
        ("a > b", ["cmp", ">", PA, ["prop", "b"]]),
        ("a >= 5", ["cmp", ">=", PA, ["int", "5"]]),
        ("a < -5.5", ["cmp", "<", PA, ["float", -5.5]]),
        ("a <= 5E10", ["cmp", "<=", PA, ["float", 5e10]]),
        ("a = TRUE", ["cmp", "=", PA, ["bool", True]]),
        ("a = 9223372036854775807", ["cmp", "=", PA, ["int", "9223372036854775807"]]),
        ("a = -9223372036854775808", ["cmp", "=", PA, ["int", "-9223372036854775808"]]),
        ("NULL IS NULL", ["is_null", ["null"]]),
        ("a IS NOT NULL", ["is_not_null", PA]),
        ("a BETWEEN 1 AND 2.5", ["between", PA, ["int", "1"], ["float", 2.5]]),
        ("a NOT BETWEEN b AND 2", ["not_between", PA, ["prop", "b"], ["int", "2"]]),
        ("a IN ('x', 'y', 'x')", ["in", PA, ["x", "y", "x"]]),
        ("a NOT IN ('x')", ["not_in", PA, ["x"]]),
        ("a CONTAINS 'x'", ["contains", PA, "x"]),
        ("a NOT CONTAINS 'x'", ["not_contains", PA, "x"]),
        ("a STARTSWITH 'x'", ["starts_with", PA, "x"]),
        ("a NOT STARTSWITH 'x'", ["not_starts_with", PA, "x"]),
        ("a ENDSWITH 'it''s'", ["ends_with", PA, "it's"]),
        ("a NOT ENDSWITH 'x'", ["not_ends_with", PA, "x"]),
        ("TRUE", ["bool", True]),
        ("FALSE OR a = 1", ["or", ["bool", False], A1]),
        ("NOT a = 1", ["not", A1]),
    ],
)
def test_to_json_shapes(expression: str, tree: list[Any]) -> None:
    produced = to_json(parse(expression))
    assert produced == tree
    assert json.loads(json.dumps(produced, allow_nan=False)) == produced


def test_selector_wire_form_carries_the_tree() -> None:
    selector = MessageSelector.by_sql(EXAMPLE)
    wire = selector.to_wire()
    assert wire == {"type": "SQL92", "expression": EXAMPLE, "ast": to_json(parse(EXAMPLE))}
    assert wire["ast"] == ["and", ["cmp", "=", ["tags"], ["str", "a"]], ["in", ["prop", "region"], ["HZ", "SH"]]]
    assert MessageSelector.from_wire(json.loads(json.dumps(wire))) == selector
    assert repr(selector) == f"MessageSelector.by_sql({EXAMPLE!r})"
