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
import math
import time
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, cast

from mq.aio.core import AsyncConsumerCore, AsyncFacade
from mq.aio.orderly import AsyncOrderlyService
from mq.consumer.concurrently import (
    check_startable,
    done,
    send_back_op,
    tasks_of,
    tried_again,
)
from mq.consumer.listener import ainvoke
from mq.consumer.machine import Answered, Listen, Reconsume, consume_task
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.push import DEFAULT_MAX_RECONSUME_TIMES, LOCAL_RECONSUME_DELAY_S, PushBase, no_listener
from mq.consumer.retry import SendBackOps
from mq.consumer.steps import SHUTDOWN_TIMEOUT_S
from mq.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)
from mq.errors import MQClientError
from mq.filter import MessageSelector
from mq.model.message import MessageExt
from mq.observe import otel
from mq.store.store import StoreOps

log = logging.getLogger("mq.consumer")

#: A concurrent listener: ``async def listener(msgs, ctx) -> ConsumeConcurrentlyStatus`` (or a plain function).
Listener = Callable[
    [list[MessageExt], ConsumeConcurrentlyContext], Awaitable[ConsumeConcurrentlyStatus] | ConsumeConcurrentlyStatus
]
#: An orderly listener: ``async def listener(msgs, ctx) -> ConsumeOrderlyStatus`` (or a plain function).
OrderlyListener = Callable[[list[MessageExt], ConsumeOrderlyContext], Awaitable[ConsumeOrderlyStatus] | ConsumeOrderlyStatus]
#: What a failed concurrent listener call counts as.
_LATER = ConsumeConcurrentlyStatus.RECONSUME_LATER
#: Seconds a plain (not ``async``) listener call may hold the event loop before it is reported
#: (asyncio's own ``slow_callback_duration`` in debug mode is 0.1 s too).
DEFAULT_SLOW_LISTENER_WARN_S = 0.1
#: At most one "a plain listener blocked the event loop" warning per this many seconds per consumer
#: (the next one says how many calls were slow meanwhile): a listener that always blocks must not
#: flood the log.
SLOW_LISTENER_WARN_EVERY_S = 30.0


class SlowListenerWarner:
    """Reports plain listener calls that held the event loop longer than ``threshold_s`` seconds: a
    logging WARNING, at most one per ``every_s`` seconds, counting the slow calls since the last one."""

    def __init__(self, group: str, threshold_s: float, every_s: float = SLOW_LISTENER_WARN_EVERY_S) -> None:
        self.group = group
        self.threshold_s = threshold_s
        self.every_s = every_s
        #: slow calls seen so far (all of them, reported or not)
        self.slow_calls = 0
        self._unreported = 0
        self._longest_s = 0.0
        self._last_warned = -math.inf

    def __call__(self, seconds: float) -> None:
        """A plain listener call held the loop for ``seconds``."""
        if seconds <= self.threshold_s:
            return
        self.slow_calls += 1
        self._unreported += 1
        self._longest_s = max(self._longest_s, seconds)
        now = time.monotonic()
        if now - self._last_warned < self.every_s:
            return
        log.warning(
            "a plain (not async) listener of %s blocked the event loop: %d call(s) longer than %.3f s, the longest "
            "%.3f s (nothing else on the loop ran meanwhile): make it an async def that awaits its I/O, or run the "
            "blocking part with asyncio.to_thread (next report in %.0f s at the earliest)",
            self.group,
            self._unreported,
            self.threshold_s,
            self._longest_s,
            self.every_s,
        )
        self._last_warned, self._unreported, self._longest_s = now, 0, 0.0


