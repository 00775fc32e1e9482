"""The producer's logic, written once for the sync :class:`mq.Producer` and the asyncio
``mq.aio.Producer``: checking and encoding a send, delay levels on the store's clock, routes, the
queue choice (explicit queue, selector, round-robin with latency fault tolerance), retries across
nodes, big batches in bounded put calls, and the results of pipelined sends.

:class:`SendCore`'s methods marked :class:`~mq.store.ops.operation` are generators of store requests
(:mod:`mq.store.ops`): :class:`SyncSendCore` runs them at once, :class:`AsyncSendCore` awaits them.
Nothing here opens a connection or starts a thread; a pause between retries is a :class:`~mq.store.ops.Sleep`
request its driver carries out.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any, Literal

from mq.errors import (
    MessageFencedError,
    MQBrokerError,
    MQClientError,
    MQError,
    QueueNotWritableError,
    ReplicaAckTimeout,
    StoreEvictedError,
    TopicNotFoundError,
)
from mq.model.message import Duplicate, Message, SendResult, SendStatus
from mq.model.msgid import new_msg_id
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.model.recall import make_handle
from mq.model.timer import DelayLevels, due_time_ms
from mq.model.validation import DEFAULT_MAX_MESSAGE_SIZE, check_batch, check_group, check_message
from mq.observe import metrics
from mq.observe.trace import TraceEvents
from mq.producer.fault import LatencyFaultTolerance
from mq.producer.request import Selector, SendRequest
from mq.producer.route import RouteCache, TopicRoute, no_levels
from mq.producer.selectors import MessageQueueSelector, consistent_hash, java_hash
from mq.store import codec
from mq.store.clock import ClockOffset
from mq.store.connection import (
    DEFAULT_SOCKET_TIMEOUT_S,
    Connection,
    is_out_of_memory,
    is_refused,
    is_unreachable,
)
from mq.store.ops import AsyncRunner, Op, Sleep, SyncRunner, operation, share_client
from mq.store.replication import SyncReplicas
from mq.store.store import StoreOps

log = logging.getLogger("mq.producer")

#: Total time budget of one sync send across retries, seconds [RocketMQ ``sendMsgTimeout`` 3000 ms].
DEFAULT_SEND_TIMEOUT_S = 3.0
#: Extra attempts after a failed sync send [RocketMQ ``retryTimesWhenSendFailed``].
DEFAULT_RETRY_TIMES = 2
#: First pause of a send while no master is known through Sentinel, seconds (doubled at each failure).
FAILOVER_BACKOFF_S = 0.05
#: Longest such pause, seconds.
FAILOVER_BACKOFF_MAX_S = 0.25
#: How long a retry's fence keeps a message id out of the queue of an attempt whose outcome was
#: unknown, ms: far longer than any written command can wait to run (D140).
RETRY_FENCE_TTL_MS = 600_000

_INF = float("inf")

NOT_STARTED = "the producer is not started: call start() or use it as a context manager"

#: Where a send goes: its explicit ``queue``, or its ``selector`` and ``arg`` (all None: round-robin).
Where = tuple[MessageQueue | None, Selector | None, Any]
#: The trace context a send carries in its message's properties (None: none).
Carried = dict[str, str] | None
#: A prepared send: its request and the queue of its pipelined attempt (None: delayed, sent on its own).
Prepared = tuple[SendRequest, MessageQueue | None]


class SendCore:
    """What a producer knows and decides, for either I/O style.

    Args:
        store: the producer's store (:class:`~mq.store.Store` or :class:`~mq.store.aio.AsyncStore`).
        send_latency_fault_enable, retry_times_when_send_failed, max_message_size: as :class:`mq.Producer`.
    """

    def __init__(
        self,
        store: StoreOps,
        *,
        send_latency_fault_enable: bool = False,
        retry_times_when_send_failed: int = DEFAULT_RETRY_TIMES,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
    ) -> None:
        self.check_options(retry_times_when_send_failed, max_message_size)
        self.send_latency_fault_enable = send_latency_fault_enable
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.max_message_size = max_message_size
        self.store = store
        share_client(self, store)
        self.routes = RouteCache(store)
        self.fault = LatencyFaultTolerance()
        self._levels = DelayLevels()
        self._clock = ClockOffset()

    @staticmethod
    def check_options(retry_times_when_send_failed: int, max_message_size: int) -> None:
        """Raise MQClientError for a bad retry count or size limit."""
        if not isinstance(retry_times_when_send_failed, int) or retry_times_when_send_failed < 0:
            raise MQClientError(f"retry_times_when_send_failed must be an int >= 0, got {retry_times_when_send_failed!r}")
        if not isinstance(max_message_size, int) or max_message_size < 1:
            raise MQClientError(f"max_message_size must be a positive int, got {max_message_size!r}")

    # -- operations -----------------------------------------------------------------------------

    @operation
    def route(self, topic: str) -> Op[TopicRoute]:
        """The route of ``topic`` (cached; see :class:`RouteCache`)."""
        return (yield from self.routes.get(topic))

    @operation
    def now_ms(self) -> Op[int]:
        """The store's clock, epoch ms (one ``TIME`` round trip a minute)."""
        return (yield from self._clock.now_op(self.store))

    @operation
    def due_ms(self, msg: Message) -> Op[int | None]:
        """Check ``msg``; returns its due time (epoch ms, the store's clock) when it is delayed."""
        check_message(msg, self.max_message_size)
        if msg.deliver_time_ms is not None:
            return msg.deliver_time_ms
        if msg.delay_level:
            levels = yield from self._levels.op(self.store)
            return due_time_ms(msg, levels, now_ms=(yield from SendCore.now_ms.op(self)))
        return None

    def request_at_once(self, msg: Message, where: Where, timeout_s: float, oneway: bool, carried: Carried) -> SendRequest | None:
        """:meth:`request` without the store (``where``: its ``queue, selector, arg``), or None when it
        needs it: a message with a delay level is due on the store's clock. Checks the input as
        :meth:`request` does.

        The common path of every send, as a plain call: run as an operation (generators and their
        driver) it cost a few microseconds more a send (D49)."""
        check_timeout(timeout_s)
        check_message(msg, self.max_message_size)
        if msg.deliver_time_ms is None and msg.delay_level:
            return None
        return self._new_request(msg, msg.deliver_time_ms, where, timeout_s, oneway, carried)

    @operation
    def request(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: Selector | None,
        arg: Any,
        timeout_s: float,
        *,
        oneway: bool = False,
        carried: dict[str, str] | None = None,
    ) -> Op[SendRequest]:
        """The request of one checked message (raises MQClientError for bad input, before any write);
        ``carried``: the trace context stored with it."""
        where = (queue, selector, arg)
        request = self.request_at_once(msg, where, timeout_s, oneway, carried)
        if request is None:  # a delay level: its due time on the store's clock
            due_ms = yield from SendCore.due_ms.op(self, msg)
            request = self._new_request(msg, due_ms, where, timeout_s, oneway, carried)
        return request

    def _new_request(
        self, msg: Message, due_ms: int | None, where: Where, timeout_s: float, oneway: bool, carried: Carried
    ) -> SendRequest:
        """The request of ``msg`` (checked), due at ``due_ms`` (epoch ms; None: at once)."""
        now_ms = int(time.time() * 1000)
        msg_id = new_msg_id(now_ms)
        fields = codec.encode(msg, msg_id, now_ms, extra_properties=carried)
        queue, selector, arg = where
        deadline = time.monotonic() + timeout_s
        # the message is kept only for a selector to see (a send in flight holds no more than it needs)
        first = msg if selector is not None else None
        request = SendRequest(
            msg.topic,
            fields,
            msg_id,
            deadline,
            first,
            queue,
            selector,
            arg,
            due_ms,
            oneway,
            dedup=msg.dedup_id,
            priority=msg.priority,
        )
        if msg.lite_topic is not None:
            request.lite = msg.lite_topic
        return request

    def prepare_at_once(self, msg: Message, where: Where, timeout_s: float, oneway: bool, carried: Carried) -> Prepared | None:
        """:meth:`prepare` without the store, or None when it needs it (a delay level, or a route
        not cached): the common path as a plain call (see :meth:`request_at_once`)."""
        request = self.request_at_once(msg, where, timeout_s, oneway, carried)
        if request is None:
            return None
        if request.due_ms is not None or request.lite is not None:
            return request, None
        route = self.routes.cached(request.topic)
        return None if route is None else (request, self.queue_of(route, request))

    @operation
    def prepare(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: Selector | None,
        arg: Any,
        timeout_s: float,
        *,
        oneway: bool = False,
        carried: dict[str, str] | None = None,
    ) -> Op[Prepared]:
        """:meth:`request` and, unless the message is delayed (its own script call), the queue its
        pipelined attempt goes to (:meth:`pipeline_queue`) — one operation for the common path."""
        prepared = self.prepare_at_once(msg, (queue, selector, arg), timeout_s, oneway, carried)
        if prepared is not None:
            return prepared
        request = yield from SendCore.request.op(self, msg, queue, selector, arg, timeout_s, oneway=oneway, carried=carried)
        if request.due_ms is not None or request.lite is not None:
            return request, None
        return request, (yield from SendCore.pipeline_queue.op(self, request))

    def batch_request(
        self, msgs: Sequence[Message], queue: MessageQueue | None, timeout_s: float, carried: dict[str, str] | None
    ) -> SendRequest:
        """The request of a batch (raises MQClientError for bad input: mixed topics, delays, size)."""
        check_timeout(timeout_s)
        topic = check_batch(msgs, self.max_message_size)
        ids = [new_msg_id() for _ in msgs]
        encoded = [codec.encode(m, i, extra_properties=carried) for m, i in zip(msgs, ids)]
        deadline = time.monotonic() + timeout_s
        return SendRequest(
            topic, encoded[0], ",".join(ids), deadline, msgs[0], queue=queue, batch=encoded, priority=msgs[0].priority
        )

    @operation
    def pipeline_queue(self, request: SendRequest) -> Op[MessageQueue]:
        """The queue a pipelined (first) attempt of ``request`` goes to."""
        return self.queue_of((yield from self.routes.get(request.topic)), request)

    def queue_of(self, route: TopicRoute, request: SendRequest) -> MessageQueue:
        """The queue a pipelined (first) attempt of ``request`` goes to on ``route``."""
        if route.config.lite:
            raise MQClientError(lite_only(request.topic))
        if request.queue is None and request.selector is None and request.dedup is None and not self.send_latency_fault_enable:
            return route.next_queue(request.priority)  # round-robin, as select_default (once a send: no two calls for it)
        return self.fixed_queue(route, request) or self.select_default(route, None, request.priority)

    @operation
    def send(self, request: SendRequest) -> Op[SendResult]:
        """Run ``request`` with retries (the direct path, and a pipelined send's fallback).

        A delayed message (``due_ms``) waits in its queue's timer and reports ``queue_offset`` -1 (its
        offset is assigned when it is delivered). A big batch goes out as several bounded put calls
        to one queue, each atomic: when a later call fails, the error says how much was stored.
        """
        if request.lite is not None:
            return (yield from self._put_lite(request))
        chunks = [[request.fields]] if request.batch is None else request.chunks()  # one message always fits one call
        mq, offset, confirmed, handle, first = yield from self._put_with_retries(request, chunks[0], None)
        stored = len(chunks[0])
        for chunk in chunks[1:]:
            try:
                confirmed &= (yield from self._put_with_retries(request, chunk, mq))[2]
            except MQError as e:
                raise MQBrokerError(
                    f"batch to {request.topic!r} partly stored: the first {stored} of "
                    f"{len(request.encoded)} messages are in {mq} from offset {offset}; "
                    f"the rest were not stored: {e}"
                ) from e
            stored += len(chunk)
        status = SendStatus.SEND_OK if confirmed else SendStatus.FLUSH_SLAVE_TIMEOUT
        if first is not None:  # its dedup id was seen in the window: the first send's result (D140)
            return SendResult(status, first, mq, offset, duplicate=True)
        return SendResult(status, request.msg_id, mq, offset, handle)

    def _put_lite(self, request: SendRequest) -> Op[SendResult]:
        """Store a lite topic message (one script call on the parent's slot; retried within the budget
        when the store fails, as a queue's send is — there is one place it can go)."""
        topic, lite = request.topic, str(request.lite)
        route = self.routes.cached(topic) or (yield from self.routes.get(topic))
        if not route.config.lite:
            raise MQClientError(f"topic {topic!r} is not a lite parent: create it with Admin.create_topic({topic!r}, lite=True)")
        if request.queue is not None or request.selector is not None:
            raise MQClientError(f"a message to lite topic {lite!r} has one place to go: send it without queue or selector")
        mq = MessageQueue(topic, route.queues[0].broker_name if route.queues else DEFAULT_BROKER_NAME, 0)
        error: Exception | None = None
        for attempt in range(1 + self.retry_times_when_send_failed):
            if attempt and time.monotonic() >= request.deadline:
                break
            try:
                offset, _, _ = yield from StoreOps.put_lite.op(
                    self.store, topic, lite, request.fields, route.config.lite_expiration_ms
                )
            except ReplicaAckTimeout as e:
                log.warning("send of %s to lite topic %s: %s", request.msg_id, lite, e)
                return SendResult(SendStatus.FLUSH_SLAVE_TIMEOUT, request.msg_id, mq, int(e.result[0]))
            except MQBrokerError as e:
                error = e
                if is_out_of_memory(e):
                    break
                continue
            return SendResult(SendStatus.SEND_OK, request.msg_id, mq, offset)
        raise MQBrokerError(f"sending to lite topic {lite!r} of {topic!r} failed: {error}") from error

    def _put_with_retries(
        self, request: SendRequest, encoded: Sequence[Sequence[Any]], pinned: MessageQueue | None
    ) -> Op[tuple[MessageQueue, int, bool, str | None, str | None]]:
        """Store ``encoded`` (all of ``request`` or one chunk of it); ``(queue, first offset, confirmed,
        recall handle, first msg id)`` — not confirmed: stored on the master, but fewer than ``sync_replicas`` replicas
        confirmed in time (not retried: that would store it twice); the recall handle of a delayed
        message, else None; the msg id of the first send of its dedup id when it was a duplicate, else None.

        Never stores it twice (D140): a put is idempotent on its queue (a re-send of a stored msg id
        returns where it is), and before an attempt on another queue every queue where an attempt's
        outcome is unknown (a lost reply) is looked at and the id fenced there (``fence-message``):
        found, that attempt's result is returned; fenced, it can never be stored there later."""
        topic = request.topic
        route = self.routes.cached(topic) or (yield from self.routes.get(topic))
        if route.config.lite:
            raise MQClientError(lite_only(topic))
        fixed = pinned or self.fixed_queue(route, request)
        in_place = request.dedup is not None and request.queue is None and request.selector is None  # its id's queue
        attempts = 1 if fixed is not None and pinned is None and not in_place else 1 + self.retry_times_when_send_failed
        unsure: list[MessageQueue] = [] if request.unsure is None else [request.unsure]
        fenced: set[MessageQueue] = set()
        last_node: str | None = None
        error: Exception | None = None
        attempt, waits = -1, 0
        while attempt + 1 < attempts:
            attempt += 1
            if attempt and time.monotonic() >= request.deadline:
                break
            mq = fixed or self._select_unfenced(route, last_node, fenced, request.priority)
            started = time.monotonic()
            putting = False
            try:
                if unsure and unsure != [mq]:
                    found = yield from self._look_back(request, encoded, unsure, mq, fenced)
                    if found is not None:
                        return found[0], found[1], True, None, None
                putting = True
                if request.due_ms is None:
                    offset, _ = stored = yield from StoreOps.put.op(self.store, topic, mq.queue_id, encoded)
                    handle = None
                    if stored.__class__ is Duplicate:
                        return mq, offset, True, None, stored.msg_id
                else:
                    entry = yield from StoreOps.put_delayed.op(self.store, topic, mq.queue_id, encoded[0], request.due_ms)
                    offset, handle = -1, make_handle(self.store.keys.namespace, topic, mq.queue_id, entry, request.msg_id)
            except ReplicaAckTimeout as e:  # stored on the master; a fault of the node, not a good send
                self.record(self._node(route, mq), started, isolation=True)
                log.warning("send of %s to %s: %s", request.msg_id, mq, e)
                if request.due_ms is not None:
                    return (
                        mq,
                        -1,
                        False,
                        make_handle(self.store.keys.namespace, topic, mq.queue_id, str(e.result), request.msg_id),
                        None,
                    )
                return mq, int(e.result[0]), False, None, getattr(e.result, "msg_id", None)
            except StoreEvictedError:  # another queue would only hide it: the operator must act (issue 29)
                self.routes.invalidate(topic)
                raise
            except (QueueNotWritableError, TopicNotFoundError) as e:
                self.routes.invalidate(topic)  # the topic changed under us: re-read it and go on
                if fixed is not None:
                    raise
                route, error = (yield from self.routes.get(topic)), e
                continue
            except MessageFencedError as e:  # an earlier look of this send fenced mq: try another queue
                fenced.add(mq)
                error = e
                continue
            except MQBrokerError as e:
                last_node, error = self._node(route, mq), e
                if putting and not e.answered and mq not in unsure:
                    unsure.append(mq)  # the put may have run: look there before any other queue (D140)
                self.record(last_node, started, isolation=True)
                log.debug("send to %s failed on attempt %d: %s", mq, attempt + 1, e)
                if is_out_of_memory(e):
                    break  # a full store stays full for the next attempt: say so at once
                pause = self.failover_pause(e, waits, request.deadline)
                if pause:  # no master known through Sentinel: wait for the failover, not an attempt spent (D77)
                    waits += 1
                    attempt -= 1
                    yield Sleep(pause)
                continue
            if self.send_latency_fault_enable:
                self.record(self._node(route, mq), started)
            if metrics.CLIENT_METRICS is not None:
                metrics.CLIENT_METRICS.send_latency.labels(topic).observe(time.monotonic() - started)
            return mq, offset, True, handle, None
        raise MQBrokerError(f"sending to topic {topic!r} failed after {attempt + 1} attempt(s): {error}") from error

    def _look_back(
        self,
        request: SendRequest,
        encoded: Sequence[Sequence[Any]],
        unsure: list[MessageQueue],
        target: MessageQueue,
        fenced: set[MessageQueue],
    ) -> Op[tuple[MessageQueue, int] | None]:
        """Before an attempt on ``target``: look at each queue of ``unsure`` (but ``target``: a put is
        idempotent on its own queue) for the first msg id of ``encoded``; ``(queue, offset)`` where an
        earlier attempt stored it, else None — each queue looked at fenced it and leaves ``unsure``.
        A node that refuses connections cannot be looked at: its attempt is given up with a warning (a
        dead node; D140 says when that can leave a second copy). Other failures raise (the attempt failed)."""
        msg_id = str(encoded[0][2])  # codec.encode: [count, "i", msg id, …]
        for queue in [q for q in unsure if q != target]:
            try:
                offset = yield from StoreOps.fence.op(self.store, request.topic, queue.queue_id, msg_id, RETRY_FENCE_TTL_MS)
            except MQBrokerError as e:
                if not is_refused(e):
                    raise
                log.warning(
                    "send of %s: %s refuses connections, so an earlier attempt there cannot be looked at: %s", msg_id, queue, e
                )
                unsure.remove(queue)
                continue
            if offset >= 0:
                log.info("send of %s: the attempt on %s whose reply was lost had stored it at offset %d", msg_id, queue, offset)
                return queue, offset
            unsure.remove(queue)
            fenced.add(queue)
        return None

    def _select_unfenced(
        self, route: TopicRoute, last_node: str | None, fenced: set[MessageQueue], priority: int = 0
    ) -> MessageQueue:
        """:meth:`select_default`, passing over queues this send's retries fenced (as long as others exist)."""
        mq = self.select_default(route, last_node, priority)
        for _ in range(len(route.queues) if fenced else 0):
            if mq not in fenced:
                break
            mq = self.select_default(route, last_node, priority)
        return mq

    def failover_pause(self, error: Exception, waits: int, deadline: float) -> float:
        """Seconds to wait before trying ``error``'s send again without spending an attempt (0: do not wait):
        through Sentinel, a master that cannot be reached is being failed over (or the sentinels name
        none yet), so the send backs off — :data:`FAILOVER_BACKOFF_S` doubling up to
        :data:`FAILOVER_BACKOFF_MAX_S` — within its time budget (``deadline``, monotonic s) instead of
        spending every attempt on it at once."""
        if self.store.conn.kind != "sentinel" or not is_unreachable(error):
            return 0.0
        left = deadline - time.monotonic()
        return max(0.0, min(FAILOVER_BACKOFF_S * 2.0**waits, FAILOVER_BACKOFF_MAX_S, left))

    def _node(self, route: TopicRoute, mq: MessageQueue) -> str:
        """The node serving ``mq`` (looked up only when a send's outcome is recorded against it)."""
        return route.nodes.get(mq) or self.store.conn.node_of(self.store.queue_keys(mq.topic, mq.queue_id).meta)

    # -- decisions (no I/O) ---------------------------------------------------------------------

    def fixed_queue(self, route: TopicRoute, request: SendRequest) -> MessageQueue | None:
        """The queue ``request``'s explicit ``queue`` or its selector names, or None for the default choice."""
        queue, selector, topic = request.queue, request.selector, request.topic
        if queue is not None:
            if not isinstance(queue, MessageQueue) or queue.topic != topic:
                raise MQClientError(f"queue {queue!r} does not belong to topic {topic!r}")
            check_queue_level(route, queue, request.priority)
            return queue
        if selector is None:
            return None if request.dedup is None else dedup_queue(route, request.dedup, request.priority)
        check_route(route, request)
        assert request.first is not None  # kept for the selector
        select = selector.select if isinstance(selector, MessageQueueSelector) else selector
        chosen = select(list(route.queues), request.first, request.arg)
        if chosen is not None and chosen not in route.nodes:
            raise MQClientError(f"selector returned {chosen!r}, which is not a writable queue of {topic!r}")
        return chosen

    def select_default(self, route: TopicRoute, last_node: str | None, priority: int = 0) -> MessageQueue:
        """Round-robin (among the queues of ``priority``'s level on a priority topic), skipping avoided
        nodes (fault tolerance) or the node that just failed."""
        n = len(route.queues)
        if self.send_latency_fault_enable:
            for _ in range(n):
                mq = route.next_queue(priority)
                if self.fault.is_available(route.nodes[mq]):
                    return mq
            node = self.fault.pick_one_at_least()
            for _ in range(n if node else 0):
                mq = route.next_queue(priority)
                if route.nodes[mq] == node:
                    return mq
            return route.next_queue(priority)
        if last_node is not None:
            for _ in range(n):
                mq = route.next_queue(priority)
                if route.nodes[mq] != last_node:
                    return mq
        return route.next_queue(priority)

    def record(self, node: str, started: float, *, isolation: bool = False) -> None:
        """Record how a send to ``node`` that began at ``started`` (monotonic s) went."""
        if self.send_latency_fault_enable:
            self.fault.update(node, (time.monotonic() - started) * 1000, isolation=isolation)


