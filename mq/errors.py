"""The exceptions rocketredis raises.

Every error the library raises on purpose derives from :class:`MQError`::

    MQError
    ├── MQClientError            bad input or a wrong call: fix the call, retrying will not help
    │   ├── InvalidNameError     a topic or group name breaks the naming rules
    │   ├── TopicNotFoundError   the topic does not exist (create it with Admin.create_topic)
    │   ├── MessageTooLargeError the body or batch is over the size limit
    │   ├── QueueNotWritableError  the queue takes no new messages (write_queues shrank)
    │   └── FilterExpressionError  a TAG or SQL92 expression is malformed (has ``position``)
    ├── MQBrokerError            the store failed or cannot be reached: retrying later may help
    │   └── StoreEvictedError    Redis evicted rocketredis's bookkeeping keys (maxmemory-policy)
    └── ReplicaAckTimeout        stored on the master, not confirmed by enough replicas in time

Redis exceptions are translated where they enter the library (``raise MQBrokerError(...) from e``),
so callers never need to import redis to handle failures.
"""

from __future__ import annotations

from typing import Any


class MQError(Exception):
    """Root of every error raised by rocketredis."""


class MQClientError(MQError):
    """The caller asked for something invalid; nothing was written."""


class InvalidNameError(MQClientError):
    """A topic or group name is empty, too long, reserved or has characters outside ``[%|a-zA-Z0-9_-]``."""


class TopicNotFoundError(MQClientError):
    """The topic does not exist in this namespace."""


class MessageTooLargeError(MQClientError):
    """A message body, or a whole batch, is over the configured size limit."""


class FilterExpressionError(MQClientError):
    """A filter expression is malformed.

    Attributes:
        expression: the expression as given.
        position: 0-based character index of the fault in ``expression``.
    """

    def __init__(self, message: str, *, expression: str = "", position: int = 0) -> None:
        super().__init__(f"{message} at position {position} in {expression!r}")
        self.expression = expression
        self.position = position


class MQBrokerError(MQError):
    """The store (Redis) failed, refused the command, or could not be reached in time.

    Attributes:
        answered: the server answered with an error reply, so the command ran nothing; False when
            its outcome is unknown (a reply that timed out, a connection lost after the command was
            written: it may have run all the same, D140).
    """

    answered: bool = False


class StoreEvictedError(MQBrokerError):
    """Redis evicted keys rocketredis keeps its bookkeeping in (a topic's config, a queue's meta) while
    the messages are still stored: ``maxmemory-policy`` is not ``noeviction``. Retrying does not help:
    set the policy, then rebuild what was evicted with ``mq topic recover`` (``Admin.recover_topics``)."""


class MessageFencedError(MQBrokerError):
    """A put was refused because a producer retry fenced its message id on that queue (D140): the
    retry went on elsewhere, so this late attempt stores nothing."""


def evicted_message(what: str, topic: str) -> str:
    """The text of :class:`StoreEvictedError`: what to do first, then what is missing."""
    return (
        "Redis evicted rocketredis's keys: set maxmemory-policy noeviction (CONFIG SET and redis.conf), "
        f"then run `mq topic recover {topic}` (Admin.recover_topics) to rebuild the topic config and queue "
        f"metas from the stored messages ({what}; see docs/operations.md, Eviction)"
    )


class QueueNotWritableError(MQClientError):
    """The queue exists but does not take new messages (``write_queues`` shrank or perm lacks ``w``)."""


class ReplicaAckTimeout(MQError):
    """A write is stored on the master, but fewer replicas than asked confirmed it in time
    [RocketMQ ``FLUSH_SLAVE_TIMEOUT``]: it may be lost if the master fails now. Not retried (that would
    store it twice); a producer reports it as ``SendStatus.FLUSH_SLAVE_TIMEOUT``.

    Attributes:
        result: what the write returned (e.g. the offset), as if it had been confirmed.
        acked: replicas that confirmed.
        wanted: replicas asked for.
    """

    def __init__(self, message: str, *, result: Any, acked: int, wanted: int) -> None:
        super().__init__(message)
        self.result = result
        self.acked = acked
        self.wanted = wanted
