"""``PullConsumer``: the application polls for messages [RocketMQ ``DefaultLitePullConsumer``].

Either ``subscribe`` (queues shared in the group by rebalance) or ``assign`` (exactly the queues
given, with ``seek``). A queue's *position* is where the application's next message comes from:
past the last message :meth:`poll` returned, or where :meth:`seek` moved it. With ``auto_commit``
positions are committed with the next pulls, every 5 s and at shutdown; otherwise only
:meth:`commit` commits them, and nothing else ever moves the group's offset.

The positions are kept by :class:`Positions`, shared with the asyncio :class:`mq.aio.PullConsumer`.
"""

from __future__ import annotations

import queue
import threading
import time
from types import TracebackType
from typing import Generic, TypeVar

from mq.consumer.allocate import AllocateMessageQueueStrategy
from mq.consumer.base import CoreT, QueueConsumerBase
from mq.consumer.core import ConsumerCore
from mq.consumer.priority import HeldMessages
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.steps import CoreSteps
from mq.consumer.types import ConsumeFromWhere, MessageModel
from mq.errors import MQClientError
from mq.filter import MessageSelector
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue

T = TypeVar("T")

#: Seconds :meth:`PullConsumer.poll` waits by default.
DEFAULT_POLL_TIMEOUT_S = 5.0
#: Default of ``pull_batch_size`` for pull consumers: most messages one poll returns.
DEFAULT_PULL_CONSUMER_BATCH = 32


class Positions:
    """Where the application's next message of each held queue is (past the last one polled, or where
    a seek moved it), and what of it may be committed. No I/O: the sync and asyncio pull consumers
    share it (thread-safe)."""

    def __init__(self, auto_commit: bool) -> None:
        self.auto_commit = auto_commit
        self._positions: dict[ProcessQueue, int] = {}
        self._lock = threading.Lock()

    def take(self, pq: ProcessQueue, generation: int, msg: MessageExt) -> bool:
        """A buffered message goes to the application: False when it is stale (its queue was released
        or seeked since it was pulled), else its queue's position moves past it."""
        with self._lock:
            if pq.dropped or generation != pq.generation:
                return False
            pq.remove([msg])
            self._positions[pq] = msg.queue_offset + 1
            return True

    def to_commit(self) -> dict[MessageQueue, int]:
        """Every held queue's position."""
        with self._lock:
            # never past where the next pull starts: a rewind (D70) moved that back under the position
            return {pq.queue: min(o, pq.next_offset) for pq, o in self._positions.items() if not pq.dropped}

    def committed(self, positions: dict[MessageQueue, int], lost: set[MessageQueue]) -> None:
        """Record the outcome of committing ``positions`` (``lost``: refused, the queue is another member's)."""
        for pq in list(self._positions):
            if pq.queue in positions and pq.queue not in lost:
                pq.stored_offset = positions[pq.queue]

    def seek(self, core: CoreSteps, queue: MessageQueue, offset: int) -> None:
        """Move ``queue``'s position (and the core's next pull) to ``offset``.

        Raises:
            MQClientError: a bad offset, or a queue this consumer does not hold.
        """
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise MQClientError(f"offset must be a non-negative int, got {offset!r}")
        if queue not in core.process_queues:
            raise MQClientError(f"{queue} is not assigned to this consumer (start it, and assign or wait for rebalance)")
        with self._lock:
            pq = core.process_queues[queue]
            core.seek(queue, offset)
            self._positions[pq] = offset

    def commit_offset(self, pq: ProcessQueue) -> int | None:
        """With auto-commit: the queue's position (None before the first poll or seek); else None."""
        if not self.auto_commit:
            return None
        with self._lock:
            return self._positions.get(pq)


class HeldBuffer(Generic[T]):
    """:class:`HeldMessages` shared by threads: the pulling thread puts, :meth:`PullConsumer.poll` takes."""

    def __init__(self) -> None:
        self._held: HeldMessages[T] = HeldMessages()
        self._ready = threading.Condition()

    def __len__(self) -> int:
        with self._ready:
            return len(self._held)

    def put(self, key: MessageQueue, priority: int, item: T) -> None:
        """Hold ``item`` of queue ``key``."""
        with self._ready:
            self._held.put(key, priority, item)
            self._ready.notify()

    def get(self, timeout: float) -> T:
        """The next item (highest priority first), waiting up to ``timeout`` s.

        Raises:
            queue.Empty: none came in time.
        """
        with self._ready:
            if not self._ready.wait_for(lambda: len(self._held) > 0, timeout):
                raise queue.Empty
            return self._held.take()


