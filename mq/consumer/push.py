"""``PushConsumer``: messages are pulled for you and handed to a listener [RocketMQ
``DefaultMQPushConsumer`` with ``ConsumeMessageConcurrentlyService``]."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Literal, cast

from mq.consumer.allocate import AllocateMessageQueueStrategy
from mq.consumer.base import CoreT, QueueConsumerBase
from mq.consumer.concurrently import (
    check_push_options,
    check_startable,
    done,
    max_reconsume_times_of,
    overdue,
    send_back_op,
    tried_again,
)
from mq.consumer.core import SHUTDOWN_TIMEOUT_S, ConsumerCore
from mq.consumer.listener import invoke
from mq.consumer.machine import Answered, Batches, Concurrent, Listen, Orderly, Reconsume, consume_task
from mq.consumer.orderly import OrderlyService
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.retry import SendBack
from mq.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeHook,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)
from mq.errors import MQClientError
from mq.filter import MessageSelector
from mq.model.message import MessageExt
from mq.observe import otel
from mq.observe.trace import Tracer
from mq.store.replication import SyncReplicas

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

#: Default pause of a suspended orderly queue, ms [RocketMQ ``suspendCurrentQueueTimeMillis``].
DEFAULT_SUSPEND_MS = 1000

#: The statuses, looked up once (a member lookup on an Enum class costs more than a listener call
#: that does nothing, in Python 3.11).
_CONSUME_SUCCESS = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
_RECONSUME_LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER

Listener = Callable[[list[MessageExt], ConsumeConcurrentlyContext], ConsumeConcurrentlyStatus]
OrderlyListener = Callable[[list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]


class PushBase(QueueConsumerBase[CoreT]):
    """What the sync and asyncio push consumers share: the arguments (see :class:`PushConsumer`), the
    settings checked once, the listener's retries, and the consume-timeout scan. A subclass adds its
    own scheduling state (threads or tasks) in :meth:`_setup`."""

    #: Why ``trace=True`` is refused by this class (None: it records traces).
    _no_trace: str | None = None

    _listener: Callable[..., Any] | None
    _orderly_listener: Callable[..., Any] | None
    _orderly: object | None  # the orderly service, made at start

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
        trace: bool | None = None,
        sync_replicas: int | Literal["all"] = 0,
        sync_replicas_timeout_ms: int = 1000,
        sync_flush: bool = False,
    ) -> None:
        check_push_options(
            consume_timeout_min=consume_timeout_min,
            consume_thread_max=consume_thread_max,
            consume_message_batch_max_size=consume_message_batch_max_size,
            max_reconsume_times=max_reconsume_times,
        )
        if trace and self._no_trace is not None:
            raise MQClientError(self._no_trace)
        super().__init__(
            group,
            url,
            namespace=namespace,
            message_model=message_model,
            consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms,
            allocate_strategy=allocate_strategy,
            pull_batch_size=pull_batch_size,
            client_id=client_id,
            kind="push",
            sync=SyncReplicas(sync_replicas, sync_replicas_timeout_ms, sync_flush),
        )
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.consume_timeout_min = consume_timeout_min
        self.suspend_current_queue_time_ms = suspend_current_queue_time_ms
        self._max_reconsume_times = max_reconsume_times
        self._listener = None
        self._orderly_listener = None
        self._hooks: list[ConsumeHook] = []
        # how messages reach the listener (the orderly policy replaces it at start when an orderly
        # listener is registered); the core reads max_span and drains_on_release from it
        self._dispatch: Concurrent | Orderly = Concurrent()
        self.seeds_start = True
        self._setup(trace)

    def _setup(self, trace: bool | None) -> None:
        """Make what the subclass needs besides the shared state (``trace``: the argument)."""

    def register_consume_hook(self, hook: ConsumeHook) -> None:
        """Add a hook whose ``before``/``after`` run around every listener call (plain functions)."""
        self._hooks.append(hook)

    @property
    def max_reconsume_times(self) -> int:
        """Retries before the DLQ (-1: unlimited)."""
        config = self._core.group_config if self._core is not None else None
        orderly = self._orderly_listener is not None
        return max_reconsume_times_of(
            self._max_reconsume_times, orderly=orderly, config=config, default=DEFAULT_MAX_RECONSUME_TIMES
        )

    def _consumes_orderly(self) -> Orderly | None:
        """At start: the orderly policy when an orderly listener is registered (then it is the one
        the core reads its settings from), else None."""
        if self._orderly_listener is None:
            return None
        self._dispatch = orderly = Orderly(
            batch_size=self.consume_message_batch_max_size,
            max_reconsume_times=self.max_reconsume_times,
            suspend_ms=self.suspend_current_queue_time_ms,
        )
        return orderly

    @property
    def max_span(self) -> int | None:
        """Flow control's offset span of cached messages (None: no limit, orderly)."""
        return self._dispatch.max_span

    @property
    def drains_on_release(self) -> bool:
        """Whether a queue being released first waits for its cached messages to be consumed."""
        return self._dispatch.drains_on_release

    @property
    def _overdue_every_s(self) -> float:
        """Seconds between two scans for listener calls past ``consume_timeout_min``."""
        return min(60.0, self.consume_timeout_min * 60 / 4)

    def _overdue(self) -> list[tuple[ProcessQueue, list[MessageExt]]]:
        """The messages whose listener call exceeded ``consume_timeout_min``, to send back [RocketMQ
        ``cleanExpiredMsg``]; none in broadcasting or orderly consumption (a slow orderly batch holds
        its queue by design)."""
        if self.message_model is not MessageModel.CLUSTERING or self._orderly is not None or self._core is None:
            return []
        return overdue(list(self._core.process_queues.values()), self.consume_timeout_min)

    def commit_offset(self, pq: ProcessQueue) -> int | None:
        """What may be committed for ``pq``: the smallest offset still in flight (or the next one)."""
        return pq.commit_offset()

    def _handling_failed(self, pq: ProcessQueue, msgs: list[MessageExt], what: str) -> None:
        """Log that our own handling of ``msgs`` failed (``what``: the step) and consume them again here."""
        log.exception(
            "%s %d message(s) of %s failed; they are consumed again here in %s s",
            what,
            len(msgs),
            pq.queue,
            LOCAL_RECONSUME_DELAY_S,
        )
        self._reconsume_here(pq, msgs)

    def _sent_back(self, pq: ProcessQueue, msgs: list[MessageExt], failed: list[MessageExt]) -> None:
        """``msgs`` were sent back but for ``failed``: forget the others, consume ``failed`` again here."""
        assert self._core is not None
        failed_ids = {id(m) for m in failed}
        done(self._core.puller, pq, [m for m in msgs if id(m) not in failed_ids])
        if failed:
            self._reconsume_here(pq, failed)

    def _reconsume_here(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Deliver ``msgs`` again to this consumer after ``LOCAL_RECONSUME_DELAY_S`` (their offsets stay held)."""
        raise NotImplementedError


class PushConsumer(PushBase[ConsumerCore]):
    """Consumes the subscribed topics with a listener on a pool of worker threads.

    Args:
        group: consumer group; members share the queues (CLUSTERING) or all get everything
            (BROADCASTING).
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix of the deployment.
        message_model: CLUSTERING (default) or BROADCASTING.
        consume_from_where: where a group without a stored offset starts (LAST_OFFSET: new messages
            only); the group's config (``Admin.create_group``) wins when it has one.
        consume_timestamp_ms: start time for TIMESTAMP, epoch ms (default: 30 minutes before start).
        allocate_strategy: how queues are shared (default ``AllocateMessageQueueAveragely``).
        consume_thread_max: worker threads running the listener.
        pull_batch_size: messages pulled per queue per round trip.
        consume_message_batch_max_size: messages per listener call.
        max_reconsume_times: retries before the dead-letter queue (None: the group's
            ``retry_max_times``, else 16 concurrently; unlimited (-1) orderly).
        client_id: this member's id (default ``host@pid@random``); keep it stable across restarts in
            BROADCASTING mode to resume from the local offsets.
        consume_timeout_min: a listener call running longer than this (minutes) has its messages
            sent back for retry, so one stuck call cannot hold the queue's offset forever.
        suspend_current_queue_time_ms: default pause of a queue whose orderly listener suspends it.
        trace: record each consumption and retry in the message trace (``Admin.message_trace``);
            None follows the namespace (``Admin.set_trace``), off by default.
        sync_replicas: replicas that must confirm this consumer's writes that matter across a
            failover: messages sent back to the retry topic or DLQ, and orderly queue locks (a lock is
            trusted only once confirmed) [RocketMQ ``SYNC_MASTER``]; 0 waits for none, ``"all"`` for
            every replica the master has. With 1 and no replica, orderly consumption does not start.
        sync_replicas_timeout_ms: how long such a write waits for its replicas, milliseconds.
        sync_flush: such a write also waits until it is fsynced to the master's AOF (and to the
            replicas' when ``sync_replicas`` asks for some): ``WAITAOF``, Redis ≥ 7.2 with
            ``appendonly yes``; ``start()`` refuses other servers [RocketMQ ``SYNC_FLUSH``].

    Use as a context manager, or call :meth:`start` and :meth:`shutdown`.
    """

    _core_type = ConsumerCore
    _orderly: OrderlyService | None

    def _setup(self, trace: bool | None) -> None:
        self._orderly = None
        self._executor: ThreadPoolExecutor | None = None
        self._tracer = Tracer(self._store, self.group, self.client_id, trace)
        self._send_back = SendBack(self._store, self.group, DEFAULT_MAX_RECONSUME_TIMES, self._tracer)
        self._in_flight = 0
        self._in_flight_cv = threading.Condition()

    # -- configuration --------------------------------------------------------------------------

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

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> PushConsumer:
        """Register in the group and start consuming. Returns self."""
        check_startable(self._listener, self._orderly_listener, self._subscriptions)
        if self._executor is not None:
            return self
        self._store.check_writes()  # a server that cannot confirm as asked is refused before any write
        orderly = self._consumes_orderly()
        if (
            self.message_model is MessageModel.CLUSTERING
        ):  # retries and resent dead letters come back through the group's retry topic
            self._subscriptions[self._send_back.ensure_retry_topic()] = MessageSelector.by_tag("*")
        core = self._build_core(self, orderly=orderly is not None)
        if orderly is not None:
            self._orderly = OrderlyService(
                core,
                lambda: self._executor,
                self._call_orderly,
                self._send_back,
                orderly,
            )
        self._executor = ThreadPoolExecutor(self.consume_thread_max, thread_name_prefix=f"mq-consume-{self.group}")
        core.start(jobs=[(self._send_back_overdue, self._overdue_every_s, "consume-timeout")])
        self._send_back.max_reconsume_times = self.max_reconsume_times  # the group's config is known now
        return self

    def shutdown(self, *, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Stop fetching, let in-flight messages finish within ``timeout_s`` seconds, commit offsets,
        release queues and leave the group.

        Returns False when listener calls were still running at the bound: they are left running in
        their threads, their messages are not committed (they are delivered again), and a warning
        says how many.
        """
        executor, core = self._executor, self._core
        if executor is None or core is None:
            return True
        clean = core.shutdown(wait_consumed=self._drain, timeout_s=timeout_s)
        executor.shutdown(wait=False, cancel_futures=True)
        self._executor = None
        self._tracer.close()
        return clean

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.shutdown()

    # -- consumption ----------------------------------------------------------------------------

    def deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Hand pulled messages to the worker threads (orderly: to the queue's consume task)."""
        executor = self._executor
        if executor is None:
            return
        if self._orderly is not None:
            self._orderly.deliver(pq, msgs)
            return
        if not msgs:
            return
        queues = len(self._core.process_queues) if self._core is not None else 1
        for batches in Concurrent.tasks(
            pq, msgs, self.consume_message_batch_max_size, workers=self.consume_thread_max, queues=queues
        ):
            with self._in_flight_cv:
                self._in_flight += 1
            executor.submit(self._consume, pq, batches)

    def _consume(self, pq: ProcessQueue, batches: Batches) -> None:
        # One worker task (mq.consumer.machine.consume_task) run on this thread: what holds for the
        # whole task is looked up once; the consumed messages are forgotten together at the end.
        consumed: list[MessageExt] = []
        task = _Task(self, pq)
        steps = Answered(consume_task(pq, batches, consumed, broadcasting=task.broadcasting))
        try:
            for step in steps:
                try:
                    if type(step) is Listen:
                        steps.answer = self._listen(task, step)
                    else:
                        back = cast(Reconsume, step)
                        self._reconsume_later(pq, back.msgs, back.delay_level)
                except Exception:  # our own handling failed: never leave the messages stuck in flight
                    self._handling_failed(pq, step[0], "handling the listener's answer for")
        finally:
            try:
                if consumed:
                    self._done(pq, consumed)
            except Exception:  # as for a batch: never leave consumed messages stuck in flight
                self._handling_failed(pq, consumed, "forgetting the consumed")
            finally:
                with self._in_flight_cv:
                    self._in_flight -= 1
                    self._in_flight_cv.notify_all()

    def _listen(self, task: _Task, step: Listen) -> ConsumeConcurrentlyStatus:
        """One listener call (its messages marked in flight meanwhile, for the consume timeout)."""
        pq, msgs = task.pq, step.msgs
        began = time.monotonic()
        traced = task.traced
        began_ms = self._tracer.now_ms() if traced else 0
        consuming = task.consuming
        for m in msgs:
            consuming[m.queue_offset] = began
        try:
            status = invoke(
                task.group,
                task.hooks,
                task.listener,
                pq.queue,
                msgs,
                step.ctx,
                _RECONSUME_LATER,
                namespace=task.namespace,
                spans=task.spans,
            )
        finally:
            for m in msgs:
                consuming.pop(m.queue_offset, None)
        if traced:
            self._tracer.consumed(pq.queue, msgs, status.value, began_ms, (time.monotonic() - began) * 1000)
        return status

    def _call_orderly(self, pq: ProcessQueue, msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        # a running batch is marked by pq.consume_lock (held by OrderlyService), not pq.consuming
        traced, began = self._tracer.active, time.monotonic()
        began_ms = self._tracer.now_ms() if traced else 0
        status = invoke(
            self.group,
            self._hooks,
            self._orderly_listener or no_listener,
            pq.queue,
            msgs,
            ctx,
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
            namespace=self._conn.namespace,
        )
        if traced:
            self._tracer.consumed(pq.queue, msgs, status.value, began_ms, (time.monotonic() - began) * 1000)
        return status

    def _done(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        # The offset to commit is read from the process queue by the next pull or commit.
        assert self._core is not None
        done(self._core.puller, pq, msgs)

    def _reconsume_later(self, pq: ProcessQueue, msgs: list[MessageExt], delay_level: int) -> None:
        """Send each message back (retry topic, or the DLQ past ``max_reconsume_times``); a message
        that cannot be sent back is consumed again here after LOCAL_RECONSUME_DELAY_S, its offset
        held back meanwhile."""
        self._sent_back(pq, msgs, self._store.run(send_back_op(self._send_back, msgs, delay_level, LOCAL_RECONSUME_DELAY_S)))

    def _reconsume_here(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Deliver ``msgs`` again to this consumer after ``LOCAL_RECONSUME_DELAY_S`` (their offsets stay held)."""
        timer = threading.Timer(LOCAL_RECONSUME_DELAY_S, self.deliver, args=(pq, tried_again(msgs)))
        timer.daemon = True
        timer.start()

    def _send_back_overdue(self) -> None:
        """Send back messages whose listener call exceeded ``consume_timeout_min``."""
        for pq, msgs in self._overdue():
            self._reconsume_later(pq, msgs, 0)

    def _drain(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the listener calls in flight; False when some still run."""
        with self._in_flight_cv:
            done = self._in_flight_cv.wait_for(lambda: self._in_flight == 0, timeout=timeout_s)
            if not done:
                log.warning(
                    "%d listener task(s) of %s still run after %.1f s: their messages are not committed and are delivered again",
                    self._in_flight,
                    self.group,
                    timeout_s,
                )
            return bool(done)


class _Task:
    """What the listener calls of one worker task share, looked up once when the task starts: the
    listener, hooks, whether spans and traces are recorded (the trace setting is re-read at most
    every few seconds anyway), and the queue's in-flight map."""

    __slots__ = ("broadcasting", "consuming", "group", "hooks", "listener", "namespace", "pq", "spans", "traced")

    def __init__(self, consumer: PushConsumer, pq: ProcessQueue) -> None:
        self.pq, self.consuming = pq, pq.consuming
        self.group, self.hooks, self.namespace = consumer.group, consumer._hooks, consumer._conn.namespace
        self.listener = consumer._listener or no_listener
        self.spans = otel.enabled()
        self.traced = consumer._tracer.active
        self.broadcasting = consumer.message_model is MessageModel.BROADCASTING


def no_listener(msgs: list[MessageExt], ctx: object) -> None:
    raise MQClientError("no listener registered")