class PushConsumer(AsyncFacade, PushBase[AsyncConsumerCore]):
    """Consumes the subscribed topics with an async listener, in tasks (see :class:`mq.PushConsumer`
    for every argument; here ``consume_thread_max`` bounds the listener calls running at once).

    Back-pressure is the sync consumer's flow control: a queue stops being pulled above 1000 cached
    messages, 100 MiB or an offset span of 2000 (concurrently), so the messages in flight are
    bounded; at most ``consume_thread_max`` listener calls run at once. ``trace=True`` is not
    supported yet (the trace writer is a thread): use the sync consumer to record traces.

    A plain (not ``async``) listener is called in the event loop's thread, so it must not block:
    a call that holds the loop longer than ``slow_listener_warn_s`` seconds (default 0.1; None: never)
    is reported as a logging WARNING, at most one every :data:`SLOW_LISTENER_WARN_EVERY_S` seconds.

    Use ``async with``, or ``await start()`` and ``await shutdown()``. No thread is started.
    """

    def __init__(self, *args: Any, slow_listener_warn_s: float | None = DEFAULT_SLOW_LISTENER_WARN_S, **kwargs: Any) -> None:
        """As :class:`mq.PushConsumer`, plus ``slow_listener_warn_s`` (seconds, see the class docstring).

        Raises:
            MQClientError: ``slow_listener_warn_s`` is not a positive finite number or None.
        """
        if slow_listener_warn_s is not None and not (
            isinstance(slow_listener_warn_s, int | float)
            and not isinstance(slow_listener_warn_s, bool)
            and math.isfinite(slow_listener_warn_s)
            and slow_listener_warn_s > 0
        ):
            raise MQClientError(
                f"slow_listener_warn_s must be a positive number of seconds or None (never warn), not {slow_listener_warn_s!r}"
            )
        self.slow_listener_warn_s = slow_listener_warn_s
        super().__init__(*args, **kwargs)

    _core_type = AsyncConsumerCore
    _no_trace = "trace=True is not supported by mq.aio.PushConsumer yet: use mq.PushConsumer to record traces"
    _orderly: AsyncOrderlyService | None

    def _setup(self, trace: bool | None) -> None:
        self._orderly = None
        self._send_back = SendBackOps(self._store, self.group, DEFAULT_MAX_RECONSUME_TIMES)
        self._slots: asyncio.Semaphore | None = None
        self._in_flight = 0
        self._consuming: set[asyncio.Task[None]] = set()
        self._drained = asyncio.Event()
        self._drained.set()
        self._started = False
        warn_s = self.slow_listener_warn_s
        self._slow: SlowListenerWarner | None = SlowListenerWarner(self.group, warn_s) if warn_s is not None else None

    # -- configuration --------------------------------------------------------------------------

    def register_message_listener(self, listener: Listener) -> None:
        """Set the concurrent listener: ``async def listener(msgs, ctx) -> ConsumeConcurrentlyStatus``.

        A plain function is called in the event loop's thread: it must not block (a call longer than
        ``slow_listener_warn_s`` is logged). A listener that raises counts as RECONSUME_LATER — a
        ``CancelledError`` of its own too (one it got from a future something else cancelled); only the
        consumer's own cancellation (its shutdown) stops a call without counting as a failure.
        """
        self._listener = listener

    def register_orderly_listener(self, listener: OrderlyListener) -> None:
        """Set an orderly listener: ``async def listener(msgs, ctx) -> ConsumeOrderlyStatus``.

        Each queue is consumed by one task at a time, in offset order, and in clustering mode only
        while this client holds the queue's lock in the store. A plain function must not block (a call
        longer than ``slow_listener_warn_s`` is logged). A listener that raises (its own
        ``CancelledError`` too) counts as SUSPEND_CURRENT_QUEUE_A_MOMENT.
        """
        self._orderly_listener = listener

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> PushConsumer:
        """Register in the group and start consuming (on the running event loop). Returns self."""
        check_startable(self._listener, self._orderly_listener, self._subscriptions)
        if self._started:
            return self
        # a server that cannot confirm as asked is refused before any write
        await self._astore().run(StoreOps.check_writes.op(self._store))
        orderly = self._consumes_orderly()
        if (
            self.message_model is MessageModel.CLUSTERING
        ):  # retries and resent dead letters come back through the group's retry topic
            retry = await self._astore().run(SendBackOps.ensure_retry_topic.op(self._send_back))
            self._subscriptions[retry] = MessageSelector.by_tag("*")
        core = self._build_core(self, orderly=orderly is not None)
        if orderly is not None:
            self._orderly = AsyncOrderlyService(
                core,
                self._call_orderly,
                self._send_back,
                orderly,
            )
        self._slots = asyncio.Semaphore(self.consume_thread_max)
        self._started = True
        await core.start(jobs=[(self._send_back_overdue, self._overdue_every_s, "consume-timeout")])
        self._send_back.max_reconsume_times = self.max_reconsume_times  # the group's config is known now
        return self

    async def shutdown(self, *, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Stop fetching, let the listener calls in progress finish within ``timeout_s`` seconds, commit
        the offsets of finished messages, release queues and leave the group.

        Messages fetched but not handed to the listener yet are not started: they stay uncommitted and
        are delivered again (to this group's next owner of their queue), so a shutdown waits for the
        calls in progress only, never for the whole cache (D98). The same holds when the task in
        ``async with`` is cancelled (``__aexit__`` shuts down).

        Returns False when listener calls were still running at the bound: they are cancelled, their
        messages are not committed (they are delivered again), and a warning says how many.
        """
        core = self._core
        if not self._started or core is None:
            return True
        self._started = False
        clean = await core.shutdown(wait_consumed=self._drain, timeout_s=timeout_s)
        await self._close_connection()
        return clean

    async def __aenter__(self) -> PushConsumer:
        return await self.start()

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.shutdown()

    # -- consumption (what the core asks, see mq.consumer.parts.Consumption) ---------------------

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
            task = core.spawn(self._consume(pq, batches), f"mq-consume-{self.group}")
            self._consuming.add(task)
            task.add_done_callback(self._consuming.discard)

    async def _consume(self, pq: ProcessQueue, batches: list[list[MessageExt]]) -> None:
        # One worker task (mq.consumer.machine.consume_task, as the sync consumer runs it) in this
        # coroutine: one slot is held for its listener calls (made one after another anyway), and the
        # consumed messages are forgotten together at the end. No coroutine of our own per call: a
        # no-op listener's call costs less than the frames around it.
        assert self._slots is not None
        consumed: list[MessageExt] = []
        steps = Answered(consume_task(pq, batches, consumed, broadcasting=self.message_model is MessageModel.BROADCASTING))
        spans = otel.enabled()
        group, hooks, listener, queue = self.group, self._hooks, self._listener or no_listener, pq.queue
        namespace, consuming, slow = self._conn.namespace, pq.consuming, self._slow
        try:
            async with self._slots:
                for step in steps:
                    try:
                        if type(step) is Listen:
                            if not self._started:
                                return  # shutting down: only calls in progress finish, the rest is delivered again (D98)
                            msgs, began = step.msgs, time.monotonic()
                            for m in msgs:
                                consuming[m.queue_offset] = began
                            try:
                                steps.answer = await ainvoke(
                                    group,
                                    hooks,
                                    listener,
                                    queue,
                                    msgs,
                                    step.ctx,
                                    _LATER,
                                    namespace=namespace,
                                    spans=spans,
                                    blocked=slow,
                                )
                            finally:
                                for m in msgs:
                                    consuming.pop(m.queue_offset, None)
                        else:
                            back = cast(Reconsume, step)
                            await self._reconsume_later(pq, back.msgs, back.delay_level)
                    except Exception:  # our own handling failed: never leave the messages stuck in flight
                        self._handling_failed(pq, step[0], "handling the listener's answer for")
        finally:
            try:
                if consumed and self._core is not None:
                    done(self._core.puller, pq, consumed)
            except Exception:  # as for a batch: never leave consumed messages stuck in flight
                self._handling_failed(pq, consumed, "forgetting the consumed")
            finally:
                self._in_flight -= 1
                if self._in_flight == 0:
                    self._drained.set()

    async def _call_orderly(self, pq: ProcessQueue, msgs: list[MessageExt], ctx: ConsumeOrderlyContext) -> ConsumeOrderlyStatus:
        return await ainvoke(
            self.group,
            self._hooks,
            self._orderly_listener or no_listener,
            pq.queue,
            msgs,
            ctx,
            ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT,
            namespace=self._conn.namespace,
            blocked=self._slow,
        )

    async def _reconsume_later(self, pq: ProcessQueue, msgs: list[MessageExt], delay_level: int) -> None:
        """Send each message back (retry topic, or the DLQ past ``max_reconsume_times``); a message
        that cannot be sent back is consumed again here after LOCAL_RECONSUME_DELAY_S."""
        assert self._core is not None
        self._sent_back(pq, msgs, await self._core.run(send_back_op(self._send_back, msgs, delay_level, LOCAL_RECONSUME_DELAY_S)))

    def _reconsume_here(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Deliver ``msgs`` again to this consumer after ``LOCAL_RECONSUME_DELAY_S`` (their offsets stay held)."""
        asyncio.get_running_loop().call_later(LOCAL_RECONSUME_DELAY_S, self.deliver, pq, tried_again(msgs))

    async def _send_back_overdue(self) -> None:
        """Send back messages whose listener call exceeded ``consume_timeout_min``."""
        for pq, msgs in self._overdue():
            await self._reconsume_later(pq, msgs, 0)

    async def _drain(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the listener tasks in flight; False when some still run (they
        are cancelled then: the messages they finished are forgotten, so committed, the rest not)."""
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
            tasks = list(self._consuming)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            return False
