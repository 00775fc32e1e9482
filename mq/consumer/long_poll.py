"""Long polling [RocketMQ ``PullRequestHoldService``]: one waiter thread per caught-up queue blocks in
Redis (``XREAD BLOCK``) until a message past the queue's next offset arrives, so an idle consumer
wakes within a millisecond of a send. One waiter per queue works the same on a cluster, where one
call cannot block on keys of different slots (D11).

The waiter hands what it found to ``on_news(pq, start, messages)``; the consumer decides whether to
deliver those messages or pull (filtered subscriptions). Before it blocks, the waiter may let the
consumer commit what was consumed since the last commit (``before_wait``), so a queue that is only
ever woken by its waiter still keeps its stored offset close behind. Not at every wake: a commit is a
round trip of its own on the waiter's thread, right after it handed a message over, and at a few
hundred messages a second per queue that doubled the round trips and held the GIL while the worker
waited to start the listener (D55). :class:`~mq.consumer.machine.CommitPacer` decides instead: commit once the stored
offset lags by half a pull batch, or once a commit has waited ``WAIT_COMMIT_DELAY_S`` (the wait
blocks no longer than that while one is pending, so a queue that goes quiet is committed then).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from mq.consumer.machine import LONG_POLL_BLOCK_MS, WAIT_COMMIT_DELAY_S, WAIT_COMMIT_LOOKS, CommitPacer, CommitPolicy
from mq.consumer.process_queue import ProcessQueue
from mq.errors import MQBrokerError
from mq.model.message import MessageExt
from mq.store import Store
from mq.store.connection import Connection
from mq.store.groups import PullResult

log = logging.getLogger("mq.consumer")

__all__ = [
    "CLOSE_WAIT_S",
    "LONG_POLL_BLOCK_MS",
    "RETRY_PAUSE_S",
    "WAIT_COMMIT_DELAY_S",
    "WAIT_COMMIT_LOOKS",
    "CommitPacer",
    "LongPoller",
    "Reconnects",
    "wait_failed",
]

#: Seconds a waiter pauses after a failed wait.
RETRY_PAUSE_S = 1.0
#: Seconds :meth:`LongPoller.close` waits for the waiters to end (they end at once once stopped).
CLOSE_WAIT_S = 2.0
OnNews = Callable[[ProcessQueue, int, list[MessageExt], int], None]
OnRewind = Callable[[ProcessQueue, int, PullResult], None]


def wait_failed(pq: ProcessQueue, e: Exception) -> None:
    """Log that a wait of ``pq``'s waiter failed (it retries in RETRY_PAUSE_S): a warning for the
    store's and the network's errors, an error with its traceback for anything else."""
    level = logging.WARNING if isinstance(e, (MQBrokerError, OSError)) else logging.ERROR
    log.log(level, "long poll of %s failed, retrying in %s s: %r", pq.queue, RETRY_PAUSE_S, e, exc_info=level == logging.ERROR)


class Reconnects:
    """Whether a waiter's next wait checks its position in the store first (D70): on a connection it
    has not checked on yet, after a wait that found nothing, and whenever the connection reconnected
    (redis-py's retry reconnects inside a call, through Sentinel to a new master, without an error
    reaching the waiter). A steady stream of wakes on one connection then costs a plain ``XREAD``."""

    __slots__ = ("__weakref__", "due", "watching")

    def __init__(self) -> None:
        self.due = True
        self.watching = False

    def watch(self, conn: Connection) -> None:
        """Check at the next wait, and after every reconnect of ``conn``'s one connection (a held
        connection; without one, such as a cluster's, every wait checks)."""
        self.due = True
        self.watching = conn.on_reconnect(self.reconnected)  # kept as a weak reference to this object

    def reconnected(self, connection: object) -> None:
        self.due = True

    def take(self) -> bool:
        """Whether this wait checks (and the next one only if something asks for it again)."""
        due, self.due = self.due or not self.watching, False
        return due