class PullBase(QueueConsumerBase[CoreT]):
    """What the sync and asyncio pull consumers share: arguments, subscribe/assign, positions.

    Args:
        group: consumer group (offsets are stored per group).
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix of the deployment.
        message_model: CLUSTERING (default) or BROADCASTING.
        consume_from_where: where a queue without a stored offset starts (the group's config wins).
        consume_timestamp_ms: start time for TIMESTAMP, epoch ms.
        auto_commit: commit positions automatically (with pulls, every 5 s, at shutdown); without
            it only :meth:`commit` commits.
        pull_batch_size: most messages one :meth:`poll` returns.
        allocate_strategy: how subscribed queues are shared in the group.
        client_id: this member's id.
    """

    def __init__(
        self,
        group: str,
        url: str | None = None,
        *,
        namespace: str = "mq",
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        auto_commit: bool = True,
        pull_batch_size: int = DEFAULT_PULL_CONSUMER_BATCH,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        client_id: str | None = None,
    ) -> None:
        if not isinstance(auto_commit, bool):
            raise MQClientError(f"auto_commit must be True or False, got {auto_commit!r}")
        super().__init__(
            group,
            url,
            namespace=namespace,
            message_model=message_model,
            consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms,
            allocate_strategy=allocate_strategy,
            pull_batch_size=pull_batch_size,
            client_id=client_id,
            kind="pull",
        )
        self.auto_commit = auto_commit
        self.pull_batch_size = pull_batch_size
        self._assigned: list[MessageQueue] | None = None
        self._positions = Positions(auto_commit)
        # what the core needs to know of this kind of consumption (see mq.consumer.core.Consumption)
        self.max_span: int | None = None
        self.drains_on_release = True  # a queue taken away waits a little for the application to poll
        self.seeds_start = auto_commit  # without auto-commit only commit() stores offsets
        self._setup()

    def _setup(self) -> None:
        """Make what the subclass needs besides the shared state (the poll buffer)."""

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` with automatic rebalance in the group."""
        if self._assigned is not None:
            raise MQClientError("this consumer uses assign(); subscribe() and assign() do not mix")
        super().subscribe(topic, expression)

    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly ``queues`` (no rebalance)."""
        if self._subscriptions:
            raise MQClientError("this consumer uses subscribe(); subscribe() and assign() do not mix")
        self._assigned = sorted(set(queues))
        if self._core is not None:
            self._core.assign(self._assigned)

    def commit_offset(self, pq: ProcessQueue) -> int | None:
        """With auto-commit: the queue's position (None before the first poll or seek); else None."""
        return self._positions.commit_offset(pq)


class PullConsumer(PullBase[ConsumerCore]):
    """Polls messages of subscribed or assigned queues (arguments: see :class:`PullBase`)."""

    _core_type = ConsumerCore

    def _setup(self) -> None:
        self._buffer: HeldBuffer[tuple[ProcessQueue, int, MessageExt]] = HeldBuffer()

    def start(self) -> PullConsumer:
        """Start pulling in the background. Returns self."""
        if self._core is None or not self._core.running:
            if not self._subscriptions and self._assigned is None:
                raise MQClientError("subscribe() or assign() before start()")
            self._build_core(self, assigned=self._assigned).start()
        return self

    def shutdown(self) -> None:
        """Commit (with auto_commit), release queues and leave the group."""
        if self._core is not None and self._core.running:
            self._core.shutdown()

    def __enter__(self) -> PullConsumer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.shutdown()

    def poll(self, timeout_s: float = DEFAULT_POLL_TIMEOUT_S) -> list[MessageExt]:
        """Up to ``pull_batch_size`` messages, waiting up to ``timeout_s`` seconds for the first
        (nothing while the group is paused)."""
        core = self._core
        if core is None or not core.running:
            raise MQClientError("the pull consumer is not started: call start() or use it as a context manager")
        out: list[MessageExt] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < self.pull_batch_size:
            if not core.active():
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
                if time.monotonic() >= deadline:
                    break
                continue
            wait = deadline - time.monotonic() if not out else 0
            try:
                pq, generation, msg = self._buffer.get(timeout=max(wait, 0.0))
            except queue.Empty:
                break
            if self._positions.take(pq, generation, msg):
                out.append(msg)
        if out:
            core.puller.wake()
        return out

    def commit(self) -> None:
        """Commit every held queue's position now (one round trip)."""
        core = self._core
        if core is None:
            return
        positions = self._positions.to_commit()
        if positions:
            self._positions.committed(positions, self._store.run(core.offsets.commit(positions, core.positions(positions))))

    def committed(self, queue: MessageQueue) -> int:
        """The committed offset of ``queue`` in the store (or local file), -1 when none."""
        offsets = self._core.offsets if self._core is not None else None
        if offsets is None:
            return self._store.read_offsets(self.group, [queue]).get(queue, -1)
        return self._store.run(offsets.read([queue])).get(queue, -1)

    def seek(self, queue: MessageQueue, offset: int) -> None:
        """Continue ``queue`` from ``offset`` (its position; committed by the next commit)."""
        if self._core is None:
            raise MQClientError(f"{queue} is not assigned to this consumer (start it, and assign or wait for rebalance)")
        self._positions.seek(self._core, queue, offset)

    def seek_to_begin(self, queue: MessageQueue) -> None:
        """Continue ``queue`` from its oldest stored message."""
        self.seek(queue, self._store.queue_stats(queue.topic, [queue.queue_id])[queue.queue_id].min_offset)

    def seek_to_end(self, queue: MessageQueue) -> None:
        """Continue ``queue`` with messages stored from now on."""
        self.seek(queue, self._store.queue_stats(queue.topic, [queue.queue_id])[queue.queue_id].max_offset)

    # -- what the core asks (see mq.consumer.core.Consumption) ----------------------------------

    def deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        """Buffer pulled messages for :meth:`poll` (which hands out higher priority first, D142)."""
        for m in msgs:
            self._buffer.put(pq.queue, m.priority, (pq, pq.generation, m))
