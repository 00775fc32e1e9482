"""Store operations of the broker service and of namespace-wide views: published settings, health
beats, the stats snapshot, the broker's per-namespace to-do indexes, backlog figures, and bulk reads
(discarded transactions, Spark pages, committed offsets of every group)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from mq.keys import QueueKeys, parse_timer_member, stream_id, timer_member
from mq.model.topic import TopicConfig
from mq.store.base import StoreBase, all_or_raise, without_dicts
from mq.store.ops import Cmd, Op, operation


class BrokerOps(StoreBase):
    """Namespace settings, health, stats, indexes and bulk reads."""

    # -- namespace settings ---------------------------------------------------------------------

    @operation
    def namespace_setting(self, name: str) -> Op[str | None]:
        """One setting the broker service published in ``{ns}:config`` (None when unset)."""
        with self._errors(f"reading the namespace setting {name!r}"):
            raw = yield Cmd(lambda c: c.hget(self.keys.config, name))
        return raw.decode() if isinstance(raw, bytes) else raw

    @operation
    def publish_settings(self, settings: Mapping[str, Any]) -> Op[None]:
        """Publish namespace settings (``message_delay_level``, ``transaction_timeout_s``, …)."""
        with self._errors("publishing broker settings"):
            (yield Cmd(lambda c: c.hset(self.keys.config, mapping=dict(settings))))

    # -- health and stats -----------------------------------------------------------------------

    @operation
    def beat(self, broker_id: str, now_ms: int) -> Op[None]:
        """Record a broker service's health beat."""
        with self._errors("reporting health"):
            (yield Cmd(lambda c: c.zadd(self.keys.brokers, {broker_id: int(now_ms)})))

    @operation
    def leave_brokers(self, broker_id: str) -> Op[None]:
        """Remove a broker service from the health set."""
        with self._errors("leaving the broker set"):
            (yield Cmd(lambda c: c.zrem(self.keys.brokers, broker_id)))

    @operation
    def brokers_since(self, cutoff_ms: int) -> Op[list[str]]:
        """Ids of the broker services that beat at or after ``cutoff_ms``."""
        with self._errors("reading broker health"):
            return [m.decode() for m in (yield Cmd(lambda c: c.zrangebyscore(self.keys.brokers, int(cutoff_ms), "+inf")))]

    @operation
    def broker_beats(self) -> Op[dict[str, int]]:
        """Every broker service id with its last health beat, epoch ms."""
        with self._errors("reading broker health"):
            return {m.decode(): int(s) for m, s in (yield Cmd(lambda c: c.zrange(self.keys.brokers, 0, -1, withscores=True)))}

    @operation
    def save_stats(self, snapshot: Mapping[str, Any], *, history_s: float = 0.0) -> Op[None]:
        """Store the broker's stats snapshot (``Admin.broker_stats``) and, with ``history_s`` > 0, add it to
        the history of the last ``history_s`` seconds (``{ns}:statshist``, scored by ``taken_at_ms``)
        that ``Admin.stats`` takes rates from; older snapshots are removed (``ZRANGEBYSCORE`` + ``ZREM``:
        commands the client ACL role already has)."""
        text = json.dumps(snapshot)
        cutoff_ms = int(snapshot.get("taken_at_ms", 0)) - int(history_s * 1000)

        def build(p: Any) -> None:
            p.set(self.keys.stats, text)
            if history_s > 0:
                p.zadd(self.keys.stats_history, {text: int(snapshot.get("taken_at_ms", 0))})
                p.zrangebyscore(self.keys.stats_history, "-inf", f"({cutoff_ms}")

        replies = all_or_raise((yield from self._pipeline(build, "saving stats")))
        if history_s > 0 and replies[-1]:
            with self._errors("trimming the stats history"):
                (yield Cmd(lambda c: c.zrem(self.keys.stats_history, *replies[-1])))

    @operation
    def stats(self) -> Op[dict[str, Any] | None]:
        """The last stats snapshot, or None."""
        with self._errors("reading broker stats"):
            raw = yield Cmd(lambda c: c.get(self.keys.stats))
        return dict(json.loads(raw)) if raw else None

    # -- the broker's to-do indexes (``{ns}:timers``, ``{ns}:halves``) --------------------------

    @operation
    def index_due(self, index: str, now_ms: int, limit: int) -> Op[list[tuple[str, int]]]:
        """Queues of ``index`` whose earliest time is at or before ``now_ms``."""
        with self._errors("reading a broker index"):
            members = yield Cmd(lambda c: c.zrangebyscore(index, "-inf", int(now_ms), start=0, num=limit))
        return [parse_timer_member(m) for m in members]

    @operation
    def index_set(self, index: str, scores: Sequence[tuple[tuple[str, int], int]]) -> Op[None]:
        """Set each queue's score in ``index`` (a score below 0 removes the queue)."""

        def build(p: Any) -> None:
            for (topic, qid), at in scores:
                member = timer_member(topic, qid)
                p.zrem(index, member) if at < 0 else p.zadd(index, {member: int(at)})

        all_or_raise((yield from self._pipeline(build, "updating a broker index")))

    @operation
    def index_lower(self, index: str, queues: Sequence[tuple[str, int]], schedule: Callable[[QueueKeys], str]) -> Op[None]:
        """Lower each queue's score in ``index`` to the earliest item of its schedule zset
        (``schedule(queue keys)``: the timer or the half-message index), adding missing entries."""
        firsts = all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: [p.zrange(schedule(self.queue_keys(t, q)), 0, 0, withscores=True) for t, q in queues],
                    "re-reading queue schedules",
                )
            )
        )
        lowered = [(q, int(first[0][1])) for q, first in zip(queues, firsts) if first]
        all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: [p.zadd(index, {timer_member(*q): at}, lt=True) for q, at in lowered], "re-indexing queues"
                )
            )
        )

    @operation
    def index_first_ms(self, index: str) -> Op[int | None]:
        """The earliest score of ``index`` (ms), or None when it is empty."""
        with self._errors("reading a broker index"):
            first = yield Cmd(lambda c: c.zrange(index, 0, 0, withscores=True))
        return int(first[0][1]) if first else None

    # -- bulk views -----------------------------------------------------------------------------

    @operation
    def topic_spans(self) -> Op[dict[str, tuple[TopicConfig, int]]]:
        """Every topic with its span (queues ever created: shrunk topics keep their old queues)."""
        with self._errors("listing topics"):
            raw = yield Cmd(lambda c: c.hgetall(self.keys.topics))
        out = {}
        for value in raw.values():
            data = json.loads(value)
            span = int(data.pop("span", 0))
            config = TopicConfig(**{k: v for k, v in data.items() if k in TopicConfig.__dataclass_fields__})
            out[config.name] = (config, max(span, config.queue_count))
        return out

    @operation
    def queue_backlogs(self, topic: str, queue_ids: Sequence[int]) -> Op[list[tuple[int, int, dict[str, int]]]]:
        """Per queue: delayed messages waiting, half messages unresolved, committed offset per group."""

        def build(p: Any) -> None:
            for q in queue_ids:
                keys = self.queue_keys(topic, q)
                p.zcard(keys.timer)
                p.zcard(keys.halfidx)
                p.hgetall(keys.offsets)

        r = all_or_raise((yield from self._pipeline(build, f"reading backlogs of {topic!r}")))
        return [(int(r[i]), int(r[i + 1]), {g.decode(): int(o) for g, o in r[i + 2].items()}) for i in range(0, len(r), 3)]

    @operation
    def group_offsets_of(self, queues: Sequence[tuple[str, int]]) -> Op[list[dict[str, int]]]:
        """Committed offset of every group on each queue ``(topic, queue_id)`` (one pipelined ``HGETALL``
        per queue, :data:`~mq.store.base.QUEUE_BATCH` a round trip)."""
        replies = yield from self._each_queue(queues, lambda p, k: p.hgetall(k.offsets), "reading committed offsets")
        return [{g.decode(): int(o) for g, o in reply.items()} for reply in replies]

    @operation
    def discarded_entries(self, queues: Sequence[tuple[str, int]]) -> Op[list[list[tuple[bytes, dict[bytes, bytes]]]]]:
        """The raw ``txdead`` entries of each queue (half messages rolled back after too many checks)."""
        return all_or_raise(
            (
                yield from self._pipeline(
                    lambda p: [p.xrange(self.queue_keys(t, q).txdead) for t, q in queues], "reading discarded transactions"
                )
            )
        )

    @operation
    def read_page_entries(self, topic: str, queue_id: int, pages: Sequence[tuple[int, int]]) -> Op[list[Any]]:
        """The stream entries ``(entry id, fields)`` at offsets ``[first, last]`` of each page, undecoded
        (see :mod:`mq.store.codec` for the fields), in offset order; one round trip for all pages.
        Offsets trimmed by retention are absent.

        ``fields`` is the reply as the server sent it, a flat list ``[name, value, …]``: redis-py's
        per-entry dict is skipped (a third of the client's time per entry). A client that has no
        such switch (a cluster's pipeline) gives a dict ``{name: value}``.
        """
        log = self.queue_keys(topic, queue_id).log

        def build(p: Any) -> None:
            without_dicts(p)
            for a, b in pages:
                p.xrange(log, stream_id(a), stream_id(b))

        replies = all_or_raise((yield from self._pipeline(build, f"reading {topic!r} queue {queue_id}")))
        return list(itertools.chain.from_iterable(replies))
