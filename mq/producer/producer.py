"""``Producer``: sync, async, oneway and batch sends [RocketMQ ``DefaultMQProducer``]."""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any

from mq.errors import MQClientError
from mq.model.message import Message, SendResult
from mq.model.msgid import new_client_id
from mq.model.queue import MessageQueue
from mq.model.timer import DELAY_LEVELS_TTL_S
from mq.observe import otel
from mq.observe.trace import Tracer
from mq.producer.async_sender import AsyncSender
from mq.producer.core import (
    DEFAULT_RETRY_TIMES,
    DEFAULT_SEND_TIMEOUT_S,
    NOT_STARTED,
    Carried,
    ProducerSettings,
    SyncSendCore,
    Where,
    check_route,
    sync_socket_timeout_s,
    trace_sent,
)
from mq.producer.futures import FutureGroup
from mq.producer.pipeline import Pending
from mq.producer.request import Selector, SendRequest
from mq.store import Store

__all__ = ["DEFAULT_RETRY_TIMES", "DEFAULT_SEND_TIMEOUT_S", "DELAY_LEVELS_TTL_S", "Producer", "sync_socket_timeout_s"]


class Producer(ProducerSettings):
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
            not retried, and counted as a fault of that node, not as a sent message. ``"all"``: every
            replica the master has (counted with ``ROLE``; a replica that went away still counts for
            a minute, so sends report the shortfall rather than quietly asking for fewer).
        sync_replicas_timeout_ms: how long a send waits for those replicas (and disks), milliseconds.
        trace: record each send in the message trace (``Admin.message_trace``); None follows the
            namespace (``Admin.set_trace``), off by default.
        sync_flush: a send also waits until it is fsynced to the master's AOF (and to the replicas'
            when ``sync_replicas`` asks for some) [RocketMQ ``SYNC_FLUSH``]: ``WAITAOF``, Redis ≥ 7.2
            with ``appendonly yes``; :meth:`start` refuses other servers with :class:`MQClientError`
            before anything is written. A send not fsynced in time returns ``FLUSH_SLAVE_TIMEOUT``.

    Sends are traced with OpenTelemetry when the ``otel`` extra is installed and a tracer provider is
    set (:mod:`mq.observe.otel`): a ``send`` span whose context travels in the message to its consumers.

    Use as a context manager, or call :meth:`start` and :meth:`shutdown`.
    """

    def _open(self) -> None:
        self._store = Store(self._conn, sync=self.sync)
        self._core = SyncSendCore(self._store, **self._core_options())
        self._fault = self._core.fault
        self._sender: AsyncSender | None = None
        self._futures = FutureGroup()
        self._tracer = Tracer(self._store, self.group, new_client_id(), self.trace)

    def __repr__(self) -> str:
        return f"Producer(group={self.group!r}, {self._conn!r}, started={self._sender is not None})"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> Producer:
        """Start the producer (idempotent). Returns self."""
        if self._sender is None:
            self._store.check_writes()  # a server that cannot confirm as asked is refused before any write
            self._sender = AsyncSender(self._store, self._core.pipelined_queue, self._core.send, self._futures)
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
            request = self._core.request_at_once(msg, (queue, selector, arg), timeout_s, False, carried) or self._core.request(
                msg, queue, selector, arg, timeout_s, carried=carried
            )
            began = time.monotonic()
            result = self._core.send(request)
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
        with otel.send_span(self.group, self._conn.namespace, list(msgs)) as carried:
            request = self._core.batch_request(msgs, queue, timeout_s, carried)
            began = time.monotonic()
            result = self._core.send(request)
        self._trace_sent(request, result, began)
        return result

    def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        """The writable queues of ``topic`` (what selectors choose from)."""
        return list(self._core.route(topic).queues)

    def recall(self, handle: str) -> bool:
        """Remove a delayed or timer message before it is due [RocketMQ 5.3.2 recall].

        ``handle`` is its ``SendResult.recall_handle`` (from any producer of this namespace). True when
        the message was still scheduled and is now removed, atomically: it will never be delivered.
        False when it is no longer scheduled (delivered, or recalled, already) or the handle names no
        message stored (an altered or forged handle removes nothing) — unlike RocketMQ, a recall says
        whether it removed the message.

        Raises:
            MQClientError: not started, ``handle`` is not a recall handle, or it belongs to another
                namespace (nothing is sent to the store).
            ReplicaAckTimeout: removed on the master; fewer replicas than ``sync_replicas`` confirmed.
        """
        self._check_started()
        return self._store.recall(handle)

    # -- internals ------------------------------------------------------------------------------

    def _check_started(self) -> None:
        if self._sender is None:
            raise MQClientError(NOT_STARTED)

    def _trace_sent(self, request: SendRequest, result: SendResult, began: float) -> None:
        """Record a stored send in the message trace (when tracing is on)."""
        if result.queue_offset >= 0 and self._tracer.active:
            trace_sent(self._tracer, request, result, began, self._tracer.now_ms())

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
            raise MQClientError(NOT_STARTED)
        if not otel.enabled():  # no span to record and no context to carry: no context manager a send
            return self._hand_over(sender, msg, (queue, selector, arg), timeout_s, oneway, None)
        with otel.send_span(self.group, self._conn.namespace, [msg]) as carried:  # the span covers the hand-over
            return self._hand_over(sender, msg, (queue, selector, arg), timeout_s, oneway, carried)

    def _hand_over(
        self, sender: AsyncSender, msg: Message, where: Where, timeout_s: float, oneway: bool, carried: Carried
    ) -> Future[SendResult]:
        """Check and encode ``msg`` and queue it for the sender thread; its future."""
        core = self._core
        request = core.request_at_once(msg, where, timeout_s, oneway, carried) or core.request(
            msg, *where, timeout_s, oneway=oneway, carried=carried
        )
        # an unknown topic, or a priority the topic cannot take, fails here, not in the future
        check_route(core.routes.cached(request.topic) or core.route(request.topic), request)
        future = self._futures.new()  # made here, before the sender thread may touch it
        if self._tracer.active:
            began = time.monotonic()
            future.add_done_callback(lambda f: None if f.exception() else self._trace_sent(request, f.result(), began))
        sender.submit(Pending(request, None if oneway else future))
        return future