class ProducerSettings:
    """The constructor the sync and the asyncio producers share (see :class:`mq.Producer` for the
    arguments): checks them and makes the connection; each producer's :meth:`_open` adds its store,
    core and tracer."""

    def __init__(
        self,
        group: str,
        url: str | None = None,
        *,
        namespace: str = "mq",
        send_latency_fault_enable: bool = False,
        retry_times_when_send_failed: int = DEFAULT_RETRY_TIMES,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        sync_replicas: int | Literal["all"] = 0,
        sync_replicas_timeout_ms: int = 1000,
        trace: bool | None = None,
        sync_flush: bool = False,
    ) -> None:
        self.group = check_group(group)
        self.sync = SyncReplicas(sync_replicas, sync_replicas_timeout_ms, sync_flush)
        self.send_latency_fault_enable = send_latency_fault_enable
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.max_message_size = max_message_size
        self.trace = trace
        SendCore.check_options(retry_times_when_send_failed, max_message_size)
        self._conn = Connection(url, namespace, socket_timeout_s=sync_socket_timeout_s(self.sync))
        self._open()

    def _open(self) -> None:
        """Make the producer's store, core and tracer on ``self._conn``."""
        raise NotImplementedError

    def _core_options(self) -> dict[str, Any]:
        """The keyword arguments of this producer's :class:`SendCore`."""
        return {
            "send_latency_fault_enable": self.send_latency_fault_enable,
            "retry_times_when_send_failed": self.retry_times_when_send_failed,
            "max_message_size": self.max_message_size,
        }


