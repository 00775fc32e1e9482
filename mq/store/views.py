"""Store reads behind the web console's views (``mq console``): many queues in few round trips —
queue stats with every group's committed offset, queue owners, key-index pages, per-topic backlogs of
the timer and transaction indexes, a retry timer's content, and the broker services' last beats.
Operations (see :mod:`mq.store.ops`); the registries and configs of many groups are in
:class:`~mq.store.groups.GroupOps`, committed offsets of many queues in
:class:`~mq.store.broker.BrokerOps`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mq.keys import QueueKeys, key_index_offset, key_index_range, parse_timer_member
from mq.store.base import QUEUE_BATCH, ScriptCall, StoreBase, all_or_raise, chunks
from mq.store.broker import BrokerOps
from mq.store.ops import Op, operation
from mq.topic import QueueStats

#: Queues read per pipelined round trip.
VIEW_BATCH = QUEUE_BATCH
#: Entries of a timer stream read per round trip by :meth:`ViewOps.delayed_holds`.
TIMER_PAGE = 500


class ViewOps(StoreBase):
    """Bulk, read-only views over queues, groups and the namespace indexes."""

    @operation
    def queues_state(
        self, queues: Sequence[tuple[str, int]], *, offsets: bool = True
    ) -> Op[list[tuple[QueueStats, dict[str, int]]]]:
        """For each ``(topic, queue_id)``: its stats and (with ``offsets``) the committed offset of every
        group on it; two pipelines (scripts, then ``HGETALL``) per :data:`VIEW_BATCH` queues."""
        out: list[tuple[QueueStats, dict[str, int]]] = []
        for batch in chunks(queues, VIEW_BATCH):
            calls: list[ScriptCall] = [("queue-stats", self.queue_keys(t, q).read(), []) for t, q in batch]
            stats = all_or_raise((yield from self._scripts(calls, "reading queue stats")))
            committed: list[dict[str, int]] = [{}] * len(batch)
            if offsets:
                committed = yield from BrokerOps.group_offsets_of.op(self, batch)
            out += [(QueueStats(int(s[0]), int(s[1]), int(s[2])), off) for s, off in zip(stats, committed)]
        return out

    @operation
    def queue_owners(self, queues: Sequence[tuple[str, int]]) -> Op[list[dict[str, str]]]:
        """For each ``(topic, queue_id)``: group → client id consuming it now (the owners hash)."""
        replies = yield from self._each_queue(queues, lambda p, k: p.hgetall(k.owners), "reading queue owners")
        return [{_text(g): _text(c) for g, c in r.items()} for r in replies]

    @operation
    def key_counts(self, topic: str, queue_ids: Sequence[int], key: str) -> Op[list[int]]:
        """How many messages of each queue are indexed under business key ``key`` (``ZLEXCOUNT``)."""
        low, high = key_index_range(key)
        queues = [(topic, q) for q in queue_ids]
        replies = yield from self._each_queue(queues, lambda p, k: p.zlexcount(k.keys, low, high), "counting a key")
        return [int(r) for r in replies]

    @operation
    def key_page(self, topic: str, queue_id: int, key: str, start: int, count: int) -> Op[list[int]]:
        """Offsets of the ``count`` messages of one queue indexed under ``key`` from the ``start``-th on
        (in offset order: index members end in the 20-digit offset)."""
        low, high = key_index_range(key)
        index = self.queue_keys(topic, queue_id).keys
        members = yield from self._cmd(
            lambda c: c.zrangebylex(index, low, high, int(start), int(count)), f"looking up key {key!r}"
        )
        return [key_index_offset(m) for m in members]

    @operation
    def index_backlog(self, index: str, schedule: Callable[[QueueKeys], str]) -> Op[list[tuple[str, int, int, int]]]:
        """``(topic, queue_id, waiting, earliest ms)`` of every queue listed in a broker index
        (``{ns}:timers`` with ``QueueKeys.timer``, ``{ns}:halves`` with ``QueueKeys.halfidx``):
        the index's score and the size of the queue's own schedule."""
        raw = yield from self._cmd(lambda c: c.zrange(index, 0, -1, withscores=True), "reading a broker index")
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
            entries = yield from self._cmd(page, f"reading the timer of {topic!r} queue {queue_id}")
            if any(fields.get(b"i") == wanted for _, fields in entries):
                return True
            if len(entries) < TIMER_PAGE:
                return False
            seen += len(entries)
            start = "(" + _text(entries[-1][0])
        return None

    @operation
    def broker_beats(self) -> Op[dict[str, int]]:
        """Every broker service id with its last health beat, epoch ms."""
        raw = yield from self._cmd(lambda c: c.zrange(self.keys.brokers, 0, -1, withscores=True), "reading broker health")
        return {_text(m): int(s) for m, s in raw}


def _xrange_from(stream: str, start: str) -> Callable[[Any], Any]:
    """A client call reading :data:`TIMER_PAGE` entries of ``stream`` from ``start`` on."""
    return lambda c: c.xrange(stream, start, "+", TIMER_PAGE)


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)
