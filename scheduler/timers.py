"""Timer delivery: move delayed messages into their queues when due, within tens of milliseconds.

A dedicated thread delivers continuously (an APScheduler job only watches that it is alive: a job
that runs for a second at a time leaves gaps whenever the scheduler skips an overlapping run).
The ``{ns}:timers`` index scores each queue with its earliest due time. A delivery cycle takes the
due queues, runs ``deliver-due`` on each (atomic per queue, so replicas never deliver twice), and
writes each queue's next due time back. Setting a queue's score races with a producer adding an
earlier message to it; re-reading the queue's earliest due time *after* writing the score and
lowering it (ZADD LT) closes that race. A sweep re-indexes every queue's timer now and then, for
index writes lost to a crash between a producer's two writes.
"""

from __future__ import annotations

import logging
import threading
import time

from mq.connection import translate_errors
from mq.errors import MQError
from mq.keys import parse_timer_member, timer_member
from mq.store import Store

log = logging.getLogger("scheduler.timers")

#: Queues handled per round trip of a delivery cycle.
QUEUES_PER_ROUND = 64


class TimerDelivery:
    """Delivers due messages of one namespace."""

    def __init__(self, store: Store, *, poll_ms: int, batch: int, stop: threading.Event) -> None:
        self._store = store
        self._poll_s = poll_ms / 1000
        self._batch = batch
        self._stop = stop
        self._thread: threading.Thread | None = None
        self.delivered = 0

    def run(self) -> None:
        """Deliver until stopped (the body of the delivery thread)."""
        while not self._stop.is_set():
            try:
                if not self.deliver_once():
                    self._stop.wait(self._pause_s())
            except MQError as e:
                log.warning("timer delivery failed, retrying in 1 s: %s", e)
                self._stop.wait(1.0)

    def ensure_running(self) -> None:
        """Start the delivery thread, or start it again if it died (an APScheduler job calls this)."""
        if self._thread is None or not self._thread.is_alive():
            if self._thread is not None:
                log.error("timer delivery thread died; starting it again")
            self._thread = threading.Thread(target=self.run, name="mq-timer-delivery", daemon=True)
            self._thread.start()

    def join(self, timeout_s: float = 5.0) -> None:
        """Wait for the delivery thread to stop (after the stop event is set)."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def deliver_once(self) -> int:
        """One round: deliver what is due now; returns how many queues were due."""
        client = self._store.conn.client
        now = int(time.time() * 1000)
        with translate_errors(self._store.conn.url, "reading the timer index"):
            due = client.zrangebyscore(self._store.keys.timers, "-inf", now, start=0, num=QUEUES_PER_ROUND)
        if not due:
            return 0
        queues = [parse_timer_member(m) for m in due]
        results = self._store.deliver_due(queues, now, self._batch)
        self.delivered += sum(moved for moved, _ in results)
        self._write_back(queues, [next_due for _, next_due in results])
        return len(queues)

    def _write_back(self, queues: list[tuple[str, int]], next_due: list[int]) -> None:
        client = self._store.conn.client
        index = self._store.keys.timers
        with translate_errors(self._store.conn.url, "updating the timer index"):
            pipe = client.pipeline(transaction=False)
            for (topic, qid), due in zip(queues, next_due):
                member = timer_member(topic, qid)
                if due < 0:
                    pipe.zrem(index, member)
                else:
                    pipe.zadd(index, {member: due})
            pipe.execute()
            self.reindex(queues)  # a producer may have added an earlier message meanwhile

    def reindex(self, queues: list[tuple[str, int]]) -> None:
        """Lower each queue's index score to its earliest due message (adding missing entries)."""
        client = self._store.conn.client
        with translate_errors(self._store.conn.url, "re-reading queue timers"):
            pipe = client.pipeline(transaction=False)
            for topic, qid in queues:
                pipe.zrange(self._store.queue_keys(topic, qid).timer, 0, 0, withscores=True)
            firsts = pipe.execute()
            pipe = client.pipeline(transaction=False)
            for (topic, qid), first in zip(queues, firsts):
                if first:
                    pipe.zadd(self._store.keys.timers, {timer_member(topic, qid): int(first[0][1])}, lt=True)
            pipe.execute()

    def sweep(self) -> None:
        """Re-index the timers of every queue of every topic (repairs lost index writes)."""
        queues = [(c.name, q) for c in self._store.topics() for q in range(c.queue_count)]
        for i in range(0, len(queues), 512):
            self.reindex(queues[i : i + 512])

    def _pause_s(self) -> float:
        """Until the earliest due time, at most ``poll_ms``."""
        try:
            first = self._store.conn.client.zrange(self._store.keys.timers, 0, 0, withscores=True)
        except Exception:  # the next round reports store errors
            return self._poll_s
        if not first:
            return self._poll_s
        return max(0.0, min(self._poll_s, float(first[0][1]) / 1000 - time.time()))