class SyncSendCore(SendCore, SyncRunner):
    """:class:`SendCore` run at once (the sync producer)."""

    def pipelined_queue(self, request: SendRequest) -> MessageQueue:
        """:meth:`pipeline_queue`, a plain call while the route is cached (the background sender's
        choice, once a send: the operation's generator and driver cost about a microsecond)."""
        route = self.routes.cached(request.topic)
        return self.pipeline_queue(request) if route is None else self.queue_of(route, request)


class AsyncSendCore(SendCore, AsyncRunner):
    """:class:`SendCore` awaited (the asyncio producer)."""


def dedup_queue(route: TopicRoute, dedup_id: str, priority: int = 0) -> MessageQueue:
    """The queue of a message with ``dedup_id`` and the default choice: its id's jump consistent hash over
    the writable queues — on a priority topic over those of ``priority``'s level (D142) — so every send
    of the id meets the same queue's window, atomically (D140). When the queue count changes, about
    the share of ids that move to a new queue may be stored again; so may an id resent with a priority
    of another level (another level's queue, another window).

    Raises:
        MQClientError: a priority other than 0 for a topic without priority levels.
    """
    if route.levels is None:
        if priority:
            raise no_levels(route.config.name, priority)
        queues = route.queues
    else:
        queues = route.levels[route.config.level_for(priority)]
    return queues[consistent_hash(java_hash(dedup_id), len(queues))]


