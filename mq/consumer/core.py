"""The sync consumer core: the steps of :mod:`mq.consumer.steps` run by threads [RocketMQ
``RebalanceImpl``, ``OffsetStore``], composed from parts chosen at construction:

- an :class:`~mq.consumer.ownership.Ownership` (claimed, locked or fixed queues),
- an :class:`~mq.consumer.offsets.OffsetStore` (the store, or a local file),
- a :class:`Consumption` (how messages reach the application, and what may be committed),
- the :class:`~mq.consumer.puller.Puller` and the :class:`~mq.consumer.long_poll.LongPoller`.

Threads of one consumer: the APScheduler jobs (a heartbeat every second, which rebalances at once
when the group's members changed and keeps retrying hand-overs until they settle; the 20 s rebalance
backstop; committing moved offsets every 5 s; renewing orderly locks), the puller, and one long-poll
waiter per caught-up queue. Every job and thread survives any exception and logs it. The steps that
change what the core holds run under one re-entrant lock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from apscheduler.schedulers.background import BackgroundScheduler

from mq.consumer.long_poll import LongPoller
from mq.consumer.machine import RELEASE_WAIT_S
from mq.consumer.parts import logged_job
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.steps import SHUTDOWN_TIMEOUT_S, CoreSteps, log
from mq.model.queue import MessageQueue
from mq.store.ops import Op

__all__ = ["RELEASE_WAIT_S", "SHUTDOWN_TIMEOUT_S", "ConsumerCore"]

T = TypeVar("T")


class ConsumerCore(CoreSteps):
    """Registration, rebalance, pulling and commits of one consumer, on threads (see the module docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As :class:`~mq.consumer.steps.CoreSteps`."""
        #: keeps the bookkeeping of the jobs, the puller and the waiters apart (re-entrant: one
        #: thread may nest steps)
        self._rebalance_lock = threading.RLock()
        super().__init__(*args, **kwargs)
        self._scheduler: BackgroundScheduler | None = None
        self.poller = LongPoller(
            self.store.conn.url,
            self.store.conn.namespace,
            group=self.group,
            on_news=self.puller.take,
            on_rewind=self.puller.rewind,
            commits=self.commits,
            before_wait=self._commit_before_wait,
            may_wait=lambda pq: self.active(),
            batch=self.settings.pull_batch_size,
            stopped=self._stopped,
        )

    def new_flag(self) -> threading.Event:
        return threading.Event()

    def _exclusive(self) -> threading.RLock:
        return self._rebalance_lock

    def _do(self, op: Op[T]) -> T:
        """Run a step under the core's lock."""
        with self._rebalance_lock:
            return self.store.run(op)

    def _watch(self, pq: ProcessQueue) -> None:
        self.poller.watch(pq)

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, jobs: Iterable[tuple[Callable[[], None], float, str]] = ()) -> None:
        """Register, rebalance, and start the puller and the timed jobs (plus the caller's ``jobs``).

        When a step fails (e.g. the store refuses the group: an ACL user without it), what was started
        is stopped and the store's connections are closed before the error is raised: the caller's
        ``with`` never reaches its exit, so nothing else would close them."""
        try:
            self._start(jobs)
        except BaseException:
            self._abort_start()
            raise

    def _start(self, jobs: Iterable[tuple[Callable[[], None], float, str]]) -> None:
        self.store.run(self.register_group_op())
        self._do(self.take_beat_op(self.store.run(self.registry.heartbeat())))
        self.settings.start.started_ms = self.registry.last_now_ms
        self.puller.start(f"mq-puller-{self.group}")
        scheduler = BackgroundScheduler(job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 5})
        every = self.timed_jobs(
            heartbeat=self._heartbeat,
            rebalance=self.rebalance,
            persist=self.persist_offsets,
            status=self.publish_status,
            renew=self.renew,
        )
        every += jobs
        for fn, seconds, job_id in every:
            scheduler.add_job(logged_job(fn, job_id, self.group), "interval", seconds=seconds, id=job_id)
        scheduler.start()
        self._scheduler = scheduler
        self.rebalance()

    def _abort_start(self) -> None:
        """Undo a failed :meth:`start`: stop the timed jobs and the puller, close the waiters and the store."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
        self.begin_stop()
        self.puller.join(timeout_s=5)
        self.poller.close()
        self.store.conn.close()

    def shutdown(self, wait_consumed: Callable[[float], bool] | None = None, *, timeout_s: float = SHUTDOWN_TIMEOUT_S) -> bool:
        """Stop pulling, let ``wait_consumed(seconds)`` finish in-flight work, commit, release, unregister.

        Returns False when something was left within ``timeout_s`` (in-flight messages, or an orderly
        batch still running: those queues are left to their owners' expiry and redelivered).
        """
        if self._scheduler is None:
            return True
        deadline = time.monotonic() + timeout_s
        self._scheduler.shutdown(wait=True)
        self._scheduler = None
        self.begin_stop()
        self.puller.join(timeout_s=5)
        clean = wait_consumed(max(0.0, deadline - time.monotonic())) if wait_consumed is not None else True
        with self._rebalance_lock:
            for mq, pq in list(self.process_queues.items()):
                if not self._release(mq, pq, wait_s=max(0.0, deadline - time.monotonic())):
                    clean = False
                    log.warning("a batch of %s still runs at shutdown: its lock expires by itself", mq)
        self.store.run(self.registry.unregister())
        self.poller.close()  # first: a waiter may be committing on the store's connection (D139)
        self.store.conn.close()
        return clean

    @property
    def running(self) -> bool:
        """Whether the consumer is started."""
        return self._scheduler is not None

    # -- subscriptions --------------------------------------------------------------------------

    def subscriptions_changed(self) -> None:
        """Rebalance over the changed subscriptions (when running)."""
        if self.running:
            self.rebalance()

    # -- timed jobs (each runs one step under the lock) -----------------------------------------

    def _heartbeat(self) -> None:
        beat = self.store.run(self.beat_op())
        if beat is not None and self._do(self.take_beat_op(beat)):
            self.rebalance()

    def renew(self) -> None:
        """Renew every held queue (orderly locks); a queue held by another member now is dropped."""
        self._do(self.renew_op())

    def persist_offsets(self) -> None:
        """Commit every queue whose committable offset moved since it was last stored."""
        self._do(self.persist_op())  # under the lock: a release in between would make this commit stale

    def _commit_before_wait(self, pq: ProcessQueue) -> None:
        """Before a waiter blocks: commit what was consumed since the last pull (store offsets only)."""
        self._do(self.commit_before_wait_op(pq))

    def rebalance(self) -> None:
        """Compute this client's queues and hand queues over cleanly (see claim-queue.lua)."""
        self._do(self.rebalance_op())

    def _apply(self, wanted: set[MessageQueue]) -> bool:
        """Release what is no longer wanted, claim what is new; True while a hand-over is pending."""
        return self._do(self.apply_op(wanted))

    def _release(self, mq: MessageQueue, pq: ProcessQueue, *, wait_s: float = 0.0) -> bool:
        """Commit ``mq``'s offset and give it up between two batches (waiting up to ``wait_s`` for a
        running orderly batch); False when a batch is still running."""
        if not pq.consume_lock.acquire(timeout=wait_s) if wait_s > 0 else not pq.consume_lock.acquire(blocking=False):
            return False
        try:
            self._do(self.give_up_op(mq, pq))
        finally:
            pq.consume_lock.release()
        return True
