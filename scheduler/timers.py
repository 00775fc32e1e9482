"""Timer delivery: move delayed messages into their queues when due, within tens of milliseconds.

A dedicated thread delivers continuously (an APScheduler job only watches that it is alive: a job
that runs for a second at a time leaves gaps whenever the scheduler skips an overlapping run).
The ``{ns}:timers`` index (a :class:`~scheduler.index.QueueIndex`) scores each queue with its
earliest due time. A delivery round takes the due queues, runs ``deliver-due`` on each (atomic per
queue, so replicas never deliver twice), and writes each queue's next due time back.
"""

from __future__ import annotations

import logging
import threading
import time

from mq.errors import MQError
from mq.store import Store
from scheduler.index import QueueIndex

log = logging.getLogger("scheduler.timers")

#: How long a queue whose delivery failed waits before the next try, ms.
RETRY_FAILED_MS = 1000


class TimerDelivery:
    """Delivers due messages of one namespace."""

    def __init__(self, store: Store, *, poll_ms: int, batch: int, stop: threading.Event) -> None:
        self._store = store
        self._poll_s = poll_ms / 1000
        self._batch = batch
        self._stop = stop
        self.index = QueueIndex(store, store.keys.timers, lambda keys: keys.timer)
        self._thread: threading.Thread | None = None
        self.delivered = 0

    def run(self) -> None:
        """Deliver until stopped (the body of the delivery thread); survives any error of a round."""
        while not self._stop.is_set():
            try:
                if not self.deliver_once():
                    self._stop.wait(self._pause_s())
            except MQError as e:
                log.warning("timer delivery failed, retrying in 1 s: %s", e)
                self._stop.wait(1.0)
            except Exception:  # a bug must not stop delayed messages of every topic: log it and go on
                log.exception("timer delivery round failed unexpectedly (delayed messages wait); retrying in 1 s")
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
        now = int(time.time() * 1000)
        queues = self.index.due(now)
        if not queues:
            return 0
        results = self._store.deliver_due(queues, now, self._batch)
        done: list[tuple[str, int]] = []
        next_due: list[int] = []
        failed: list[tuple[str, int]] = []
        for (topic, qid), result in zip(queues, results):
            if isinstance(result, MQError):  # nothing of that queue changed: try it again later
                log.error("timer delivery of %r queue %d failed, retrying in %d ms: %s", topic, qid, RETRY_FAILED_MS, result)
                failed.append((topic, qid))
                continue
            self.delivered += result.moved
            done.append((topic, qid))
            if result.dead:
                log.error(
                    "%d delayed message(s) of %r queue %d could not be delivered: kept in its timer "
                    "dead-letter stream (Store.timer_dead_letters)",
                    result.dead,
                    topic,
                    qid,
                )
            next_due.append(result.next_due_ms)
        if failed:
            self.index.postpone(failed, now + RETRY_FAILED_MS)
        if done:
            self.index.write_back(done, next_due)
        return len(queues)

    def sweep(self) -> None:
        """Re-index every queue's timer (repairs lost index writes)."""
        self.index.sweep()

    def _pause_s(self) -> float:
        """Until the earliest due time, at most ``poll_ms``."""
        return self.index.seconds_to_next(self._poll_s)