def check_route(route: TopicRoute, request: SendRequest) -> None:
    """Refuse (MQClientError) what the queue choice on ``route`` would refuse of ``request``, before it
    is handed to a background sender: a priority for a topic without levels, a selector for one with."""
    if route.levels is None:
        if request.priority:
            raise no_levels(route.config.name, request.priority)
    elif request.selector is not None:
        raise MQClientError(
            f"topic {route.config.name!r} has priority levels: its queues are chosen by priority, so a "
            "selector (ordered sending) cannot be used with it (D142)"
        )


def check_queue_level(route: TopicRoute, queue: MessageQueue, priority: int) -> None:
    """Refuse an explicit ``queue`` that does not hold ``priority``'s level (MQClientError)."""
    if route.levels is None:
        if priority:
            raise no_levels(route.config.name, priority)
        return
    config = route.config
    if config.level_of(queue.queue_id) != config.level_for(priority):
        raise MQClientError(
            f"{queue} holds priority level {config.level_of(queue.queue_id)}, not the level of priority {priority} "
            f"({config.level_for(priority)}): send without a queue, or to a queue of that level (D142)"
        )


def oneway_failed(request: SendRequest, error: BaseException) -> None:
    """Log a failed oneway send (nobody waits for its result)."""
    log.warning("oneway send of %s to %r failed: %s", request.msg_id, request.topic, error)


