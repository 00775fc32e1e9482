"""RocketMQ's own SQL92 filter tests, ported as data (apache/rocketmq, module ``filter``, tests under
``filter/src/test/java/org/apache/rocketmq/filter/``; read at commit 8fc57f1468d1 of 2025-09-19).

Each block names the Java test it comes from. The expressions, property values and expected answers are
theirs; only the form is ours. RocketMQ's ``eval(expression, context, expected)`` passes when the result
is the expected Boolean, and treats NULL (or a non-Boolean) as FALSE, so ``expected`` here is "the
message matches" (only TRUE matches, as in :meth:`MessageSelector.matches`).

Porting notes:

- RocketMQ's ``TAGS`` is a property its broker fills with the message tag; here ``TAGS`` is the tag, so
  a ``TAGS`` value of theirs is the ``tags`` of the case.
- A property ``null`` in their context map is a missing property here (a message has no null values).
- Their tests that put an ``Integer`` in the context repeat the check with the same values as strings
  ("use string"), or only need the value's text: those are ported with the string, which is all a real
  message carries (message properties are strings in RocketMQ too). The blocks that test a ``Double``,
  ``Boolean`` or bare ``Object`` value (``testContains_StartsWith_EndsWith_{number,boolean,object}_has``
  and their ``not`` forms) cannot occur in a message and are not ported; nor is ``testEvaluate_now``,
  which builds a ``NowExpression`` in Java (SQL has no ``now`` keyword: ``a <= now`` names a property,
  see ``PARSE_VALID``).
"""

from __future__ import annotations

from typing import NamedTuple


class Case(NamedTuple):
    """One evaluation: ``expression`` on a message with ``properties`` and ``tags`` matches or not."""

    expression: str
    properties: dict[str, str]
    tags: str | None
    expected: bool


def _cases(expressions: list[str], properties: dict[str, str], expected: bool, tags: str | None = None) -> list[Case]:
    return [Case(expression, properties, tags, expected) for expression in expressions]


_TEXT_TESTS = ["value contains '{0}'", "value startswith '{1}'", "value endswith '{2}'"]
_NOT_TEXT_TESTS = ["value not contains '{0}'", "value not startswith '{1}'", "value not endswith '{2}'"]


def _text(templates: list[str], left: str, *patterns: str) -> list[str]:
    """The three text tests with ``left`` instead of ``value`` and the patterns (one for all, or three)."""
    args = patterns * 3 if len(patterns) == 1 else patterns
    return [template.replace("value", left, 1).format(*args) for template in templates]


AND_EXPRESSION = "a=3 and b<>4 And c>5 AND d<=4"
OR_EXPRESSION = "a=3 or b<>4 Or c>5 OR d<=4"
ALL_IN_ONE = "a not in ('4', '4', '5') and b between 3 and 10 and c not {0} 'axbc'"
ALL_IN_ONE_CONTEXT = {"a": "3", "b": "3", "c": "axbdc"}  # b is Integer 3 in theirs; "3" gives the same here and there

