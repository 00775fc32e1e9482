"""Enums, statuses and contexts of consumers [RocketMQ ``consumer`` and ``listener`` packages]."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from mq.errors import MQClientError
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue


class MessageModel(str, Enum):
    """How a group shares messages [RocketMQ ``MessageModel``]."""

    #: Each message goes to one member of the group; offsets live in the store.
    CLUSTERING = "CLUSTERING"
    #: Every member gets every message; offsets live in a local file per client.
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(str, Enum):
    """Where a group with no stored offset starts [RocketMQ ``ConsumeFromWhere``]."""

    #: Only messages stored after the consumer started (a retry topic starts at 0).
    LAST_OFFSET = "LAST_OFFSET"
    #: Everything still stored.
    FIRST_OFFSET = "FIRST_OFFSET"
    #: The first message stored at or after ``consume_timestamp_ms``.
    TIMESTAMP = "TIMESTAMP"


class ConsumeConcurrentlyStatus(str, Enum):
    """What a concurrent listener returns [RocketMQ ``ConsumeConcurrentlyStatus``]."""

    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(str, Enum):
    """What an orderly listener returns [RocketMQ ``ConsumeOrderlyStatus``]."""

    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


#: ``ConsumeConcurrentlyContext.ack_index`` by default: every message of the call acknowledged.
_NO_ACK_INDEX = 2**31 - 1


@dataclass
class ConsumeConcurrentlyContext:
    """Passed to a concurrent listener with each batch [RocketMQ ``ConsumeConcurrentlyContext``].

    Attributes:
        message_queue: the queue the batch came from.
        delay_level_when_next_consume: the delay level of the retry when the listener returns
            RECONSUME_LATER; 0 lets the broker choose (3 + reconsume times), -1 sends the messages
            straight to the dead-letter queue. Setting anything else raises ``MQClientError`` in the
            listener (which then counts as RECONSUME_LATER with the broker's choice).
        ack_index: with CONSUME_SUCCESS, the index of the last message consumed successfully; the
            messages after it are retried like RECONSUME_LATER (clustering; broadcasting drops them).
    """

    message_queue: MessageQueue
    delay_level_when_next_consume: int = 0
    ack_index: int = 2**31 - 1

    @classmethod
    def of(cls, queue: MessageQueue) -> ConsumeConcurrentlyContext:
        """A fresh context for a batch of ``queue`` (the defaults need no checks: built once per call)."""
        ctx = cls.__new__(cls)
        fields = ctx.__dict__  # items set one by one: no keyword dict per call (D61)
        fields["message_queue"] = queue
        fields["delay_level_when_next_consume"] = 0
        fields["ack_index"] = _NO_ACK_INDEX
        return ctx

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "delay_level_when_next_consume" and (not isinstance(value, int) or isinstance(value, bool) or value < -1):
            raise MQClientError(
                f"ctx.delay_level_when_next_consume must be an int: -1 (dead-letter queue), 0 (the broker's choice) "
                f"or a delay level 1..N, got {value!r}"
            )
        if name == "ack_index" and (not isinstance(value, int) or isinstance(value, bool)):
            raise MQClientError(f"ctx.ack_index must be an int (index of the last message consumed), got {value!r}")
        super().__setattr__(name, value)


@dataclass
class ConsumeOrderlyContext:
    """Passed to an orderly listener with each batch [RocketMQ ``ConsumeOrderlyContext``].

    Attributes:
        message_queue: the queue the batch came from (one queue, in offset order).
        suspend_current_queue_time_ms: how long the queue pauses when the listener returns
            SUSPEND_CURRENT_QUEUE_A_MOMENT (or raises); clamped to 10..30000.
        auto_commit: offsets are committed after each successful batch (always true here).
    """

    message_queue: MessageQueue
    suspend_current_queue_time_ms: int = 1000
    auto_commit: bool = True


@dataclass
class ConsumeMessageContext:
    """What consume hooks see around each listener call [RocketMQ ``ConsumeMessageContext``].

    Attributes:
        group: the consumer group.
        message_queue: where the messages came from.
        messages: the batch given to the listener.
        status: the listener's answer (set before ``after``); None before the call.
        duration_ms: how long the listener took (set before ``after``).
        success: whether the batch was consumed successfully (set before ``after``).
        error: the exception the listener raised, if any.
    """

    group: str
    message_queue: MessageQueue
    messages: list[MessageExt]
    status: str | None = None
    duration_ms: float = 0.0
    success: bool = False
    error: BaseException | None = None
    props: dict[str, str] = field(default_factory=dict)


class ConsumeHook:
    """Runs around every listener call; override what you need [RocketMQ ``ConsumeMessageHook``].

    Errors raised by a hook are logged and never lose messages.
    """

    def before(self, ctx: ConsumeMessageContext) -> None:
        """Called before the listener."""

    def after(self, ctx: ConsumeMessageContext) -> None:
        """Called after the listener, with ``status``, ``duration_ms`` and ``success`` set."""
