"""``PullConsumer``: the application polls for messages [RocketMQ ``DefaultLitePullConsumer``].

Either ``subscribe`` (queues shared in the group by rebalance) or ``assign`` (exactly the queues
given, with ``seek``). Polled messages count as consumed: with ``auto_commit`` their offsets are
committed every 5 s and at shutdown; otherwise call :meth:`commit`.
"""

from __future__ import annotations

import queue
import threading
import time
from types import TracebackType

from mq.consumer.allocate import AllocateMessageQueueStrategy
from mq.consumer.core import ConsumerCore
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.types import ConsumeFromWhere, MessageModel
from mq.errors import MQClientError
from mq.filter import MessageSelector
from mq.message import MessageExt
from mq.queue import MessageQueue

#: Seconds :meth:`PullConsumer.poll` waits by default.
DEFAULT_POLL_TIMEOUT_S = 5.0


class PullConsumer:
    """Polls messages of subscribed or assigned queues.

    Args:
        group: consumer group (offsets are stored per group).
        url: store URL; None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix of the deployment.
        message_model: CLUSTERING (default) or BROADCASTING.
        consume_from_where: where a queue without a stored offset starts.
        auto_commit: commit polled offsets every 5 s and at shutdown.
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
        pull_batch_size: int = 32,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        client_id: str | None = None,
    ) -> None:
        self.auto_commit = auto_commit
        self.pull_batch_size = pull_batch_size
        self._buffer: queue.Queue[tuple[ProcessQueue, int, MessageExt]] = queue.Queue()
        self._core = ConsumerCore(
            group, url, namespace=namespace, message_model=message_model, consume_from_where=consume_from_where,
            consume_timestamp_ms=consume_timestamp_ms, allocate_strategy=allocate_strategy,
            pull_batch_size=pull_batch_size, client_id=client_id, kind="pull", deliver=self._deliver, max_span=None,
            track_offsets=False,
        )  # fmt: skip
        self._polled: dict[MessageQueue, int] = {}
        self._committed: dict[MessageQueue, int] = {}  # by commit(), when auto_commit is off
        self._lock = threading.Lock()
        if not self.auto_commit:
            self._core.release_offset = self._release_offset

    def __repr__(self) -> str:
        return f"PullConsumer(group={self._core.group!r}, client_id={self._core.client_id!r}, {self._core.conn!r})"

    def subscribe(self, topic: str, expression: str | MessageSelector = "*") -> None:
        """Consume ``topic`` with automatic rebalance in the group."""
        if self._core._assigned is not None:
            raise MQClientError("this consumer uses assign(); subscribe() and assign() do not mix")
        self._core.subscribe(topic, expression)

    def assign(self, queues: list[MessageQueue]) -> None:
        """Consume exactly ``queues`` (no rebalance)."""
        if self._core.subscriptions:
            raise MQClientError("this consumer uses subscribe(); subscribe() and assign() do not mix")
        self._core.assign(queues)

    def start(self) -> PullConsumer:
        """Start pulling in the background. Returns self."""
        if not self._core.running:
            if not self._core.subscriptions and self._core._assigned is None:
                raise MQClientError("subscribe() or assign() before start()")
            self._core.start()
        return self

    def shutdown(self) -> None:
        """Commit (with auto_commit), release queues and leave the group."""
        if self._core.running:
            if self.auto_commit:
                self._apply_polled()
            self._core.shutdown()

    def __enter__(self) -> PullConsumer:
        return self.start()

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.shutdown()

    def poll(self, timeout_s: float = DEFAULT_POLL_TIMEOUT_S) -> list[MessageExt]:
        """Up to ``pull_batch_size`` messages, waiting up to ``timeout_s`` seconds for the first."""
        out: list[MessageExt] = []
        deadline = time.monotonic() + timeout_s
        while len(out) < self.pull_batch_size:
            wait = deadline - time.monotonic() if not out else 0
            try:
                pq, generation, msg = self._buffer.get(timeout=wait) if wait > 0 else self._buffer.get_nowait()
            except queue.Empty:
                break
            if pq.dropped or generation != pq.generation:
                continue  # released or seeked away since it was pulled
            pq.remove([msg])
            with self._lock:
                self._polled[pq.queue] = max(self._polled.get(pq.queue, 0), msg.queue_offset + 1)
            out.append(msg)
        if out:
            self._core.wake()
            if self.auto_commit:
                self._apply_polled()  # persisted by the 5 s job and at shutdown
        return out

    def commit(self) -> None:
        """Commit the offsets of everything polled so far (one round trip)."""
        applied = self._apply_polled()
        self._core.offsets.persist()
        with self._lock:
            self._committed.update(applied)

    def committed(self, queue: MessageQueue) -> int:
        """The committed offset of ``queue`` in the store (or local file), -1 when none."""
        return self._core.offsets.read([queue]).get(queue, -1)

    def seek(self, queue: MessageQueue, offset: int) -> None:
        """Continue ``queue`` from ``offset``."""
        with self._lock:
            self._polled.pop(queue, None)
        self._core.seek(queue, offset)

    def seek_to_begin(self, queue: MessageQueue) -> None:
        """Continue ``queue`` from its oldest stored message."""
        self.seek(queue, self._core.store.queue_stats(queue.topic, [queue.queue_id])[queue.queue_id].min_offset)

    def seek_to_end(self, queue: MessageQueue) -> None:
        """Continue ``queue`` with messages stored from now on."""
        self.seek(queue, self._core.store.queue_stats(queue.topic, [queue.queue_id])[queue.queue_id].max_offset)

    def assigned_queues(self) -> set[MessageQueue]:
        """The queues this consumer reads now."""
        return {mq for mq, pq in self._core.process_queues.items() if not pq.releasing}

    def _deliver(self, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        for m in msgs:
            self._buffer.put((pq, pq.generation, m))

    def _apply_polled(self) -> dict[MessageQueue, int]:
        """Move the in-memory offsets past everything polled (the next persist stores them)."""
        with self._lock:
            polled, self._polled = self._polled, {}
        applied = {}
        for mq, offset in polled.items():
            pq = self._core.process_queues.get(mq)
            applied[mq] = pq.commit_offset() if pq else offset
            self._core.offsets.update(mq, applied[mq])
        return applied

    def _release_offset(self, pq: ProcessQueue) -> int:
        """Without auto-commit a released queue keeps what ``commit()`` stored (or where we began):
        messages polled but not committed are delivered again to whoever reads the queue next."""
        with self._lock:
            return self._committed.pop(pq.queue, pq.start_offset)