EXPRESSION_TEST: list[Case] = [
    # ExpressionTest.testContains_StartsWith_EndsWith_has
    *_cases(_text(_TEXT_TESTS, "value", "x", "ax", "xb"), {"value": "axb"}, True),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_has
    *_cases(_text(_NOT_TEXT_TESTS, "value", "x", "ax", "xb"), {"value": "axb"}, False),
    # ExpressionTest.testContains_StartsWith_EndsWith_has_not
    *_cases(_text(_TEXT_TESTS, "value", "x"), {"value": "abb"}, False),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_has_not
    *_cases(_text(_NOT_TEXT_TESTS, "value", "x"), {"value": "abb"}, True),
    # ExpressionTest.testContains_StartsWith_EndsWith_hasEmpty: an empty right operand never matches
    *_cases(_text(_TEXT_TESTS, "value", ""), {"value": "axb"}, False),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_hasEmpty: ... in the NOT forms neither
    *_cases(_text(_NOT_TEXT_TESTS, "value", ""), {"value": "axb"}, False),
    # ExpressionTest.testContains_StartsWith_EndsWith_null_has_1 and _null_has_2 (value null / absent)
    *_cases(_text(_TEXT_TESTS, "value", "x"), {}, False),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_null_has_1 and _null_has_2
    *_cases(_text(_NOT_TEXT_TESTS, "value", "x"), {}, False),
    # ExpressionTest.testContains_StartsWith_EndsWith_string_has_string
    *_cases(_text(_TEXT_TESTS, "'axb'", "x", "ax", "xb"), {"whatever": "whatever"}, True),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_string_has_string
    *_cases(_text(_NOT_TEXT_TESTS, "'axb'", "x", "ax", "xb"), {"whatever": "whatever"}, False),
    # ExpressionTest.testContains_startsWith_endsWith_string_has_not_string
    *_cases(_text(_TEXT_TESTS, "'axb'", "u"), {"whatever": "whatever"}, False),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_string_has_not_string
    *_cases(_text(_NOT_TEXT_TESTS, "'axb'", "u"), {"whatever": "whatever"}, True),
    # ExpressionTest.testContains_StartsWith_EndsWith_string_has_empty
    *_cases(_text(_TEXT_TESTS, "'axb'", ""), {"whatever": "whatever"}, False),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_string_has_empty
    *_cases(_text(_NOT_TEXT_TESTS, "'axb'", ""), {"whatever": "whatever"}, False),
    # ExpressionTest.testContains_StartsWith_EndsWith_string_has_space
    *_cases(_text(_TEXT_TESTS, "' '", " "), {"whatever": "whatever"}, True),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_string_has_space
    *_cases(_text(_NOT_TEXT_TESTS, "' '", " "), {"whatever": "whatever"}, False),
    # ExpressionTest.testContains_StartsWith_EndsWith_string_has_special_1
    *_cases(_text(_TEXT_TESTS, "'axb'", "."), {"whatever": "whatever"}, False),
    # ExpressionTest.test_notContains_notStartsWith_notEndsWith_string_has_special_1
    *_cases(_text(_NOT_TEXT_TESTS, "'axb'", "."), {"whatever": "whatever"}, True),
    # ExpressionTest.testContains_StartsWith_EndsWith_string_has_special_2 (a backslash is an ordinary character)
    *_cases(_text(_TEXT_TESTS, "'s'", "\\"), {"whatever": "whatever"}, False),
    # ExpressionTest.testContainsAllInOne, testStartsWithAllInOne, testEndsWithAllInOne
    *_cases([ALL_IN_ONE.format(op) for op in ("contains", "startswith", "endswith")], ALL_IN_ONE_CONTEXT, True),
    # ExpressionTest.testEvaluate_stringHasString: their TAGS property is our tag
    Case("TAGS is not null and TAGS='''''tag'''''", {}, "''tag''", True),
    # ExpressionTest.testEvaluate_stringCompare. In RocketMQ the second block throws (comparing "3.14" with
    # "up" by >=, which the test expects as a RuntimeException, and which their broker counts as no match),
    # so the blocks after it never ran there; their expected answers are ported all the same.
    Case("a between up and low", {"a": "3.14"}, None, False),
    Case("a between up and low", {"a": "3.14", "up": "up", "low": "low"}, None, False),
    Case("key is not null and key between 0 and 100", {"key": "con"}, None, False),
    Case("a between 0 and 100", {"a": "abc"}, None, False),
    Case("a=b", {"a": "3.14", "b": "3.14"}, None, True),
    Case("a<>b", {"a": "3.14", "b": "3.14"}, None, False),
    Case("a<>b", {"a": "3.14", "b": "3.141"}, None, True),
    # ExpressionTest.testEvaluate_exponent: String.valueOf(3.1415 * Math.pow(10, 10)) is "3.1415E10"
    Case("a > 3.1E10", {"a": "3.1415E10"}, None, True),
    # ExpressionTest.testEvaluate_floatNumber
    Case("a > 3.14", {"a": "3.1415"}, None, True),
    # ExpressionTest.testEvaluate_twoVariable, testEvaluate_twoVariableGt
    Case("a > b", {"a": "10", "b": "20"}, None, False),
    Case("a > b", {"b": "10", "a": "20"}, None, True),
    # ExpressionTest.testEvaluate_nullOr
    Case("a is null OR a='hello'", {}, None, True),
    Case("a is null OR a='hello'", {"a": "hello"}, None, True),
    Case("a is null OR a='hello'", {"a": "abc"}, None, False),
    # ExpressionTest.testEvaluate_boolean
    Case("a=TRUE OR b=FALSE", {"a": "true", "b": "false"}, None, True),
    Case("a=TRUE OR b=FALSE", {"a": "false", "b": "true"}, None, False),
    # ExpressionTest.testEvaluate_equal
    Case("a is not null and a='hello'", {"a": "hello"}, None, True),
    Case("a is not null and a='hello'", {}, None, False),
    # ExpressionTest.testEvaluate_andTrue, testEvaluate_andFalse (Integer values, then "use string": the same)
    Case(AND_EXPRESSION, {"a": "3", "b": "5", "c": "6", "d": "1"}, None, True),
    Case(AND_EXPRESSION, {"a": "4", "b": "5", "c": "6", "d": "1"}, None, False),
    # ExpressionTest.testEvaluate_orTrue (first, second, third, forth), testEvaluate_orFalse (Integer values)
    Case(OR_EXPRESSION, {"a": "3"}, None, True),
    Case(OR_EXPRESSION, {"a": "4", "b": "5"}, None, True),
    Case(OR_EXPRESSION, {"a": "4", "b": "4", "c": "6"}, None, True),
    Case(OR_EXPRESSION, {"a": "4", "b": "4", "c": "3", "d": "2"}, None, True),
    Case(OR_EXPRESSION, {"a": "4", "b": "4", "c": "3", "d": "10"}, None, False),
    # ExpressionTest.testEvaluate_inTrue, testEvaluate_inFalse
    *[Case("a in ('3', '4', '5')", {"a": a}, None, True) for a in ("3", "4", "5")],
    Case("a in ('3', '4', '5')", {"a": "8"}, None, False),
    # ExpressionTest.testEvaluate_notInTrue, testEvaluate_notInFalse
    Case("a not in ('3', '4', '5')", {"a": "8"}, None, True),
    *[Case("a not in ('3', '4', '5')", {"a": a}, None, False) for a in ("3", "4", "5")],
    # ExpressionTest.testEvaluate_betweenTrue, testEvaluate_betweenFalse
    *[Case("a between 2 and 10", {"a": a}, None, True) for a in ("2", "10", "3")],
    *[Case("a between 2 and 10", {"a": a}, None, False) for a in ("1", "11")],
    # ExpressionTest.testEvaluate_notBetweenTrue, testEvaluate_notBetweenFalse
    *[Case("a not between 2 and 10", {"a": a}, None, True) for a in ("1", "11")],
    *[Case("a not between 2 and 10", {"a": a}, None, False) for a in ("2", "10", "3")],
    # ExpressionTest.testEvaluate_isNullTrue, _isNullFalse, _isNotNullTrue, _isNotNullFalse
    Case("a is null", {"abc": "2"}, None, True),
    Case("a is null", {"a": "2"}, None, False),
    Case("a is not null", {"a": "2"}, None, True),
    Case("a is not null", {"abc": "2"}, None, False),
]

