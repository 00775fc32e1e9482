"""The simple consumer's logic, written once for the sync :class:`mq.SimpleConsumer` and the asyncio
``mq.aio.SimpleConsumer`` (see :mod:`mq.consumer.simple` for the model): argument checks, the
heartbeat and the group's config, the queues and their cursors (seeded where ``consume_from_where``
says), one receive round over the queues, dead-lettering past ``max_delivery_attempts``, receipts.

:class:`SimpleCore`'s methods marked :class:`~mq.store.ops.operation` are generators of store
requests: :class:`SyncSimpleCore` runs them at once, :class:`AsyncSimpleCore` awaits them. The
facades only wait (a blocking read on their own connection, or a pause) between rounds.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import time
from collections.abc import Callable, Mapping

from mq.consumer.lite import LiteMember, is_lite_receipt, make_lite_receipt, parse_lite_receipt
from mq.consumer.priority import priority_order
from mq.consumer.puller import filter_args
from mq.consumer.registry import HEARTBEAT_INTERVAL_S, ClientInfo, Registry
from mq.consumer.retry import dlq_topic, original_topic, retry_topic
from mq.consumer.start import DEFAULT_CONSUME_TIMESTAMP_AGO_MS
from mq.consumer.types import ConsumeFromWhere
from mq.errors import MQClientError, StoreEvictedError, evicted_message
from mq.filter import MessageSelector
from mq.keys import stream_id
from mq.model.group import GroupConfig
from mq.model.message import Message, MessageExt
from mq.model.msgid import new_client_id
from mq.model.properties import DLQ_REASON, ORIGIN_MESSAGE_ID, RETRY_TOPIC
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.model.topic import TopicConfig
from mq.model.validation import RETRY_PREFIX, check_group, check_topic
from mq.observe.trace import TraceEvents
from mq.store import codec
from mq.store.base import StoreBase
from mq.store.clock import ClockOffset
from mq.store.connection import Connection
from mq.store.lite import LiteDelivery
from mq.store.ops import AsyncRunner, Op, SyncRunner, operation, share_client
from mq.store.store import StoreOps

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
#: Longest pause between receive rounds on a cluster (one XREAD cannot span slots), seconds.
CLUSTER_PAUSE_S = 0.05

#: Attribute of a received :class:`MessageView` holding when it was handed out (the store's clock,
#: epoch ms): where an ``ACK`` trace event's cost starts. Not a field: views compare and print without it.
RECEIVED_AT = "_received_ms"

#: What the group's retry topic is read with: every message (its copies were filtered when first read).
EVERY_TAG = MessageSelector.by_tag("*")

NOT_STARTED = "the simple consumer is not started: call start() or use it as a context manager"


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
    """``msg`` (as read from its queue) as a received view with a receipt
    ``queue_id:offset:visible_at_ms:topic`` naming that queue. A copy read from the group's retry topic
    (a dead letter resent by ``Admin.resend_dlq``) shows its original topic, as push listeners see it."""
    view = MessageView.__new__(MessageView)
    view.__dict__.update(msg.__dict__)
    view.delivery_attempt = attempt
    view.receipt_handle = make_receipt(msg.topic, msg.queue_id, msg.queue_offset, visible_at)
    view.topic = original_topic(msg)
    return view


def renewed_view(view: MessageView, visible_at: int) -> MessageView:
    """``view`` with a receipt for the same queue and offset, valid until ``visible_at`` (epoch ms)."""
    renewed = MessageView.__new__(MessageView)
    renewed.__dict__.update(view.__dict__)
    if is_lite_receipt(view.receipt_handle):
        lite = parse_lite_receipt(view.receipt_handle)
        renewed.receipt_handle = make_lite_receipt(lite.parent, lite.lite_topic, lite.offset, visible_at)
        return renewed
    queue, offset, _ = parse_receipt(view.receipt_handle)
    renewed.receipt_handle = make_receipt(queue.topic, queue.queue_id, offset, visible_at)
    return renewed


def lite_view(d: LiteDelivery, received_ms: int) -> MessageView:
    """A lite delivery as a received view (its ``topic`` the parent, ``lite_topic`` set)."""
    assert d.message is not None
    view = MessageView.__new__(MessageView)
    view.__dict__.update(d.message.__dict__)
    view.delivery_attempt = d.attempt
    view.receipt_handle = make_lite_receipt(d.message.topic, d.lite_topic, d.offset, d.visible_at_ms)
    setattr(view, RECEIVED_AT, received_ms)
    return view


def make_receipt(topic: str, queue_id: int, offset: int, visible_at_ms: int) -> str:
    """The receipt handle of a message handed out until ``visible_at_ms`` (read by :func:`parse_receipt`)."""
    return f"{queue_id}:{offset}:{visible_at_ms}:{topic}"


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


def check_invisible(seconds: float) -> None:
    """Raise MQClientError unless ``seconds`` is an allowed invisible duration."""
    if not MIN_INVISIBLE_S <= seconds <= MAX_INVISIBLE_S:
        raise MQClientError(f"invisible_duration_s must be in {MIN_INVISIBLE_S:g}..{MAX_INVISIBLE_S:g}, got {seconds!r}")


def check_receive(started: bool, max_messages: int, invisible_duration_s: float) -> None:
    """Raise MQClientError for a receive on a consumer not started, or with bad arguments."""
    if not started:
        raise MQClientError(NOT_STARTED)
    if not 1 <= max_messages <= MAX_RECEIVE:
        raise MQClientError(f"max_messages must be in 1..{MAX_RECEIVE}, got {max_messages!r}")
    check_invisible(invisible_duration_s)


def expired(view: MessageView) -> MQClientError:
    """The error of an ack or change whose receipt expired."""
    return MQClientError(f"receipt of {view.msg_id} expired: it was handed out again after its invisible time")


class SimpleSettings:
    """The constructor the sync and the asyncio simple consumers share (see :class:`mq.SimpleConsumer`
    for the arguments): checks them and makes the connections; each consumer's :meth:`_open` adds its
    stores and core."""

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
        trace: bool | None = None,
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
        self.client_id = client_id or new_client_id()
        self.trace = trace
        self._conn = Connection(url, namespace)
        self._poll = Connection(url, namespace, socket_timeout_s=WAIT_SLICE_S + 5)
        self._started = False
        self._open()

    def _open(self) -> None:
        """Make the consumer's stores and core on ``self._conn`` and ``self._poll``."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(group={self.group!r}, {self._conn!r})"


