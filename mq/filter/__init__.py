"""Message filters: tag expressions and SQL92 selectors [RocketMQ ``MessageSelector``]."""

from mq.filter.selector import ExpressionType, MessageSelector
from mq.filter.sql92 import evaluate, parse, to_json
from mq.filter.tag import TagExpression, parse_tags

__all__ = [
    "ExpressionType",
    "MessageSelector",
    "TagExpression",
    "evaluate",
    "parse",
    "parse_tags",
    "to_json",
]
