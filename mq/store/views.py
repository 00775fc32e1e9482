"""Store reads behind the web console's views (``mq console``): many queues in few round trips —
queue stats with every group's committed offset, queue owners, key counts, per-topic backlogs of the
timer and transaction indexes, and a retry timer's content. Operations (see :mod:`mq.store.ops`); the
console's other reads are next to their kin: the registries and configs of many groups in
:class:`~mq.store.groups.GroupOps`, committed offsets of many queues and the broker services' beats in
:class:`~mq.store.broker.BrokerOps`, key pages in :meth:`~mq.store.store.MessageOps.find_keys`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mq.keys import QueueKeys, key_index_range, parse_timer_member
from mq.model.topic import QueueStats
from mq.store.base import StoreBase
from mq.store.broker import BrokerOps
from mq.store.ops import Cmd, Op, operation

#: Entries of a timer stream read per round trip by :meth:`ViewOps.delayed_holds`.
TIMER_PAGE = 500


class ViewOps(StoreBase):
    """Bulk, read-only views over queues and the namespace indexes."""

    @operation
    def queues_state(
        self, queues: Sequence[tuple[str, int]], *, offsets: bool = True, owners: bool = False
    ) -> Op[list[tuple[QueueStats, dict[str, int], dict[str, str]]]]:
        """For each ``(topic, queue_id)``: its stats, (with ``offsets``) the committed offset of every
        group on it and (with ``owners``) the client consuming it for each group: one pipeline of
        scripts, then one of ``HGETALL`` for each of ``offsets`` and ``owners``, per
        :data:`~mq.store.base.QUEUE_BATCH` queues."""
        stats = yield from self._queue_stats(queues, "reading queue stats")
        committed: list[dict[str, int]] = (
            (yield from BrokerOps.group_offsets_of.op(self, queues)) if offsets else [{} for _ in queues]
        )
        held: list[dict[str, str]] = (yield from ViewOps.queue_owners.op(self, queues)) if owners else [{} for _ in queues]
        return list(zip(stats, committed, held))

    @operation
    def queue_owners(self, queues: Sequence[tuple[str, int]]) -> Op[list[dict[str, str]]]:
        """For each ``(topic, queue_id)``: group → client id consuming it now (the owners hash)."""
        replies = yield from self._each_queue(queues, lambda p, k: p.hgetall(k.owners), "reading queue owners")
        return [{_text(g): _text(c) for g, c in r.items()} for r in replies]

    @operation
    def expired_unconsumed(self, queues: Sequence[tuple[str, int]]) -> Op[list[dict[str, int]]]:
        """For each ``(topic, queue_id)``: group → messages retention removed before the group consumed
        them (the counters ``trim-queue`` keeps; groups that never lost one are absent)."""
        replies = yield from self._each_queue(queues, lambda p, k: p.hgetall(k.expired), "reading expired counts")
        return [{_text(g): int(n) for g, n in r.items()} for r in replies]

    @operation
    def key_counts(self, topic: str, queue_ids: Sequence[int], key: str) -> Op[list[int]]:
        """How many messages of each queue are indexed under business key ``key`` (``ZLEXCOUNT``)."""
        low, high = key_index_range(key)
        queues = [(topic, q) for q in queue_ids]
        replies = yield from self._each_queue(queues, lambda p, k: p.zlexcount(k.keys, low, high), "counting a key")
        return [int(r) for r in replies]

    @operation
    def index_backlog(self, index: str, schedule: Callable[[QueueKeys], str]) -> Op[list[tuple[str, int, int, int]]]:
        """``(topic, queue_id, waiting, earliest ms)`` of every queue listed in a broker index
        (``{ns}:timers`` with ``QueueKeys.timer``, ``{ns}:halves`` with ``QueueKeys.halfidx``):
        the index's score and the size of the queue's own schedule."""
        with self._errors("reading a broker index"):
            raw = yield Cmd(lambda c: c.zrange(index, 0, -1, withscores=True))
        listed = [(parse_timer_member(m), int(s)) for m, s in raw]
        sizes = yield from self._each_queue([q for q, _ in listed], lambda p, k: p.zcard(schedule(k)), "reading queue schedules")
        return [(t, q, int(n), at) for ((t, q), at), n in zip(listed, sizes)]

    @operation
    def delayed_holds(self, topic: str, queue_id: int, msg_id: str, *, limit: int) -> Op[bool | None]:
        """Whether the timer of a queue (its delayed messages waiting to be due) holds message ``msg_id``;
        None when it holds more than ``limit`` entries (not all read). ``XRANGE`` in pages of
        :data:`TIMER_PAGE`."""
        delayed = self.queue_keys(topic, queue_id).delayed
        start, seen, wanted = "-", 0, msg_id.encode()
        while seen < limit:
            page = _xrange_from(delayed, start)
            with self._errors(f"reading the timer of {topic!r} queue {queue_id}"):
                entries = yield Cmd(page)
            if any(fields.get(b"i") == wanted for _, fields in entries):
                return True
            if len(entries) < TIMER_PAGE:
                return False
            seen += len(entries)
            start = "(" + _text(entries[-1][0])
        return None


def _xrange_from(stream: str, start: str) -> Callable[[Any], Any]:
    """A client call reading :data:`TIMER_PAGE` entries of ``stream`` from ``start`` on."""
    return lambda c: c.xrange(stream, start, "+", TIMER_PAGE)


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
