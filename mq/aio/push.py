"""``aio.PushConsumer``: messages are pulled for you and handed to an ``async def`` listener, in
asyncio tasks on the running event loop [RocketMQ ``DefaultMQPushConsumer``].

It is :class:`mq.PushConsumer` with tasks for threads: the same constructor arguments and methods,
the same core steps (:mod:`mq.consumer.steps`, scheduled by :class:`~mq.aio.core.AsyncConsumerCore`),
the same ownership, offsets, long polling, flow control, retry and DLQ decisions
(:mod:`mq.consumer.concurrently`, :class:`~mq.consumer.orderly.OrderlySteps`), and the same store
protocol, so sync and asyncio members share one group.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any

from mq.aio.core import AsyncConsumerCore
from mq.aio.orderly import AsyncOrderlyService
from mq.consumer.allocate import AllocateMessageQueueStrategy
from mq.consumer.base import QueueConsumerBase
from mq.consumer.concurrently import (
    acknowledged,
    check_push_options,
    check_startable,
    done,
    max_reconsume_times_of,
    overdue,
    send_back_op,
    tasks_of,
    tried_again,
)
from mq.consumer.listener import ainvoke
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.puller import CONSUME_CONCURRENTLY_MAX_SPAN
from mq.consumer.push import (
    DEFAULT_CONSUME_BATCH_MAX_SIZE,
    DEFAULT_CONSUME_THREAD_MAX,
    DEFAULT_CONSUME_TIMEOUT_MIN,
    DEFAULT_MAX_RECONSUME_TIMES,
    DEFAULT_PULL_BATCH_SIZE,
    DEFAULT_SUSPEND_MS,
    LOCAL_RECONSUME_DELAY_S,
)
from mq.consumer.retry import SendBackOps
from mq.consumer.steps import SHUTDOWN_TIMEOUT_S
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
from mq.message import MessageExt
from mq.store.ops import arun
from mq.store.replication import SyncReplicas

log = logging.getLogger("mq.consumer")

#: A concurrent listener: ``async def listener(msgs, ctx) -> ConsumeConcurrentlyStatus`` (or a plain function).
Listener = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext], Awaitable[ConsumeConcurrentlyStatus] | ConsumeConcurrentlyStatus
]
#: An orderly listener: ``async def listener(msgs, ctx) -> ConsumeOrderlyStatus`` (or a plain function).
OrderlyListener = Callable[[list[MessageExt], ConsumeOrderlyContext], Awaitable[ConsumeOrderlyStatus] | ConsumeOrderlyStatus]


class PushConsumer(QueueConsumerBase[AsyncConsumerCore]):
    """Consumes the subscribed topics with an async listener, in tasks (see :class:`mq.PushConsumer`
    for every argument; here ``consume_thread_max`` bounds the listener calls running at once).

    Back-pressure is the sync consumer's flow control: a queue stops being pulled above 1000 cached
    messages, 100 MiB or an offset span of 2000 (concurrently), so the messages in flight are
    bounded; at most ``consume_thread_max`` listener calls run at once. ``trace=True`` is not
    supported yet (the trace writer is a thread): use the sync consumer to record traces.

    Use ``async with``, or ``await start()`` and ``await shutdown()``. No thread is started.
    """

    _core_type = AsyncConsumerCore

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
        sync_replicas: int = 0,
        sync_replicas_timeout_ms: int = 1000,
    ) -> None:
        check_push_options(
            consume_timeout_min=consume_timeout_min,
            consume_thread_max=consume_thread_max,
            consume_message_batch_max_size=consume_message_batch_max_size,
            max_reconsume_times=max_reconsume_times,
        )
        if trace:
            raise MQClientError("trace=True is not supported by mq.aio.PushConsumer yet: use mq.PushConsumer to record traces")
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
            sync=SyncReplicas(sync_replicas, sync_replicas_timeout_ms),
        )
        self.consume_thread_max = consume_thread_max
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.consume_timeout_min = consume_timeout_min
        self.suspend_current_queue_time_ms = suspend_current_queue_time_ms
        self._max_reconsume_times = max_reconsume_times
        self._listener: Listener | None = None
        self._orderly_listener: OrderlyListener | None = None
        self._orderly: AsyncOrderlyService | None = None
        self._hooks: list[ConsumeHook] = []
        self._send_back = SendBackOps(self._store, self.group, DEFAULT_MAX_RECONSUME_TIMES)
        self._slots: asyncio.Semaphore | None = None
        self._in_flight = 0
        self._drained = asyncio.Event()
        self._drained.set()
        self._started = False
        # what the core needs to know of this kind of consumption (see mq.consumer.parts.Consumption)
        self.max_span: int | None = CONSUME_CONCURRENTLY_MAX_SPAN
        self.drains_on_release = True  # orderly releases between two batches instead
        self.seeds_start = True

    # -- configuration --------------------------------------------------------------------------

    def register_message_listener(self, listener: Listener) -> None:
        """Set the concurrent listener: ``async def listener(msgs, ctx) -> ConsumeConcurrentlyStatus``.

        A plain function is called in the event loop's thread: it must not block. A listener that
        raises counts as RECONSUME_LATER.
        """
        self._listener = listener

    def register_orderly_listener(self, listener: OrderlyListener) -> None:
        """Set an orderly listener: ``async def listener(msgs, ctx) -> ConsumeOrderlyStatus``.

        Each queue is consumed by one task at a time, in offset order, and in clustering mode only
        while this client holds the queue's lock in the store. A plain function must not block. A
        listener that raises counts as SUSPEND_CURRENT_QUEUE_A_MOMENT.
        """
        self._orderly_listener = listener

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

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> PushConsumer:
        """Register in the group and start consuming (on the running event loop). Returns self."""
        check_startable(self._listener, self._orderly_listener, self._subscriptions)
        if self._started:
            return self
        orderly = self._orderly_listener is not None
        if orderly:
            self.max_span, self.drains_on_release = None, False
        elif self.message_model is MessageModel.CLUSTERING:  # retries come back through the group's retry topic
            retry = await arun(self._conn.async_client, SendBackOps.ensure_retry_topic.op(self._send_back))
            self._subscriptions[retry] = MessageSelector.by_tag("*")
        core = self._build_core(self, orderly=orderly)
        if orderly:
            self._orderly = AsyncOrderlyService(
                core,
                self._call_orderly,
                self._send_back,
                batch_size=self.consume_message_batch_max_size,
                max_reconsume_times=self.max_reconsume_times,
                suspend_ms=self.suspend_current_queue_time_ms,
            )
        self._slots = asyncio.Semaphore(self.consume_thread_max)
        self._started = True
        await core.start(jobs=[(self._send_back_overdue, min(60.0, self.consume_timeout_min * 60 / 4), "consume-timeout")])
        self._send_back.max_reconsume_times = self.max_reconsume_times  # the group's config is known now
        return self

    async def shutdown(self, *, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Stop fetching, let in-flight messages finish within ``timeout_s`` seconds, commit the offsets
        of finished ones, release queues and leave the group.

        Returns False when listener calls were still running at the bound: they are cancelled, their
        messages are not committed (they are delivered again), and a warning says how many.
        """
        core = self._core
        if not self._started or core is None:
            return True
        self._started = False
        clean = await core.shutdown(wait_consumed=self._drain, timeout_s=timeout_s)
        await self._conn.aclose()
        return clean

    async def __aenter__(self) -> PushConsumer:
        return await self.start()

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.shutdown()

    # -- consumption (what the core asks, see mq.consumer.parts.Consumption) ---------------------

    def commit_offset(self, pq: ProcessQueue) -> int | None:
        """What may be committed for ``pq``: the smallest offset still in flight (or the next one)."""
        return pq.commit_offset()

    def deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Hand pulled messages to listener tasks (orderly: to the queue's consume task)."""
        core = self._core
        if not self._started or core is None:
            return
        if self._orderly is not None:
            self._orderly.deliver(pq, msgs)
            return
        queues = len(core.process_queues)
        for batches in tasks_of(pq, msgs, self.consume_message_batch_max_size, workers=self.consume_thread_max, queues=queues):
            self._in_flight += 1
            self._drained.clear()
            core.spawn(self._consume(pq, batches), f"mq-consume-{self.group}")

    async def _consume(self, pq: ProcessQueue, batches: list[list[MessageExt]]) -> None:
        try:
            for msgs in batches:
                if pq.dropped:
                    return  # taken over after a failure: the new owner consumes the rest
                try:
                    await self._consume_batch(pq, msgs)
                except Exception:  # our own handling failed: never leave the messages stuck in flight
                    log.exception(
                        "handling the listener's answer for %d message(s) of %s failed; they are consumed again here in %s s",
                        len(msgs),
                        pq.queue,
                        LOCAL_RECONSUME_DELAY_S,
                    )
                    self._reconsume_here(pq, msgs)
        finally:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._drained.set()

    async def _consume_batch(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        assert self._slots is not None and self._core is not None
        ctx = ConsumeConcurrentlyContext.of(pq.queue)
        async with self._slots:
            began = time.monotonic()
            for m in msgs:
                pq.consuming[m.queue_offset] = began
            try:
                status = await ainvoke(
                    self.group,
                    self._hooks,
                    self._listener or _no_listener,
                    pq.queue,
                    msgs,
                    ctx,
                    ConsumeConcurrentlyStatus.RECONSUME_LATER,
                    namespace=self._conn.namespace,
                )
            finally:
                for m in msgs:
                    pq.consuming.pop(m.queue_offset, None)
        ok, failed = acknowledged(msgs, status, ctx, broadcasting=self.message_model is MessageModel.BROADCASTING)
        if ok:
            done(self._core.puller, pq, ok)
        if failed:
            await self._reconsume_later(pq, failed, ctx.delay_level_when_next_consume)

    async def _call_orderly(self, pq: ProcessQueue, msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        return await ainvoke(
            self.group,
            self._hooks,
            self._orderly_listener or _no_listener,
            pq.queue,
            msgs,
            ctx,
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
            namespace=self._conn.namespace,
        )

    async def _reconsume_later(self, pq: ProcessQueue, msgs: list[MessageExt], delay_level: int) -> None:
        """Send each message back (retry topic, or the DLQ past ``max_reconsume_times``); a message
        that cannot be sent back is consumed again here after LOCAL_RECONSUME_DELAY_S."""
        assert self._core is not None
        failed = await self._core.run(send_back_op(self._send_back, msgs, delay_level, LOCAL_RECONSUME_DELAY_S))
        failed_ids = {id(m) for m in failed}
        done(self._core.puller, pq, [m for m in msgs if id(m) not in failed_ids])
        if failed:
            self._reconsume_here(pq, failed)

    def _reconsume_here(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Deliver ``msgs`` again to this consumer after ``LOCAL_RECONSUME_DELAY_S`` (their offsets stay held)."""
        asyncio.get_running_loop().call_later(LOCAL_RECONSUME_DELAY_S, self.deliver, pq, tried_again(msgs))

    async def _send_back_overdue(self) -> None:
        """Send back messages whose listener call exceeded ``consume_timeout_min``."""
        if self.message_model is not MessageModel.CLUSTERING or self._orderly is not None or self._core is None:
            return  # orderly: a slow batch holds its queue by design
        for pq, msgs in overdue(list(self._core.process_queues.values()), self.consume_timeout_min):
            await self._reconsume_later(pq, msgs, 0)

    async def _drain(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the listener tasks in flight; False when some still run."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._drained.wait()
            return True
        except TimeoutError:
            log.warning(
                "%d listener task(s) of %s still run after %.1f s: their messages are not committed and are delivered again",
                self._in_flight,
                self.group,
                timeout_s,
            )
            return False


def _no_listener(msgs: list[MessageExt], ctx: Any) -> None:
    raise MQClientError("no listener registered")