class SimpleCore:
    """What a simple consumer knows and does between waits, for either I/O style.

    Args:
        store: the consumer's store (:class:`~mq.store.Store` or :class:`~mq.store.aio.AsyncStore`).
        settings: the consumer (its checked arguments).
        trace: where the message trace's events go (the facade's tracer writes them).
    """

    def __init__(self, store: StoreOps, settings: SimpleSettings, trace: TraceEvents) -> None:
        self.store = store
        self.trace = trace
        share_client(self, store)
        self.settings = settings
        self.group = settings.group
        info = ClientInfo.of_this_process(
            settings.client_id, kind="simple", subscriptions={t: s.expression for t, s in settings.subscriptions.items()}
        )
        self.registry = Registry(store, self.group, info)  # type: ignore[arg-type]  # builds operations only
        self.queues: list[MessageQueue] = []
        #: Priority levels of the topics read that have them (D142).
        self.levels: dict[str, int] = {}
        self._refreshed_s = 0.0
        self._beat_s = 0.0
        self._turn = itertools.count()
        #: Invisibility times are on the store's clock (a skewed host hands nothing out early or late).
        self.clock = ClockOffset()
        #: The group's config as of the last heartbeat (None: the group has none).
        self.group_config: GroupConfig | None = None
        #: This member's lite topics (``subscribe_lite``).
        self.lite = LiteMember(store, self.group, settings.client_id)

    @operation
    def start(self) -> Op[None]:
        """Register and fix the group's starting point on every queue it has not read yet (see
        :meth:`mq.SimpleConsumer.start`); nothing stays registered when a subscribed topic is missing."""
        yield from self._heartbeat()  # reads the group's config first
        try:
            yield from StoreOps.register_group.op(self.store, self.group)
            yield from self._refresh_queues()
        except BaseException:
            yield from self.registry.unregister()
            raise

    @operation
    def unregister(self) -> Op[None]:
        """Leave the group at once (its lite topics go to the next member that beats)."""
        yield from self.lite.leave()
        yield from self.registry.unregister()

    @operation
    def subscribe_lite(self, parent: str, lite_topic: str) -> Op[None]:
        """Consume lite topic ``lite_topic`` of lite parent ``parent`` from now on (see
        :meth:`mq.SimpleConsumer.subscribe_lite`)."""
        yield from self.lite.subscribe(parent, lite_topic, (yield from self.clock.now_op(self.store)))

    @operation
    def unsubscribe_lite(self, parent: str, lite_topic: str) -> Op[None]:
        """Stop consuming lite topic ``lite_topic`` of ``parent``."""
        yield from self.lite.unsubscribe(parent, lite_topic)

    @operation
    def wait_plan(self, seconds: float, cluster: bool) -> Op[tuple[dict[str, str] | None, float]]:
        """How a member with lite topics waits for news, up to ``seconds``: ``(streams, block_s)`` — one
        ``XREAD`` over its wake streams and, standalone, its queues' logs (stream → id to read after);
        streams None: a pause (a cluster member with lite topics of several parents: their wake streams
        are in different slots). ``block_s`` ends early when an invisible time passes meanwhile."""
        block = seconds
        if self.lite.next_ready_ms is not None:
            now_ms = yield from self.clock.now_op(self.store)
            block = max(0.0, min(block, (self.lite.next_ready_ms - now_ms) / 1000))
        streams = self.lite.wake_streams()
        if cluster:
            return (None, min(block, CLUSTER_PAUSE_S)) if len(streams) > 1 else (streams, block)
        for q, c in (yield from SimpleCore.cursors.op(self)).items():
            streams[self.store.queue_keys(q.topic, q.queue_id).log] = stream_id(c - 1)
        return streams, block

    @operation
    def round(self, max_messages: int, invisible_duration_s: float) -> Op[tuple[list[MessageView], bool]]:
        """One receive round: heartbeat and queue refresh when due, then up to ``max_messages``
        messages unless the group is paused; ``(views, paused)``."""
        if time.monotonic() - self._beat_s >= HEARTBEAT_INTERVAL_S:
            yield from self._heartbeat()
        if time.monotonic() - self._refreshed_s >= QUEUE_REFRESH_S:
            yield from self._refresh_queues()
        paused = self.group_config is not None and not self.group_config.consume_enable
        if paused:
            return [], True
        return (yield from self._receive_once(max_messages, int(invisible_duration_s * 1000))), False

    @staticmethod
    def pause_s(paused: bool, remaining_s: float) -> float:
        """How long to wait before the next round (a paused group: until the next heartbeat)."""
        return min(remaining_s, HEARTBEAT_INTERVAL_S if paused else WAIT_SLICE_S)

    @operation
    def cursors(self) -> Op[dict[MessageQueue, int]]:
        """The group's cursor on each queue, for a blocking wait for news past them."""
        cursors = yield from StoreOps.read_offsets.op(self.store, self.group, self.queues)
        return {q: cursors.get(q, 0) for q in self.queues}

    @operation
    def ack(self, view: MessageView) -> Op[None]:
        """Acknowledge ``view`` (MQClientError when its receipt expired); traced as a ``consume`` event
        ``ACK`` from its receipt to now."""
        if not (yield from self._ack_receipt(view, None)):
            raise expired(view)
        if is_lite_receipt(view.receipt_handle):
            return  # the message trace lives with a queue: lite topics have none
        if (yield from self.trace.active_op(self.store)):
            now_ms = yield from self.clock.now_op(self.store)
            received_ms = getattr(view, RECEIVED_AT, now_ms)
            queue = parse_receipt(view.receipt_handle)[0]
            self.trace.delivery_ended(queue, view, "consume", "ACK", view.delivery_attempt, received_ms, now_ms - received_ms)

    @operation
    def change_invisible_duration(self, view: MessageView, invisible_duration_s: float) -> Op[MessageView]:
        """Make ``view`` invisible for ``invisible_duration_s`` from now; returns it with a new receipt."""
        check_invisible(invisible_duration_s)
        visible_at = (yield from self.clock.now_op(self.store)) + int(invisible_duration_s * 1000)
        if not (yield from self._ack_receipt(view, visible_at)):
            raise expired(view)
        return renewed_view(view, visible_at)

    # -- internals ------------------------------------------------------------------------------

    def _heartbeat(self) -> Op[None]:
        """Say this member is alive (``Admin.consumer_connections``, and on its lite parents, taking the
        lite topics of members that stopped) and read the group's config."""
        self.group_config = (yield from self.registry.heartbeat()).config
        if self.lite.parents:
            yield from self.lite.beat((yield from self.clock.now_op(self.store)))
        self._beat_s = time.monotonic()

    def _refresh_queues(self) -> Op[None]:
        queues = []
        configs = []
        for topic in self.settings.subscriptions:
            config = yield from StoreOps.topic.op(self.store, topic)
            if config is None:
                if (yield from StoreOps.topic_evicted.op(self.store, topic)):
                    raise StoreEvictedError(evicted_message(f"topic {topic!r} has stored queues but no config", topic))
                raise MQClientError(f"topic {topic!r} does not exist; create it with Admin.create_topic")
            queues += config.readable_queues()
            configs.append(config)
        retry = yield from StoreOps.topic.op(self.store, retry_topic(self.group))
        if retry is not None:  # dead letters resent to the group (``Admin.resend_dlq``) come back here
            queues += retry.readable_queues()
            configs.append(retry)
        self.levels = {c.name: c.priority_levels for c in configs if c.priority_levels}
        if set(queues) - set(self.queues):
            yield from self._seed_cursors(queues)
        self.queues = queues
        self._refreshed_s = time.monotonic()

    def _seed_cursors(self, queues: list[MessageQueue]) -> Op[None]:
        where = self.group_config.consume_from_where if self.group_config is not None else self.settings.consume_from_where
        yield from seed_cursors_op(self.store, self.group, queues, where)

    def _receive_once(self, want: int, invisible_ms: int) -> Op[list[MessageView]]:
        now_ms = yield from self.clock.now_op(self.store)
        traced = yield from self.trace.active_op(self.store)
        subscriptions = self.settings.subscriptions
        views = yield from receive_round_op(
            self.store,
            self.group,
            self.queues,
            start=next(self._turn),
            want=want,
            now_ms=now_ms,
            invisible_ms=invisible_ms,
            max_attempts=self.settings.max_delivery_attempts,
            filter_of=lambda q: filter_args(subscriptions.get(q.topic, EVERY_TAG)),
            trace=self.trace if traced else None,
            levels=self.levels,
        )
        if self.lite.parents and len(views) < want:
            lite = yield from self.lite.receive(want - len(views), now_ms, invisible_ms, self.settings.max_delivery_attempts)
            views += [lite_view(d, now_ms) for d in lite]
        return views

    def _ack_receipt(self, view: MessageView, new_visible_at_ms: int | None) -> Op[bool]:
        if is_lite_receipt(view.receipt_handle):
            now_ms = yield from self.clock.now_op(self.store)
            return (yield from self.lite.ack(parse_lite_receipt(view.receipt_handle), new_visible_at_ms, now_ms))
        queue, offset, visible_at = parse_receipt(view.receipt_handle)
        return bool((yield from StoreOps.ack_simple.op(self.store, self.group, queue, offset, visible_at, new_visible_at_ms)))


