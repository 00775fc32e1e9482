"""Admin views for dashboards (the web console, ``mq console``): queue states of many topics in few
round trips, queue owners, key queries by page, timer and half-message backlogs per topic, broker
beats, and what each group did with one message. :class:`mq.Admin` inherits them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from mq.consumer import registry
from mq.consumer.registry import ClientInfo
from mq.consumer.retry import dlq_topic, retry_topic
from mq.errors import MQClientError
from mq.keys import QueueKeys
from mq.model.group import GroupConfig
from mq.model.message import MessageExt
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.model.topic import QueueStats, TopicConfig
from mq.model.validation import check_group, check_topic
from mq.store import Store

#: Delayed entries of a retry topic :meth:`AdminViews.message_states` reads at most per message and group.
MAX_TIMER_SCAN = 10_000
#: What a group did with a message (:meth:`AdminViews.message_states`).
CONSUMED, RETRYING, DEAD_LETTERED, PENDING, UNKNOWN = "consumed", "retrying", "dead_lettered", "pending", "unknown"


#: Most tiered matches of a business key counted and paged per queue by the views (each lookup reads the
#: ``keys`` column of the queue's whole tier; the matches are held in memory to page through them).
MAX_TIER_KEY_MATCHES = 10_000


@dataclass(frozen=True)
class QueueState:
    """One queue with every group's committed offset.

    Attributes:
        message_queue: the queue.
        stats: min/max offset and last store time.
        readable, writable: by the topic's queue counts and perm.
        offsets: group → committed offset (next to consume); groups without one are absent.
        owners: group → client id consuming the queue now (read only when asked: else empty).
        expired: group → messages retention removed before the group consumed them, ever (read only
            when asked: else empty; groups that never lost one are absent).
    """

    message_queue: MessageQueue
    stats: QueueStats
    readable: bool
    writable: bool
    offsets: dict[str, int]
    owners: dict[str, str] = field(default_factory=dict)
    expired: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Backlog:
    """Messages waiting in the timer (delayed) or the transaction check-backs (half) of one topic.

    Attributes:
        topic: the topic.
        waiting: messages waiting, over its queues.
        earliest_ms: the earliest due time (timer) or next check-back (half), epoch ms.
    """

    topic: str
    waiting: int
    earliest_ms: int


class AdminViews:
    """Read views over many queues (mixed into :class:`mq.Admin`, which provides ``_store``, ``_require``
    and ``_topics_with_offsets``)."""

    _store: Store
    _require: Callable[[str], TopicConfig]
    _topics_with_offsets: Callable[[str, Sequence[TopicConfig] | None], set[str]]

    def queue_states(
        self, topics: Sequence[str], *, offsets: bool = True, owners: bool = False, expired: bool = False
    ) -> dict[str, list[QueueState]]:
        """Every queue (``0..queue_count-1``) of each of ``topics``, with stats and every group's committed
        offset, in two pipelined round trips per 2 000 queues (one with ``offsets=False``: the
        ``offsets`` of each state are then empty; one more with ``owners=True``, which fills ``owners``,
        and one more with ``expired=True``, which fills ``expired``).

        Raises:
            TopicNotFoundError: one of ``topics`` does not exist.
        """
        configs = [self._require(t) for t in topics]
        locations = [(c.name, q) for c in configs for q in range(c.queue_count)]
        rows = iter(self._store.queues_state(locations, offsets=offsets, owners=owners))
        lost = iter(self._store.expired_unconsumed(locations) if expired else [{} for _ in locations])
        out: dict[str, list[QueueState]] = {}
        for c in configs:
            out[c.name] = []
            for q in range(c.queue_count):
                stats, committed, held = next(rows)
                mq = MessageQueue(c.name, DEFAULT_BROKER_NAME, q)
                out[c.name].append(QueueState(mq, stats, c.readable(q), c.writable(q), committed, held, next(lost)))
        return out

    def group_lags(self, groups: Sequence[str]) -> dict[tuple[str, str], int]:
        """``(group, topic)`` → lag of each of ``groups``, summed over the topic's queues the group has a
        committed offset on (a pair without any is absent: its lag is unknown). Reads every queue's
        committed offsets (one pipelined ``HGETALL`` each), then the stats of the queues those groups
        have offsets on only."""
        wanted = {check_group(g) for g in groups}
        locations = [(c.name, q) for c in self._store.topics() for q in range(c.queue_count)]
        mine = []
        for location, committed in zip(locations, self._store.group_offsets_of(locations)):
            found = {g: o for g, o in committed.items() if g in wanted}
            if found:
                mine.append((location, found))
        stats = self._store.queues_state([loc for loc, _ in mine], offsets=False)
        lags: dict[tuple[str, str], int] = {}
        for ((topic, _), found), (s, _, _) in zip(mine, stats):
            for g, o in found.items():
                lags[(g, topic)] = lags.get((g, topic), 0) + s.lag(o)
        return lags

    def queue_owners(self, topic: str) -> dict[int, dict[str, str]]:
        """Queue id → (group → client id consuming the queue now) for every queue of ``topic``."""
        config = self._require(topic)
        owners = self._store.queue_owners([(config.name, q) for q in range(config.queue_count)])
        return dict(enumerate(owners))

    def count_messages_by_key(self, topic: str, key: str) -> int:
        """How many stored messages of ``topic`` carry business key ``key`` (no cap; with a tier, its
        matches too, at most :data:`MAX_TIER_KEY_MATCHES` a queue)."""
        config = self._require(topic)
        queue_ids = range(config.queue_count)
        tiered = self._tiered_by_key(config.name, queue_ids, _check_key(key))
        return sum(self._store.key_counts(config.name, queue_ids, key)) + sum(len(t) for t in tiered.values())

    def messages_by_key(self, topic: str, key: str, *, start: int, count: int) -> list[MessageExt]:
        """Messages of ``topic`` with business key ``key``, the ``start``-th to ``start + count - 1``-th
        in (queue id, offset) order: pages through every match, without :data:`mq.operator.admin.MAX_KEY_QUERY`'s cap.
        With a tier, a queue's tiered matches (its ``keys`` column read whole, at most
        :data:`MAX_TIER_KEY_MATCHES`) come before the ones Redis holds.

        Raises:
            TopicNotFoundError / MQClientError: an unknown topic, an empty key or a bad range.
        """
        config = self._require(topic)
        _check_range(start, count)
        queue_ids = range(config.queue_count)
        tiered = self._tiered_by_key(config.name, queue_ids, _check_key(key))
        counts = self._store.key_counts(config.name, queue_ids, key)
        out: list[MessageExt] = []
        skip, want = start, count
        for qid, n in enumerate(counts):
            cold = tiered.get(qid, [])
            if want == 0:
                break
            if skip >= n + len(cold):
                skip -= n + len(cold)
                continue
            taken = cold[skip : skip + want]
            out += taken
            want -= len(taken)
            skip = max(0, skip - len(cold))
            if want and skip < n:
                found = self._store.find_keys(config.name, [qid], key, want, start=skip)
                out += self._store.read_at(config.name, found)
                want -= len(found)
            skip = 0
        return out

    def _tiered_by_key(self, topic: str, queue_ids: Sequence[int], key: str) -> dict[int, list[MessageExt]]:
        """Queue id → the tier's messages with business key ``key`` that Redis no longer holds (below the
        log's first offset: those Redis holds are found by its index), in offset order."""
        found = self._store.find_in_tier(topic, queue_ids, "keys", key, MAX_TIER_KEY_MATCHES)
        out: dict[int, list[MessageExt]] = {}
        for m in found:
            out.setdefault(m.queue_id, []).append(m)
        for qid in list(out):
            first = self._store.hot_queue(topic, qid, memory=False).first
            out[qid] = [m for m in out[qid] if m.queue_offset < first]
        return out

    def timer_backlog(self) -> list[Backlog]:
        """Delayed messages waiting per topic (from the broker's timer index), by topic name."""
        return self._backlog(self._store.keys.timers, lambda k: k.timer)

    def half_backlog(self) -> list[Backlog]:
        """Unresolved transaction half messages per topic (from the check-back index), by topic name."""
        return self._backlog(self._store.keys.halves, lambda k: k.halfidx)

    def _backlog(self, index: str, schedule: Callable[[QueueKeys], str]) -> list[Backlog]:
        totals: dict[str, list[int]] = {}
        for topic, _, waiting, at in self._store.index_backlog(index, schedule):
            if waiting:
                entry = totals.setdefault(topic, [0, at])
                entry[0] += waiting
                entry[1] = min(entry[1], at)
        return [Backlog(t, n, at) for t, (n, at) in sorted(totals.items())]

    def consumer_connections_of(self, groups: Sequence[str]) -> dict[str, list[ClientInfo]]:
        """:meth:`mq.Admin.consumer_connections` of each of ``groups``, in one round trip."""
        names = [check_group(g) for g in groups]
        return registry.groups_clients(self._store, names)

    def group_configs(self, groups: Sequence[str]) -> dict[str, GroupConfig]:
        """The config of each of ``groups`` that has one (see :meth:`mq.Admin.group_config`), in one round trip."""
        names = [check_group(g) for g in groups]
        found = {g: registry.parse_group_config(g, raw) for g, raw in zip(names, self._store.group_configs_json(names))}
        return {g: c for g, c in found.items() if c is not None}

    def topics_with_offsets(self, group: str, configs: Sequence[TopicConfig] | None = None) -> set[str]:
        """The topics (of ``configs``, default every topic) on whose queues ``group`` has a committed
        offset: one pipelined ``HGET`` per queue."""
        return self._topics_with_offsets(group, configs)

    def stats_history(self) -> list[dict[str, Any]]:
        """The broker service's stats snapshots of the last 3 minutes, oldest first (see
        :meth:`mq.Admin.broker_stats` for their fields); empty when no service took any."""
        return self._store.stats_history(0)

    def broker_beats(self) -> dict[str, int]:
        """Every broker service that has beaten, with its last beat (epoch ms); a service that stopped
        cleanly is absent, one that died stays until it is cleaned up (judge by the time)."""
        return self._store.broker_beats()

    def message_states(self, message: MessageExt, groups: Sequence[str]) -> dict[str, str]:
        """What each of ``groups`` did with ``message`` (a stored message of a user topic):

        - :data:`DEAD_LETTERED`: a copy is in ``%DLQ%<group>``;
        - :data:`RETRYING`: a copy waits in ``%RETRY%<group>`` — in its timer, or stored and not consumed yet;
        - :data:`CONSUMED`: the group's committed offset on the message's queue is past the message;
        - :data:`PENDING`: not yet;
        - :data:`UNKNOWN`: the group has no committed offset on that queue, or its retry timer holds more
          than :data:`MAX_TIMER_SCAN` messages (not searched through).
        """
        queue = MessageQueue(message.topic, DEFAULT_BROKER_NAME, message.queue_id)
        out: dict[str, str] = {}
        for group in groups:
            dlq, retry = dlq_topic(check_group(group)), retry_topic(group)
            copies, existing = self._copies(message.msg_id, [dlq, retry])
            if any(t == dlq for t, _, _ in copies):
                out[group] = DEAD_LETTERED
                continue
            retried = [(MessageQueue(retry, DEFAULT_BROKER_NAME, q), o) for t, q, o in copies if t == retry]
            committed = self._store.read_offsets(group, [*(mq for mq, _ in retried), queue])  # one round trip
            if any(committed.get(mq, -1) <= o for mq, o in retried):
                out[group] = RETRYING
                continue
            waiting = self._store.delayed_holds(retry, 0, message.msg_id, limit=MAX_TIMER_SCAN) if retry in existing else False
            if waiting is not False:
                out[group] = RETRYING if waiting else UNKNOWN
                continue
            offset = committed.get(queue)
            out[group] = UNKNOWN if offset is None else CONSUMED if offset > message.queue_offset else PENDING
        return out

    def _copies(self, msg_id: str, topics: Sequence[str]) -> tuple[list[tuple[str, int, int]], set[str]]:
        """``(topic, queue id, offset)`` of the copies of ``msg_id`` in those of ``topics`` that exist, and
        the names of those."""
        configs = [c for c in (self._store.topic(check_topic(t)) for t in topics) if c is not None]
        found = self._store.find_id_in([(c.name, q) for c in configs for q in range(c.queue_count)], msg_id)
        return found, {c.name for c in configs}


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise MQClientError(f"key must be a non-empty string, got {key!r}")
    return key


def _check_range(start: object, count: object) -> None:
    for name, value, low in (("start", start, 0), ("count", count, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise MQClientError(f"{name} must be an int >= {low}, got {value!r}")


__all__ = ["CONSUMED", "DEAD_LETTERED", "PENDING", "RETRYING", "UNKNOWN", "AdminViews", "Backlog", "QueueState"]
