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

from mq.connection import Connection
from mq.consumer.puller import filter_args
from mq.consumer.registry import HEARTBEAT_INTERVAL_S, ClientInfo, Registry
from mq.consumer.retry import dlq_topic
from mq.consumer.start import DEFAULT_CONSUME_TIMESTAMP_AGO_MS
from mq.consumer.types import ConsumeFromWhere
from mq.errors import MQClientError
from mq.filter import MessageSelector
from mq.group import GroupConfig
from mq.message import Message, MessageExt
from mq.msgid import new_client_id
from mq.properties import DLQ_REASON, ORIGIN_MESSAGE_ID, RETRY_TOPIC
from mq.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.store import Store, codec
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
#: Longest ``await_duration_s``, seconds.
MAX_AWAIT_S = 60.0
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


def received_view(msg: MessageExt, attempt: int, visible_at: int) -> MessageView:
    """``msg`` as a received view with a receipt ``queue_id:offset:visible_at_ms:topic``."""
    view = MessageView.__new__(MessageView)
    view.__dict__.update(msg.__dict__)
    view.delivery_attempt = attempt
    view.receipt_handle = make_receipt(msg.topic, msg.queue_id, msg.queue_offset, visible_at)
    return view


def make_receipt(topic: str, queue_id: int, offset: int, visible_at_ms: int) -> str:
    """The receipt handle of a message handed out until ``visible_at_ms`` (read by :func:`parse_receipt`)."""
    return f"{queue_id}:{offset}:{visible_at_ms}:{topic}"


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
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
    ) -> None:
        self.group = check_group(group)
        if not subscriptions:
            raise MQClientError("a SimpleConsumer needs at least one subscription")
        if not isinstance(max_delivery_attempts, int) or isinstance(max_delivery_attempts, bool) or max_delivery_attempts < 1:
            raise MQClientError(f"max_delivery_attempts must be an int of at least 1, got {max_delivery_attempts!r}")
        wait = await_duration_s
        if not isinstance(wait, (int, float)) or isinstance(wait, bool) or not 0 <= wait <= MAX_AWAIT_S:
            raise MQClientError(f"await_duration_s must be in 0..{MAX_AWAIT_S:g} seconds, got {wait!r}")
        try:
            self.consume_from_where = ConsumeFromWhere(consume_from_where)
        except ValueError:
            raise MQClientError(f"consume_from_where must be a ConsumeFromWhere, got {consume_from_where!r}") from None
        self.subscriptions = {check_topic(t): MessageSelector.parse(e) for t, e in subscriptions.items()}
        self.await_duration_s = await_duration_s
        self.max_delivery_attempts = max_delivery_attempts
        self._conn = Connection(url, namespace)
        self._poll = Connection(url, namespace, socket_timeout_s=WAIT_SLICE_S + 5)
        self._store = Store(self._conn)
        self._poll_store = Store(self._poll)
        info = ClientInfo.of_this_process(
            client_id or new_client_id(), kind="simple", subscriptions={t: s.expression for t, s in self.subscriptions.items()}
        )
        self._registry = Registry(self._store, self.group, info)
        self._queues: list[MessageQueue] = []
        self._refreshed_s = 0.0
        self._beat_s = 0.0
        self._turn = itertools.count()
        self._started = False
        #: The group's config as of the last heartbeat (None: the group has none).
        self.group_config: GroupConfig | None = None

    def __repr__(self) -> str:
        return f"SimpleConsumer(group={self.group!r}, {self._conn!r})"

    def start(self) -> SimpleConsumer:
        """Register and fix the group's starting point on every queue it has not read yet: where
        ``consume_from_where`` says (the group's config wins) for a group new to a topic, the queue's
        first message for a queue added to a topic the group already reads.

        Raises:
            MQClientError: a subscribed topic does not exist (nothing is registered then).
        """
        self._heartbeat()  # reads the group's config first
        try:
            self._store.register_group(self.group)
            self._refresh_queues()
        except BaseException:
            self._registry.unregister()
            raise
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
            if time.monotonic() - self._beat_s >= HEARTBEAT_INTERVAL_S:
                self._heartbeat()
            if time.monotonic() - self._refreshed_s >= QUEUE_REFRESH_S:
                self._refresh_queues()
            paused = self.group_config is not None and not self.group_config.consume_enable
            views = [] if paused else self._receive_once(max_messages, int(invisible_duration_s * 1000))
            remaining = deadline - time.monotonic()
            if views or remaining <= 0:
                return views
            if paused:
                time.sleep(min(remaining, HEARTBEAT_INTERVAL_S))
            else:
                self._wait(min(remaining, WAIT_SLICE_S))

    def ack(self, view: MessageView) -> None:
        """Acknowledge ``view``: it is done and never handed out again.

        Raises:
            MQClientError: the receipt expired (the message was handed out again meanwhile).
        """
        if not self._ack_receipt(view, None):
            raise MQClientError(f"receipt of {view.msg_id} expired: it was handed out again after its invisible time")

    def change_invisible_duration(self, view: MessageView, invisible_duration_s: float) -> MessageView:
        """Make ``view`` invisible for ``invisible_duration_s`` from now; returns it with a new receipt.

        Raises:
            MQClientError: the receipt expired, or the duration is out of range.
        """
        _check_invisible(invisible_duration_s)
        visible_at = int(time.time() * 1000 + invisible_duration_s * 1000)
        if not self._ack_receipt(view, visible_at):
            raise MQClientError(f"receipt of {view.msg_id} expired: it was handed out again after its invisible time")
        return received_view(view, view.delivery_attempt, visible_at)

    # -- internals ------------------------------------------------------------------------------

    def _heartbeat(self) -> None:
        """Say this member is alive (``Admin.consumer_connections``) and read the group's config."""
        self.group_config = self._registry.heartbeat().config
        self._beat_s = time.monotonic()

    def _refresh_queues(self) -> None:
        queues = []
        for topic in self.subscriptions:
            config = self._store.topic(topic)
            if config is None:
                raise MQClientError(f"topic {topic!r} does not exist; create it with Admin.create_topic")
            queues += config.readable_queues()
        if set(queues) - set(self._queues):
            self._seed_cursors(queues)
        self._queues = queues
        self._refreshed_s = time.monotonic()

    def _seed_cursors(self, queues: list[MessageQueue]) -> None:
        where = self.group_config.consume_from_where if self.group_config is not None else self.consume_from_where
        seed_cursors(self._store, self.group, queues, where)

    def _receive_once(self, want: int, invisible_ms: int) -> list[MessageView]:
        views: list[MessageView] = []
        start = next(self._turn)
        for i in range(len(self._queues)):  # one queue at a time: nothing handed out beyond ``want``
            q = self._queues[(start + i) % len(self._queues)]
            ftype, fdata = filter_args(self.subscriptions[q.topic])
            handed = self._store.receive_simple(
                self.group,
                q,
                now_ms=int(time.time() * 1000),
                invisible_ms=invisible_ms,
                max_messages=want - len(views),
                max_attempts=self.max_delivery_attempts,
                filter_type=ftype,
                filter_data=fdata,
                max_scan=RECEIVE_MAX_SCAN,
            )
            for d in handed:
                if d.message is None:  # not a message (logged when decoding): acked so it is never handed out again
                    self._store.ack_simple(self.group, q, d.offset, d.visible_at_ms, None)
                    continue
                view = received_view(d.message, d.attempt, d.visible_at_ms)
                if d.dead:
                    self._dead_letter(view)
                else:
                    views.append(view)
            if len(views) >= want:
                break
        return views

    def _dead_letter(self, view: MessageView) -> None:
        dead_letter(self._store, self.group, view, "max delivery attempts")

    def _ack_receipt(self, view: MessageView, new_visible_at_ms: int | None) -> bool:
        queue, offset, visible_at = parse_receipt(view.receipt_handle)
        return self._store.ack_simple(self.group, queue, offset, visible_at, new_visible_at_ms)

    def _wait(self, seconds: float) -> None:
        """Block until a queue may have news, ``seconds`` at most (standalone: one XREAD over all logs)."""
        if self._conn.kind == "cluster":  # one XREAD cannot span slots: short pauses instead
            time.sleep(min(seconds, 0.05))
            return
        cursors = self._store.read_offsets(self.group, self._queues)
        self._poll_store.wait_for_any({q: cursors.get(q, 0) for q in self._queues}, int(seconds * 1000))


