"""``ProcessQueue``: the messages of one assigned queue pulled and not yet consumed [RocketMQ
``ProcessQueue``]: :class:`~mq.consumer.machine.QueueState` (the rules) with the locks and the flag
the consumer's threads and tasks need around it."""

from __future__ import annotations

import threading
import time

from mq.consumer.machine import QueueState
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue
from mq.store.groups import fingerprint


class ProcessQueue(QueueState):
    """In-flight messages of one queue, by offset (see :class:`~mq.consumer.machine.QueueState`).

    Attributes:
        idle: set while the last pull found nothing new; the queue's long-poll waiter then blocks
            in the store until a message arrives.
        pull_lock: one pull of this queue at a time (the puller or its waiter).
        consume_lock: orderly: held around each batch [RocketMQ ``consumeLock``]; the queue is given
            up only while nobody holds it, so its store lock and offset never go while a batch runs.
    """

    def __init__(self, queue: MessageQueue, next_offset: int) -> None:
        super().__init__(queue, next_offset, fingerprint)
        self.idle = threading.Event()
        self._lock = threading.Lock()  # the cache: pullers add, workers remove
        self.pull_lock = threading.Lock()
        self.consume_lock = threading.Lock()

    def position(self) -> tuple[int, str]:
        """Where the next pull starts and the fingerprint of the entry before it, read together."""
        with self._lock:
            return self.next_offset, self.last_entry

    def add(self, msgs: list[MessageExt], next_offset: int, last_entry: str | None = None, *, now_s: float = 0.0) -> None:
        """As :meth:`QueueState.add` (``now_s``: the monotonic clock when not given)."""
        with self._lock:
            super().add(msgs, next_offset, last_entry, now_s=now_s or time.monotonic())

    def remove(self, msgs: list[MessageExt]) -> int:
        """As :meth:`QueueState.remove`."""
        with self._lock:
            return super().remove(msgs)

    def tried_again(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """As :meth:`QueueState.tried_again`."""
        with self._lock:
            return super().tried_again(msgs)

    def overdue(self, timeout_s: float) -> list[MessageExt]:
        """Cached messages whose listener call began more than ``timeout_s`` ago."""
        with self._lock:
            return self.overdue_at(timeout_s, time.monotonic())

    def head(self, n: int) -> list[MessageExt]:
        """As :meth:`QueueState.head`."""
        with self._lock:
            return super().head(n)

    def reset(self, next_offset: int, last_entry: str = "") -> None:
        """As :meth:`QueueState.reset`."""
        with self._lock:
            super().reset(next_offset, last_entry)

    def commit_offset(self) -> int:
        """As :meth:`QueueState.commit_offset`."""
        with self._lock:
            return super().commit_offset()

    @property
    def span(self) -> int:
        """Offsets between the oldest and newest cached message."""
        with self._lock:
            return self._span()
