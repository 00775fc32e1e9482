"""Orderly consumption: one thread at a time per queue, in offset order, only while this client
holds the queue's store lock [RocketMQ ``ConsumeMessageOrderlyService``].

Each queue has at most one consume task scheduled or running. The task takes batches from the
head of the queue's cache while the lock is valid; after ``MAX_TIME_CONSUME_CONTINUOUSLY_S`` it
yields the worker to other queues. A batch the listener suspends (or raises on) is retried after
``suspend_current_queue_time_ms`` with only its own queue paused; once a message has been tried
``max_reconsume_times + 1`` times it goes to the DLQ and the queue moves on.

What a batch is and what its listener's answer leads to is :class:`OrderlySteps`, shared with the
asyncio push consumer (:mod:`mq.aio.orderly`); :class:`OrderlyService` runs it on worker threads.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass

from mq.consumer.core import ConsumerCore
from mq.consumer.ownership import Ownership
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.retry import SendBack, SendBackOps, original_topic
from mq.consumer.types import ConsumeOrderlyContext, ConsumeOrderlyStatus
from mq.errors import MQError
from mq.message import MessageExt
from mq.store.ops import Op
from mq.validation import RETRY_PREFIX

log = logging.getLogger("mq.consumer")

#: Seconds a queue is consumed without a break before its task yields [RocketMQ ``MAX_TIME_CONSUME_CONTINUOUSLY``].
MAX_TIME_CONSUME_CONTINUOUSLY_S = 60.0
#: Bounds of ``suspend_current_queue_time_ms`` [RocketMQ: 10..30000].
SUSPEND_MIN_MS, SUSPEND_MAX_MS = 10, 30_000
#: Seconds before a queue whose lock is not (yet) valid is tried again.
LOCK_RETRY_S = 0.5

CallListener = Callable[[ProcessQueue, list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]


@dataclass(frozen=True)
class Stop:
    """A queue's consume task stops now; it runs again after ``again`` seconds (None: when messages come)."""

    again: float | None


#: What a task does next: stop, or call the listener on these messages with this context.
Next = Stop | tuple[list[MessageExt], ConsumeOrderlyContext]


class OrderlySteps:
    """The decisions of orderly consumption, with no scheduling: the next batch of a queue, and what
    the listener's answer leads to (the dead-lettering is an operation, see :mod:`mq.store.ops`)."""

    def __init__(
        self, ownership: Ownership, send_back: SendBackOps, *, batch_size: int, max_reconsume_times: int, suspend_ms: int
    ) -> None:
        self._ownership = ownership
        self._send_back = send_back
        self._batch_size = batch_size
        self._max = max_reconsume_times
        self._suspend_ms = suspend_ms

    def next(self, pq: ProcessQueue, began: float) -> Next:
        """What the task of ``pq`` (running since monotonic ``began``) does next."""
        if pq.dropped or pq.releasing:
            return Stop(None)
        if not self._ownership.may_consume(pq):
            return Stop(LOCK_RETRY_S)  # not (or no longer) sure of the lock: wait for its renewal
        if time.monotonic() - began > MAX_TIME_CONSUME_CONTINUOUSLY_S:
            return Stop(0.01)  # let other queues have the worker
        msgs = pq.head(self._batch_size)
        if not msgs:
            return Stop(None)
        if pq.queue.topic.startswith(RETRY_PREFIX):  # the listener sees the topic the message was sent to
            msgs = [dataclasses.replace(m, topic=original_topic(m)) for m in msgs]
        return msgs, ConsumeOrderlyContext(pq.queue, suspend_current_queue_time_ms=self._suspend_ms)

    def answered(
        self, pq: ProcessQueue, msgs: list[MessageExt], ctx: ConsumeOrderlyContext, status: ConsumeOrderlyStatus
    ) -> Op[Stop | None]:
        """Take in the listener's answer on ``msgs``: None goes on with the next batch, a Stop suspends the queue."""
        if status is ConsumeOrderlyStatus.SUCCESS:
            pq.remove(msgs)  # the next pull or commit stores the offset
            return None
        msgs = pq.tried_again(msgs)
        dead = [m for m in msgs if 0 <= self._max < m.reconsume_times]
        if dead and (yield from self._dead_letter(pq, dead)):
            return None
        return Stop(min(max(ctx.suspend_current_queue_time_ms, SUSPEND_MIN_MS), SUSPEND_MAX_MS) / 1000)

    def _dead_letter(self, pq: ProcessQueue, dead: list[MessageExt]) -> Op[bool]:
        """Move poison messages to the DLQ so their queue can go on; False if the store refused."""
        try:
            for m in dead:
                yield from SendBackOps.dead_letter.op(self._send_back, m, f"orderly consumption failed {m.reconsume_times} times")
        except MQError as e:
            log.warning("moving poison messages of %s to the DLQ failed, retrying: %s", pq.queue, e)
            return False
        pq.remove(dead)
        return True


class OrderlyService:
    """Schedules and runs the per-queue consume tasks of an orderly push consumer."""

    def __init__(
        self,
        core: ConsumerCore,
        executor: Callable[[], Executor | None],
        call: CallListener,
        send_back: SendBack,
        *,
        batch_size: int,
        max_reconsume_times: int,
        suspend_ms: int,
    ) -> None:
        self._core = core
        self._executor = executor
        self._call = call
        self._steps = OrderlySteps(
            core.ownership, send_back, batch_size=batch_size, max_reconsume_times=max_reconsume_times, suspend_ms=suspend_ms
        )
        self._lock = threading.Lock()

    def deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """New messages were cached for ``pq``: make sure its task runs."""
        self.submit(pq)

    def submit(self, pq: ProcessQueue, delay_s: float = 0.0) -> None:
        """Schedule ``pq``'s task unless one is scheduled or running already."""
        with self._lock:
            if pq.orderly_active or pq.dropped:
                return
            pq.orderly_active = True
        if delay_s > 0:
            timer = threading.Timer(delay_s, self._start, args=(pq,))
            timer.daemon = True
            timer.start()
        else:
            self._start(pq)

    def _start(self, pq: ProcessQueue) -> None:
        executor = self._executor()
        if executor is None:
            pq.orderly_active = False
            return
        executor.submit(self._run, pq)

    def _run(self, pq: ProcessQueue) -> None:
        again: float | None = None
        try:
            again = self._consume(pq)
        finally:
            with self._lock:
                pq.orderly_active = False
            if again is not None:
                self.submit(pq, again)
            elif pq.count and not (pq.dropped or pq.releasing):
                self.submit(pq)  # messages arrived while this task was finishing

    def _consume(self, pq: ProcessQueue) -> float | None:
        """Consume batches in order; returns seconds until the task should run again, or None."""
        began = time.monotonic()
        while True:
            with pq.consume_lock:  # the queue is not given up while a batch runs (see ConsumerCore._release)
                again, done = self._batch(pq, began)
            if done:
                return again

    def _batch(self, pq: ProcessQueue, began: float) -> tuple[float | None, bool]:
        """One listener call on the head of ``pq``: (seconds until the task runs again, or None;
        whether the task stops now)."""
        step = self._steps.next(pq, began)
        if isinstance(step, Stop):
            return step.again, True
        msgs, ctx = step
        stop = self._core.store.run(self._steps.answered(pq, msgs, ctx, self._call(pq, msgs, ctx)))
        return (None, False) if stop is None else (stop.again, True)