FILTER_SPI_TEST: list[Case] = [
    # FilterSpiTest.testGet (an EmptyEvaluationContext)
    Case("a is not null and a > 0", {}, None, False),
]

CASES: list[Case] = EXPRESSION_TEST + FILTER_SPI_TEST
"""Every ported evaluation."""

PARSE_VALID: list[str] = [
    # ParserTest.testParse_valid
    AND_EXPRESSION,
    OR_EXPRESSION,
    "a in ('3', '4', '5')",
    "(a not in ('6', '4', '5')) or (b in ('3', '4', '5'))",
    "(a between 2 and 10) AND (b not between 6 and 9)",
    "a is null",
    "a is not null",
    "a <= now",
    "a=3 and b contains 'xxx' and c not contains 'xxx'",
]

_LONG_DIGITS = "111111111111111111111111111111111111111111111111111" * 2048
PARSE_INVALID: list[str] = [
    # ParserTest.testParse_invalid
    "a and between 2 and 10",
    # ParserTest.testParse_decimalOverFlow
    "a > 100000000000000000000000",
    # ParserTest.testParse_floatOverFlow
    "a > 1" + _LONG_DIGITS + "." + _LONG_DIGITS,
    # ParserTest.testParse_illegalBetween
    " a between 10 and 0",
    # ExpressionTest.testContains_has_not_string_1/_2, test_notContains_has_not_string_1/_2 ("will throw parse exception")
    "value contains x",
    "value not contains x",
    "value contains 123",
    "value not contains 123",
    # ExpressionTest.testContains_string_has_nothing, test_notContains_string_has_nothing
    "'axb' contains ",
    "'axb' not contains ",
]

PARSE_EQUAL: list[tuple[str, str]] = [
    # ParserTest.testEquals: extra blanks do not change the expression
    (AND_EXPRESSION, "a=3  and    b<>4 And c>5 AND d<=4"),
]
PARSE_NOT_EQUAL: list[tuple[str, str]] = [
    # ParserTest.testEquals
    (AND_EXPRESSION, OR_EXPRESSION),
]
