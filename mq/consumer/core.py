"""The machinery every queue-reading consumer shares [RocketMQ ``RebalanceImpl``, ``OffsetStore``]:
registration, rebalance, start offsets and commits, composed from parts chosen at construction:

- an :class:`~mq.consumer.ownership.Ownership` (claimed, locked or fixed queues),
- an :class:`~mq.consumer.offsets.OffsetStore` (the store, or a local file),
- a :class:`Consumption` (how messages reach the application, and what may be committed),
- the :class:`~mq.consumer.puller.Puller` and the :class:`~mq.consumer.long_poll.LongPoller`.

Threads of one consumer: the APScheduler jobs (a heartbeat every second, which rebalances at once
when the group's members changed and keeps retrying hand-overs until they settle; the 20 s rebalance
backstop; committing moved offsets every 5 s; renewing orderly locks), the puller, and one long-poll
waiter per caught-up queue. Every job and thread survives any exception and logs it.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable

from apscheduler.schedulers.background import BackgroundScheduler

from mq import metrics
from mq.connection import is_out_of_memory
from mq.consumer.locks import LOCK_RENEW_INTERVAL_S
from mq.consumer.long_poll import LongPoller
from mq.consumer.offsets import PERSIST_INTERVAL_S, OffsetStore
from mq.consumer.ownership import Ownership
from mq.consumer.parts import ConsumerSettings, Consumption, logged_job
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.puller import MATCH_ALL, Puller
from mq.consumer.registry import HEARTBEAT_INTERVAL_S, STATUS_INTERVAL_S, Beat, Registry
from mq.consumer.status import StatusMeter
from mq.consumer.types import MessageModel
from mq.errors import MQBrokerError, MQClientError
from mq.filter import MessageSelector
from mq.group import GroupConfig
from mq.queue import MessageQueue
from mq.store import Store

log = logging.getLogger("mq.consumer")

#: Seconds between rebalances when nothing changed [RocketMQ ``rebalanceInterval`` 20 s].
REBALANCE_INTERVAL_S = 20.0
#: Seconds a released queue of a concurrent consumer waits for its cached messages to be consumed
#: before it is released anyway (the rest is then redelivered to the new owner). An orderly queue
#: is released between two batches instead, however long that takes.
RELEASE_WAIT_S = 10.0
#: Default bound of ``shutdown(timeout_s=…)``: in-flight work, then an orderly batch, may take this long, s.
SHUTDOWN_TIMEOUT_S = 30.0


class ConsumerCore:
    """Registration, rebalance, pulling and commits of one consumer (see the module docstring)."""

    def __init__(
        self,
        store: Store,
        settings: ConsumerSettings,
        subscriptions: dict[str, MessageSelector],
        *,
        registry: Registry,
        ownership: Ownership,
        offsets: OffsetStore,
        consumption: Consumption,
        assigned: list[MessageQueue] | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.group, self.client_id = settings.group, settings.client_id
        self.subscriptions = subscriptions
        self.registry = registry
        self.ownership = ownership
        self.offsets = offsets
        self.consumption = consumption
        self._assigned = assigned
        self.process_queues: dict[MessageQueue, ProcessQueue] = {}
        self.group_config: GroupConfig | None = None
        self._members: list[str] = []
        self._status = StatusMeter()
        self._listed = False  # whether the group is in the namespace's group list
        self._reset_seq = -1  # the group's offset-reset counter as last seen (-1: before the first heartbeat)
        self._unsettled = False
        self._rebalance_lock = threading.RLock()
        self._stopped = threading.Event()
        self._scheduler: BackgroundScheduler | None = None
        self.puller = Puller(
            store,
            group=self.group,
            client_id=self.client_id,
            guard=ownership.guard,
            batch=settings.pull_batch_size,
            max_span=consumption.max_span,
            selector=lambda t: self.subscriptions.get(t) or MATCH_ALL,
            queues=lambda: list(self.process_queues.values()),
            deliver=consumption.deliver,
            commit_offset=self._commit_with_pull,
            on_lost=self._lost,
            active=self.active,
            stopped=self._stopped,
        )
        self.poller = LongPoller(
            store.conn.url,
            store.conn.namespace,
            on_news=self.puller.take,
            before_wait=self._commit_before_wait,
            may_wait=lambda pq: self.active(),
            batch=settings.pull_batch_size,
            stopped=self._stopped,
        )
        self.rebalance_count = 0

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, jobs: Iterable[tuple[Callable[[], None], float, str]] = ()) -> None:
        """Register, rebalance, and start the puller and the timed jobs (plus the caller's ``jobs``)."""
        self._register_group()
        self._on_heartbeat(self.store._run(self.registry.heartbeat()))
        self.settings.start.started_ms = self.registry.last_now_ms
        self.puller.start(f"mq-puller-{self.group}")
        scheduler = BackgroundScheduler(job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 5})
        every = [
            (self._heartbeat, HEARTBEAT_INTERVAL_S, "heartbeat"),
            (self.rebalance, REBALANCE_INTERVAL_S, "rebalance"),
            (self.persist_offsets, PERSIST_INTERVAL_S, "persist-offsets"),
            (self.publish_status, STATUS_INTERVAL_S, "status"),
            *jobs,
        ]
        if self.ownership.renews:
            every.append((self.renew, LOCK_RENEW_INTERVAL_S, "renew-locks"))
        for fn, seconds, job_id in every:
            scheduler.add_job(logged_job(fn, job_id, self.group), "interval", seconds=seconds, id=job_id)
        scheduler.start()
        self._scheduler = scheduler
        self.rebalance()

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
        self._stopped.set()
        for pq in self.process_queues.values():
            pq.releasing = True
            pq.idle.set()
        self.puller.join(timeout_s=5)
        clean = wait_consumed(max(0.0, deadline - time.monotonic())) if wait_consumed is not None else True
        with self._rebalance_lock:
            for mq, pq in list(self.process_queues.items()):
                if not self._release(mq, pq, wait_s=max(0.0, deadline - time.monotonic())):
                    clean = False
                    log.warning("a batch of %s still runs at shutdown: its lock expires by itself", mq)
        self.store._run(self.registry.unregister())
        self.store.conn.close()
        self.poller.close()
        return clean

    @property
    def running(self) -> bool:
        """Whether the consumer is started."""
        return self._scheduler is not None

    def active(self) -> bool:
        """False while the group is paused (``consume_enable=False``): nothing is pulled or delivered."""
        return self.group_config is None or self.group_config.consume_enable

    # -- subscriptions --------------------------------------------------------------------------

    def subscriptions_changed(self) -> None:
        """Rebalance over the changed subscriptions (when running)."""
        if self.running:
            self.rebalance()

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues`` (manual assignment)."""
        self._assigned = sorted(set(queues))
        if self.running:
            self.rebalance()

    # -- timed jobs -----------------------------------------------------------------------------

    def _register_group(self) -> None:
        """List the group for ``mq group list``; on a full store (``OOM``) that waits for a later heartbeat."""
        try:
            self.store.register_group(self.group)
            self._listed = True
        except MQBrokerError as e:
            if not is_out_of_memory(e):
                raise
            log.warning("group %s not listed yet, the store is full (OOM); consuming anyway: %s", self.group, e)

    def _heartbeat(self) -> None:
        if not self._listed:
            with contextlib.suppress(MQBrokerError):
                self._register_group()
        try:
            beat = self.store._run(self.registry.heartbeat())
        except MQBrokerError as e:
            log.warning("heartbeat of %s failed: %s", self.group, e)
            return
        if self._on_heartbeat(beat) or self._unsettled:
            self.rebalance()

    def _on_heartbeat(self, beat: Beat) -> bool:
        """Take in the members, the group config and offset resets; True when the members changed."""
        members, config = beat.members, beat.config
        if beat.reset_seq != self._reset_seq:
            self._apply_resets(beat.reset_seq)
        was_active = self.active()
        self.group_config = config
        if config is not None:
            self.settings.start.where = config.consume_from_where
        if self.active() != was_active:
            log.info(
                "group %s %s by its config (consume_enable=%s)",
                self.group,
                "resumed" if self.active() else "paused",
                self.active(),
            )
            self.puller.wake()
        changed = members != self._members
        self._members = members
        return changed

    def _apply_resets(self, seq: int) -> None:
        """Continue held queues from offsets an operator reset since the last heartbeat (the offsets
        are in the store already); cached messages of those queues are dropped."""
        seen, self._reset_seq = self._reset_seq, seq
        if seen < 0:
            return  # resets before this member started are in the committed offsets it starts from
        with self._rebalance_lock:
            for topic, (reset_seq, offsets) in self.store.group_resets(self.group).items():
                if reset_seq <= seen:
                    continue  # applied at an earlier heartbeat
                for mq, pq in list(self.process_queues.items()):
                    if mq.topic == topic and mq.queue_id in offsets:
                        log.info(
                            "group %s: %s continues from offset %d (reset by an operator)", self.group, mq, offsets[mq.queue_id]
                        )
                        pq.reset(offsets[mq.queue_id])
                        pq.stored_offset = -1  # a pull in flight may have committed over the reset: commit again
                        pq.idle.clear()
            self.puller.wake()

    def publish_status(self) -> None:
        """Refresh the runtime state the next heartbeat publishes (``mq group status``)."""
        self.registry.info.status = self._status.status(dict(self.process_queues), paused=not self.active())

    def renew(self) -> None:
        """Renew every held queue (orderly locks); a queue held by another member now is dropped."""
        with self._rebalance_lock:
            pqs = {mq: pq for mq, pq in self.process_queues.items() if not pq.dropped}
            try:
                sent, held = self.ownership.renew(list(pqs))
            except MQBrokerError as e:
                log.warning("renewing the locks of %s failed (consuming stops when they expire locally): %s", self.group, e)
                return
            for mq, pq in pqs.items():
                if mq in held:
                    pq.lock_sent_s = sent
                else:
                    self._lost(pq)

    def persist_offsets(self) -> None:
        """Commit every queue whose committable offset moved since it was last stored."""
        with self._rebalance_lock:  # a release in between would make this commit stale
            due = {mq: o for mq, pq in self.process_queues.items() if (o := self._commit_due(pq)) is not None}
            if not due:
                return
            try:
                lost = self.offsets.commit(due)
            except (MQBrokerError, OSError) as e:
                log.warning("committing offsets of %s failed (retried in %s s): %s", self.group, PERSIST_INTERVAL_S, e)
                return
            for mq, offset in due.items():
                pq = self.process_queues[mq]
                if mq in lost:
                    self._lost(pq)
                else:
                    pq.stored_offset = offset

    def _commit_due(self, pq: ProcessQueue) -> int | None:
        """The committable offset of ``pq`` when it differs from the stored one (and we may commit)."""
        if pq.dropped or not self.ownership.may_consume(pq):  # a lost lock's offset belongs to the new holder
            return None
        offset = self.consumption.commit_offset(pq)
        return None if offset is None or offset == pq.stored_offset else offset

    def _commit_with_pull(self, pq: ProcessQueue) -> int | None:
        """What a pull of ``pq`` commits in the same script: store offsets only (broadcasting's live in a file)."""
        return self._commit_due(pq) if self.offsets.in_store else None

    def _commit_before_wait(self, pq: ProcessQueue) -> None:
        """Before a waiter blocks: commit what was consumed since the last pull (store offsets only)."""
        offset = self._commit_due(pq)
        if offset is None or not self.offsets.in_store:
            return
        with self._rebalance_lock:
            if pq.dropped:
                return
            if self.offsets.commit({pq.queue: offset}):
                self._lost(pq)
            else:
                pq.stored_offset = offset

    def _lost(self, pq: ProcessQueue) -> None:
        """The store says ``pq`` is another member's now: stop consuming it, commit nothing more."""
        with self._rebalance_lock:
            if pq.dropped:
                return
            log.warning("group %s lost %s to another member; it is no longer consumed here", self.group, pq.queue)
            pq.dropped = True
            self.process_queues.pop(pq.queue, None)
            self._unsettled = True

    # -- rebalance ------------------------------------------------------------------------------

    def rebalance(self) -> None:
        """Compute this client's queues and hand queues over cleanly (see claim-queue.lua)."""
        with self._rebalance_lock:
            if self._stopped.is_set():
                return
            try:
                self._unsettled = self._apply(self._wanted_queues())
            except MQBrokerError as e:
                log.warning("rebalance of %s failed, retrying in %s s: %s", self.group, HEARTBEAT_INTERVAL_S, e)
                self._unsettled = True

    def _wanted_queues(self) -> set[MessageQueue]:
        if self._assigned is not None:
            return set(self._assigned)
        wanted: set[MessageQueue] = set()
        for topic in sorted(self.subscriptions):
            config = self.store.topic(topic)
            if config is None:
                log.info("group %s: topic %r does not exist (yet); nothing to consume from it", self.group, topic)
                continue
            mqs = config.readable_queues()
            if self.settings.message_model is MessageModel.BROADCASTING:
                wanted.update(mqs)
            else:
                wanted.update(self.settings.strategy.allocate(self.group, self.client_id, mqs, self._members))
        return wanted

    def _apply(self, wanted: set[MessageQueue]) -> bool:
        """Release what is no longer wanted, claim what is new; True while a hand-over is pending."""
        unsettled = False
        for mq, pq in list(self.process_queues.items()):
            if mq in wanted:
                if pq.releasing:  # handed back before it was released: go on where it stopped
                    pq.releasing = False
                    self.consumption.deliver(pq, [])
                continue
            if not pq.releasing:
                pq.releasing, pq.releasing_since = True, time.monotonic()
            draining = self.consumption.drains_on_release and pq.count
            if draining and time.monotonic() - pq.releasing_since < RELEASE_WAIT_S:
                unsettled = True  # let cached messages be consumed first
                continue
            unsettled |= not self._release(mq, pq)
        new = sorted(wanted - set(self.process_queues))
        sent, claimed = self.ownership.claim(new, self._members)
        unsettled |= len(claimed) < len(new)
        if claimed:
            starts = self._start_offsets(claimed)
            for mq in claimed:
                pq = ProcessQueue(mq, starts[mq])
                pq.lock_sent_s = sent
                self.process_queues[mq] = pq
                self.poller.watch(pq)
            self.rebalance_count += 1
            if metrics.CLIENT_METRICS is not None:
                metrics.CLIENT_METRICS.rebalances.labels(self.group).inc()
            log.info("group %s client %s now consumes %d queues", self.group, self.client_id, len(self.process_queues))
            self.puller.wake()
        return unsettled

    def _release(self, mq: MessageQueue, pq: ProcessQueue, *, wait_s: float = 0.0) -> bool:
        """Commit ``mq``'s offset and give it up between two batches (waiting up to ``wait_s`` for a
        running orderly batch); False when a batch is still running."""
        if not pq.consume_lock.acquire(timeout=wait_s) if wait_s > 0 else not pq.consume_lock.acquire(blocking=False):
            return False
        try:
            offset = self.consumption.commit_offset(pq)
            pq.dropped = True
            self.process_queues.pop(mq, None)
            self.ownership.release(mq, pq, offset)
        finally:
            pq.consume_lock.release()
        return True

    def _start_offsets(self, queues: list[MessageQueue]) -> dict[MessageQueue, int]:
        """Committed offsets, else where the start policy says (stored at once for the group, unless
        the consumer commits only what the application commits)."""
        stored = self.offsets.read(queues)
        missing = [q for q in queues if q not in stored]
        computed = self.settings.start.offsets(self.store, self.group, missing) if missing else {}
        if computed and self.consumption.seeds_start:
            try:
                computed = self.offsets.seed(computed)  # the first member to start a queue fixes it for all
            except MQBrokerError as e:
                if not is_out_of_memory(e):
                    raise
                log.warning("starting offsets of %s not stored, the store is full (OOM): %s", self.group, e)
        return stored | computed

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Move the next offset of a held queue (cached messages are dropped)."""
        pq = self.process_queues.get(mq)
        if pq is None:
            raise MQClientError(f"{mq} is not assigned to this consumer")
        pq.reset(offset)
        pq.idle.clear()
        self.puller.wake()
