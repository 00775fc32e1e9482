"""Long polling [RocketMQ ``PullRequestHoldService``]: one waiter thread per caught-up queue blocks in
Redis (``XREAD BLOCK``) until a message past the queue's next offset arrives, so an idle consumer
wakes within a millisecond of a send. One waiter per queue works the same on a cluster, where one
call cannot block on keys of different slots (D11).

The waiter hands what it found to ``on_news(pq, start, messages)``; the consumer decides whether to
deliver those messages or pull (filtered subscriptions). Before it blocks, the waiter lets the
consumer commit what was consumed since the last pull (``before_wait``), so a queue that is only
ever woken by its waiter still keeps its stored offset at most one wake behind.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from mq.connection import Connection
from mq.consumer.process_queue import ProcessQueue
from mq.errors import MQBrokerError
from mq.message import MessageExt
from mq.store import Store

log = logging.getLogger("mq.consumer")

#: Milliseconds a waiter blocks in Redis before it blocks again.
LONG_POLL_BLOCK_MS = 10_000
#: Seconds a waiter pauses after a failed wait.
RETRY_PAUSE_S = 1.0

OnNews = Callable[[ProcessQueue, int, list[MessageExt], int], None]


def wait_failed(pq: ProcessQueue, e: Exception) -> None:
    """Log that a wait of ``pq``'s waiter failed (it retries in RETRY_PAUSE_S): a warning for the
    store's and the network's errors, an error with its traceback for anything else."""
    level = logging.WARNING if isinstance(e, (MQBrokerError, OSError)) else logging.ERROR
    log.log(level, "long poll of %s failed, retrying in %s s: %r", pq.queue, RETRY_PAUSE_S, e, exc_info=level == logging.ERROR)


class LongPoller:
    """Runs the waiters of one consumer on a connection of its own (replies may take ``LONG_POLL_BLOCK_MS``).

    Args:
        url, namespace: the store.
        on_news: called with ``(pq, start offset, messages read, offset after the last entry read)``
            when a wait returned entries.
        before_wait: called before each wait (commits the queue's offset if it moved).
        may_wait: whether the queue may be polled now (False while the group is paused).
        batch: most messages one wake reads.
        stopped: set at shutdown.
    """

    def __init__(
        self,
        url: str | None,
        namespace: str,
        *,
        on_news: OnNews,
        before_wait: Callable[[ProcessQueue], None],
        may_wait: Callable[[ProcessQueue], bool],
        batch: int,
        stopped: threading.Event,
    ) -> None:
        self._conn = Connection(url, namespace, socket_timeout_s=LONG_POLL_BLOCK_MS / 1000 + 5)
        self._store = Store(self._conn)
        self._on_news = on_news
        self._before_wait = before_wait
        self._may_wait = may_wait
        self._batch = batch
        self._stopped = stopped

    def watch(self, pq: ProcessQueue) -> None:
        """Start the waiter of ``pq``; it ends when the queue is dropped or the consumer stops."""
        threading.Thread(target=self._run, args=(pq,), name=f"mq-poll-{pq.queue.topic}-{pq.queue.queue_id}", daemon=True).start()

    def close(self) -> None:
        """Close the waiters' connection (blocked calls end with an error the waiters ignore)."""
        self._conn.close()

    def _run(self, pq: ProcessQueue) -> None:
        while not (self._stopped.is_set() or pq.dropped):
            try:
                self._once(pq)
            except Exception as e:  # a waiter never dies: the queue would stall
                if self._stopped.is_set() or pq.dropped:
                    return  # shutdown closed the connection under this call
                wait_failed(pq, e)
                self._stopped.wait(RETRY_PAUSE_S)

    def _once(self, pq: ProcessQueue) -> None:
        if pq.releasing or not self._may_wait(pq):
            self._stopped.wait(0.1)
            return
        if not pq.idle.wait(1.0):
            return
        self._before_wait(pq)
        start = pq.next_offset
        news = self._store.wait_for_messages(pq.queue, start, self._batch, LONG_POLL_BLOCK_MS)
        if news is not None:
            self._on_news(pq, start, *news)
