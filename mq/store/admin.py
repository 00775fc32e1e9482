"""Store operations of operator tools: finding a message id in every topic, the recent history of
stats snapshots (``Admin.stats`` rates), and removing every key of a namespace (``mq demo``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from mq.store.base import StoreBase, all_or_raise, chunks
from mq.store.ops import Cmd, Op, Scan, operation

#: Keys one pipelined round trip looks up or deletes.
BATCH = 500


class AdminOps(StoreBase):
    """Namespace-wide reads and clean-up for operators."""

    @operation
    def find_id_in(self, queues: Sequence[tuple[str, int]], msg_id: str) -> Op[list[tuple[str, int, int]]]:
        """``(topic, queue_id, offset)`` of every queue among ``queues`` whose id index holds ``msg_id``
        (one ``HGET`` per queue, pipelined in batches of :data:`BATCH`)."""
        replies = yield from self._each_queue(
            queues, lambda p, k: p.hget(k.ids, msg_id), f"looking up msg id {msg_id!r}", batch=BATCH
        )
        return [(t, q, int(off)) for (t, q), off in zip(queues, replies) if off is not None]

    @operation
    def stats_history(self, since_ms: int) -> Op[list[dict[str, Any]]]:
        """The stats snapshots taken at or after ``since_ms`` (epoch ms), oldest first."""
        with self._errors("reading the stats history"):
            raw = yield Cmd(lambda c: c.zrangebyscore(self.keys.stats_history, int(since_ms), "+inf"))
        return [dict(json.loads(r)) for r in raw]

    @operation
    def namespace_keys(self) -> Op[list[str]]:
        """Every key of the namespace, by ``SCAN MATCH`` on its hash-tag prefixes (never ``KEYS``);
        on a cluster, every master is scanned."""
        out: list[str] = []
        for pattern in self.keys.patterns():
            with self._errors("listing the namespace's keys"):
                found = yield Scan(pattern, BATCH)
            out += [key.decode() if isinstance(key, bytes) else str(key) for key in found]
        return out

    @operation
    def drop_namespace(self) -> Op[int]:
        """Delete (``UNLINK``) every key of the namespace; returns how many were deleted. Clients still
        running in the namespace write their keys again: stop them first."""
        keys = sorted(set((yield from AdminOps.namespace_keys.op(self))))
        deleted = 0
        for batch in chunks(keys, BATCH):
            replies = all_or_raise(
                (
                    yield from self._pipeline(
                        _each(batch, lambda p, key: p.execute_command("UNLINK", key)), "deleting the namespace"
                    )
                )
            )
            deleted += sum(int(r) for r in replies)
        return deleted


def _each(keys: Sequence[str], command: Callable[[Any, str], object]) -> Callable[[Any], None]:
    """A pipeline builder that queues ``command(pipe, key)`` for each of ``keys``."""

    def build(pipe: Any) -> None:
        for key in keys:
            command(pipe, key)

    return build
