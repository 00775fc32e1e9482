"""The timing of the store-side queue locks of orderly consumption (taken and renewed by
:class:`mq.consumer.ownership.Locked`) [RocketMQ ``RebalanceLockManager``].

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

#: Seconds a lock lives in Redis after a renewal.
LOCK_TTL_S = 12.0
#: Seconds between renewals of all held locks (one pipeline).
LOCK_RENEW_INTERVAL_S = 4.0
#: Seconds after sending a successful renewal that a client still trusts its lock.
LOCAL_LOCK_EXPIRY_S = 8.0
