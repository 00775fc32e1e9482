"""``aio.PullConsumer``: the application awaits messages [RocketMQ ``DefaultLitePullConsumer``].

:class:`mq.PullConsumer` on the event loop: the same arguments and methods (``subscribe`` or
``assign`` + ``seek``; ``auto_commit`` or :meth:`commit`), the same core steps scheduled by tasks
(:class:`~mq.aio.core.AsyncConsumerCore`) and the same positions (:class:`mq.consumer.pull.Positions`).
``await poll()`` returns a batch, ``async for msg in consumer`` one message at a time.

Cancelling a task awaiting :meth:`poll` loses nothing: a poll only waits while it holds no message,
so a cancelled poll has taken none from the buffer.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

from mq.aio.core import AsyncConsumerCore, AsyncFacade, LoopFlag
from mq.consumer.priority import HeldMessages
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.pull import DEFAULT_POLL_TIMEOUT_S, PullBase
from mq.errors import MQClientError
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue
from mq.store.store import StoreOps

#: Seconds a poll sleeps between looks while the group is paused.
PAUSED_POLL_S = 0.1


class PullConsumer(AsyncFacade, PullBase[AsyncConsumerCore]):
    """Polls messages of subscribed or assigned queues, awaited (arguments: see
    :class:`mq.consumer.pull.PullBase`). Use ``async with``, or ``await start()`` and
    ``await shutdown()``. No thread is started."""

    _core_type = AsyncConsumerCore

    def _setup(self) -> None:
        self._buffer: HeldMessages[tuple[ProcessQueue, int, MessageExt]] = HeldMessages()
        self._arrived = LoopFlag()

    async def start(self) -> PullConsumer:
        """Start pulling in tasks of the running event loop. Returns self."""
        if self._core is None or not self._core.running:
            if not self._subscriptions and self._assigned is None:
                raise MQClientError("subscribe() or assign() before start()")
            await self._build_core(self, assigned=self._assigned).start()
        return self

    async def shutdown(self, *, timeout_s: float | None = None) -> bool:
        """Commit (with auto_commit), release queues and leave the group (``timeout_s`` bounds the
        wait for the store; polled messages are the application's already). Returns True."""
        core = self._core
        if core is not None and core.running:
            if timeout_s is None:
                await core.shutdown()
            else:
                await core.shutdown(timeout_s=timeout_s)
            await self._close_connection()
        return True

    async def __aenter__(self) -> PullConsumer:
        return await self.start()

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.shutdown()

    def _running_core(self) -> AsyncConsumerCore:
        core = self._core
        if core is None or not core.running:
            raise MQClientError("the pull consumer is not started: await start() or use it with async with")
        return core

    async def poll(self, timeout_s: float = DEFAULT_POLL_TIMEOUT_S) -> list[MessageExt]:
        """Up to ``pull_batch_size`` messages, waiting up to ``timeout_s`` seconds for the first
        (nothing while the group is paused). Cancelling it loses nothing (see the module docstring)."""
        return await self._poll(timeout_s, self.pull_batch_size)

    async def _poll(self, timeout_s: float, limit: int) -> list[MessageExt]:
        core = self._running_core()
        out: list[MessageExt] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < limit:
            left = deadline - time.monotonic()
            if not core.active():
                if out or left <= 0:
                    break
                await asyncio.sleep(min(PAUSED_POLL_S, left))
                continue
            if not self._buffer:
                if out or left <= 0:
                    break
                self._arrived.clear()
                await self._arrived.wait_for(left)  # holds no message here: a cancellation loses nothing
                continue
            pq, generation, msg = self._buffer.take()  # higher priority first (D142)
            if self._positions.take(pq, generation, msg):
                out.append(msg)
        if out:
            core.puller.wake()
        return out

    def __aiter__(self) -> PullConsumer:
        return self

    async def __anext__(self) -> MessageExt:
        """The next message (waiting as long as it takes); ends when the consumer is shut down. Its
        position moves past it only now, so messages never handed out are never committed."""
        while self._core is not None and self._core.running:
            got = await self._poll(DEFAULT_POLL_TIMEOUT_S, 1)
            if got:
                return got[0]
        raise StopAsyncIteration

    async def commit(self) -> None:
        """Commit every held queue's position now (one round trip)."""
        core = self._core
        if core is None:
            return
        positions = self._positions.to_commit()
        if positions:
            self._positions.committed(positions, await core.run(core.offsets.commit(positions, core.positions(positions))))

    async def committed(self, queue: MessageQueue) -> int:
        """The committed offset of ``queue`` in the store (or local file), -1 when none."""
        core = self._core
        read = core.offsets.read([queue]) if core is not None else StoreOps.read_offsets.op(self._store, self.group, [queue])
        return (await self._astore().run(read)).get(queue, -1)

    def seek(self, queue: MessageQueue, offset: int) -> None:
        """Continue ``queue`` from ``offset`` (its position; committed by the next commit)."""
        if self._core is None:
            raise MQClientError(f"{queue} is not assigned to this consumer (start it, and assign or wait for rebalance)")
        self._positions.seek(self._core, queue, offset)

    async def seek_to_begin(self, queue: MessageQueue) -> None:
        """Continue ``queue`` from its oldest stored message."""
        stats = await self._astore().run(StoreOps.queue_stats.op(self._store, queue.topic, [queue.queue_id]))
        self.seek(queue, stats[queue.queue_id].min_offset)

    async def seek_to_end(self, queue: MessageQueue) -> None:
        """Continue ``queue`` with messages stored from now on."""
        stats = await self._astore().run(StoreOps.queue_stats.op(self._store, queue.topic, [queue.queue_id]))
        self.seek(queue, stats[queue.queue_id].max_offset)

    # -- what the core asks (see mq.consumer.parts.Consumption) ----------------------------------

    def deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Buffer pulled messages for :meth:`poll`."""
        for m in msgs:
            self._buffer.put(pq.queue, m.priority, (pq, pq.generation, m))
        if msgs:
            self._arrived.set()
