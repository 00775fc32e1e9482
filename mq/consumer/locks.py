"""Store-side queue locks of orderly consumption, and their timing [RocketMQ ``RebalanceLockManager``].

A client consumes a queue in order only while it holds the queue's lock. The timing keeps two
clients from ever consuming one queue at once and still lets a crashed client's queues move fast:

- the lock lives ``LOCK_TTL_S`` in Redis after each renewal [RocketMQ: 60 s];
- a client renews all its locks every ``LOCK_RENEW_INTERVAL_S`` [RocketMQ: 20 s];
- a client stops starting batches on a queue ``LOCAL_LOCK_EXPIRY_S`` after it *sent* the last
  successful renewal [RocketMQ: 30 s]. The store counts its TTL from when it *ran* the renewal,
  which is later, so the client always stops at least ``LOCK_TTL_S - LOCAL_LOCK_EXPIRY_S`` (4 s)
  before anyone else can take the lock: a batch that started in time has that long to finish.
- a crashed client's queues are taken over once the group sees it gone (heartbeat timeout, 6 s)
  and its locks have run out (at most ``LOCK_TTL_S`` after its last renewal): within about 13 s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from mq.connection import translate_errors
from mq.queue import MessageQueue
from mq.store import Store, scripts

#: Seconds a lock lives in Redis after a renewal.
LOCK_TTL_S = 12.0
#: Seconds between renewals of all held locks (one pipeline).
LOCK_RENEW_INTERVAL_S = 4.0
#: Seconds after sending a successful renewal that a client still trusts its lock.
LOCAL_LOCK_EXPIRY_S = 8.0


def try_lock(store: Store, group: str, client_id: str, queues: Sequence[MessageQueue]) -> tuple[float, set[MessageQueue]]:
    """Take or renew the locks of ``queues``; returns when the request was sent (monotonic s) and the
    queues the caller holds now."""
    sent = time.monotonic()
    if not queues:
        return sent, set()
    calls = [("lock-queue", [store.queue_keys(q.topic, q.queue_id).lock(group)], [client_id, int(LOCK_TTL_S * 1000)])
             for q in queues]  # fmt: skip
    with translate_errors(store.conn.url, "locking queues"):
        results = scripts.run_many(store.conn.client, calls)
    return sent, {q for q, r in zip(queues, results) if r == 1}


def unlock(store: Store, group: str, client_id: str, queue: MessageQueue, offset: int | None) -> bool:
    """Release the caller's lock of ``queue``, committing ``offset`` with it; False when not held."""
    keys = store.queue_keys(queue.topic, queue.queue_id)
    with translate_errors(store.conn.url, f"unlocking {queue}"):
        return bool(scripts.run(store.conn.client, "unlock-queue", [keys.lock(group), keys.offsets],
                                [client_id, group, "" if offset is None else offset]))  # fmt: skip