def seed_cursors_op(store: StoreOps, group: str, queues: list[MessageQueue], where: ConsumeFromWhere) -> Op[None]:
    """Give ``group`` a cursor on every queue of ``queues`` it has none on (``HSETNX``, so members
    starting together agree): where ``where`` says when the group reads none of the topic's queues yet,
    else the queue's start — a topic that grew keeps nothing from the group (an operation)."""
    cursors = yield from StoreOps.read_offsets.op(store, group, queues)
    seeds: dict[MessageQueue, int] = {}
    for topic in dict.fromkeys(q.topic for q in queues):
        missing = [q.queue_id for q in queues if q.topic == topic and q not in cursors]
        if not missing:
            continue
        from_start = (
            where is ConsumeFromWhere.FIRST_OFFSET or topic.startswith(RETRY_PREFIX) or any(q.topic == topic for q in cursors)
        )
        for qid, stats in (yield from StoreOps.queue_stats.op(store, topic, missing)).items():
            mq = MessageQueue(topic, queues[0].broker_name, qid)
            if from_start:
                seeds[mq] = stats.min_offset
            elif where is ConsumeFromWhere.TIMESTAMP:
                ts = (yield from StoreBase.server_time_ms.op(store)) - DEFAULT_CONSUME_TIMESTAMP_AGO_MS
                seeds[mq] = max(stats.min_offset, (yield from StoreOps.search_offset.op(store, topic, qid, ts)))
            else:
                seeds[mq] = stats.max_offset
    if seeds:
        yield from StoreOps.seed_offsets.op(store, group, seeds)


