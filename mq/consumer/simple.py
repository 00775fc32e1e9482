"""``SimpleConsumer``: receive, process, ack — each message invisible to the group's other receivers
until acked or until its invisible duration passes [RocketMQ 5 ``SimpleConsumer``].

All members of a group share all queues (no rebalance); the store hands out each message to one
receiver at a time (``receive-simple.lua``). A message not acked in time is handed out again with
``delivery_attempt + 1``; past ``max_delivery_attempts`` it goes to ``%DLQ%<group>``.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections.abc import Mapping
from types import TracebackType

from mq.connection import Connection, translate_errors
from mq.consumer.core import filter_args
from mq.consumer.offsets import read_group_offsets
from mq.consumer.registry import ClientInfo, Registry, new_client_id
from mq.consumer.retry import DLQ_REASON, ORIGIN_MESSAGE_ID, RETRY_TOPIC, dlq_topic
from mq.errors import MQClientError
from mq.filter import MessageSelector
from mq.keys import stream_id
from mq.message import Message, MessageExt
from mq.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.store import Store, codec, scripts
from mq.store.store import pairs
from mq.topic import TopicConfig
from mq.validation import check_group, check_topic

log = logging.getLogger("mq.consumer")

#: Shortest and longest invisible duration, seconds [RocketMQ 5: 10 s .. 12 h].
MIN_INVISIBLE_S, MAX_INVISIBLE_S = 10.0, 12 * 3600.0
#: Most messages one receive returns [RocketMQ 5: 32].
MAX_RECEIVE = 32
#: How often a receiving consumer re-reads its topics' queue counts, seconds (a topic may grow).
QUEUE_REFRESH_S = 5.0
#: Entries a receive may scan per queue past non-matching ones.
RECEIVE_MAX_SCAN = 1024
#: Longest single block while waiting for messages, seconds (so expiring invisibility is noticed).
WAIT_SLICE_S = 1.0


@dataclasses.dataclass(init=False, eq=True, repr=False)
class MessageView(MessageExt):
    """A received message: :class:`MessageExt` plus what ack needs.

    Attributes:
        receipt_handle: pass back to ``ack`` or ``change_invisible_duration`` (opaque).
        delivery_attempt: 1 the first time, then 2, 3, … each time it is handed out again.
    """

    receipt_handle: str
    delivery_attempt: int


def _view(msg: MessageExt, attempt: int, visible_at: int) -> MessageView:
    view = MessageView.__new__(MessageView)
    view.__dict__.update(msg.__dict__)
    view.delivery_attempt = attempt
    view.receipt_handle = f"{msg.queue_id}:{msg.queue_offset}:{visible_at}:{msg.topic}"
    return view


class SimpleConsumer:
    """Receives messages of ``subscriptions`` for ``group``.

    Args:
        group: consumer group (members share the work).
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix of the deployment.
        subscriptions: topic → tag expression or :class:`MessageSelector`.
        await_duration_s: how long ``receive`` waits for a message (long polling).
        max_delivery_attempts: deliveries before a message goes to the DLQ.
        client_id: this member's id.
    """

    def __init__(
        self,
        group: str,
        url: str | None = None,
        *,
        namespace: str = "mq",
        subscriptions: Mapping[str, str | MessageSelector],
        await_duration_s: float = 5.0,
        max_delivery_attempts: int = 16,
        client_id: str | None = None,
    ) -> None:
        self.group = check_group(group)
        if not subscriptions:
            raise MQClientError("a SimpleConsumer needs at least one subscription")
        if max_delivery_attempts < 1:
            raise MQClientError(f"max_delivery_attempts must be at least 1, got {max_delivery_attempts!r}")
        self.subscriptions = {check_topic(t): MessageSelector.parse(e) for t, e in subscriptions.items()}
        self.await_duration_s = await_duration_s
        self.max_delivery_attempts = max_delivery_attempts
        self._conn = Connection(url, namespace)
        self._poll = Connection(url, namespace, socket_timeout_s=WAIT_SLICE_S + 5)
        self._store = Store(self._conn)
        info = ClientInfo.of_this_process(client_id or new_client_id(), kind="simple",
                                          subscriptions={t: s.expression for t, s in self.subscriptions.items()})  # fmt: skip
        self._registry = Registry(self._store, self.group, info)
        self._queues: list[MessageQueue] = []
        self._refreshed_s = 0.0
        self._turn = itertools.count()
        self._started = False

    def __repr__(self) -> str:
        return f"SimpleConsumer(group={self.group!r}, {self._conn!r})"

    def start(self) -> SimpleConsumer:
        """Register and fix the group's starting point on every queue it has not read yet: new
        messages only for a group new to a topic, the queue's first message for a queue added to a
        topic the group already reads."""
        self._registry.register()
        self._refresh_queues()
        self._started = True
        return self

    def shutdown(self) -> None:
        """Leave the group; messages received and not acked reappear after their invisible time."""
        if self._started:
            self._registry.unregister()
            self._started = False
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
        if not self._started:
            raise MQClientError("the simple consumer is not started: call start() or use it as a context manager")
        if not 1 <= max_messages <= MAX_RECEIVE:
            raise MQClientError(f"max_messages must be in 1..{MAX_RECEIVE}, got {max_messages!r}")
        _check_invisible(invisible_duration_s)
        deadline = time.monotonic() + self.await_duration_s
        while True:
            if time.monotonic() - self._refreshed_s >= QUEUE_REFRESH_S:
                self._refresh_queues()
            views = self._receive_once(max_messages, int(invisible_duration_s * 1000))
            remaining = deadline - time.monotonic()
            if views or remaining <= 0:
                return views
            self._wait(min(remaining, WAIT_SLICE_S))

    def ack(self, view: MessageView) -> None:
        """Acknowledge ``view``: it is done and never handed out again.

        Raises:
            MQClientError: the receipt expired (the message was handed out again meanwhile).
        """
        if not self._ack_script(view, ""):
            raise MQClientError(f"receipt of {view.msg_id} expired: it was handed out again after its invisible time")

    def change_invisible_duration(self, view: MessageView, invisible_duration_s: float) -> MessageView:
        """Make ``view`` invisible for ``invisible_duration_s`` from now; returns it with a new receipt.

        Raises:
            MQClientError: the receipt expired, or the duration is out of range.
        """
        _check_invisible(invisible_duration_s)
        visible_at = int(time.time() * 1000 + invisible_duration_s * 1000)
        if not self._ack_script(view, str(visible_at)):
            raise MQClientError(f"receipt of {view.msg_id} expired: it was handed out again after its invisible time")
        return _view(view, view.delivery_attempt, visible_at)

    # -- internals ------------------------------------------------------------------------------

    def _refresh_queues(self) -> None:
        queues = []
        for topic in self.subscriptions:
            config = self._store.topic(topic)
            if config is None:
                raise MQClientError(f"topic {topic!r} does not exist; create it with Admin.create_topic")
            queues += [MessageQueue(topic, DEFAULT_BROKER_NAME, q) for q in range(config.read_queues) if config.readable(q)]
        if set(queues) - set(self._queues):
            self._seed_cursors(queues)
        self._queues = queues
        self._refreshed_s = time.monotonic()

    def _seed_cursors(self, queues: list[MessageQueue]) -> None:
        """Give the group a cursor on every queue of ``queues`` it has none on (``HSETNX``, so
        members starting together agree): the queue's end when the group reads none of the topic's
        queues yet, else the queue's start — a topic that grew keeps nothing from the group."""
        with translate_errors(self._conn.url, "starting a simple consumer"):
            cursors = read_group_offsets(self._store, self.group, queues)
            pipe = self._conn.client.pipeline(transaction=False)
            for topic in self.subscriptions:
                missing = [q.queue_id for q in queues if q.topic == topic and q not in cursors]
                if not missing:
                    continue
                reading = any(q.topic == topic for q in cursors)
                for qid, stats in self._store.queue_stats(topic, missing).items():
                    offsets = self._store.queue_keys(topic, qid).offsets
                    pipe.hsetnx(offsets, self.group, stats.min_offset if reading else stats.max_offset)
            pipe.execute()

    def _receive_once(self, want: int, invisible_ms: int) -> list[MessageView]:
        views: list[MessageView] = []
        start = next(self._turn)
        for i in range(len(self._queues)):  # one queue at a time: nothing handed out beyond ``want``
            q = self._queues[(start + i) % len(self._queues)]
            ftype, fdata = filter_args(self.subscriptions[q.topic])
            argv = [self.group, int(time.time() * 1000), invisible_ms, want - len(views), self.max_delivery_attempts,
                    ftype, fdata, RECEIVE_MAX_SCAN]  # fmt: skip
            keys = self._store.queue_keys(q.topic, q.queue_id).simple(self.group)
            with translate_errors(self._conn.url, f"receiving from {q}"):
                reply = scripts.run(self._conn.client, "receive-simple", keys, argv)
            for kind, offset, attempt, visible_at, fields in reply:
                msg = codec.decode(q.topic, q.queue_id, stream_id(int(offset)).encode(), pairs(fields))
                view = _view(msg, int(attempt), int(visible_at))
                if kind == b"d":
                    self._dead_letter(view)
                else:
                    views.append(view)
            if len(views) >= want:
                break
        return views

    def _dead_letter(self, view: MessageView) -> None:
        topic = self._store.ensure_topic(TopicConfig(dlq_topic(self.group), read_queues=1, write_queues=1)).name
        system = {**view.system_properties, RETRY_TOPIC: view.topic, ORIGIN_MESSAGE_ID: view.msg_id,
                  DLQ_REASON: "max delivery attempts"}  # fmt: skip
        copy = Message(topic, view.body, view.tags, view.keys, view.properties)
        self._store.put(topic, 0, [codec.encode(copy, view.msg_id, view.born_timestamp_ms,
                                                reconsume_times=view.delivery_attempt, system_properties=system)])  # fmt: skip
        self._ack_script(view, "")
        log.info("message %s of %s went to %s after %d attempts", view.msg_id, view.topic, topic, view.delivery_attempt)

    def _ack_script(self, view: MessageView, new_visible_at: str) -> bool:
        qid, offset, visible_at, topic = view.receipt_handle.split(":", 3)
        keys = self._store.queue_keys(topic, int(qid)).simple(self.group)[3:]
        with translate_errors(self._conn.url, f"acknowledging {view.msg_id}"):
            return bool(scripts.run(self._conn.client, "ack-simple", keys, [offset, visible_at, new_visible_at]))

    def _wait(self, seconds: float) -> None:
        """Block until a queue may have news, ``seconds`` at most (standalone: one XREAD over all logs)."""
        with translate_errors(self._conn.url, "waiting for messages"):
            cursors = self._cursors()
            if self._conn.kind == "cluster":  # one XREAD cannot span slots: short pauses instead
                time.sleep(min(seconds, 0.05))
                return
            streams = {self._store.queue_keys(q.topic, q.queue_id).log: stream_id(c - 1) for q, c in cursors.items()}
            self._poll.client.xread(streams, count=1, block=max(1, int(seconds * 1000)))

    def _cursors(self) -> dict[MessageQueue, int]:
        pipe = self._conn.client.pipeline(transaction=False)
        for q in self._queues:
            pipe.hget(self._store.queue_keys(q.topic, q.queue_id).offsets, self.group)
        return {q: int(c or 0) for q, c in zip(self._queues, pipe.execute())}


def _check_invisible(seconds: float) -> None:
    if not MIN_INVISIBLE_S <= seconds <= MAX_INVISIBLE_S:
        raise MQClientError(f"invisible_duration_s must be in {MIN_INVISIBLE_S:g}..{MAX_INVISIBLE_S:g}, got {seconds!r}")
