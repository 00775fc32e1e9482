"""What a consumer core does, written once for both I/O styles [RocketMQ ``RebalanceImpl``,
``OffsetStore``]: registration and heartbeats, rebalance and clean hand-over, start offsets, commits,
lock renewal, offset resets and the published status.

Every step that asks the store is an *operation* (a generator, see :mod:`mq.store.ops`) composed
from the ownership, offset-store, registry and start-policy parts. The sync core
(:class:`mq.consumer.core.ConsumerCore`) runs the steps with redis-py from its threads and jobs; the
asyncio core (:class:`mq.aio.core.AsyncConsumerCore`) awaits the very same steps from tasks. Only
the scheduling — threads or tasks, locks, waiting — lives in those two modules.

A step never waits for anything but the store: the caller holds whatever keeps two steps of one
consumer apart (a re-entrant lock in the sync core, one asyncio lock in the async core), and the
subclass makes the flags its waiters wait on; this module starts and holds no thread primitive.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, TypeVar

from mq.consumer.locks import LOCK_RENEW_INTERVAL_S
from mq.consumer.machine import CommitPolicy, plan_rebalance
from mq.consumer.offsets import PERSIST_INTERVAL_S, OffsetStore
from mq.consumer.ownership import Ownership
from mq.consumer.parts import ConsumerSettings, Consumption
from mq.consumer.priority import top_levels_first
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.puller import MATCH_ALL, Puller
from mq.consumer.registry import HEARTBEAT_INTERVAL_S, STATUS_INTERVAL_S, Beat, Registry
from mq.consumer.status import StatusMeter
from mq.consumer.types import MessageModel
from mq.errors import MQBrokerError, MQClientError, evicted_message
from mq.filter import MessageSelector
from mq.model.group import GroupConfig
from mq.model.queue import MessageQueue
from mq.observe import metrics
from mq.store import Store
from mq.store.connection import is_out_of_memory
from mq.store.ops import Op
from mq.store.store import StoreOps

if TYPE_CHECKING:
    import threading
    from collections.abc import Iterable
    from contextlib import AbstractContextManager

log = logging.getLogger("mq.consumer")

#: Seconds between rebalances when nothing changed [RocketMQ ``rebalanceInterval`` 20 s].
REBALANCE_INTERVAL_S = 20.0
#: Default bound of ``shutdown(timeout_s=…)``: in-flight work, then an orderly batch, may take this long, s.
SHUTDOWN_TIMEOUT_S = 30.0

#: A core's runner of one timed step: a function (sync core) or a coroutine function (asyncio core).
F = TypeVar("F")


def _queue_of(pq: ProcessQueue) -> MessageQueue:
    return pq.queue


class CoreSteps(ABC):
    """The state and steps of one consumer core (see the module docstring); subclasses schedule them.

    Args:
        store: the consumer's store (builds the requests; the subclass's client runs them).
        settings: who the member is and how it reads.
        subscriptions: topic → selector (shared with the consumer, which may change it).
        registry, ownership, offsets, consumption: the parts (see :mod:`mq.consumer.parts`).
        assigned: manual assignment (``PullConsumer.assign``), else None.
    """

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
        self._evicted_topics: set[str] = set()  # subscribed topics reported evicted (ERROR once until back)
        #: Priority levels of the subscribed topics that have them, as the last rebalance read them (D142).
        self.priority_levels: dict[str, int] = {}
        self._stopped = self.new_flag()
        self.rebalance_count = 0
        self.commits: CommitPolicy[ProcessQueue] = CommitPolicy(
            in_store=offsets.in_store, offset=consumption.commit_offset, may_consume=ownership.may_consume
        )
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
            commit_offset=self.commits.with_pull,
            on_lost=self.lost,
            active=self.active,
            stopped=self._stopped,
            wake=self.new_flag(),
        )
        # a priority topic's higher levels are pulled first, the next level once they are caught up (D142)
        self.puller.plan.order = lambda ready: top_levels_first(ready, self.priority_levels, _queue_of, self._pulling())

    def _pulling(self) -> list[ProcessQueue]:
        """The held queues a puller round is pulling right now (not their waiters: a waiter pulls a caught-up queue)."""
        if not self.priority_levels:
            return []
        return [pq for pq in self.process_queues.values() if pq.pull_lock.locked() and not (pq.idle.is_set() or pq.releasing)]

    # -- what the scheduling subclass provides ---------------------------------------------------

    @abstractmethod
    def new_flag(self) -> threading.Event:
        """A flag the scheduler's waiters can wait on (the puller's wake-up, a queue's ``idle``, the stop)."""

    @abstractmethod
    def _exclusive(self) -> AbstractContextManager[object]:
        """What keeps a step that changes what the core holds apart from the others (called outside
        the scheduler's own serialisation: a lost queue reported by the puller)."""

    def _new_queue(self, mq: MessageQueue, offset: int) -> ProcessQueue:
        """A process queue for a newly held queue (its ``idle`` flag made by :meth:`new_flag`)."""
        pq = ProcessQueue(mq, offset)
        pq.idle = self.new_flag()
        return pq

    @abstractmethod
    def _watch(self, pq: ProcessQueue) -> None:
        """Start the long-poll waiter of a newly held queue."""

    @abstractmethod
    def subscriptions_changed(self) -> None:
        """Rebalance over the changed subscriptions (when running)."""

    def assign(self, queues: Iterable[MessageQueue]) -> None:
        """Consume exactly ``queues`` (manual assignment)."""
        self._assigned = sorted(set(queues))
        self.subscriptions_changed()

    # -- state ----------------------------------------------------------------------------------

    def active(self) -> bool:
        """False while the group is paused (``consume_enable=False``): nothing is pulled or delivered."""
        return self.group_config is None or self.group_config.consume_enable

    @property
    def stopped(self) -> bool:
        """Whether the core stopped (nothing more is pulled or rebalanced)."""
        return self._stopped.is_set()

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Move the next offset of a held queue (cached messages are dropped)."""
        pq = self.process_queues.get(mq)
        if pq is None:
            raise MQClientError(f"{mq} is not assigned to this consumer")
        pq.reset(offset)
        pq.idle.clear()
        self.puller.wake()

    def publish_status(self) -> None:
        """Refresh the runtime state the next heartbeat publishes (``mq group status``)."""
        self.registry.info.status = self._status.status(dict(self.process_queues), paused=not self.active())

    def lost(self, pq: ProcessQueue) -> None:
        """The store says ``pq`` is another member's now: stop consuming it, commit nothing more."""
        with self._exclusive():
            if pq.dropped:
                return
            log.warning("group %s lost %s to another member; it is no longer consumed here", self.group, pq.queue)
            pq.dropped = True
            self.process_queues.pop(pq.queue, None)
            self._unsettled = True

    def positions(self, queues: Iterable[MessageQueue]) -> dict[MessageQueue, tuple[int, str]]:
        """The position (next offset, fingerprint of the entry before it) of each held queue of
        ``queues``: commits carry them for the store to check (D70)."""
        return {mq: pq.position() for mq in queues if (pq := self.process_queues.get(mq)) is not None}

    def begin_stop(self) -> None:
        """Stop pulling and rebalancing: every queue is being released (the shutdown's first step)."""
        self._stopped.set()
        for pq in self.process_queues.values():
            pq.releasing = True
            pq.idle.set()
        self.puller.wake()

    # -- registration and heartbeats ------------------------------------------------------------

    def register_group_op(self) -> Op[None]:
        """List the group for ``mq group list``; on a full store (``OOM``) that waits for a later heartbeat."""
        try:
            yield from StoreOps.register_group.op(self.store, self.group)
            self._listed = True
        except MQBrokerError as e:
            if not is_out_of_memory(e):
                raise
            log.warning("group %s not listed yet, the store is full (OOM); consuming anyway: %s", self.group, e)

    def beat_op(self) -> Op[Beat | None]:
        """One heartbeat (listing the group first if that failed before); None when it failed (logged)."""
        try:
            if not self._listed:
                yield from self.register_group_op()
            return (yield from self.registry.heartbeat())
        except MQBrokerError as e:
            log.warning("heartbeat of %s failed: %s", self.group, e)
            return None

    def take_beat_op(self, beat: Beat) -> Op[bool]:
        """Take in the members, the group config and offset resets; True when a rebalance is due
        (the members changed, or a hand-over is still pending)."""
        members, config = beat.members, beat.config
        if beat.reset_seq != self._reset_seq:
            yield from self._apply_resets_op(beat.reset_seq)
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
        return changed or self._unsettled

    def _apply_resets_op(self, seq: int) -> Op[None]:
        """Continue held queues from offsets an operator reset since the last heartbeat (the offsets
        are in the store already); cached messages of those queues are dropped."""
        seen, self._reset_seq = self._reset_seq, seq
        if seen < 0:
            return  # resets before this member started are in the committed offsets it starts from
        resets = yield from StoreOps.group_resets.op(self.store, self.group)
        for topic, (reset_seq, offsets) in resets.items():
            if reset_seq <= seen:
                continue  # applied at an earlier heartbeat
            for mq, pq in list(self.process_queues.items()):
                if mq.topic == topic and mq.queue_id in offsets:
                    log.info("group %s: %s continues from offset %d (reset by an operator)", self.group, mq, offsets[mq.queue_id])
                    pq.reset(offsets[mq.queue_id])
                    pq.stored_offset = -1  # a pull in flight may have committed over the reset: commit again
                    pq.idle.clear()
        self.puller.wake()

    def timed_jobs(self, *, heartbeat: F, rebalance: F, persist: F, status: F, renew: F) -> list[tuple[F, float, str]]:
        """The core's timed jobs, ``(runner, interval in seconds, name)``, given the subclass's runner of
        each step: heartbeat, rebalance backstop, committing moved offsets, the status, and renewing
        queue locks when the ownership renews."""
        every = [
            (heartbeat, HEARTBEAT_INTERVAL_S, "heartbeat"),
            (rebalance, REBALANCE_INTERVAL_S, "rebalance"),
            (persist, PERSIST_INTERVAL_S, "persist-offsets"),
            (status, STATUS_INTERVAL_S, "status"),
        ]
        if self.ownership.renews:
            every.append((renew, LOCK_RENEW_INTERVAL_S, "renew-locks"))
        return every

    # -- commits and locks ----------------------------------------------------------------------

    def renew_op(self) -> Op[None]:
        """Renew every held queue (orderly locks); a queue held by another member now is dropped."""
        pqs = {mq: pq for mq, pq in self.process_queues.items() if not pq.dropped}
        try:
            sent, held = yield from self.ownership.renew(list(pqs))
        except MQBrokerError as e:
            log.warning("renewing the locks of %s failed (consuming stops when they expire locally): %s", self.group, e)
            return
        for mq, pq in pqs.items():
            if mq in held:
                pq.lock_sent_s = sent
            else:
                self.lost(pq)

    def persist_op(self) -> Op[None]:
        """Commit every queue whose committable offset moved since it was last stored."""
        due = self.commits.periodic(self.process_queues.values())
        if not due:
            return
        try:
            lost = yield from self.offsets.commit(due, self.positions(due))
        except (MQBrokerError, OSError) as e:
            log.warning("committing offsets of %s failed (retried in %s s): %s", self.group, PERSIST_INTERVAL_S, e)
            return
        for mq, offset in due.items():
            pq = self.process_queues.get(mq)
            if pq is None:
                continue
            if mq in lost:
                self.lost(pq)
            else:
                pq.stored_offset = offset

    def commit_before_wait_op(self, pq: ProcessQueue) -> Op[None]:
        """Before a waiter blocks: commit what was consumed since the last pull (store offsets only)."""
        offset = self.commits.before_wait(pq)
        if offset is not None:
            lost = yield from self.offsets.commit({pq.queue: offset}, self.positions([pq.queue]))
            self.wait_committed(pq, offset, held=not lost)

    def wait_committed(self, pq: ProcessQueue, offset: int, *, held: bool) -> None:
        """Take in a waiter's commit of ``offset``: stored, or refused as the queue is another
        member's now (unless this client is releasing it anyway, which commits by itself)."""
        if self.commits.committed(pq, offset, held=held):
            self.lost(pq)

    # -- rebalance ------------------------------------------------------------------------------

    def rebalance_op(self) -> Op[None]:
        """Compute this client's queues and hand queues over cleanly (see claim-queue.lua)."""
        if self._stopped.is_set():
            return
        try:
            self._unsettled = yield from self.apply_op((yield from self._wanted_queues_op()))
        except MQBrokerError as e:
            log.warning("rebalance of %s failed, retrying in %s s: %s", self.group, HEARTBEAT_INTERVAL_S, e)
            self._unsettled = True

    def _wanted_queues_op(self) -> Op[set[MessageQueue]]:
        if self._assigned is not None:
            return set(self._assigned)
        wanted: set[MessageQueue] = set()
        levels: dict[str, int] = {}
        for topic in sorted(self.subscriptions):
            config = yield from StoreOps.topic.op(self.store, topic)
            if config is None:
                yield from self._report_missing_op(topic)
                continue
            self._evicted_topics.discard(topic)
            if config.priority_levels:
                levels[topic] = config.priority_levels
            mqs = config.readable_queues()
            if self.settings.message_model is MessageModel.BROADCASTING:
                wanted.update(mqs)
            else:
                wanted.update(self.settings.strategy.allocate(self.group, self.client_id, mqs, self._members))
        self.priority_levels = levels
        return wanted

    def _report_missing_op(self, topic: str) -> Op[None]:
        """Say that ``topic`` has no config: at INFO when it does not exist (yet), at ERROR — once until
        it is back — when queues of it are stored (Redis evicted its config: see StoreEvictedError)."""
        if not (yield from StoreOps.topic_evicted.op(self.store, topic)):
            log.info("group %s: topic %r does not exist (yet); nothing to consume from it", self.group, topic)
        elif topic not in self._evicted_topics:
            self._evicted_topics.add(topic)
            message = evicted_message(f"topic {topic!r} has stored queues but no config", topic)
            log.error("group %s: nothing is consumed from %r: %s", self.group, topic, message)

    def apply_op(self, wanted: Iterable[MessageQueue]) -> Op[bool]:
        """Release what is no longer wanted, claim what is new; True while a hand-over is pending."""
        # the queues as held now: a queue lost while another is released (the asyncio core awaits
        # each release) is still released from this snapshot, as before the plan was a function
        held = dict(self.process_queues)
        plan = plan_rebalance(held, wanted, drains_on_release=self.consumption.drains_on_release, now_s=time.monotonic())
        for mq in plan.resumed:  # handed back before it was released: go on where it stopped
            self.consumption.deliver(held[mq], [])
        unsettled = plan.unsettled
        for mq in plan.release:
            unsettled |= not (yield from self.release_op(mq, held[mq]))
        new = plan.claim
        sent, claimed = yield from self.ownership.claim(new, self._members)
        unsettled |= len(claimed) < len(new)
        if claimed:
            starts = yield from self._start_offsets_op(claimed)
            for mq in claimed:
                pq = self._new_queue(mq, starts[mq])
                pq.lock_sent_s = sent
                self.process_queues[mq] = pq
                self._watch(pq)
            self.rebalance_count += 1
            if metrics.CLIENT_METRICS is not None:
                metrics.CLIENT_METRICS.rebalances.labels(self.group).inc()
            log.info("group %s client %s now consumes %d queues", self.group, self.client_id, len(self.process_queues))
            self.puller.wake()
        return unsettled

    def release_op(self, mq: MessageQueue, pq: ProcessQueue) -> Op[bool]:
        """Commit ``mq``'s offset and give it up between two batches; False when an orderly batch
        is running (its ``consume_lock`` is held)."""
        if not pq.consume_lock.acquire(blocking=False):
            return False
        try:
            yield from self.give_up_op(mq, pq)
        finally:
            pq.consume_lock.release()
        return True

    def give_up_op(self, mq: MessageQueue, pq: ProcessQueue) -> Op[None]:
        """Commit ``mq``'s offset and give it up (the caller holds ``pq.consume_lock``)."""
        offset = self.consumption.commit_offset(pq)
        pq.dropped = True
        self.process_queues.pop(mq, None)
        yield from self.ownership.release(mq, pq, offset)

    def _start_offsets_op(self, queues: list[MessageQueue]) -> Op[dict[MessageQueue, int]]:
        """Committed offsets, else where the start policy says (stored at once for the group, unless
        the consumer commits only what the application commits)."""
        stored = yield from self.offsets.read(queues)
        missing = [q for q in queues if q not in stored]
        computed = (yield from self.settings.start.offsets(self.store, self.group, missing)) if missing else {}
        if computed and self.consumption.seeds_start:
            try:
                computed = yield from self.offsets.seed(computed)  # the first member to start a queue fixes it for all
            except MQBrokerError as e:
                if not is_out_of_memory(e):
                    raise
                log.warning("starting offsets of %s not stored, the store is full (OOM): %s", self.group, e)
        return stored | computed
