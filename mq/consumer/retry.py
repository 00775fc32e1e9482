"""Sending a message back for another try: ``%RETRY%<group>`` with a growing delay, or
``%DLQ%<group>`` once it was tried ``max_reconsume_times`` times [RocketMQ
``sendMessageBack``, broker ``consumerSendMsgBack``].

The copy keeps the body, tags, keys, properties and msg id; ``reconsume_times`` grows by one; the
system properties ``RETRY_TOPIC`` (the original topic) and ``ORIGIN_MESSAGE_ID`` say where it came
from, so the listener sees the original topic and an admin can resend from the DLQ.

The logic is written once as operations (:class:`SendBackOps`, see :mod:`mq.store.ops`):
:class:`SendBack` runs them at once with redis-py, :class:`mq.aio.push.AsyncSendBack` awaits them.
"""

from __future__ import annotations

import logging

from mq.errors import MQBrokerError
from mq.model.message import Message, MessageExt
from mq.model.properties import DLQ_REASON, ORIGIN_MESSAGE_ID, ORIGIN_QUEUE_ID, RETRY_TOPIC
from mq.model.timer import DelayLevels
from mq.model.topic import MAX_PRIORITY_LEVELS, TopicConfig
from mq.model.validation import DLQ_PREFIX, RETRY_PREFIX
from mq.observe.trace import Tracer
from mq.store import Store, codec
from mq.store.clock import ClockOffset
from mq.store.connection import is_out_of_memory
from mq.store.ops import Op, SyncRunner, operation, share_client
from mq.store.store import StoreOps

log = logging.getLogger("mq.consumer")

#: The first retry's delay level is this plus reconsume times [RocketMQ: 3 + reconsumeTimes].
RETRY_BASE_LEVEL = 3


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``."""
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``."""
    return DLQ_PREFIX + group


def original_topic(msg: MessageExt) -> str:
    """The topic the message was first sent to."""
    return msg.system_properties.get(RETRY_TOPIC, msg.topic)


