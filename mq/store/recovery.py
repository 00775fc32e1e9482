"""Store reads for finding what Redis evicted (``mq doctor``, the clients' error paths) and
rebuilding it (``Admin.recover_topics``): the queue keys a namespace still holds, and each queue's seq.

With a ``maxmemory-policy`` other than ``noeviction`` Redis may evict any key; the small bookkeeping
keys (the topics hash, queue metas, group offsets) go as readily as the streams holding the messages.
These reads run on error paths and in operator tools only, never on a send's or a pull's usual path.
"""

from __future__ import annotations

from collections.abc import Sequence

from mq.store.admin import BATCH, AdminOps
from mq.store.base import StoreBase, all_or_raise
from mq.store.ops import Op, operation

#: Queues of a topic whose log :meth:`RecoveryOps.topic_evicted` looks for: a topic's messages spread
#: over its queues from queue 0 on (round robin from a random start), so a topic that stored anything
#: almost surely has a log among its first queues. Bounds the work of a "topic does not exist" answer.
EVICTION_PROBE_QUEUES = 16


class RecoveryOps(StoreBase):
    """Evicted bookkeeping: detection and the reads recovery is built on."""

    @operation
    def topic_evicted(self, topic: str) -> Op[bool]:
        """Whether ``topic`` has no config but queue logs of it are stored (Redis evicted the topics hash
        or the topic's field): one pipelined ``EXISTS`` for each of the first
        :data:`EVICTION_PROBE_QUEUES` queues. For the "topic does not exist" error path only."""
        replies = all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: [p.exists(self.queue_keys(topic, q).log) for q in range(EVICTION_PROBE_QUEUES)],
                    f"looking for stored queues of topic {topic!r}",
                )
            )
        )
        return any(int(r) for r in replies)

    @operation
    def queue_keys_present(self) -> Op[dict[str, dict[int, set[str]]]]:
        """Topic → queue id → the kinds of its keys the namespace holds (``"q"`` meta, ``"log"``,
        ``"offsets"``), by ``SCAN`` of the whole namespace (every master of a cluster)."""
        out: dict[str, dict[int, set[str]]] = {}
        for key in (yield from AdminOps.namespace_keys.op(self)):
            parsed = self.keys.parse_queue_key(key)
            if parsed is not None:
                topic, qid, kind = parsed
                out.setdefault(topic, {}).setdefault(qid, set()).add(kind)
        return out

    @operation
    def queue_seqs(self, queues: Sequence[tuple[str, int]]) -> Op[list[int | None]]:
        """Each queue's seq (its next offset), None where its meta holds none; pipelined in batches."""
        replies = yield from self._each_queue(
            list(queues), lambda p, k: p.hget(k.meta, "seq"), "reading queue sequences", batch=BATCH
        )
        return [None if r is None else int(r) for r in replies]