def seed_cursors(store: Store, group: str, queues: list[MessageQueue], where: ConsumeFromWhere) -> None:
    """Give ``group`` a cursor on every queue of ``queues`` it has none on (``HSETNX``, so members
    starting together agree): where ``where`` says when the group reads none of the topic's queues yet,
    else the queue's start — a topic that grew keeps nothing from the group."""
    cursors = store.read_offsets(group, queues)
    seeds: dict[MessageQueue, int] = {}
    for topic in dict.fromkeys(q.topic for q in queues):
        missing = [q.queue_id for q in queues if q.topic == topic and q not in cursors]
        if not missing:
            continue
        from_start = where is ConsumeFromWhere.FIRST_OFFSET or any(q.topic == topic for q in cursors)
        for qid, stats in store.queue_stats(topic, missing).items():
            mq = MessageQueue(topic, queues[0].broker_name, qid)
            if from_start:
                seeds[mq] = stats.min_offset
            elif where is ConsumeFromWhere.TIMESTAMP:
                ts = int(time.time() * 1000) - DEFAULT_CONSUME_TIMESTAMP_AGO_MS
                seeds[mq] = max(stats.min_offset, store.search_offset(topic, qid, ts))
            else:
                seeds[mq] = stats.max_offset
    if seeds:
        store.seed_offsets(group, seeds)