def round_failed(size: int, unfinished: Sequence[SendRequest], error: BaseException) -> None:
    """Log a pipelined round of ``size`` sends that failed unexpectedly (a bug): its ``unfinished``
    sends (those prepared) fail with ``error``."""
    log.error(
        "async sender: a round of %d send(s) failed unexpectedly; failing %d unfinished send(s) (msg ids %s): %r",
        size,
        len(unfinished),
        ", ".join(r.msg_id for r in unfinished[:5]),
        error,
        exc_info=True,
    )


def trace_sent(tracer: TraceEvents, request: SendRequest, result: SendResult, began: float, now_ms: int) -> None:
    """Record a stored send (``began``: monotonic s) in the message trace; a delayed one (offset -1)
    is traced on delivery. Call it when tracing is on; ``now_ms``: the store's clock."""
    trace_stored(tracer, request.topic, request.msg_ids, result, began, now_ms)


def trace_stored(tracer: TraceEvents, topic: str, msg_ids: Sequence[str], result: SendResult, began: float, now_ms: int) -> None:
    """:func:`trace_sent` of a send known by its topic and message ids (no request at hand)."""
    if result.queue_offset >= 0:
        cost_ms = (time.monotonic() - began) * 1000
        tracer.sent(topic, result.message_queue.queue_id, result.queue_offset, msg_ids, now_ms - int(cost_ms), cost_ms)


def lite_only(topic: str) -> str:
    """The error of a message without a lite topic sent to lite parent ``topic``."""
    return f"topic {topic!r} is a lite parent: its messages name a lite topic, Message({topic!r}, body, lite_topic=...)"


def check_timeout(timeout_s: float) -> None:
    """Raise MQClientError unless ``timeout_s`` is a positive finite number of seconds."""
    if timeout_s.__class__ is float and 0 < timeout_s < _INF:  # the common case, first (once a send)
        return
    if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not 0 < timeout_s < _INF:
        raise MQClientError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")


def sync_socket_timeout_s(sync: SyncReplicas) -> float | None:
    """A reply timeout long enough for ``WAIT`` and ``WAITAOF`` (their timeouts plus a second), or None
    for the default."""
    needed = sync.timeout_ms / 1000 * (2 if sync.flush else 1) + 1.0
    return needed if sync.enabled and needed > DEFAULT_SOCKET_TIMEOUT_S else None
