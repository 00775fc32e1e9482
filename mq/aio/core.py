"""The asyncio consumer core: the steps of :mod:`mq.consumer.steps` awaited by tasks on one event loop.

It is :class:`mq.consumer.core.ConsumerCore` with tasks for threads: one task per timed job (heartbeat
every second, which rebalances when the members changed; the 20 s rebalance backstop; committing
moved offsets every 5 s; the status; renewing orderly locks), :data:`PULL_LANES` puller tasks (the
shared :class:`~mq.consumer.puller.Puller` decides what to pull and applies what came back; each
task pulls its share of the held queues, see :meth:`AsyncConsumerCore._pull_loop`), and one
long-poll waiter task per held queue (``XREAD BLOCK`` on a connection of its own). The steps that
change what the core holds are awaited under one ``asyncio.Lock``. No thread is started.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from mq.aio.tasks import cancel_and_wait
from mq.consumer.long_poll import LONG_POLL_BLOCK_MS, wait_failed
from mq.consumer.long_poll import RETRY_PAUSE_S as POLL_RETRY_PAUSE_S
from mq.consumer.machine import CommitPacer
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.puller import RETRY_PAUSE_S
from mq.consumer.steps import SHUTDOWN_TIMEOUT_S, CoreSteps
from mq.errors import MQBrokerError
from mq.model.queue import MessageQueue
from mq.store.aio import AsyncStore
from mq.store.connection import Connection
from mq.store.ops import Op
from mq.store.replication import SyncReplicas
from mq.store.store import StoreOps

log = logging.getLogger("mq.consumer")

T = TypeVar("T")
#: A timed job of the async core: ``(coroutine function, interval in seconds, name)``.
Job = tuple[Callable[[], Awaitable[None]], float, str]
#: Puller tasks of one consumer, each pulling every PULL_LANES-th held queue: while one task's reply
#: is decoded and its messages are consumed (all on the one event loop), the other's pull runs in the
#: store, so the loop does not wait for Redis between rounds (D54).
PULL_LANES = 2


class LoopFlag(threading.Event):
    """A flag the shared parts set and clear like a ``threading.Event`` and an asyncio task can await.

    Used only from the event loop's thread (the async core starts no other)."""

    def __init__(self) -> None:
        super().__init__()
        self._event = asyncio.Event()

    def set(self) -> None:
        super().set()
        self._event.set()

    def clear(self) -> None:
        super().clear()
        self._event.clear()

    async def wait_for(self, timeout_s: float) -> bool:
        """Wait until set, at most ``timeout_s`` seconds; returns whether it is set."""
        if not self.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout_s):
                    await self._event.wait()
        return self.is_set()


class AsyncFacade:
    """What an asyncio consumer's facade runs its own operations on (before its core exists, too):
    an :class:`~mq.store.aio.AsyncStore` on the facade's connection, made on first use and dropped
    when :meth:`_close_connection` closes that connection's asyncio client (a restart makes another)."""

    _conn: Connection
    _sync: SyncReplicas | None
    _async_store: AsyncStore | None = None

    def _astore(self) -> AsyncStore:
        store = self._async_store
        if store is None:
            store = self._async_store = AsyncStore(self._conn, sync=self._sync)
        return store

    async def _close_connection(self) -> None:
        """Close the connection's asyncio client (and forget the store that ran on it)."""
        self._async_store = None
        await self._conn.aclose()