def receive_round_op(
    store: StoreOps,
    group: str,
    queues: list[MessageQueue],
    *,
    start: int,
    want: int,
    now_ms: int,
    invisible_ms: int,
    max_attempts: int,
    filter_of: Callable[[MessageQueue], tuple[str, str]],
    fifo: bool = False,
    trace: TraceEvents | None = None,
    levels: Mapping[str, int] | None = None,
) -> Op[list[MessageView]]:
    """One receive round for a simple-consumer group (an operation, for the simple consumers and the
    RocketMQ 5 endpoint): up to ``want`` messages handed out from ``queues``, one queue at a time from
    the ``start``-th (round-robin), invisible for ``invisible_ms``; messages past ``max_attempts``
    deliveries go to the DLQ, entries that are not messages are acked and passed by.

    Args:
        now_ms: the store's clock, epoch ms.
        filter_of: a queue's ``(filter type, filter data)`` (see :func:`mq.consumer.puller.filter_args`).
        fifo: hand out message groups in order (receive-fifo.lua).
        trace: record ``INVISIBLE_TIMEOUT`` and ``dlq`` events here (None: not traced).
        levels: priority levels of the topics that have them: their higher levels' queues are read
            first (:func:`mq.consumer.priority.priority_order`, D142).

    Raises:
        MQClientError: ``fifo`` with a priority topic (priority reorders across queues).
    """
    if fifo and levels and any(q.topic in levels for q in queues):
        raise MQClientError("a priority topic cannot be consumed in FIFO order: priority reorders messages (D142)")
    views: list[MessageView] = []
    for q in priority_order(queues, levels or {}, start):  # one queue at a time: nothing handed out beyond ``want``
        ftype, fdata = filter_of(q)
        handed = yield from StoreOps.receive_simple.op(
            store,
            group,
            q,
            now_ms=now_ms,
            invisible_ms=invisible_ms,
            max_messages=want - len(views),
            max_attempts=max_attempts,
            filter_type=ftype,
            filter_data=fdata,
            max_scan=RECEIVE_MAX_SCAN,
            fifo=fifo,
        )
        for d in handed:
            if d.message is None:  # not a message (logged when decoding): acked so it is never handed out again
                yield from StoreOps.ack_simple.op(store, group, q, d.offset, d.visible_at_ms, None)
                continue
            view = received_view(d.message, d.attempt, d.visible_at_ms)
            setattr(view, RECEIVED_AT, now_ms)
            if d.dead:
                dlq = yield from dead_letter_op(store, group, view, "max delivery attempts")
                if trace is not None:
                    trace.delivery_ended(q, view, "dlq", dlq, d.attempt, now_ms, 0.0)
                continue
            if trace is not None and d.attempt > 1:  # the delivery before this one was not acked in time
                trace.delivery_ended(q, view, "consume", "INVISIBLE_TIMEOUT", d.attempt - 1, now_ms, 0.0)
            views.append(view)
        if len(views) >= want:
            break
    return views


