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

from mq.connection import translate_errors
from mq.keys import QueueKeys, parse_timer_member, timer_member
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
        with translate_errors(self._store.conn.url, "reading a broker index"):
            members = self._store.conn.client.zrangebyscore(self.key, "-inf", now_ms, start=0, num=limit)
        return [parse_timer_member(m) for m in members]

    def write_back(self, queues: list[tuple[str, int]], next_ms: list[int]) -> None:
        """Record each queue's next time (-1: nothing pending), then re-index against races."""
        client = self._store.conn.client
        with translate_errors(self._store.conn.url, "updating a broker index"):
            pipe = client.pipeline(transaction=False)
            for (topic, qid), at in zip(queues, next_ms):
                member = timer_member(topic, qid)
                if at < 0:
                    pipe.zrem(self.key, member)
                else:
                    pipe.zadd(self.key, {member: at})
            pipe.execute()
        self.reindex(queues)

    def postpone(self, queues: list[tuple[str, int]], at_ms: int) -> None:
        """Look at ``queues`` again at ``at_ms`` (epoch ms), e.g. after a failure, without re-indexing them."""
        with translate_errors(self._store.conn.url, "postponing queues in a broker index"):
            self._store.conn.client.zadd(self.key, {timer_member(t, q): at_ms for t, q in queues})

    def reindex(self, queues: list[tuple[str, int]]) -> None:
        """Lower each queue's score to its earliest pending item (adding missing entries)."""
        client = self._store.conn.client
        with translate_errors(self._store.conn.url, "re-reading queue schedules"):
            pipe = client.pipeline(transaction=False)
            for topic, qid in queues:
                pipe.zrange(self._schedule(self._store.queue_keys(topic, qid)), 0, 0, withscores=True)
            firsts = pipe.execute()
            pipe = client.pipeline(transaction=False)
            for (topic, qid), first in zip(queues, firsts):
                if first:
                    pipe.zadd(self.key, {timer_member(topic, qid): int(first[0][1])}, lt=True)
            pipe.execute()

    def sweep(self) -> None:
        """Re-index every queue of every topic."""
        queues = [(c.name, q) for c in self._store.topics() for q in range(c.queue_count)]
        for i in range(0, len(queues), 512):
            self.reindex(queues[i : i + 512])

    def seconds_to_next(self, cap_s: float) -> float:
        """Seconds until the earliest score, at most ``cap_s`` (``cap_s`` when empty or unreadable)."""
        try:
            first = self._store.conn.client.zrange(self.key, 0, 0, withscores=True)
        except Exception:  # the next round reports store errors
            return cap_s
        if not first:
            return cap_s
        return max(0.0, min(cap_s, float(first[0][1]) / 1000 - time.time()))
