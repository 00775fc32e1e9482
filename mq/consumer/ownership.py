"""Queue ownership: how a consumer comes to consume a queue and how it gives it up, chosen once when
the consumer is built [RocketMQ ``RebalanceImpl`` + ``RebalanceLockManager``].

- :class:`Claimed` (clustering): a queue is the caller's while the store's owners hash names it
  (claim-queue / release-queue); a queue whose owner is no longer a live member is taken over.
- :class:`Locked` (orderly clustering): a queue is consumed only while the caller holds the group's
  store-side lock of it, renewed in the background (see :mod:`mq.consumer.locks` for the timing).
- :class:`Fixed` (broadcasting, and ``PullConsumer.assign``): every wanted queue is the caller's;
  nothing is asked of the store.

Each strategy also names the *guard* the store checks before committing an offset of a queue for
this client (``pull-messages`` and ``commit-offset`` check it), so a member that lost a queue never
moves the new owner's offset back.

The methods that ask the store are operations (:mod:`mq.store.ops`), run by the sync consumer core
with redis-py and by the asyncio one with ``redis.asyncio``: the same code for both.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from mq.consumer.locks import LOCAL_LOCK_EXPIRY_S, LOCK_TTL_S
from mq.consumer.offsets import LocalFileOffsetStore, OffsetStore, RemoteOffsetStore, at_once
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.types import MessageModel
from mq.errors import MQBrokerError
from mq.model.queue import MessageQueue
from mq.store import Store
from mq.store.groups import LOCK_GUARD, NO_GUARD, OWNER_GUARD
from mq.store.ops import Op
from mq.store.replication import SyncReplicas
from mq.store.store import StoreOps

log = logging.getLogger("mq.consumer")


class Ownership(Protocol):
    """How a consumer takes and gives up queues."""

    #: What the store checks before committing for this client: "", "owner" or "lock".
    guard: str
    #: Whether held queues must be renewed every ``LOCK_RENEW_INTERVAL_S``.
    renews: bool

    def claim(self, queues: Sequence[MessageQueue], members: Sequence[str]) -> Op[tuple[float, list[MessageQueue]]]:
        """The queues of ``queues`` the caller may start on now, and when the request was sent (monotonic s)."""
        ...

    def release(self, queue: MessageQueue, pq: ProcessQueue, offset: int | None) -> Op[None]:
        """Give ``queue`` up, committing ``offset`` with it (None: commit nothing)."""
        ...

    def may_consume(self, pq: ProcessQueue) -> bool:
        """Whether this client may start consuming a batch of ``pq`` now."""
        ...

    def renew(self, queues: Sequence[MessageQueue]) -> Op[tuple[float, set[MessageQueue]]]:
        """Renew held queues; returns when the request was sent and the queues still held."""
        ...


#: A store request granting (True) or refusing each queue asked for.
Ask = Callable[[Sequence[MessageQueue]], Op[list[bool]]]


class _StoreHeld:
    """Ownership the store records for this client of this group."""

    def __init__(self, store: Store, group: str, client_id: str) -> None:
        self._store, self._group, self._client_id = store, group, client_id

    @staticmethod
    def _take(queues: Sequence[MessageQueue], ask: Ask) -> Op[tuple[float, list[MessageQueue]]]:
        """Ask the store for ``queues``; returns when the request was sent (monotonic s) and what was granted."""
        sent = time.monotonic()
        granted = (yield from ask(queues)) if queues else []
        return sent, [q for q, ok in zip(queues, granted) if ok]


class Claimed(_StoreHeld):
    """Clustering: one live member owns a queue at a time, through the store's owners hash."""

    guard = OWNER_GUARD
    renews = False

    def claim(self, queues: Sequence[MessageQueue], members: Sequence[str]) -> Op[tuple[float, list[MessageQueue]]]:
        """Claim each queue that is free or whose owner is not a live member."""
        return (
            yield from self._take(
                queues, lambda qs: StoreOps.claim_queues.op(self._store, self._group, self._client_id, members, qs)
            )
        )

    def release(self, queue: MessageQueue, pq: ProcessQueue, offset: int | None) -> Op[None]:
        """Commit and give up in one script; a failure leaves the queue to be taken over when we leave."""
        try:
            yield from StoreOps.release_queue.op(self._store, self._group, self._client_id, queue, offset, pq.position())
        except MQBrokerError as e:
            log.warning("releasing %s failed (another member takes it over when we are gone): %s", queue, e)

    def may_consume(self, pq: ProcessQueue) -> bool:
        """Always: ownership is checked by the store on every pull and commit."""
        return True

    def renew(self, queues: Sequence[MessageQueue]) -> Op[tuple[float, set[MessageQueue]]]:
        """Nothing to renew."""
        return (yield from at_once((time.monotonic(), set(queues))))


