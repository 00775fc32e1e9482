"""The puller [RocketMQ ``PullMessageService``]: one thread pulls every queue that has something new,
all in one pipelined round trip of ``pull-messages`` scripts (the filter runs in the store, and each
pull commits the group's offset of its queue), and hands the messages to the consumer. Flow control
pauses a queue with too much cached; a caught-up queue is left to its long-poll waiter.

A pull is an operation (:meth:`Puller.pull_op`, :meth:`Puller.take_op`; see :mod:`mq.store.ops`):
the thread here runs it with redis-py, the asyncio consumer's puller task (:mod:`mq.aio.core`) awaits it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence

from mq.consumer.machine import (
    CONSUME_CONCURRENTLY_MAX_SPAN,
    PULL_THRESHOLD_FOR_QUEUE,
    PULL_THRESHOLD_SIZE_FOR_QUEUE,
    FlowControl,
    PullPlan,
)
from mq.consumer.positions import rewound
from mq.consumer.process_queue import ProcessQueue
from mq.errors import MQBrokerError
from mq.filter import MessageSelector
from mq.model.message import MessageExt
from mq.store import Store
from mq.store.groups import PullRequest, PullResult
from mq.store.ops import Op
from mq.store.store import StoreOps

log = logging.getLogger("mq.consumer")

__all__ = [
    "CONSUME_CONCURRENTLY_MAX_SPAN",
    "PULL_THRESHOLD_FOR_QUEUE",
    "PULL_THRESHOLD_SIZE_FOR_QUEUE",
    "Puller",
    "filter_args",
]

#: Entries a pull may scan past without a match before it returns (bounds work under a filter).
PULL_MAX_SCAN = 1024
#: Bytes of entries one pull may scan (at least one entry): bounds the script's time and memory.
PULL_MAX_BYTES = 4 * 1024 * 1024
#: The same bound under a filter, which may read every byte of every scanned entry: keeps a filtered
#: pull's single script call well under 50 ms (bench/limits.py, docs/benchmarks.md).
PULL_MAX_BYTES_FILTERED = 1024 * 1024
#: Seconds the puller pauses after a failed round.
RETRY_PAUSE_S = 1.0

#: The subscription of a topic with no expression: every message.
MATCH_ALL = MessageSelector.by_tag("*")

Deliver = Callable[[ProcessQueue, list[MessageExt]], None]


def filter_args(selector: MessageSelector) -> tuple[str, str]:
    """The store-side filter type and data of a subscription (see pull-messages-5.lua)."""
    wire = selector.to_wire()
    if wire["type"] == "SQL92":
        return "SQL92", json.dumps(wire["ast"], separators=(",", ":"))
    tags = wire["tags"]
    return ("", "") if tags == ["*"] else ("TAG", "\x1f".join(tags))


def _busy(pq: ProcessQueue) -> bool:
    """Whether ``pq`` is left out of a pull round: caught up (its waiter blocks for it) or being pulled."""
    return pq.idle.is_set() or pq.pull_lock.locked()


class Puller:
    """Pulls the queues of one consumer (see the module docstring).

    Args:
        store: the consumer's store.
        group, client_id, guard: who commits, and what the store checks first (see ownership.py).
        batch: messages per pull per queue.
        max_span: flow-control offset span (None: no span limit).
        selector: the subscription of a topic.
        queues: the consumer's process queues now.
        deliver: hands pulled messages on.
        commit_offset: what a pull of a queue commits now (None: nothing rides along with it; see
            :meth:`~mq.consumer.machine.CommitPolicy.with_pull`).
        on_lost: a queue the store says is no longer this client's.
        active: False while the group is paused (nothing is pulled).
        stopped: set at shutdown.
        wake: the flag :meth:`wake` sets (default a new ``threading.Event``; the asyncio core passes
            one its puller task can await).
    """

    def __init__(
        self,
        store: Store,
        *,
        group: str,
        client_id: str,
        guard: str,
        batch: int,
        max_span: int | None,
        selector: Callable[[str], MessageSelector],
        queues: Callable[[], Sequence[ProcessQueue]],
        deliver: Deliver,
        commit_offset: Callable[[ProcessQueue], int | None],
        on_lost: Callable[[ProcessQueue], None],
        active: Callable[[], bool],
        stopped: threading.Event,
        wake: threading.Event | None = None,
    ) -> None:
        self._store = store
        self._group, self._client_id, self._guard = group, client_id, guard
        self.batch = batch
        # the thresholds are read when the consumer starts (tests lower them on this module)
        self._flow = FlowControl(max_span, PULL_THRESHOLD_FOR_QUEUE, PULL_THRESHOLD_SIZE_FOR_QUEUE)
        #: which queues a round pulls, in what order (PullPlan.order: the one place that decides it)
        self.plan: PullPlan[ProcessQueue] = PullPlan(self._flow)
        self._selector = selector
        self._queues = queues
        self._deliver = deliver
        self._commit_offset = commit_offset
        self._on_lost = on_lost
        self._active = active
        self._stopped = stopped
        self._wake = self.wake_flag = wake or threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, name: str) -> None:
        """Start the pull thread."""
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait for the pull thread to end (after ``stopped`` was set)."""
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def wake(self) -> None:
        """Make the puller look again (consumption freed room, an offset moved, a queue was added)."""
        self._wake.set()

    def flow_limited(self, pq: ProcessQueue) -> bool:
        """Whether pulling ``pq`` pauses because too much of it is cached (see :class:`FlowControl`)."""
        return self._flow.limited(pq)

    def unfiltered(self, pq: ProcessQueue) -> bool:
        """Whether ``pq``'s subscription takes every message (its waiter may deliver what it read)."""
        return filter_args(self._selector(pq.queue.topic))[0] == ""

    def _loop(self) -> None:
        while not self._stopped.is_set():
            self._wake.clear()
            try:
                ready = self.ready()
                if not ready:
                    self._wake.wait(self.idle_wait_s())
                    continue
                self.pull(ready)
            except Exception as e:  # the puller never dies: every queue would stall
                self.round_failed(e)
                self._stopped.wait(RETRY_PAUSE_S)

    def round_failed(self, e: Exception) -> None:
        """Log a failed pull round (the caller pauses ``RETRY_PAUSE_S`` and goes on)."""
        level = logging.WARNING if isinstance(e, MQBrokerError) else logging.ERROR
        log.log(
            level, "pull round of %s failed, retrying in %s s: %r", self._group, RETRY_PAUSE_S, e, exc_info=level == logging.ERROR
        )

    def ready(self) -> list[ProcessQueue]:
        """The queues to pull now (not releasing, not caught up, not flow-limited, not being pulled by
        their waiter, which wakes the puller when it is done); [] while paused."""
        ready = self.plan.ready(self._queues(), busy=_busy)
        return ready if self._active() else []

    def idle_wait_s(self) -> float:
        """Seconds to sleep when nothing is ready: short while a queue waits for room (flow control)."""
        return 0.05 if any(pq.flow_paused for pq in self._queues()) else 1.0

    def pull(self, ready: Sequence[ProcessQueue]) -> None:
        """One pipelined pull of every queue in ``ready`` that no waiter is pulling right now."""
        self._store.run(self.pull_op(ready))

    def pull_op(self, ready: Sequence[ProcessQueue]) -> Op[None]:
        """:meth:`pull` as an operation."""
        locked = [pq for pq in ready if pq.pull_lock.acquire(blocking=False)]
        try:
            requests = [self._request(pq) for pq in locked]
            results = yield from StoreOps.pull_many.op(self._store, requests)
            for pq, request, result in zip(locked, requests, results):
                self._apply(pq, request, result)
        finally:
            for pq in locked:
                pq.pull_lock.release()

    def _request(self, pq: ProcessQueue) -> PullRequest:
        offset, last_entry = pq.position()
        ftype, fdata = filter_args(self._selector(pq.queue.topic))
        max_bytes = PULL_MAX_BYTES_FILTERED if ftype else PULL_MAX_BYTES
        # Unfiltered, and the last pull's messages were small enough that a full batch of them fits
        # the byte bound: read the entries natively after the script (PullRequest.read_after).
        read_after = not ftype and 0 <= pq.largest_body * self.batch <= max_bytes // 2
        return PullRequest(
            pq.queue.topic,
            pq.queue.queue_id,
            offset,
            self.batch,
            PULL_MAX_SCAN,
            ftype,
            fdata,
            max_bytes,
            self._group,
            self._commit_offset(pq),
            self._guard,
            self._client_id,
            read_after,
            last_entry,
        )

    def _apply(self, pq: ProcessQueue, request: PullRequest, result: PullResult | MQBrokerError) -> None:
        if isinstance(result, MQBrokerError):
            log.warning("pull of %s failed: %s", pq.queue, result)
            return
        if not result.held:
            self._on_lost(pq)
            return
        if request.commit is not None:
            pq.stored_offset = request.commit
        if pq.dropped or pq.next_offset != request.offset or not self._active():  # released, seeked or paused meanwhile
            return
        if result.rewound:
            self.rewind(pq, request.offset, result)
            return
        pq.add(result.messages, result.next_offset, result.last_entry or None)
        if result.next_offset >= result.max_offset:
            pq.idle.set()  # caught up: its waiter blocks in the store until something arrives
        if result.messages:
            self._deliver(pq, result.messages)

    def rewind(self, pq: ProcessQueue, position: int, result: PullResult) -> None:
        """Continue ``pq`` from where the store rewound a pull from ``position`` (``result.rewound``:
        the position was beyond the queue's end, or its history changed under it): cached messages
        are dropped, the messages from there are read again — duplicates rather than loss (D70)."""
        if pq.dropped or pq.next_offset != position:  # released or seeked meanwhile
            return
        rewound(self._group, pq.queue, position, result)
        pq.reset(result.next_offset, result.last_entry)
        pq.stored_offset = -1  # the store may hold the rewound offset now: commit again
        pq.idle.clear()
        self._wake.set()

    def take(self, pq: ProcessQueue, start: int, msgs: list[MessageExt], end: int) -> None:
        """Deliver what a long poll read (``msgs`` up to offset ``end``), or pull it through the filter;
        hand over to the puller when the queue is busy or more is waiting."""
        self._store.run(self.take_op(pq, start, msgs, end))

    def take_op(self, pq: ProcessQueue, start: int, msgs: list[MessageExt], end: int) -> Op[None]:
        """:meth:`take` as an operation."""
        if not self._active():  # paused while the waiter blocked: read it again after the resume
            return
        if self.flow_limited(pq) or not pq.pull_lock.acquire(blocking=False):
            pq.idle.clear()
            self._wake.set()
            return
        try:
            if self.unfiltered(pq):
                # a full batch may have more behind it: stay "caught up" so the waiter reads on at once
                request = PullRequest(pq.queue.topic, pq.queue.queue_id, start, 0, 0)
                self._apply(pq, request, PullResult(msgs, end, end))
            else:
                pq.idle.clear()
                request = self._request(pq)
                self._apply(pq, request, (yield from StoreOps.pull_many.op(self._store, [request]))[0])
        finally:
            pq.pull_lock.release()
        if not pq.idle.is_set():
            self._wake.set()  # more than one pull's worth arrived: the puller continues