class AsyncConsumerCore(CoreSteps):
    """Registration, rebalance, pulling and commits of one asyncio consumer (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As :class:`~mq.consumer.steps.CoreSteps`."""
        super().__init__(*args, **kwargs)
        #: the operations built on :attr:`store` (its keys and replica settings) run on this one's client
        self.astore = AsyncStore(self.store.conn, sync=self.store.sync)
        # the waiters' replies may take LONG_POLL_BLOCK_MS: a connection (and a store) of their own
        url, namespace = self.store.conn.url, self.store.conn.namespace
        self._poll_conn = Connection(url, namespace, socket_timeout_s=LONG_POLL_BLOCK_MS / 1000 + 5)
        self._poll_store = AsyncStore(self._poll_conn)
        self._lock = asyncio.Lock()
        self._jobs: list[asyncio.Task[None]] = []
        self._waiters: dict[ProcessQueue, asyncio.Task[None]] = {}
        self._spawned: set[asyncio.Task[None]] = set()
        self._puller_tasks: list[asyncio.Task[None]] = []
        #: the queues a release waits on while an orderly batch runs: set by :meth:`batch_ended`
        self._batch_ends: dict[ProcessQueue, asyncio.Event] = {}

    # -- running steps --------------------------------------------------------------------------

    async def run(self, op: Op[T]) -> T:
        """Await one operation on :attr:`astore`."""
        return await self.astore.run(op)

    async def do(self, op: Op[T]) -> T:
        """Await a step that changes what the core holds, one at a time."""
        async with self._lock:
            return await self.astore.run(op)

    def spawn(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        """Run ``coro`` as a task the core keeps a reference to (until it ends)."""
        task = asyncio.get_running_loop().create_task(coro, name=name)
        self._spawned.add(task)
        task.add_done_callback(self._spawned.discard)
        return task

    def new_flag(self) -> LoopFlag:
        return LoopFlag()

    def _exclusive(self) -> contextlib.nullcontext[None]:
        # every step runs on the one event loop thread, and a lost queue is taken in without an await
        return contextlib.nullcontext()

    def _watch(self, pq: ProcessQueue) -> None:
        self._waiters[pq] = self.spawn(self._wait_loop(pq), f"mq-poll-{pq.queue.topic}-{pq.queue.queue_id}")

    # -- lifecycle ------------------------------------------------------------------------------

    async def start(self, jobs: Iterable[Job] = ()) -> None:
        """Register, rebalance, and start the puller and the timed jobs (plus the caller's ``jobs``)."""
        await self.run(self.register_group_op())
        await self.do(self.take_beat_op(await self.run(self.registry.heartbeat())))
        self.settings.start.started_ms = self.registry.last_now_ms
        self._puller_tasks = [self.spawn(self._pull_loop(lane), f"mq-puller-{self.group}-{lane}") for lane in range(PULL_LANES)]
        every: list[Job] = self.timed_jobs(
            heartbeat=self._heartbeat,
            rebalance=self.rebalance,
            persist=self.persist_offsets,
            status=self._publish_status,
            renew=self.renew,
        )
        every += jobs
        self._jobs = [self.spawn(self._every(fn, seconds, job_id), f"mq-{job_id}-{self.group}") for fn, seconds, job_id in every]
        await self.rebalance()

    async def shutdown(
        self, wait_consumed: Callable[[float], Awaitable[bool]] | None = None, *, timeout_s: float = SHUTDOWN_TIMEOUT_S
    ) -> bool:
        """Stop pulling, let ``wait_consumed(seconds)`` finish in-flight work, commit, release, unregister.

        Returns False when something was left within ``timeout_s`` (in-flight messages, or an orderly
        batch still running: those queues are left to their owners' expiry and redelivered).
        """
        if not self._jobs:
            return True
        deadline = time.monotonic() + timeout_s
        jobs, self._jobs = self._jobs, []
        await cancel_and_wait(jobs)
        self.begin_stop()
        if self._puller_tasks:
            await asyncio.wait(self._puller_tasks, timeout=5)  # a pull in flight applies what it took
            await cancel_and_wait(self._puller_tasks)
        await cancel_and_wait(list(self._waiters.values()))
        clean = await wait_consumed(max(0.0, deadline - time.monotonic())) if wait_consumed is not None else True
        async with self._lock:
            for mq, pq in list(self.process_queues.items()):
                if not await self._release(mq, pq, deadline):
                    clean = False
                    log.warning("a batch of %s still runs at shutdown: its lock expires by itself", mq)
        await self.run(self.registry.unregister())
        await cancel_and_wait(list(self._spawned))
        await self._poll_conn.aclose()
        return clean

    @property
    def running(self) -> bool:
        """Whether the consumer is started."""
        return bool(self._jobs)

    async def _release(self, mq: MessageQueue, pq: ProcessQueue, deadline: float) -> bool:
        """Commit and give up ``mq`` once no orderly batch runs on it (waiting until ``deadline``)."""
        while not pq.consume_lock.acquire(blocking=False):
            # held by an orderly batch (a rebalance's release runs under self._lock, as this does): the
            # batch's task wakes this one when it lets go (batch_ended), so nothing is looked at meanwhile
            ended = self._batch_ends.setdefault(pq, asyncio.Event())
            try:
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await ended.wait()
            except TimeoutError:
                return False
        try:
            await self.run(self.give_up_op(mq, pq))
        finally:
            pq.consume_lock.release()
        return True

    def batch_ended(self, pq: ProcessQueue) -> None:
        """An orderly batch of ``pq`` let go of ``pq.consume_lock``: wake a release waiting for it."""
        ended = self._batch_ends.pop(pq, None)
        if ended is not None:
            ended.set()

    # -- subscriptions --------------------------------------------------------------------------

    def subscriptions_changed(self) -> None:
        """Rebalance over the changed subscriptions (when running; in a task)."""
        if self.running:
            self.spawn(self.rebalance(), f"mq-rebalance-{self.group}")

    # -- timed jobs -----------------------------------------------------------------------------

    async def _every(self, fn: Callable[[], Awaitable[None]], seconds: float, job_id: str) -> None:
        """Run ``fn`` every ``seconds`` until cancelled; a failure is logged and the job goes on."""
        while True:
            await asyncio.sleep(seconds)
            try:
                await fn()
            except Exception:
                log.exception("job %s of consumer group %s failed (it runs again at its next interval)", job_id, self.group)

    async def _heartbeat(self) -> None:
        beat = await self.run(self.beat_op())
        if beat is not None and await self.do(self.take_beat_op(beat)):
            await self.rebalance()

    async def _publish_status(self) -> None:
        self.publish_status()

    async def rebalance(self) -> None:
        """Compute this client's queues and hand queues over cleanly (see claim-queue.lua)."""
        await self.do(self.rebalance_op())

    async def persist_offsets(self) -> None:
        """Commit every queue whose committable offset moved since it was last stored."""
        await self.do(self.persist_op())

    async def renew(self) -> None:
        """Renew every held queue (orderly locks); a queue held by another member now is dropped."""
        await self.do(self.renew_op())

    # -- pulling --------------------------------------------------------------------------------

    async def _pull_loop(self, lane: int) -> None:
        """A puller task: one pipelined pull of every ready queue of its ``lane``, or a wait to be woken.

        The held queues are dealt round-robin to the :data:`PULL_LANES` tasks (by their place among
        the held queues, looked at every round; a queue is never pulled by two at once, see
        ``pq.pull_lock``), so one lane's round trip overlaps the other's decoding and consumption.
        """
        wake = self.puller.wake_flag
        assert isinstance(wake, LoopFlag)
        while not self.stopped:
            wake.clear()
            try:
                ready = self._lane_share(self.puller.ready(), lane)
                if not ready:
                    await wake.wait_for(self.puller.idle_wait_s())
                    continue
                await self.run(self.puller.pull_op(ready))
                await asyncio.sleep(0)  # a round that found every queue busy must not starve the loop
            except Exception as e:  # the puller never dies: every queue would stall
                self.puller.round_failed(e)
                await asyncio.sleep(RETRY_PAUSE_S)

    def _lane_share(self, ready: list[ProcessQueue], lane: int) -> list[ProcessQueue]:
        """The queues of ``ready`` that puller task ``lane`` pulls: every :data:`PULL_LANES`-th held queue."""
        if PULL_LANES == 1 or not ready:
            return ready
        mine = set(list(self.process_queues.values())[lane::PULL_LANES])
        return [pq for pq in ready if pq in mine]

    async def _wait_loop(self, pq: ProcessQueue) -> None:
        """The long-poll waiter of ``pq`` (see :mod:`mq.consumer.long_poll`)."""
        pacer = CommitPacer(self.settings.pull_batch_size // 2)
        while not (self.stopped or pq.dropped):
            try:
                await self._wait_once(pq, pacer)
            except Exception as e:  # a waiter never dies: the queue would stall
                if self.stopped or pq.dropped:
                    return
                wait_failed(pq, e)
                await asyncio.sleep(POLL_RETRY_PAUSE_S)
        self._waiters.pop(pq, None)

    async def _wait_once(self, pq: ProcessQueue, pacer: CommitPacer) -> None:
        if pq.releasing or not self.active():
            await asyncio.sleep(0.1)
            return
        idle = pq.idle
        if not (await idle.wait_for(1.0) if isinstance(idle, LoopFlag) else idle.is_set()):
            return
        start, last_entry = pq.position()
        poll, batch = self._poll_store, self.settings.pull_batch_size
        commit, block_ms = self.commits.paced(pq, pacer, start, time.monotonic())
        if commit is None:
            rewound, news = await poll.run(
                StoreOps.wait_for_messages.op(
                    self.store, pq.queue, start, batch, block_ms, group=self.group, last_entry=last_entry
                ),
            )
        else:
            # what was consumed is committed in the wait's own round trip, when the pacer says so
            held, rewound, news = await poll.run(
                StoreOps.commit_and_wait.op(
                    self.store,
                    self.group,
                    pq.queue,
                    commit,
                    start,
                    batch,
                    block_ms,
                    guard=self.ownership.guard,
                    client_id=self.client_id,
                    last_entry=last_entry,
                ),
            )
            if isinstance(held, MQBrokerError):  # not committed: the next wake or the periodic commit does it
                log.warning("committing the offset of %s failed: %s", pq.queue, held)
            else:
                self.wait_committed(pq, commit, held=held)
        if rewound is not None:
            self.puller.rewind(pq, start, rewound)
        elif news is not None:
            await self.run(self.puller.take_op(pq, start, *news))