def dead_letter(store: Store, group: str, view: MessageView, reason: str) -> str:
    """Store a copy of ``view`` in ``%DLQ%<group>`` and acknowledge it; returns the DLQ topic."""
    topic = store.ensure_topic(TopicConfig(dlq_topic(group), read_queues=1, write_queues=1)).name
    system = {**view.system_properties, RETRY_TOPIC: view.topic, ORIGIN_MESSAGE_ID: view.msg_id, DLQ_REASON: reason}
    copy = Message(topic, view.body, view.tags, view.keys, view.properties)
    encoded = codec.encode(
        copy, view.msg_id, view.born_timestamp_ms, reconsume_times=view.delivery_attempt, system_properties=system
    )
    store.put(topic, 0, [encoded])
    queue, offset, visible_at = parse_receipt(view.receipt_handle)
    store.ack_simple(group, queue, offset, visible_at, None)
    log.info("message %s of %s went to %s after %d attempts", view.msg_id, view.topic, topic, view.delivery_attempt)
    return topic


def parse_receipt(handle: str) -> tuple[MessageQueue, int, int]:
    """The queue, offset and visible-at time (ms) a receipt handle names.

    Raises:
        MQClientError: ``handle`` is not a receipt handle this library issued.
    """
    try:
        qid, offset, visible_at, topic = handle.split(":", 3)
        return MessageQueue(check_topic(topic), DEFAULT_BROKER_NAME, int(qid)), int(offset), int(visible_at)
    except (ValueError, AttributeError, MQClientError):
        raise MQClientError(f"malformed receipt handle {handle!r}: pass the receipt_handle of a received MessageView") from None


def _check_invisible(seconds: float) -> None:
    if not MIN_INVISIBLE_S <= seconds <= MAX_INVISIBLE_S:
        raise MQClientError(f"invisible_duration_s must be in {MIN_INVISIBLE_S:g}..{MAX_INVISIBLE_S:g}, got {seconds!r}")
