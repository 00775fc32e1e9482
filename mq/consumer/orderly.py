"""Orderly consumption: one thread at a time per queue, in offset order, only while this client
holds the queue's store lock [RocketMQ ``ConsumeMessageOrderlyService``].

Each queue has at most one consume task scheduled or running. The task takes batches from the
head of the queue's cache while the lock is valid; after ``MAX_TIME_CONSUME_CONTINUOUSLY_S`` it
yields the worker to other queues. A batch the listener suspends (or raises on) is retried after
``suspend_current_queue_time_ms`` with only its own queue paused; once a message has been tried
``max_reconsume_times + 1`` times it goes to the DLQ and the queue moves on.

What a batch is and what its listener's answer leads to is :class:`~mq.consumer.machine.Orderly`
(:class:`OrderlySteps` adds the dead-lettering operation), shared with the asyncio push consumer
(:mod:`mq.aio.orderly`); :class:`OrderlyService` runs it on worker threads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor

from mq.consumer.core import ConsumerCore
from mq.consumer.machine import Call, DeadLetter, Orderly, Stop
from mq.consumer.ownership import Ownership
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.retry import SendBack, SendBackOps
from mq.consumer.types import ConsumeOrderlyContext, ConsumeOrderlyStatus
from mq.errors import MQError
from mq.model.message import MessageExt
from mq.store.ops import Op

log = logging.getLogger("mq.consumer")

CallListener = Callable[[ProcessQueue, list[MessageExt], ConsumeOrderlyContext], ConsumeOrderlyStatus]


class OrderlySteps:
    """The orderly decisions (:class:`~mq.consumer.machine.Orderly`) with the dead-lettering they may
    ask for as an operation (see :mod:`mq.store.ops`), for either driver to run."""

    def __init__(self, ownership: Ownership, send_back: SendBackOps, policy: Orderly) -> None:
        self._ownership = ownership
        self._send_back = send_back
        self._policy = policy

    def next(self, pq: ProcessQueue, began: float) -> Stop | Call:
        """What the task of ``pq`` (running since monotonic ``began``) does next."""
        return self._policy.next(pq, may_consume=self._ownership.may_consume(pq), running_s=time.monotonic() - began)

    def answered(self, pq: ProcessQueue, call: Call, status: ConsumeOrderlyStatus) -> Op[Stop | None]:
        """Take in the listener's answer on ``call``: None goes on with the next batch, a Stop suspends the queue."""
        step = self._policy.answered(pq, call, status)
        if not isinstance(step, DeadLetter):
            return step
        return self._policy.dead_lettered(pq, step, moved=(yield from self._dead_letter(pq, step.msgs)))

    def _dead_letter(self, pq: ProcessQueue, dead: list[MessageExt]) -> Op[bool]:
        """Move poison messages to the DLQ so their queue can go on; False if the store refused."""
        try:
            for m in dead:
                yield from SendBackOps.dead_letter.op(self._send_back, m, f"orderly consumption failed {m.reconsume_times} times")
        except MQError as e:
            log.warning("moving poison messages of %s to the DLQ failed, retrying: %s", pq.queue, e)
            return False
        return True


class OrderlyService:
    """Schedules and runs the per-queue consume tasks of an orderly push consumer."""

    def __init__(
        self,
        core: ConsumerCore,
        executor: Callable[[], Executor | None],
        call: CallListener,
        send_back: SendBack,
        policy: Orderly,
    ) -> None:
        self._core = core
        self._executor = executor
        self._call = call
        self._steps = OrderlySteps(core.ownership, send_back, policy)
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
        stop = self._core.store.run(self._steps.answered(pq, step, self._call(pq, step.msgs, step.ctx)))
        return (None, False) if stop is None else (stop.again, True)