class LongPoller:
    """Runs the waiters of one consumer on a client of their own (replies may take ``LONG_POLL_BLOCK_MS``),
    each waiter on one connection it holds (see :meth:`~mq.store.connection.Connection.held`).

    Args:
        url, namespace: the store.
        group: the consumer group (each wait checks its position first, D70).
        on_news: called with ``(pq, start offset, messages read, offset after the last entry read)``
            when a wait returned entries.
        on_rewind: called with ``(pq, start offset, rewound result)`` when the store rewound the
            position a wait was to start from (what the wait read is then dropped).
        commits: the consumer's commit policy (what a waiter commits before it blocks, paced by a
            :class:`CommitPacer` per waiter); None: waiters never commit.
        before_wait: commits the queue's offset if it moved (when the policy says so).
        may_wait: whether the queue may be polled now (False while the group is paused).
        batch: most messages one wake reads.
        stopped: set at shutdown.
    """

    def __init__(
        self,
        url: str | None,
        namespace: str,
        *,
        group: str,
        on_news: OnNews,
        on_rewind: OnRewind,
        commits: CommitPolicy[ProcessQueue] | None,
        before_wait: Callable[[ProcessQueue], None],
        may_wait: Callable[[ProcessQueue], bool],
        batch: int,
        stopped: threading.Event,
    ) -> None:
        self._conn = Connection(url, namespace, socket_timeout_s=LONG_POLL_BLOCK_MS / 1000 + 5)
        #: a wait blocks no longer than this: on a store whose blocked read no close reaches, a waiter
        #: then sees the consumer's stop within CLOSE_WAIT_S (see Connection.max_block_ms)
        self._max_block_ms = self._conn.max_block_ms or LONG_POLL_BLOCK_MS
        self._group = group
        self._on_news = on_news
        self._on_rewind = on_rewind
        self._commits = commits
        self._before_wait = before_wait
        self._may_wait = may_wait
        self._batch = batch
        self._stopped = stopped
        self._threads: list[threading.Thread] = []

    def watch(self, pq: ProcessQueue) -> None:
        """Start the waiter of ``pq``; it ends when the queue is dropped or the consumer stops."""
        self._threads = [t for t in self._threads if t.is_alive()]
        thread = threading.Thread(target=self._run, args=(pq,), name=f"mq-poll-{pq.queue.topic}-{pq.queue.queue_id}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        """End the waiters (up to ``CLOSE_WAIT_S``) and close their connections.

        The waiters' connections stop retrying, and the socket of every one in use is shut from here
        until the waiters have ended: a blocked wait fails at once and its waiter, seeing ``stopped``,
        gives the connection back. Before, only the pool was closed under the waiters (``disconnect()``
        of connections in use, from this thread), which raced them: redis-py's retry connected a failed
        wait again and sent it again, so a waiter blocked anew for up to ``LONG_POLL_BLOCK_MS`` and
        outlived the consumer (about every other shutdown). The pool is closed again once every waiter
        has ended: a waiter past its ``stopped`` check sends one more wait after the first close, and
        the connection redis-py made for it must not stay open (a socket leaked by each such shutdown)."""
        deadline = time.monotonic() + CLOSE_WAIT_S
        self._conn.stop_retrying()
        self._conn.close()  # idle connections, and a cluster's (no socket of a waiter's own to shut)
        while True:
            alive = [t for t in self._threads if t.is_alive()]  # looked at first: one that ends now has given its connection back
            if not alive:
                break
            self._conn.interrupt()
            if time.monotonic() > deadline:
                log.warning("%d long-poll waiter(s) still running %s s after the consumer stopped", len(alive), CLOSE_WAIT_S)
                break
            alive[0].join(0.05)
        self._conn.close()

    def _run(self, pq: ProcessQueue) -> None:
        # Each waiter holds a connection of its own (the pool's checkout per wait cost ~10 µs of CPU
        # and a poll of the socket, D55). It is taken in the loop, so a store not reachable yet is
        # retried, and given back after a failure: a new one is connected through the pool, which
        # asks the Sentinels for the master again (a held connection would reconnect where it was).
        # The connection is taken when the queue first has to be waited for, not when the waiter starts:
        # a consumer starting on a backlog would otherwise connect every waiter at once (~1.5 ms of
        # redis-py's connection set-up each, in the threads the puller shares the GIL with: 17 waiters
        # delayed a 40 000-message drain's first message by ~25 ms, the D55 dip).
        pacer = CommitPacer(self._batch // 2)
        reconnects = Reconnects()
        conn: Connection | None = None
        try:
            while not (self._stopped.is_set() or pq.dropped):
                try:
                    if not self._waiting(pq):
                        continue
                    if conn is None:
                        conn = self._conn.held()
                        store = Store(conn)
                        reconnects.watch(conn)
                    self._once(pq, pacer, store, reconnects)
                except Exception as e:  # a waiter never dies: the queue would stall
                    if self._stopped.is_set() or pq.dropped:
                        return  # shutdown closed the connection under this call
                    wait_failed(pq, e)
                    if conn is not None:
                        conn.release_held()
                        conn = None
                    self._stopped.wait(RETRY_PAUSE_S)
        finally:
            if conn is not None:
                conn.release_held()

    def _waiting(self, pq: ProcessQueue) -> bool:
        """Whether ``pq`` is to be waited for now: caught up (``idle``, waited for up to 1 s), not
        being released, the group not paused (else a pause of 0.1 s)."""
        if pq.releasing or not self._may_wait(pq):
            self._stopped.wait(0.1)
            return False
        return pq.idle.wait(1.0)

    def _once(self, pq: ProcessQueue, pacer: CommitPacer, store: Store, reconnects: Reconnects) -> None:
        """One wait of a caught-up queue (:meth:`_waiting` said so): commit if the pacer says so, block
        in the store until news or the block time (its position checked first when ``reconnects``
        says so), hand the news on."""
        start, last_entry = pq.position()
        block_ms = LONG_POLL_BLOCK_MS
        if self._commits is not None:
            commit, block_ms = self._commits.paced(pq, pacer, start, time.monotonic())
            if commit is not None:
                self._before_wait(pq)
        check = reconnects.take()
        rewound, news = store.wait_for_messages(
            pq.queue, start, self._batch, min(block_ms, self._max_block_ms), group=self._group, last_entry=last_entry, check=check
        )
        if rewound is not None:
            self._on_rewind(pq, start, rewound)
        elif news is None:
            reconnects.due = True  # a quiet queue: its next wait checks (it costs nothing then)
        elif not check and reconnects.due:
            pass  # reconnected during an unchecked wait: read it again, checked, before handing it on
        else:
            self._on_news(pq, start, *news)
