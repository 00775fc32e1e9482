"""RocketMQ status codes: the error the endpoint answers with, and how rocketredis' errors map to them."""

from __future__ import annotations

from typing import Any

from mq.errors import (
    FilterExpressionError,
    MessageTooLargeError,
    MQBrokerError,
    MQClientError,
    QueueNotWritableError,
    TopicNotFoundError,
)
from mq.proxy.pb import Code, definition

OK: int = Code.Value("OK")
#: Each ``Code`` name's number, looked up once: a status is built for every answer and every entry.
_NUMBERS: dict[str, int] = dict(Code.items())


class ProxyError(Exception):
    """A request the endpoint refuses, with the RocketMQ status code to answer (``Code`` name)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    @property
    def value(self) -> int:
        """The numeric code."""
        return int(Code.Value(self.code))


def status(code: str | int = "OK", message: str = "OK") -> Any:
    """A ``Status`` message (``code`` a ``Code`` name or number)."""
    return definition.Status(code=_NUMBERS[code] if isinstance(code, str) else code, message=message)


#: The ``Code`` of each rocketredis error, most specific first (the first match answers).
ERROR_CODES: tuple[tuple[type[Exception], str], ...] = (
    (TopicNotFoundError, "TOPIC_NOT_FOUND"),
    (MessageTooLargeError, "MESSAGE_BODY_TOO_LARGE"),
    (FilterExpressionError, "ILLEGAL_FILTER_EXPRESSION"),
    (QueueNotWritableError, "FORBIDDEN"),
    (MQClientError, "BAD_REQUEST"),
    (MQBrokerError, "INTERNAL_SERVER_ERROR"),
)


def code_of(error: BaseException) -> tuple[str, str]:
    """The ``Code`` name and message to answer for ``error``."""
    if isinstance(error, ProxyError):
        return error.code, str(error)
    for kind, code in ERROR_CODES:
        if isinstance(error, kind):
            return code, str(error)
    return "INTERNAL_ERROR", f"{type(error).__name__}: {error}"
