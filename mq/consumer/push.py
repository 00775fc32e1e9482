"""``PushConsumer``: messages are pulled for you and handed to a listener [RocketMQ
``DefaultMQPushConsumer`` with ``ConsumeMessageConcurrentlyService``]."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any

from mq import metrics
from mq.consumer.allocate import AllocateMessageQueueStrategy
from mq.consumer.core import ConsumerCore
from mq.consumer.orderly import OrderlyService
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.retry import SendBack, original_topic
from mq.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeHook,
    ConsumeMessageContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)
from mq.errors import MQClientError, MQError
from mq.filter import MessageSelector
from mq.message import MessageExt
from mq.queue import MessageQueue
from mq.validation import RETRY_PREFIX

log = logging.getLogger("mq.consumer")

#: Worker threads that run the listener [RocketMQ ``consumeThreadMax``].
DEFAULT_CONSUME_THREAD_MAX = 20
#: Messages one pull brings per queue [RocketMQ ``pullBatchSize``].
DEFAULT_PULL_BATCH_SIZE = 32
#: Messages per listener call [RocketMQ ``consumeMessageBatchMaxSize``].
DEFAULT_CONSUME_BATCH_MAX_SIZE = 1
#: Retries of a concurrently consumed message before the dead-letter queue [RocketMQ ``maxReconsumeTimes``].
DEFAULT_MAX_RECONSUME_TIMES = 16
#: Minutes a listener call may take before its messages are sent back for retry [RocketMQ ``consumeTimeout``].
DEFAULT_CONSUME_TIMEOUT_MIN = 15.0
#: Seconds before a message whose listener asked to reconsume is consumed again here
#: [RocketMQ's local fallback when sending back to the retry topic fails].
LOCAL_RECONSUME_DELAY_S = 5.0

#: Listener calls one worker task makes in turn (see ``PushConsumer._deliver``).
BATCHES_PER_TASK = 8

#: Default pause of a suspended orderly queue, ms [RocketMQ ``suspendCurrentQueueTimeMillis``].
DEFAULT_SUSPEND_MS = 1000

Listener = Callable[[list[MessageExt], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus]
OrderlyListener = Callable[[list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]


class PushConsumer:
    """Consumes the subscribed topics with a listener on a pool of worker threads.

    Args:
        group: consumer group; members share the queues (CLUSTERING) or all get everything
            (BROADCASTING).
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix of the deployment.
        message_model: CLUSTERING (default) or BROADCASTING.
        consume_from_where: where a group without a stored offset starts (LAST_OFFSET: new messages only).
        consume_timestamp_ms: start time for TIMESTAMP, epoch ms (default: 30 minutes before start).
        allocate_strategy: how queues are shared (default ``AllocateMessageQueueAveragely``).
        consume_thread_max: worker threads running the listener.
        pull_batch_size: messages pulled per queue per round trip.
        consume_message_batch_max_size: messages per listener call.
        max_reconsume_times: retries before the dead-letter queue (None: 16 concurrently, unlimited
            (-1) orderly).
        client_id: this member's id (default ``host@pid@random``); keep it stable across restarts in
            BROADCASTING mode to resume from the local offsets.
        consume_timeout_min: a listener call running longer than this (minutes) has its messages
            sent back for retry, so one stuck call cannot hold the queue's offset forever.
        suspend_current_queue_time_ms: default pause of a queue whose orderly listener suspends it.

    Use as a context manager, or call :meth:`start` and :meth:`shutdown`.
    """

    def __init__(
        self,
        group: str,
        url: str | None = None,
        *,
        namespace: str = "mq",
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        consume_thread_max: int = DEFAULT_CONSUME_THREAD_MAX,
        pull_batch_size: int = DEFAULT_PULL_BATCH_SIZE,
        consume_message_batch_max_size: int = DEFAULT_CONSUME_BATCH_MAX_SIZE,
        max_reconsume_times: int | None = None,
        client_id: str | None = None,
        consume_timeout_min: float = DEFAULT_CONSUME_TIMEOUT_MIN,
        suspend_current_queue_time_ms: int = DEFAULT_SUSPEND_MS,
    ) -> None:
        if consume_timeout_min <= 0:
            raise MQClientError(f"consume_timeout_min must be positive, got {consume_timeout_min!r}")
        if not isinstance(consume_thread_max, int) or consume_thread_max < 1:
            raise MQClientError(f"consume_thread_max must be a positive int, got {consume_thread_max!r}")
        if not isinstance(consume_message_batch_max_size, int) or not 1 <= consume_message_batch_max_size <= 1024:
            raise MQClientError(f"consume_message_batch_max_size must be in 1..1024, got {consume_message_batch_max_size!r}")
        self._core = ConsumerCore(
            group, url, namespace=namespace, message_model=message_model, consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms, allocate_strategy=allocate_strategy,
            pull_batch_size=pull_batch_size, client_id=client_id, kind="push", deliver=self._deliver,
        )  # fmt: skip
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self._max_reconsume_times = max_reconsume_times
        self._listener: Listener | None = None
        self._orderly_listener: OrderlyListener | None = None
        self._orderly: OrderlyService | None = None
        self.suspend_current_queue_time_ms = suspend_current_queue_time_ms
        self._hooks: list[ConsumeHook] = []
        self._executor: ThreadPoolExecutor | None = None
        self._send_back = SendBack(self._core.store, self._core.group, DEFAULT_MAX_RECONSUME_TIMES)
        self.consume_timeout_min = consume_timeout_min
        self._core.add_job(self._send_back_overdue, min(60.0, consume_timeout_min * 60 / 4), "consume-timeout")
        self._in_flight = 0
        self._in_flight_cv = threading.Condition()

    def __repr__(self) -> str:
        return f"PushConsumer(group={self.group!r}, client_id={self.client_id!r}, {self._core.conn!r})"

    @property
    def group(self) -> str:
        """The consumer group."""
        return self._core.group

    @property
    def client_id(self) -> str:
        """This member's client id."""
        return self._core.client_id

    # -- configuration --------------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` filtered by a tag expression (``"*"``, ``"A || B"``) or a MessageSelector.

        Raises:
            FilterExpressionError: the expression is malformed (with its position).
        """
        self._core.subscribe(topic, expression)

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``."""
        self._core.unsubscribe(topic)

    def register_message_listener(self, listener: Listener) -> None:
        """Set the concurrent listener: ``listener(msgs, ctx) -> ConsumeConcurrentlyStatus``.

        A listener that raises counts as RECONSUME_LATER.
        """
        self._listener = listener

    def register_orderly_listener(self, listener: OrderlyListener) -> None:
        """Set an orderly listener: ``listener(msgs, ctx) -> ConsumeOrderlyStatus``.

        Each queue is consumed by one thread at a time, in offset order, and in clustering mode
        only while this client holds the queue's lock in the store (see ``mq/consumer/locks.py``).
        A listener that raises counts as SUSPEND_CURRENT_QUEUE_A_MOMENT.
        """
        self._orderly_listener = listener
        self._core.orderly = True

    def register_consume_hook(self, hook: ConsumeHook) -> None:
        """Add a hook whose ``before``/``after`` run around every listener call."""
        self._hooks.append(hook)

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def max_reconsume_times(self) -> int:
        """Retries before the DLQ (-1: unlimited)."""
        if self._max_reconsume_times is not None:
            return self._max_reconsume_times
        return -1 if self._orderly_listener is not None else DEFAULT_MAX_RECONSUME_TIMES

    def start(self) -> PushConsumer:
        """Register in the group and start consuming. Returns self."""
        if self._listener is None and self._orderly_listener is None:
            raise MQClientError("register a listener (register_message_listener or register_orderly_listener) before start()")
        if self._listener is not None and self._orderly_listener is not None:
            raise MQClientError("register either a concurrent or an orderly listener, not both")
        if not self._core.subscriptions:
            raise MQClientError("subscribe to at least one topic before start()")
        self._send_back = SendBack(self._core.store, self._core.group, self.max_reconsume_times)
        if self._orderly_listener is not None:
            self._orderly = OrderlyService(self._core, lambda: self._executor, self._call_orderly, self._send_back,
                                           batch_size=self.consume_message_batch_max_size,
                                           max_reconsume_times=self.max_reconsume_times,
                                           suspend_ms=self.suspend_current_queue_time_ms)  # fmt: skip
        if self._executor is None:
            if self._core.message_model is MessageModel.CLUSTERING and self._orderly is None:  # retries come back
                self._core.subscribe(self._send_back.ensure_retry_topic(), "*")
            self._executor = ThreadPoolExecutor(self.consume_thread_max, thread_name_prefix=f"mq-consume-{self.group}")
            self._core.start()
        return self

    def shutdown(self) -> None:
        """Finish the messages being consumed, commit offsets, release queues and leave the group."""
        if self._executor is None:
            return
        self._core.shutdown(wait_consumed=self._drain)
        self._executor.shutdown(wait=True)
        self._executor = None

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.shutdown()

    def assigned_queues(self) -> set[MessageQueue]:
        """The queues this member consumes now."""
        return {mq for mq, pq in self._core.process_queues.items() if not pq.releasing}

    # -- consumption ----------------------------------------------------------------------------

    def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        executor = self._executor
        if executor is None:
            return
        if self._orderly is not None:
            self._orderly.deliver(pq, msgs)
            return
        if pq.queue.topic.startswith(RETRY_PREFIX):
            for m in msgs:  # the listener sees the topic the message was sent to
                m.topic = original_topic(m)
        size = self.consume_message_batch_max_size
        batches = [msgs[i : i + size] for i in range(0, len(msgs), size)]
        # One task runs up to BATCHES_PER_TASK listener calls in turn: handing each message to a
        # thread of its own costs more than a no-op listener, and a pull of many queues still
        # yields enough tasks to keep every worker busy.
        for i in range(0, len(batches), BATCHES_PER_TASK):
            with self._in_flight_cv:
                self._in_flight += 1
            executor.submit(self._consume, pq, batches[i : i + BATCHES_PER_TASK])

    def _consume(self, pq: ProcessQueue, batches: list[list[MessageExt]]) -> None:
        try:
            for msgs in batches:
                if pq.dropped:
                    return  # taken over after a failure: the new owner consumes the rest
                ctx = ConsumeConcurrentlyContext(pq.queue)
                began = time.monotonic()
                for m in msgs:
                    pq.consuming[m.queue_offset] = began
                try:
                    status = self._call_listener(pq.queue, msgs, ctx)
                finally:
                    for m in msgs:
                        pq.consuming.pop(m.queue_offset, None)
                if self._core.message_model is MessageModel.BROADCASTING:
                    self._done(pq, msgs)  # broadcasting does not retry, as in RocketMQ
                    continue
                # success covers msgs[: ack_index + 1]; the rest is retried [RocketMQ processConsumeResult]
                success = status is ConsumeConcurrentlyStatus.CONSUME_SUCCESS
                ack = max(-1, min(ctx.ack_index, len(msgs) - 1)) if success else -1
                ok, failed = msgs[: ack + 1], msgs[ack + 1 :]
                if ok:
                    self._done(pq, ok)
                if failed:
                    self._reconsume_later(pq, failed, ctx.delay_level_when_next_consume)
        finally:
            with self._in_flight_cv:
                self._in_flight -= 1
                self._in_flight_cv.notify_all()

    def _call_listener(self, mq: MessageQueue, msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        status = self._invoke(self._listener, mq, msgs, ctx, ConsumeConcurrentlyStatus.RECONSUME_LATER)
        return ConsumeConcurrentlyStatus(status)

    def _call_orderly(self, pq: ProcessQueue, msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        # a running batch is marked by pq.consume_lock (held by OrderlyService), not pq.consuming
        status = self._invoke(self._orderly_listener, pq.queue, msgs, ctx, ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT)
        return ConsumeOrderlyStatus(status)

    def _invoke(self, listener: Callable[..., Any] | None, mq: MessageQueue, msgs: list[MessageExt], ctx: Any,
                failure: ConsumeConcurrentlyStatus | ConsumeOrderlyStatus) -> Any:  # fmt: skip
        """Call a listener between the hooks; an exception (or a bad answer) counts as ``failure``."""
        hook_ctx = ConsumeMessageContext(self.group, mq, msgs)
        self._run_hooks("before", hook_ctx)
        started = time.perf_counter()
        status: Any = failure
        try:
            if listener is not None:
                status = type(failure)(listener(msgs, ctx))
        except Exception as e:  # the listener's failure means "later", never a lost message
            hook_ctx.error = e
            log.warning("listener of %s raised on %d message(s) from %s: %r", self.group, len(msgs), mq, e)
        hook_ctx.duration_ms = (time.perf_counter() - started) * 1000
        if metrics.CLIENT_METRICS is not None:
            metrics.CLIENT_METRICS.consume_latency.labels(self.group, mq.topic).observe(hook_ctx.duration_ms / 1000)
        hook_ctx.status = status.value
        hook_ctx.success = status is not failure
        self._run_hooks("after", hook_ctx)
        return status

    def _run_hooks(self, phase: str, ctx: ConsumeMessageContext) -> None:
        for hook in self._hooks:
            try:
                getattr(hook, phase)(ctx)
            except Exception as e:
                log.warning("consume hook %r.%s raised: %r", hook, phase, e)

    def _done(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        # The offset to commit is read from the process queue when offsets are persisted.
        limited = self._core.flow_limited(pq)
        pq.remove(msgs)
        if limited:
            self._core.wake()

    def _reconsume_later(self, pq: ProcessQueue, msgs: list[MessageExt], delay_level: int) -> None:
        """Send each message back (retry topic, or the DLQ past ``max_reconsume_times``); a message
        that cannot be sent back is consumed again here after LOCAL_RECONSUME_DELAY_S, its offset
        held back meanwhile."""
        failed = []
        for m in msgs:
            try:
                self._send_back.send_back(m, delay_level)
            except MQError as e:
                log.warning("sending %s back failed, consuming it again in %s s: %s", m.msg_id, LOCAL_RECONSUME_DELAY_S, e)
                failed.append(m)
        failed_ids = {id(m) for m in failed}
        self._done(pq, [m for m in msgs if id(m) not in failed_ids])
        if failed:
            for m in failed:
                m.reconsume_times += 1
            timer = threading.Timer(LOCAL_RECONSUME_DELAY_S, self._deliver, args=(pq, failed))
            timer.daemon = True
            timer.start()

    def _send_back_overdue(self) -> None:
        """Send back messages whose listener call exceeded ``consume_timeout_min`` [RocketMQ ``cleanExpiredMsg``]."""
        if self._core.message_model is not MessageModel.CLUSTERING or self._orderly is not None:
            return  # orderly: a slow batch holds its queue by design
        for pq in list(self._core.process_queues.values()):
            overdue = pq.overdue(self.consume_timeout_min * 60)
            if overdue:
                log.warning("%d message(s) of %s exceeded consume_timeout_min=%s: sending them back",
                            len(overdue), pq.queue, self.consume_timeout_min)  # fmt: skip
                self._reconsume_later(pq, overdue, 0)

    def _drain(self) -> None:
        with self._in_flight_cv:
            self._in_flight_cv.wait_for(lambda: self._in_flight == 0, timeout=30)
