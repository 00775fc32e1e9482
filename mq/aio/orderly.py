"""Orderly consumption in asyncio tasks: at most one task per queue, in offset order, only while this
client holds the queue's store lock. The decisions are :class:`mq.consumer.orderly.OrderlySteps`,
shared with the sync :class:`~mq.consumer.orderly.OrderlyService`; only the scheduling is here."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from mq.aio.core import AsyncConsumerCore
from mq.consumer.machine import Orderly, Stop
from mq.consumer.orderly import OrderlySteps
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.retry import SendBackOps
from mq.consumer.types import ConsumeOrderlyContext, ConsumeOrderlyStatus
from mq.model.message import MessageExt

#: Seconds before a queue whose release is in progress is looked at again.
BUSY_RETRY_S = 0.01

CallListener = Callable[[ProcessQueue, list[MessageExt], ConsumeOrderlyContext], Awaitable[ConsumeOrderlyStatus]]


class AsyncOrderlyService:
    """Schedules and runs the per-queue consume tasks of an orderly asyncio push consumer."""

    def __init__(
        self,
        core: AsyncConsumerCore,
        call: CallListener,
        send_back: SendBackOps,
        policy: Orderly,
    ) -> None:
        self._core = core
        self._call = call
        self._steps = OrderlySteps(core.ownership, send_back, policy)

    def deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """New messages were cached for ``pq``: make sure its task runs."""
        self.submit(pq)

    def submit(self, pq: ProcessQueue, delay_s: float = 0.0) -> None:
        """Start ``pq``'s task unless one is scheduled or running already."""
        if pq.orderly_active or pq.dropped or self._core.stopped:
            return
        pq.orderly_active = True
        self._core.spawn(self._run(pq, delay_s), f"mq-orderly-{pq.queue.topic}-{pq.queue.queue_id}")

    async def _run(self, pq: ProcessQueue, delay_s: float) -> None:
        again: float | None = None
        try:
            if delay_s > 0:
                await asyncio.sleep(delay_s)
            again = await self._consume(pq)
        finally:
            pq.orderly_active = False
        if again is not None:
            self.submit(pq, again)
        elif pq.count and not (pq.dropped or pq.releasing):
            self.submit(pq)  # messages arrived while this task was finishing

    async def _consume(self, pq: ProcessQueue) -> float | None:
        """Consume batches in order; returns seconds until the task should run again, or None."""
        began = time.monotonic()
        while True:
            # the queue is not given up while a batch runs (see CoreSteps.release_op); a release in
            # progress holds the lock across its store call: look again in a moment
            if not pq.consume_lock.acquire(blocking=False):
                return BUSY_RETRY_S
            try:
                stop = await self._batch(pq, began)
            finally:
                pq.consume_lock.release()
                self._core.batch_ended(pq)
            if stop is not None:
                return stop.again

    async def _batch(self, pq: ProcessQueue, began: float) -> Stop | None:
        """One listener call on the head of ``pq``; a Stop ends the task for now."""
        step = self._steps.next(pq, began)
        if isinstance(step, Stop):
            return step
        status = await self._call(pq, step.msgs, step.ctx)
        return await self._core.run(self._steps.answered(pq, step, status))
