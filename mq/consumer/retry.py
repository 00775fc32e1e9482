"""Sending a message back for another try: ``%RETRY%<group>`` with a growing delay, or
``%DLQ%<group>`` once it was tried ``max_reconsume_times`` times [RocketMQ
``sendMessageBack``, broker ``consumerSendMsgBack``].

The copy keeps the body, tags, keys, properties and msg id; ``reconsume_times`` grows by one; the
system properties ``RETRY_TOPIC`` (the original topic) and ``ORIGIN_MESSAGE_ID`` say where it came
from, so the listener sees the original topic and an admin can resend from the DLQ.
"""

from __future__ import annotations

import logging
import threading
import time

from mq.connection import is_out_of_memory
from mq.errors import MQBrokerError
from mq.message import Message, MessageExt
from mq.properties import DLQ_REASON, ORIGIN_MESSAGE_ID, ORIGIN_QUEUE_ID, RETRY_TOPIC
from mq.store import Store, codec
from mq.store.clock import ServerClock
from mq.timer import delay_levels
from mq.topic import TopicConfig
from mq.trace import Tracer
from mq.validation import DLQ_PREFIX, RETRY_PREFIX

log = logging.getLogger("mq.consumer")

#: The first retry's delay level is this plus reconsume times [RocketMQ: 3 + reconsumeTimes].
RETRY_BASE_LEVEL = 3
#: Seconds the namespace's delay levels are cached (the broker service may publish new ones).
DELAY_LEVELS_TTL_S = 30.0


def retry_topic(group: str) -> str:
    """``%RETRY%<group>``."""
    return RETRY_PREFIX + group


def dlq_topic(group: str) -> str:
    """``%DLQ%<group>``."""
    return DLQ_PREFIX + group


def original_topic(msg: MessageExt) -> str:
    """The topic the message was first sent to."""
    return msg.system_properties.get(RETRY_TOPIC, msg.topic)


class SendBack:
    """Sends messages of one group back to its retry topic or DLQ."""

    def __init__(self, store: Store, group: str, max_reconsume_times: int, tracer: Tracer | None = None) -> None:
        self._store = store
        self._group = group
        #: Retries before the DLQ (-1: unlimited).
        self.max_reconsume_times = max_reconsume_times
        self._levels: tuple[int, ...] = ()
        self._levels_read_s = 0.0
        self._ensured: set[str] = set()
        self._clock = ServerClock(store)
        self._tracer = tracer
        self._lock = threading.Lock()

    def ensure_retry_topic(self) -> str:
        """Create ``%RETRY%<group>`` (one queue) when missing; returns its name.

        A full store (``OOM``) does not stop a consumer from starting: the topic is created with the
        first message sent back (until then such a send fails and the message is consumed again locally).
        """
        name = retry_topic(self._group)
        try:
            return self._ensure(name)
        except MQBrokerError as e:
            if not is_out_of_memory(e):
                raise
            log.warning("retry topic %s not created, the store is full (OOM); starting anyway: %s", name, e)
            return name

    def send_back(self, msg: MessageExt, delay_level: int = 0, reason: str = "max reconsume times") -> str:
        """Send a copy of ``msg`` for another try (or to the DLQ); returns the topic it went to.

        ``delay_level`` -1 sends it straight to the DLQ, 0 lets the broker choose (3 + reconsume times).

        Raises:
            MQBrokerError: the store failed (the caller consumes it again locally instead).
        """
        to_dlq = delay_level < 0 or 0 <= self.max_reconsume_times <= msg.reconsume_times
        return self._copy(msg, delay_level, "delay level -1" if delay_level < 0 else reason, to_dlq=to_dlq)

    def dead_letter(self, msg: MessageExt, reason: str) -> str:
        """Put a copy of ``msg`` into the group's DLQ; returns the DLQ topic."""
        return self._copy(msg, 0, reason, to_dlq=True)

    def _copy(self, msg: MessageExt, delay_level: int, reason: str, *, to_dlq: bool) -> str:
        system = {
            **msg.system_properties,
            RETRY_TOPIC: original_topic(msg),
            ORIGIN_MESSAGE_ID: msg.system_properties.get(ORIGIN_MESSAGE_ID, msg.msg_id),
            ORIGIN_QUEUE_ID: msg.system_properties.get(ORIGIN_QUEUE_ID, str(msg.queue_id)),
        }
        topic = self._ensure(dlq_topic(self._group) if to_dlq else retry_topic(self._group))
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
            self._store.put(topic, 0, [encoded])
        else:
            levels = self._delay_levels()
            level = delay_level if delay_level > 0 else RETRY_BASE_LEVEL + msg.reconsume_times
            self._store.put_delayed(topic, 0, encoded, self._clock.now_ms() + levels[min(level, len(levels)) - 1])
        if self._tracer is not None:
            self._tracer.sent_back(msg, topic)
        return topic

    def _delay_levels(self) -> tuple[int, ...]:
        if not self._levels or time.monotonic() - self._levels_read_s > DELAY_LEVELS_TTL_S:
            self._levels, self._levels_read_s = delay_levels(self._store), time.monotonic()
        return self._levels

    def _ensure(self, topic: str) -> str:
        with self._lock:
            if topic not in self._ensured:
                self._store.ensure_topic(TopicConfig(topic, read_queues=1, write_queues=1))
                self._ensured.add(topic)
        return topic