def dead_letter_op(store: StoreOps, group: str, view: MessageView, reason: str) -> Op[str]:
    """Store a copy of ``view`` in ``%DLQ%<group>`` and acknowledge it; returns the DLQ topic (an operation)."""
    config = TopicConfig(dlq_topic(group), read_queues=1, write_queues=1)
    topic = (yield from StoreOps.ensure_topic.op(store, config)).name
    system = {**view.system_properties, RETRY_TOPIC: original_topic(view), ORIGIN_MESSAGE_ID: view.msg_id, DLQ_REASON: reason}
    copy = Message(topic, view.body, view.tags, view.keys, view.properties)
    encoded = codec.encode(
        copy, view.msg_id, view.born_timestamp_ms, reconsume_times=view.delivery_attempt, system_properties=system
    )
    yield from StoreOps.put.op(store, topic, 0, [encoded], copies=True)
    queue, offset, visible_at = parse_receipt(view.receipt_handle)
    yield from StoreOps.ack_simple.op(store, group, queue, offset, visible_at, None)
    log.info("message %s of %s went to %s after %d attempts", view.msg_id, view.topic, topic, view.delivery_attempt)
    return topic


class SyncSimpleCore(SimpleCore, SyncRunner):
    """:class:`SimpleCore` run at once."""


class AsyncSimpleCore(SimpleCore, AsyncRunner):
    """:class:`SimpleCore` awaited."""


def remaining_s(deadline: float) -> float:
    """Seconds left until ``deadline`` (monotonic s)."""
    return deadline - time.monotonic()
