"""``Producer``: sync, async, oneway and batch sends [RocketMQ ``DefaultMQProducer``]."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any

from mq import metrics, otel
from mq.connection import DEFAULT_SOCKET_TIMEOUT_S, Connection, is_out_of_memory
from mq.errors import MQBrokerError, MQClientError, MQError, QueueNotWritableError, ReplicaAckTimeout, TopicNotFoundError
from mq.message import Message, SendResult, SendStatus
from mq.msgid import new_client_id, new_msg_id
from mq.producer.async_sender import AsyncSender
from mq.producer.fault import LatencyFaultTolerance
from mq.producer.request import Selector, SendRequest
from mq.producer.route import RouteCache, TopicRoute
from mq.producer.selectors import MessageQueueSelector
from mq.queue import MessageQueue
from mq.store import Store, codec
from mq.store.clock import ServerClock
from mq.store.replication import SyncReplicas
from mq.timer import delay_levels, due_time_ms
from mq.trace import Tracer
from mq.validation import DEFAULT_MAX_MESSAGE_SIZE, check_batch, check_group, check_message

log = logging.getLogger("mq.producer")

#: Total time budget of one sync send across retries, seconds [RocketMQ ``sendMsgTimeout`` 3000 ms].
DEFAULT_SEND_TIMEOUT_S = 3.0
#: Extra attempts after a failed sync send [RocketMQ ``retryTimesWhenSendFailed``].
DEFAULT_RETRY_TIMES = 2
#: Seconds the namespace's delay levels are cached (the broker service may publish new ones).
DELAY_LEVELS_TTL_S = 30.0

_NOT_STARTED = "the producer is not started: call start() or use it as a context manager"


class Producer:
    """Sends messages to topics.

    Args:
        group: producer group name (used by transactions and shown by admin tools).
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix of the deployment.
        send_latency_fault_enable: avoid nodes that were slow or failed (RocketMQ's latency fault
            tolerance); off by default as in RocketMQ.
        retry_times_when_send_failed: extra attempts of a sync or async send with the default queue
            choice, preferring another node each time.
        max_message_size: largest body, and largest batch, in bytes.
        sync_replicas: replicas that must confirm each send before it counts as sent [RocketMQ
            ``SYNC_MASTER`` when ≥ 1]; ``WAIT`` goes in the same round trip as the write. When fewer
            confirm in time the send returns ``SendStatus.FLUSH_SLAVE_TIMEOUT``: stored on the master,
            not retried, and counted as a fault of that node, not as a sent message.
        sync_replicas_timeout_ms: how long a send waits for those replicas, milliseconds.
        trace: record each send in the message trace (``Admin.message_trace``); None follows the
            namespace (``Admin.set_trace``), off by default.

    Sends are traced with OpenTelemetry when the ``otel`` extra is installed and a tracer provider is
    set (:mod:`mq.otel`): a ``send`` span whose context travels in the message to its consumers.

    Use as a context manager, or call :meth:`start` and :meth:`shutdown`.
    """

    def __init__(
        self,
        group: str,
        url: str | None = None,
        *,
        namespace: str = "mq",
        send_latency_fault_enable: bool = False,
        retry_times_when_send_failed: int = DEFAULT_RETRY_TIMES,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        sync_replicas: int = 0,
        sync_replicas_timeout_ms: int = 1000,
        trace: bool | None = None,
    ) -> None:
        self.group = check_group(group)
        self.sync = SyncReplicas(sync_replicas, sync_replicas_timeout_ms)
        if not isinstance(retry_times_when_send_failed, int) or retry_times_when_send_failed < 0:
            raise MQClientError(f"retry_times_when_send_failed must be an int >= 0, got {retry_times_when_send_failed!r}")
        if not isinstance(max_message_size, int) or max_message_size < 1:
            raise MQClientError(f"max_message_size must be a positive int, got {max_message_size!r}")
        self.send_latency_fault_enable = send_latency_fault_enable
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.max_message_size = max_message_size
        self._conn = Connection(url, namespace, socket_timeout_s=sync_socket_timeout_s(self.sync))
        self._store = Store(self._conn, sync=self.sync)
        self._routes = RouteCache(self._store)
        self._fault = LatencyFaultTolerance()
        self._sender: AsyncSender | None = None
        self._levels: tuple[int, ...] = ()
        self._levels_read_s = 0.0
        self._clock = ServerClock(self._store)
        self._tracer = Tracer(self._store, self.group, new_client_id(), trace)

    def __repr__(self) -> str:
        return f"Producer(group={self.group!r}, {self._conn!r}, started={self._sender is not None})"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Producer:
        """Start the producer (idempotent). Returns self."""
        if self._sender is None:
            self._sender = AsyncSender(self._store, self._select_for_async, self._send)
            self._sender.start()
        return self

    def shutdown(self) -> None:
        """Finish pending async sends, then close the connection."""
        if self._sender is not None:
            self._sender.stop()
            self._sender = None
        self._tracer.close()
        self._conn.close()

    def __enter__(self) -> Producer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.shutdown()

    # -- sending --------------------------------------------------------------------------------

    def send(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: Selector | None = None,
        arg: Any = None,
        timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    ) -> SendResult:
        """Send ``msg`` and wait for the store to accept it.

        Args:
            queue: send to exactly this queue (no retry elsewhere).
            selector: pick the queue with ``selector.select(mqs, msg, arg)`` (one attempt).
            arg: passed to the selector, e.g. a sharding key.
            timeout_s: total budget across retries, seconds.

        Raises:
            MQClientError: bad input, unknown topic, or a queue that takes no messages.
            MQBrokerError: the store failed or was unreachable on every attempt within the budget.
        """
        self._check_started()
        with otel.send_span(self.group, self._conn.namespace, [msg]) as carried:
            request = self._request(msg, queue, selector, arg, timeout_s, carried=carried)
            began = time.monotonic()
            result = self._send(request)
            otel.set_message_id(result.msg_id)
        self._trace_sent(request, result, began)
        return result

    def send_async(
        self,
        msg: Message,
        *,
        queue: MessageQueue | None = None,
        selector: Selector | None = None,
        arg: Any = None,
        timeout_s: float = DEFAULT_SEND_TIMEOUT_S,
    ) -> Future[SendResult]:
        """Send ``msg`` without waiting; the future resolves to the :class:`SendResult` or the error.

        Bad input raises here at once. Sends waiting at the same time share one pipeline.
        """
        return self._enqueue(msg, queue, selector, arg, timeout_s, oneway=False)

    def send_oneway(
        self, msg: Message, *, queue: MessageQueue | None = None, selector: Selector | None = None, arg: Any = None
    ) -> None:
        """Send ``msg`` without any result and without retry (failures are only logged)."""
        self._enqueue(msg, queue, selector, arg, DEFAULT_SEND_TIMEOUT_S, oneway=True)

    def send_batch(
        self, msgs: Sequence[Message], *, queue: MessageQueue | None = None, timeout_s: float = DEFAULT_SEND_TIMEOUT_S
    ) -> SendResult:
        """Send messages of one topic to one queue atomically, with consecutive offsets.

        ``SendResult.msg_id`` is the comma-joined ids; ``queue_offset`` is the first message's.

        Raises:
            MQClientError: mixed topics, delayed messages, or a batch over ``max_message_size``.
        """
        self._check_started()
        topic = check_batch(msgs, self.max_message_size)
        ids = [new_msg_id() for _ in msgs]
        with otel.send_span(self.group, self._conn.namespace, list(msgs)) as carried:
            encoded = [codec.encode(m, i, extra_properties=carried) for m, i in zip(msgs, ids)]
            request = SendRequest(topic, encoded, ids, msgs[0], time.monotonic() + timeout_s, queue=queue)
            began = time.monotonic()
            result = self._send(request)
        self._trace_sent(request, result, began)
        return result

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (what selectors choose from)."""
        return list(self._routes.get(topic).queues)

    # -- internals ------------------------------------------------------------------------------

    def _check_started(self) -> None:
        if self._sender is None:
            raise MQClientError(_NOT_STARTED)

    def _check(self, msg: Message) -> int | None:
        """Check ``msg``; returns its due time (epoch ms, the store's clock) when it is delayed."""
        check_message(msg, self.max_message_size)
        if msg.deliver_time_ms is not None:
            return msg.deliver_time_ms
        if msg.delay_level:
            if not self._levels or time.monotonic() - self._levels_read_s > DELAY_LEVELS_TTL_S:
                self._levels, self._levels_read_s = delay_levels(self._store), time.monotonic()
            return due_time_ms(msg, self._levels, now_ms=self._clock.now_ms())
        return None

    def _trace_sent(self, request: SendRequest, result: SendResult, began: float) -> None:
        """Record a stored send in the message trace (when tracing is on; a delayed one is traced on delivery)."""
        if result.queue_offset >= 0 and self._tracer.active:
            cost_ms = (time.monotonic() - began) * 1000
            self._tracer.sent(
                request.topic,
                result.message_queue.queue_id,
                result.queue_offset,
                request.msg_ids,
                self._tracer.now_ms() - int(cost_ms),
                cost_ms,
            )

    def _request(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: Selector | None,
        arg: Any,
        timeout_s: float,
        *,
        oneway: bool = False,
        carried: dict[str, str] | None = None,
    ) -> SendRequest:
        """The request of one checked message (raises MQClientError for bad input, before any I/O);
        ``carried``: the trace context stored with it."""
        if not isinstance(timeout_s, (int, float)) or isinstance(timeout_s, bool) or not 0 < timeout_s < float("inf"):
            raise MQClientError(f"timeout_s must be a positive number of seconds, got {timeout_s!r}")
        due_ms = self._check(msg)
        msg_id = new_msg_id()
        encoded = codec.encode(msg, msg_id, extra_properties=carried)
        return SendRequest(
            msg.topic,
            [encoded],
            [msg_id],
            msg,
            time.monotonic() + timeout_s,
            queue=queue,
            selector=selector,
            arg=arg,
            due_ms=due_ms,
            oneway=oneway,
        )

    def _enqueue(
        self,
        msg: Message,
        queue: MessageQueue | None,
        selector: Selector | None,
        arg: Any,
        timeout_s: float,
        *,
        oneway: bool,
    ) -> Future[SendResult]:
        sender = self._sender
        if sender is None:
            raise MQClientError(_NOT_STARTED)
        with otel.send_span(self.group, self._conn.namespace, [msg]) as carried:  # the span covers the hand-over
            request = self._request(msg, queue, selector, arg, timeout_s, oneway=oneway, carried=carried)
            self._routes.get(msg.topic)  # an unknown topic fails here, not in the future
            if self._tracer.active:
                began = time.monotonic()
                request.future.add_done_callback(
                    lambda f: None if f.exception() else self._trace_sent(request, f.result(), began)
                )
            sender.submit(request)
        return request.future

    def _fixed_queue(
        self, route: TopicRoute, msg: Message, queue: MessageQueue | None, selector: Selector | None, arg: Any
    ) -> MessageQueue | None:
        """The queue an explicit ``queue`` or a selector names, or None for the default choice."""
        if queue is not None:
            if not isinstance(queue, MessageQueue) or queue.topic != msg.topic:
                raise MQClientError(f"queue {queue!r} does not belong to topic {msg.topic!r}")
            return queue
        if selector is None:
            return None
        select = selector.select if isinstance(selector, MessageQueueSelector) else selector
        chosen = select(list(route.queues), msg, arg)
        if chosen is not None and chosen not in route.nodes:
            raise MQClientError(f"selector returned {chosen!r}, which is not a writable queue of {msg.topic!r}")
        return chosen

    def _select_default(self, route: TopicRoute, last_node: str | None) -> MessageQueue:
        """Round-robin, skipping avoided nodes (fault tolerance) or the node that just failed."""
        n = len(route.queues)
        if self.send_latency_fault_enable:
            for _ in range(n):
                mq = route.next_queue()
                if self._fault.is_available(route.nodes[mq]):
                    return mq
            node = self._fault.pick_one_at_least()
            for _ in range(n if node else 0):
                mq = route.next_queue()
                if route.nodes[mq] == node:
                    return mq
            return route.next_queue()
        if last_node is not None:
            for _ in range(n):
                mq = route.next_queue()
                if route.nodes[mq] != last_node:
                    return mq
        return route.next_queue()

    def _select_for_async(self, request: SendRequest) -> MessageQueue:
        route = self._routes.get(request.topic)
        return self._fixed_queue(route, request.first, request.queue, request.selector, request.arg) or self._select_default(
            route, None
        )

    def _send(self, request: SendRequest) -> SendResult:
        """Run ``request`` with retries (the sync path, and the async path's fallback).

        A delayed message (``due_ms``) waits in its queue's timer and reports ``queue_offset`` -1 (its
        offset is assigned when it is delivered). A big batch goes out as several bounded put calls
        to one queue, each atomic: when a later call fails, the error says how much was stored.
        """
        chunks = request.chunks()
        mq, offset, confirmed = self._put_with_retries(request, chunks[0], None)
        stored = len(chunks[0])
        for chunk in chunks[1:]:
            try:
                confirmed &= self._put_with_retries(request, chunk, mq)[2]
            except MQError as e:
                raise MQBrokerError(
                    f"batch to {request.topic!r} partly stored: the first {stored} of "
                    f"{len(request.encoded)} messages are in {mq} from offset {offset}; "
                    f"the rest were not stored: {e}"
                ) from e
            stored += len(chunk)
        status = SendStatus.SEND_OK if confirmed else SendStatus.FLUSH_SLAVE_TIMEOUT
        return SendResult(status, request.msg_id, mq, offset)

    def _put_with_retries(
        self, request: SendRequest, encoded: list[list[Any]], pinned: MessageQueue | None
    ) -> tuple[MessageQueue, int, bool]:
        """Store ``encoded`` (all of ``request`` or one chunk of it); ``(queue, first offset, confirmed)``
        — not confirmed: stored on the master, but fewer than ``sync_replicas`` replicas confirmed in time
        (not retried: that would store it twice)."""
        topic = request.topic
        route = self._routes.get(topic)
        fixed = pinned or self._fixed_queue(route, request.first, request.queue, request.selector, request.arg)
        attempts = 1 if fixed is not None and pinned is None else 1 + self.retry_times_when_send_failed
        last_node: str | None = None
        error: Exception | None = None
        for attempt in range(attempts):
            if attempt and time.monotonic() >= request.deadline:
                break
            mq = fixed or self._select_default(route, last_node)
            node = route.nodes.get(mq) or self._conn.node_of(self._store.queue_keys(topic, mq.queue_id).meta)
            started = time.monotonic()
            try:
                if request.due_ms is None:
                    offset, _ = self._store.put(topic, mq.queue_id, encoded)
                else:
                    self._store.put_delayed(topic, mq.queue_id, encoded[0], request.due_ms)
                    offset = -1
            except ReplicaAckTimeout as e:  # stored on the master; a fault of the node, not a good send
                self._record(node, started, isolation=True)
                log.warning("send of %s to %s: %s", request.msg_id, mq, e)
                return mq, -1 if request.due_ms is not None else int(e.result[0]), False
            except (QueueNotWritableError, TopicNotFoundError) as e:
                self._routes.invalidate(topic)  # the topic changed under us: re-read it and go on
                if fixed is not None:
                    raise
                route, error = self._routes.get(topic), e
                continue
            except MQBrokerError as e:
                self._record(node, started, isolation=True)
                last_node, error = node, e
                log.debug("send to %s failed on attempt %d: %s", mq, attempt + 1, e)
                if is_out_of_memory(e):
                    break  # a full store stays full for the next attempt: say so at once
                continue
            self._record(node, started)
            if metrics.CLIENT_METRICS is not None:
                metrics.CLIENT_METRICS.send_latency.labels(topic).observe(time.monotonic() - started)
            return mq, offset, True
        raise MQBrokerError(f"sending to topic {topic!r} failed after {attempt + 1} attempt(s): {error}") from error

    def _record(self, node: str, started: float, *, isolation: bool = False) -> None:
        if self.send_latency_fault_enable:
            self._fault.update(node, (time.monotonic() - started) * 1000, isolation=isolation)


def sync_socket_timeout_s(sync: SyncReplicas) -> float | None:
    """A reply timeout long enough for ``WAIT`` (its timeout plus a second), or None for the default."""
    needed = sync.timeout_ms / 1000 + 1.0
    return needed if sync.enabled and needed > DEFAULT_SOCKET_TIMEOUT_S else None
