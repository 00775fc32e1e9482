"""``QueueIndex``: a namespace-wide sorted set that scores each queue with its earliest pending time.

The broker's to-do lists (due timers, half messages due for a check-back) live in each queue's
slot; this index, in another slot, tells the broker which queues to look at. Producers lower a
queue's score (``ZADD LT``) after writing to the queue. The broker writes back each queue's next
time after handling it and then re-reads the queue's earliest time and lowers the score again,
which closes the race with a producer adding an earlier item meanwhile; a periodic sweep re-indexes
every queue, repairing an index write lost to a crash between a producer's two writes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from mq.keys import QueueKeys
from mq.store import Store

#: Queues handled per round trip.
QUEUES_PER_ROUND = 64


class QueueIndex:
    """One index key and the per-queue schedule (zset) it summarises."""

    def __init__(self, store: Store, key: str, schedule: Callable[[QueueKeys], str]) -> None:
        self._store = store
        self.key = key
        self._schedule = schedule

    def due(self, now_ms: int, limit: int = QUEUES_PER_ROUND) -> list[tuple[str, int]]:
        """Queues whose earliest time has come."""
        return self._store.index_due(self.key, now_ms, limit)

    def write_back(self, queues: list[tuple[str, int]], next_ms: list[int]) -> None:
        """Record each queue's next time (-1: nothing pending), then re-index against races."""
        self._store.index_set(self.key, list(zip(queues, next_ms)))
        self.reindex(queues)

    def postpone(self, queues: list[tuple[str, int]], at_ms: int) -> None:
        """Look at ``queues`` again at ``at_ms`` (epoch ms), e.g. after a failure, without re-indexing them."""
        self._store.index_set(self.key, [(queue, at_ms) for queue in queues])

    def reindex(self, queues: list[tuple[str, int]]) -> None:
        """Lower each queue's score to its earliest pending item (adding missing entries)."""
        self._store.index_lower(self.key, queues, self._schedule)

    def sweep(self) -> None:
        """Re-index every queue every topic ever had (its span: a shrunk topic keeps its high queues,
        and what waits there must still be delivered)."""
        queues = [(name, q) for name, (_, span) in sorted(self._store.topic_spans().items()) for q in range(span)]
        for i in range(0, len(queues), 512):
            self.reindex(queues[i : i + 512])

    def seconds_to_next(self, cap_s: float) -> float:
        """Seconds until the earliest score, at most ``cap_s`` (``cap_s`` when empty or unreadable)."""
        try:
            first = self._store.index_first_ms(self.key)
        except Exception:  # the next round reports store errors
            return cap_s
        if first is None:
            return cap_s
        return max(0.0, min(cap_s, first / 1000 - time.time()))
