"""``SimpleConsumer``: receive, process, ack — each message invisible to the group's other receivers
until acked or until its invisible duration passes [RocketMQ 5 ``SimpleConsumer``].

All members of a group share all queues (no rebalance); the store hands out each message to one
receiver at a time (``receive-simple.lua``). A message not acked in time is handed out again with
``delivery_attempt + 1``; past ``max_delivery_attempts`` it goes to ``%DLQ%<group>``.

The logic is :mod:`mq.consumer.simple_core`'s, shared with ``mq.aio.SimpleConsumer``.
"""

from __future__ import annotations

import time
from types import TracebackType

from mq.consumer.simple_core import (
    CLUSTER_PAUSE_S,
    MAX_AWAIT_S,
    MAX_INVISIBLE_S,
    MAX_RECEIVE,
    MIN_INVISIBLE_S,
    QUEUE_REFRESH_S,
    RECEIVE_MAX_SCAN,
    WAIT_SLICE_S,
    MessageView,
    SimpleSettings,
    SyncSimpleCore,
    check_receive,
    make_receipt,
    parse_receipt,
    received_view,
    remaining_s,
)
from mq.model.group import GroupConfig
from mq.observe.trace import Tracer
from mq.store import Store

__all__ = [
    "MAX_AWAIT_S",
    "MAX_INVISIBLE_S",
    "MAX_RECEIVE",
    "MIN_INVISIBLE_S",
    "QUEUE_REFRESH_S",
    "RECEIVE_MAX_SCAN",
    "WAIT_SLICE_S",
    "MessageView",
    "SimpleConsumer",
    "make_receipt",
    "parse_receipt",
    "received_view",
]


class SimpleConsumer(SimpleSettings):
    """Receives messages of ``subscriptions`` for ``group``.

    Args:
        group: consumer group (members share the work).
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix of the deployment.
        subscriptions: topic → tag expression or :class:`MessageSelector`.
        await_duration_s: how long ``receive`` waits for a message (long polling).
        max_delivery_attempts: deliveries before a message goes to the DLQ.
        client_id: this member's id.
        consume_from_where: where a group new to a topic starts (the group's config wins).
        trace: record each acknowledgement, each delivery not acked in time and each dead letter in
            the message trace (``Admin.message_trace``); None follows the namespace
            (``Admin.set_trace``), off by default.
    """

    def _open(self) -> None:
        self._store = Store(self._conn)
        self._poll_store = Store(self._poll)
        self._tracer = Tracer(self._store, self.group, self.client_id, self.trace)
        self._core = SyncSimpleCore(self._store, self, self._tracer)

    @property
    def group_config(self) -> GroupConfig | None:
        """The group's config as of the last heartbeat (None: the group has none)."""
        return self._core.group_config

    def start(self) -> SimpleConsumer:
        """Register and fix the group's starting point on every queue it has not read yet: where
        ``consume_from_where`` says (the group's config wins) for a group new to a topic, the queue's
        first message for a queue added to a topic the group already reads.

        Raises:
            MQClientError: a subscribed topic does not exist (nothing is registered then).
            StoreEvictedError: a subscribed topic's config is gone while its queues are stored (Redis
                evicted it; nothing is registered then).
        """
        self._core.start()
        self._started = True
        return self

    def shutdown(self) -> None:
        """Leave the group; messages received and not acked reappear after their invisible time."""
        if self._started:
            self._core.unregister()
            self._started = False
        self._tracer.close()
        self._conn.close()
        self._poll.close()

    def __enter__(self) -> SimpleConsumer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.shutdown()

    def receive(self, max_messages: int = 16, invisible_duration_s: float = 30.0) -> list[MessageView]:
        """Up to ``max_messages`` messages, waiting up to ``await_duration_s`` for the first one.

        Each stays invisible to the group's other receivers for ``invisible_duration_s`` (10 s .. 12 h).
        """
        check_receive(self._started, max_messages, invisible_duration_s)
        deadline = time.monotonic() + self.await_duration_s
        while True:
            views, paused = self._core.round(max_messages, invisible_duration_s)
            if views or remaining_s(deadline) <= 0:
                return views
            self._wait(self._core.pause_s(paused, remaining_s(deadline)), paused)

    def subscribe_lite(self, parent: str, lite_topic: str) -> None:
        """Consume lite topic ``lite_topic`` of lite parent ``parent`` (``Admin.create_topic(parent,
        lite=True)``) from now on, whether it exists yet or not [RIP-83]: ``receive`` hands out its
        messages in order, from its first stored one for a group new to it. In a group, one member
        consumes a lite topic at a time: the one that subscribed it last; when that member stops
        (no ``receive`` or ``ack`` for ``LITE_MEMBER_TIMEOUT_S``, or ``shutdown``), another member of
        the group takes its lite topics. ``receive`` wakes on a message to any of them without
        polling each.

        Raises:
            MQClientError: ``parent`` is not a lite parent, or a name is invalid (nothing is written).
        """
        self._core.subscribe_lite(parent, lite_topic)

    def unsubscribe_lite(self, parent: str, lite_topic: str) -> None:
        """Stop consuming lite topic ``lite_topic`` of ``parent``; the group keeps its position there
        (until the lite topic expires), so a later subscriber goes on from it."""
        self._core.unsubscribe_lite(parent, lite_topic)

    def ack(self, view: MessageView) -> None:
        """Acknowledge ``view``: it is done and never handed out again.

        Raises:
            MQClientError: the receipt expired (the message was handed out again meanwhile).
        """
        self._core.ack(view)

    def change_invisible_duration(self, view: MessageView, invisible_duration_s: float) -> MessageView:
        """Make ``view`` invisible for ``invisible_duration_s`` from now; returns it with a new receipt.

        Raises:
            MQClientError: the receipt expired, or the duration is out of range.
        """
        return self._core.change_invisible_duration(view, invisible_duration_s)

    def _wait(self, seconds: float, paused: bool) -> None:
        """Block until a queue may have news, ``seconds`` at most (standalone: one XREAD over all logs)."""
        if not paused and self._core.lite.parents:  # its wake streams, and its queues' logs when standalone
            streams, block_s = self._core.wait_plan(seconds, self._conn.kind == "cluster")
            if streams is None or block_s <= 0:
                time.sleep(block_s)
            else:
                self._poll_store.wait_lite(streams, int(block_s * 1000))
            return
        if paused or self._conn.kind == "cluster":  # one XREAD cannot span slots: short pauses instead
            time.sleep(seconds if paused else min(seconds, CLUSTER_PAUSE_S))
            return
        self._poll_store.wait_for_any(self._core.cursors(), int(seconds * 1000))