class Locked(_StoreHeld):
    """Orderly clustering: a queue is consumed only under the group's store-side lock of it. With
    ``sync`` (replicas ≥ 1) a lock or renewal counts only once a replica confirmed it, so a failover
    never hands a lock its holder still trusts to another member (D36)."""

    guard = LOCK_GUARD
    renews = True

    def __init__(self, store: Store, group: str, client_id: str, sync: SyncReplicas | None = None) -> None:
        super().__init__(store, group, client_id)
        self._sync = sync

    def claim(self, queues: Sequence[MessageQueue], members: Sequence[str]) -> Op[tuple[float, list[MessageQueue]]]:
        """Take the locks of ``queues`` (free or expired ones, or our own)."""
        return (yield from self._lock(queues))

    def renew(self, queues: Sequence[MessageQueue]) -> Op[tuple[float, set[MessageQueue]]]:
        """Renew every held lock in one pipeline."""
        sent, held = yield from self._lock(queues)
        return sent, set(held)

    def _lock(self, queues: Sequence[MessageQueue]) -> Op[tuple[float, list[MessageQueue]]]:
        ttl_ms = int(LOCK_TTL_S * 1000)
        return (
            yield from self._take(
                queues,
                lambda qs: StoreOps.lock_queues.op(self._store, self._group, self._client_id, qs, ttl_ms, sync=self._sync),
            )
        )

    def release(self, queue: MessageQueue, pq: ProcessQueue, offset: int | None) -> Op[None]:
        """Unlock, committing ``offset`` only while the lock is still ours locally."""
        try:
            held = offset if self.may_consume(pq) else None
            yield from StoreOps.unlock_queue.op(self._store, self._group, self._client_id, queue, held, pq.position())
        except MQBrokerError as e:
            log.warning("unlocking %s failed (its lock expires by itself): %s", queue, e)

    def may_consume(self, pq: ProcessQueue) -> bool:
        """While the last successful lock request was sent less than ``LOCAL_LOCK_EXPIRY_S`` ago."""
        return time.monotonic() - pq.lock_sent_s < LOCAL_LOCK_EXPIRY_S


class Fixed:
    """Broadcasting and manual assignment: every wanted queue is ours; release just commits."""

    guard = NO_GUARD
    renews = False

    def __init__(self, offsets: OffsetStore) -> None:
        self._offsets = offsets

    def claim(self, queues: Sequence[MessageQueue], members: Sequence[str]) -> Op[tuple[float, list[MessageQueue]]]:
        """Every queue."""
        return (yield from at_once((time.monotonic(), list(queues))))

    def release(self, queue: MessageQueue, pq: ProcessQueue, offset: int | None) -> Op[None]:
        """Commit ``offset`` (where offsets live: the store, or the local file)."""
        if offset is None:
            return
        try:
            yield from self._offsets.commit({queue: offset}, {queue: pq.position()})
        except (MQBrokerError, OSError) as e:
            log.warning("committing the offset of %s at release failed: %s", queue, e)

    def may_consume(self, pq: ProcessQueue) -> bool:
        """Always."""
        return True

    def renew(self, queues: Sequence[MessageQueue]) -> Op[tuple[float, set[MessageQueue]]]:
        """Nothing to renew."""
        return (yield from at_once((time.monotonic(), set(queues))))


def choose(
    store: Store,
    group: str,
    client_id: str,
    model: MessageModel,
    *,
    orderly: bool = False,
    assigned: bool = False,
    sync: SyncReplicas | None = None,
) -> tuple[Ownership, OffsetStore]:
    """The ownership and offset store of a consumer: broadcasting reads every queue with offsets in a
    local file; manual assignment reads its queues with unguarded store offsets; clustering claims
    queues (orderly: locks them) with offsets committed only while they are ours."""
    if model is MessageModel.BROADCASTING:
        local = LocalFileOffsetStore(store.conn.namespace, group, client_id)
        return Fixed(local), local
    if assigned:
        remote = RemoteOffsetStore(store, group)
        return Fixed(remote), remote
    ownership: Ownership = Locked(store, group, client_id, sync) if orderly else Claimed(store, group, client_id)
    return ownership, RemoteOffsetStore(store, group, client_id, ownership.guard)
