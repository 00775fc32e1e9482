"""Tag filter expressions [RocketMQ ``SubscriptionData`` sub-string]: ``*`` or exact tags joined by ``||``.

- ``"*"``, ``""``, a blank string or None match every message, tagged or not.
- ``"A || B"`` matches a message whose tag is exactly (case-sensitively) ``A`` or ``B``; spaces around
  ``||`` are ignored. An untagged message (tag None or ``""``) matches only ``*``.
- Refused with the 0-based position of the fault (RocketMQ silently drops these): an empty tag
  (``"A ||"``, ``"|| A"``, ``"A |||| B"``), a single ``|``, tags separated by spaces only (``"A B"``:
  a tag cannot contain whitespace) and ``*`` inside a tag or a list (it only means "all" on its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mq.errors import FilterExpressionError

MATCH_ALL = "*"
SEPARATOR = "||"
_SPACE = re.compile(r"\s*")
_TAG = re.compile(r"[^\s|]+")


@dataclass(frozen=True, slots=True)
class TagExpression:
    """A parsed tag expression.

    Attributes:
        tags: the accepted tags in the order given, without duplicates; None means ``*`` (everything).
    """

    tags: tuple[str, ...] | None

    @property
    def matches_all(self) -> bool:
        """Whether this is ``*``."""
        return self.tags is None

    def matches(self, tags: str | None) -> bool:
        """Whether a message with tag ``tags`` (None or ``""`` when untagged) passes."""
        return self.tags is None or (bool(tags) and tags in self.tags)

    def to_wire(self) -> list[str]:
        """The tag list for the store: ``["*"]`` for everything, else the exact tags."""
        return [MATCH_ALL] if self.tags is None else list(self.tags)


def parse_tags(expression: str | None) -> TagExpression:
    """Parse ``"*"`` or ``"A || B || …"``.

    Raises:
        FilterExpressionError: a malformed list; ``position`` is the index of the fault.
        TypeError: ``expression`` is neither a str nor None.
    """
    if expression is not None and not isinstance(expression, str):
        raise TypeError(f"a tag expression must be a str or None, got {type(expression).__name__}")
    if expression is None or expression.strip() in ("", MATCH_ALL):
        return TagExpression(None)
    tags: list[str] = []
    pos = _skip_space(expression, 0)
    while True:
        tag = _read_tag(expression, pos)
        tags.append(tag)
        pos = _skip_space(expression, pos + len(tag))
        if pos == len(expression):
            return TagExpression(tuple(dict.fromkeys(tags)))
        if not expression.startswith(SEPARATOR, pos):
            raise _error("tags must be separated by '||'", expression, pos)
        pos = _skip_space(expression, pos + len(SEPARATOR))


def _read_tag(expression: str, pos: int) -> str:
    """The tag starting at ``pos``; refuses a missing tag and ``*`` inside one."""
    match = _TAG.match(expression, pos)
    if match is None:
        raise _error("expected a tag", expression, pos)
    tag = match.group()
    if MATCH_ALL in tag:
        raise _error(
            "'*' matches every tag only on its own; it cannot be part of a tag or a list", expression, pos + tag.index(MATCH_ALL)
        )
    return tag


def _skip_space(expression: str, pos: int) -> int:
    match = _SPACE.match(expression, pos)
    return match.end() if match else pos


def _error(message: str, expression: str, pos: int) -> FilterExpressionError:
    return FilterExpressionError(message, expression=expression, position=pos)