class SendBackOps:
    """Sends messages of one group back to its retry topic or DLQ (operations; see the module docstring).

    Args:
        store: builds the requests (the runner's client runs them).
        group: the consumer group.
        max_reconsume_times: retries before the DLQ (-1: unlimited).
        tracer: records each send-back in the message trace (sync consumers only).
    """

    def __init__(self, store: Store, group: str, max_reconsume_times: int, tracer: Tracer | None = None) -> None:
        self._store = store
        self._group = group
        #: Retries before the DLQ (-1: unlimited).
        self.max_reconsume_times = max_reconsume_times
        self._levels = DelayLevels()
        self._ensured: set[str] = set()
        self._retry_levels: dict[str, TopicConfig] = {}
        self._clock = ClockOffset()
        self._tracer = tracer

    @operation
    def ensure_retry_topic(self) -> Op[str]:
        """Create ``%RETRY%<group>`` (one queue) when missing; returns its name.

        A full store (``OOM``) does not stop a consumer from starting: the topic is created with the
        first message sent back (until then such a send fails and the message is consumed again locally).
        """
        name = retry_topic(self._group)
        try:
            return (yield from self._ensure(name))
        except MQBrokerError as e:
            if not is_out_of_memory(e):
                raise
            log.warning("retry topic %s not created, the store is full (OOM); starting anyway: %s", name, e)
            return name

    @operation
    def send_back(self, msg: MessageExt, delay_level: int = 0, reason: str = "max reconsume times") -> Op[str]:
        """Send a copy of ``msg`` for another try (or to the DLQ); returns the topic it went to.

        ``delay_level`` -1 sends it straight to the DLQ, 0 lets the broker choose (3 + reconsume times).

        Raises:
            MQBrokerError: the store failed (the caller consumes it again locally instead).
        """
        to_dlq = delay_level < 0 or 0 <= self.max_reconsume_times <= msg.reconsume_times
        return (yield from self._copy(msg, delay_level, "delay level -1" if delay_level < 0 else reason, to_dlq=to_dlq))

    @operation
    def dead_letter(self, msg: MessageExt, reason: str) -> Op[str]:
        """Put a copy of ``msg`` into the group's DLQ; returns the DLQ topic."""
        return (yield from self._copy(msg, 0, reason, to_dlq=True))

    def _copy(self, msg: MessageExt, delay_level: int, reason: str, *, to_dlq: bool) -> Op[str]:
        system = {
            **msg.system_properties,
            RETRY_TOPIC: original_topic(msg),
            ORIGIN_MESSAGE_ID: msg.system_properties.get(ORIGIN_MESSAGE_ID, msg.msg_id),
            ORIGIN_QUEUE_ID: msg.system_properties.get(ORIGIN_QUEUE_ID, str(msg.queue_id)),
        }
        topic = yield from self._ensure(dlq_topic(self._group) if to_dlq else retry_topic(self._group))
        if to_dlq:
            system[DLQ_REASON] = reason
        copy = Message(topic, msg.body, msg.tags, msg.keys, msg.properties)
        encoded = codec.encode(
            copy,
            msg.msg_id,
            msg.born_timestamp_ms,
            reconsume_times=msg.reconsume_times + (0 if to_dlq else 1),
            system_properties=system,
        )
        if to_dlq:
            yield from StoreOps.put.op(self._store, topic, 0, [encoded], copies=True)
        else:
            # a priority message waits in the retry topic's queue of its level: retried, it keeps its
            # place before lower priorities (RocketMQ's retry topic loses it, apache/rocketmq #10350; D142)
            queue_id = (yield from self._priority_queue(topic, msg.priority)) if msg.priority else 0
            levels = yield from self._delay_levels()
            level = delay_level if delay_level > 0 else RETRY_BASE_LEVEL + msg.reconsume_times
            due_ms = (yield from self._now_ms()) + levels[min(level, len(levels)) - 1]
            yield from StoreOps.put_delayed.op(self._store, topic, queue_id, encoded, due_ms)
        if self._tracer is not None:
            self._tracer.sent_back(msg, topic)
        return topic

    def _now_ms(self) -> Op[int]:
        """The server's time now, epoch ms (one ``TIME`` round trip every ``CLOCK_REFRESH_S``)."""
        return (yield from self._clock.now_op(self._store))

    def _delay_levels(self) -> Op[tuple[int, ...]]:
        return (yield from self._levels.op(self._store))

    def _priority_queue(self, topic: str, priority: int) -> Op[int]:
        """The queue of ``priority``'s level in retry topic ``topic``, giving the topic priority levels
        (and a queue a level) the first time a priority message is sent back to it."""
        config = self._retry_levels.get(topic)
        if config is None:
            config = yield from StoreOps.topic.op(self._store, topic)
            if config is None or not config.priority_levels:
                queues = max(MAX_PRIORITY_LEVELS, config.queue_count if config is not None else 1)
                config = TopicConfig(topic, read_queues=queues, write_queues=queues, priority_levels=MAX_PRIORITY_LEVELS)
                yield from StoreOps.save_topic.op(self._store, config)
            self._retry_levels[topic] = config
        return config.level_for(priority)

    def _ensure(self, topic: str) -> Op[str]:
        """Create ``topic`` once (creating it twice from two callers at once is harmless)."""
        if topic not in self._ensured:
            yield from StoreOps.ensure_topic.op(self._store, TopicConfig(topic, read_queues=1, write_queues=1))
            self._ensured.add(topic)
        return topic


class SendBack(SendBackOps, SyncRunner):
    """:class:`SendBackOps` run at once with the store's redis-py client."""

    def __init__(self, store: Store, group: str, max_reconsume_times: int, tracer: Tracer | None = None) -> None:
        super().__init__(store, group, max_reconsume_times, tracer)
        share_client(self, store)
