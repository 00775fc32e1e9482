"""``ProcessQueue``: the messages of one assigned queue pulled and not yet consumed [RocketMQ
``ProcessQueue``]. It tells flow control how much is cached and the offset store what to commit."""

from __future__ import annotations

import dataclasses
import itertools
import threading
import time

from mq.message import MessageExt
from mq.queue import MessageQueue
from mq.store.groups import fingerprint


class ProcessQueue:
    """In-flight messages of one queue, by offset.

    Attributes:
        queue: the queue.
        next_offset: where the next pull starts.
        last_entry: the fingerprint of the entry at ``next_offset - 1`` as this client was handed it
            ("" when not known): pulls carry it for the store to check that a failover did not give
            that offset to another message (D70; read both with :meth:`position`).
        releasing: set when rebalance takes the queue away: pulling stops, cached messages are
            still consumed, then the offset is committed and the queue released.
        dropped: the queue is gone from this consumer (released, or taken over by another member).
        idle: set while the last pull found nothing new; the queue's long-poll waiter then blocks
            in the store until a message arrives.
        flow_paused: set while the puller leaves the queue out because too much of it is cached.
        releasing_since: monotonic time the release began.
    """

    def __init__(self, queue: MessageQueue, next_offset: int) -> None:
        self.queue = queue
        self.start_offset = next_offset  # where this client started on the queue
        self.next_offset = next_offset
        self.last_entry = ""
        self.generation = 0  # bumped by reset(): messages pulled before a seek are stale
        self.releasing = False
        self.releasing_since = 0.0
        self.dropped = False
        self.idle = threading.Event()
        #: set while the puller leaves this queue out for flow control: consuming then wakes it
        self.flow_paused = False
        self.last_pull_s = 0.0
        self.consumed_total = 0  # messages consumed (removed) since this client took the queue
        self._msgs: dict[int, MessageExt] = {}
        #: body bytes of the largest message the last pull brought (-1: none yet): the puller reads a
        #: queue of small messages without passing them through the pull script (see PullRequest.read_after)
        self.largest_body = -1
        self._bytes = 0
        self._lock = threading.Lock()
        self.pull_lock = threading.Lock()  # one pull of this queue at a time (puller or its waiter)
        self.consuming: dict[int, float] = {}  # concurrent: offset -> monotonic time its listener call began
        #: the offset the store holds as committed for this queue, as far as this client knows (-1: unknown)
        self.stored_offset = -1
        self.lock_sent_s = 0.0  # orderly: when the last successful lock request was sent (monotonic)
        self.orderly_active = False  # orderly: a consume task for this queue is scheduled or running
        #: orderly: held around each batch [RocketMQ ``consumeLock``]; the queue is given up only
        #: while nobody holds it, so its store lock and offset never go while a batch runs
        self.consume_lock = threading.Lock()

    def position(self) -> tuple[int, str]:
        """Where the next pull starts and the fingerprint of the entry before it, read together."""
        with self._lock:
            return self.next_offset, self.last_entry

    def add(self, msgs: list[MessageExt], next_offset: int, last_entry: str | None = None) -> None:
        """Cache pulled messages; the next pull starts at ``next_offset``, after the entry whose
        fingerprint is ``last_entry`` (None: the last of ``msgs`` when it is that entry, else the
        one known before when the position did not move, else unknown)."""
        sizes = [len(m.body) for m in msgs]
        if last_entry is None:
            if msgs and msgs[-1].queue_offset == next_offset - 1:
                last_entry = fingerprint(msgs[-1])
            elif not msgs and next_offset == self.next_offset:
                last_entry = self.last_entry
            else:
                last_entry = ""
        with self._lock:
            cached = self._msgs
            if msgs and (not cached or next(reversed(cached)) < msgs[0].queue_offset):
                # the common case: the pull continues past everything cached (offsets rise within a pull)
                cached.update(zip([m.queue_offset for m in msgs], msgs))
                self._bytes += sum(sizes)
            else:
                for m, size in zip(msgs, sizes):
                    if m.queue_offset not in cached:
                        cached[m.queue_offset] = m
                        self._bytes += size
            self.next_offset = next_offset
            self.last_entry = last_entry
            self.last_pull_s = time.monotonic()
        if sizes:
            self.largest_body = max(sizes)

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget consumed messages; returns the offset to commit (smallest still in flight, else next).

        A message whose offset holds another message now is left alone: the queue was rewound under
        it (a lossy failover gave its offset to a new message, D70) and the new one is still to be
        consumed."""
        with self._lock:
            cached = self._msgs
            for m in msgs:
                held = cached.get(m.queue_offset)
                if held is not None and (held is m or held.msg_id == m.msg_id):
                    del cached[m.queue_offset]
                    self._bytes -= len(m.body)
                    self.consumed_total += 1
            return self._oldest()

    def _oldest(self) -> int:
        # Pulls add offsets in increasing order and a dict keeps insertion order, so the first key is
        # the smallest and the last the largest: O(1), under the lock.
        return next(iter(self._msgs)) if self._msgs else self.next_offset

    def tried_again(self, msgs: list[MessageExt]) -> list[MessageExt]:
        """Count one more try of each cached message of ``msgs`` (orderly retries in place): the cache
        holds copies with ``reconsume_times + 1``, which are returned; handed-out objects are not changed."""
        with self._lock:
            out = []
            for m in msgs:
                again = dataclasses.replace(m, reconsume_times=m.reconsume_times + 1)
                if m.queue_offset in self._msgs:
                    self._msgs[m.queue_offset] = again
                out.append(again)
            return out

    def overdue(self, timeout_s: float) -> list[MessageExt]:
        """Cached messages whose listener call began more than ``timeout_s`` ago."""
        limit = time.monotonic() - timeout_s
        with self._lock:
            return [self._msgs[o] for o, began in list(self.consuming.items()) if began < limit and o in self._msgs]

    def head(self, n: int) -> list[MessageExt]:
        """The ``n`` cached messages with the smallest offsets, in offset order (orderly batches)."""
        with self._lock:
            return list(itertools.islice(self._msgs.values(), n))

    def reset(self, next_offset: int, last_entry: str = "") -> None:
        """Drop cached messages and pull from ``next_offset`` next (a seek; ``last_entry``: the
        fingerprint of the entry before it, when known)."""
        with self._lock:
            self._msgs.clear()
            self._bytes = 0
            self.next_offset = next_offset
            self.last_entry = last_entry
            self.generation += 1

    def commit_offset(self) -> int:
        """The offset that is safe to commit now."""
        with self._lock:
            return self._oldest()

    @property
    def count(self) -> int:
        """Messages cached."""
        return len(self._msgs)

    @property
    def size_bytes(self) -> int:
        """Body bytes cached."""
        return self._bytes

    @property
    def span(self) -> int:
        """Offsets between the oldest and newest cached message."""
        with self._lock:
            return next(reversed(self._msgs)) - next(iter(self._msgs)) if self._msgs else 0
