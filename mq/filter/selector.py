"""Subscription filters [RocketMQ ``MessageSelector``]: a TAG or SQL92 expression, parsed when built."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from mq.errors import FilterExpressionError
from mq.filter import limits, sql92
from mq.filter.sql92_nodes import Condition
from mq.filter.tag import MATCH_ALL, TagExpression, parse_tags


class ExpressionType(str, Enum):
    """The language of a selector's expression [RocketMQ ``ExpressionType``]."""

    TAG = "TAG"
    SQL92 = "SQL92"


class MessageSelector:
    """A parsed filter: which messages of a topic a subscription receives.

    Build one with :meth:`by_tag`, :meth:`by_sql` or :meth:`parse`; a malformed expression raises
    :class:`~mq.errors.FilterExpressionError` right there. Selectors are immutable, compare equal when
    type and expression (as given) are equal, and can be evaluated locally with :meth:`matches` — the
    same semantics the store applies to :meth:`to_wire`'s form.
    """

    __slots__ = ("_compiled", "_expression", "_type")

    def __init__(self, kind: ExpressionType | str, expression: str | None) -> None:
        """Parse ``expression`` as ``kind`` (``"TAG"`` or ``"SQL92"``); None or blank TAG means ``*``."""
        try:
            kind = ExpressionType(kind)
        except ValueError:
            raise FilterExpressionError(f"unknown expression type {kind!r}", expression=str(expression)) from None
        compiled: TagExpression | Condition
        if isinstance(expression, str):
            limits.check_expression_length(expression)
        if kind is ExpressionType.TAG:
            compiled = parse_tags(expression)
            expression = MATCH_ALL if compiled.matches_all and not (expression or "").strip() else expression
            limits.check_tags(str(expression), compiled.to_wire())
        else:
            text = expression if expression is not None else ""
            try:
                compiled = sql92.parse(text)
            except RecursionError:
                raise FilterExpressionError(f"nested deeper than {limits.MAX_DEPTH} levels", expression=text) from None
            limits.check_tree(text, sql92.to_json(compiled))
        self._type = kind
        self._expression = str(expression)
        self._compiled = compiled

    @classmethod
    def by_tag(cls, expression: str | None = MATCH_ALL) -> MessageSelector:
        """A tag selector: ``"*"`` (or None/blank) for everything, or ``"TagA || TagB"``."""
        return cls(ExpressionType.TAG, expression)

    @classmethod
    def by_sql(cls, expression: str) -> MessageSelector:
        """A SQL92 selector over message properties and ``TAGS``."""
        return cls(ExpressionType.SQL92, expression)

    @classmethod
    def parse(cls, selector: str | MessageSelector | None) -> MessageSelector:
        """``selector`` itself, or a plain string (or None) read as a tag expression."""
        if isinstance(selector, MessageSelector):
            return selector
        if selector is None or isinstance(selector, str):
            return cls.by_tag(selector)
        raise TypeError(f"expected a tag expression (str) or a MessageSelector, got {type(selector).__name__}")

    @classmethod
    def from_wire(cls, wire: Mapping[str, Any]) -> MessageSelector:
        """Rebuild a selector from :meth:`to_wire`'s dict (only ``type`` and ``expression`` are read)."""
        return cls(wire["type"], wire["expression"])

    @property
    def type(self) -> ExpressionType:
        """TAG or SQL92."""
        return self._type

    @property
    def expression(self) -> str:
        """The expression as given (``"*"`` for a TAG selector built from None or a blank string)."""
        return self._expression

    def matches(self, properties: Mapping[str, str], tags: str | None = None) -> bool:
        """Whether a message with these user properties and tag passes (SQL92: only TRUE passes)."""
        if isinstance(self._compiled, TagExpression):
            return self._compiled.matches(tags)
        return sql92.evaluate(self._compiled, properties, tags) is True

    def to_wire(self) -> dict[str, Any]:
        """A JSON-serialisable form for the store.

        ``{"type": "TAG", "expression": e, "tags": [...]}`` (``["*"]`` for everything) or
        ``{"type": "SQL92", "expression": e, "ast": [...]}`` with the tree of :func:`mq.filter.sql92.to_json`.
        """
        wire: dict[str, Any] = {"type": self._type.value, "expression": self._expression}
        if isinstance(self._compiled, TagExpression):
            wire["tags"] = self._compiled.to_wire()
        else:
            wire["ast"] = sql92.to_json(self._compiled)
        return wire

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, MessageSelector):
            return NotImplemented
        return (self._type, self._expression) == (other._type, other._expression)

    def __hash__(self) -> int:
        return hash((self._type, self._expression))

    def __repr__(self) -> str:
        factory = "by_tag" if self._type is ExpressionType.TAG else "by_sql"
        return f"MessageSelector.{factory}({self._expression!r})"
