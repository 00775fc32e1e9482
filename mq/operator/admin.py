"""``Admin``: topics, offsets and message queries [RocketMQ ``mqadmin`` / ``DefaultMQAdminExt``]."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
import time
from collections.abc import Iterable, Sequence
from types import TracebackType
from typing import Any

from mq.consumer import registry
from mq.consumer.registry import ClientInfo, parse_group_config
from mq.consumer.retry import dlq_topic, original_topic, retry_topic
from mq.consumer.types import ConsumeFromWhere
from mq.errors import MQBrokerError, MQClientError, TopicNotFoundError
from mq.model.group import GroupConfig
from mq.model.message import Message, MessageExt
from mq.model.msgid import msgid_time_ms
from mq.model.properties import DLQ_LETTER, DLQ_REASON, ORIGIN_MESSAGE_ID, RESENT, RETRY_TOPIC
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.model.topic import DEFAULT_DEDUP_WINDOW_S, DEFAULT_QUEUE_NUMS, QueueProgress, QueueStats, TierStats, TopicConfig
from mq.model.validation import DLQ_PREFIX, RETRY_PREFIX, check_group, check_lite_topic, check_topic, check_user_topic
from mq.observe.trace import NAMESPACE_SETTING, TraceEvent
from mq.operator.admin_views import AdminViews
from mq.operator.rates import STATS_HISTORY_S, Rates, rates_over
from mq.operator.recovery import RecoveredTopic, rebuilt_config, restored
from mq.store import Store, codec
from mq.store.connection import Connection
from mq.store.lite import LITE_CURSOR_LIMIT
from mq.store.ops import Op, SyncRunner, operation, share_client
from mq.store.store import StoreOps, decode_half
from mq.store.tier import TIER_URL_SETTING

log = logging.getLogger("mq.admin")

#: Most messages one key query returns (RocketMQ's ``maxNum`` cap).
MAX_KEY_QUERY = 64
#: Most messages :meth:`Admin.messages` returns from one offset range.
MAX_RANGE_READ = 1024
#: Most lite topics one :meth:`Admin.list_lite_topics` page asks for.
MAX_LITE_PAGE = 10_000
#: The window of :meth:`Admin.stats`, seconds.
STATS_WINDOW_S = 60.0


#: How far a producer's clock may run ahead of the store's: a tiered lookup by id reads the segments
#: stored after the id's time less this, milliseconds.
ID_CLOCK_SLACK_MS = 300_000


class AdminCore:
    """The administration of one namespace, written once as operations (:mod:`mq.store.ops`):
    :class:`Admin` runs them at once, :class:`mq.aio.Admin` returns them as coroutines. A subclass
    opens the connection and a store of its I/O style with :meth:`_open`."""

    _conn: Connection
    _store: StoreOps

    def _open(self, conn: Connection, store: StoreOps) -> None:
        self._conn = conn
        self._store = store
        share_client(self, store)
        #: dead letters the last :meth:`resend_dlq` skipped: ``"msg id (topic: why)"`` each
        self.last_resend_skipped: list[str] = []

    def __repr__(self) -> str:
        return f"Admin({self._conn!r})"

    # -- topics ---------------------------------------------------------------------------------

    @operation
    def create_topic(
        self,
        topic: str,
        *,
        read_queues: int = DEFAULT_QUEUE_NUMS,
        write_queues: int = DEFAULT_QUEUE_NUMS,
        perm: str = "rw",
        order: bool = False,
        lite: bool = False,
        lite_expiration_s: int | None = None,
        priority_levels: int | None = None,
        dedup_window_s: int = DEFAULT_DEDUP_WINDOW_S,
    ) -> Op[TopicConfig]:
        """Create ``topic``, or update it when it exists (as ``mqadmin updateTopic`` does).

        ``lite=True`` makes it a parent of lite topics [RIP-83]: ``Message(topic, …, lite_topic=…)``
        creates a one-queue ordered lite topic on its first send, removed ``lite_expiration_s``
        seconds after its last write (messages and offsets, by Redis itself; default
        :data:`~mq.model.topic.DEFAULT_LITE_EXPIRATION_S`). Its own queues carry nothing then.

        ``priority_levels`` (2..10) makes a priority topic [RocketMQ 5.4 RIP-80]: its queues are split
        among the levels (queue ``q`` holds level ``q % priority_levels``), a message of priority ``p``
        goes to a queue of level ``min(p, priority_levels - 1)`` and consumers take higher levels first
        (D142). Not with ``order=True``: ordered consumption and priority do not mix; not on a lite parent.

        ``dedup_window_s``: how long a message's ``dedup_id`` is remembered, seconds (D140).

        Raises:
            InvalidNameError: the name is invalid or reserved.
            MQClientError: bad queue counts, perm, lite expiration, priority levels or dedup window.
        """
        if priority_levels is not None and order:
            raise MQClientError("a priority topic cannot be ordered: priority reorders messages across queues (D142)")
        config = TopicConfig(
            check_user_topic(topic),
            read_queues,
            write_queues,
            perm,
            bool(order),
            lite=lite,
            lite_expiration_s=lite_expiration_s,
            priority_levels=priority_levels,
            dedup_window_s=dedup_window_s,
        )
        (yield from StoreOps.save_topic.op(self._store, config))
        return config

    @operation
    def list_lite_topics(self, parent: str, prefix: str = "", *, cursor: int = 0, count: int = 100) -> Op[LiteTopicPage]:
        """A page of the live lite topics of lite parent ``parent`` whose names start with ``prefix``: at
        most ``count`` names and the ``cursor`` of the next page (0: none; pass it back, it is opaque).
        Pages go through the parent's keys without an index (``SCAN``): names come in no useful order,
        and a lite topic created or expiring while the pages are read may be listed or not.

        Raises:
            TopicNotFoundError: ``parent`` does not exist; MQClientError: it is not a lite parent, or
                bad ``count`` / ``cursor``.
        """
        config = yield from AdminCore._require.op(self, parent)
        if not config.lite:
            raise MQClientError(f"topic {parent!r} is not a lite parent (Admin.create_topic({parent!r}, lite=True))")
        if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_LITE_PAGE:
            raise MQClientError(f"count must be an int in 1..{MAX_LITE_PAGE}, got {count!r}")
        if not isinstance(cursor, int) or isinstance(cursor, bool) or not 0 <= cursor < LITE_CURSOR_LIMIT:
            first = "0 for the first page, then the one a page gave"
            raise MQClientError(f"cursor must be an int in 0..{LITE_CURSOR_LIMIT - 1} ({first}), got {cursor!r}")
        if prefix:
            check_lite_topic(prefix)
        names, next_cursor = yield from StoreOps.list_lite_topics.op(self._store, parent, prefix, cursor=cursor, count=count)
        return LiteTopicPage(sorted(names), next_cursor)  # a page may span SCAN steps, each sorted alone

    @operation
    def update_topic(
        self,
        topic: str,
        *,
        read_queues: int | None = None,
        write_queues: int | None = None,
        perm: str | None = None,
        hot_retention_s: float | None = None,
        hot_retention_bytes: int | None = None,
        dedup_window_s: int | None = None,
    ) -> Op[TopicConfig]:
        """Change queue counts, perm, hot retention or the dedup window of an existing topic; None
        keeps a value. A new ``dedup_window_s`` applies to ids sent from then on (D140).

        Growing takes effect at once. To shrink safely, lower ``write_queues`` first, let consumers
        drain the high queues, then lower ``read_queues``; messages are never deleted by this.
        ``hot_retention_s`` / ``hot_retention_bytes`` override the broker service's for this topic's
        queues when a tier is on (how long / how much Redis keeps of what the tier holds).

        Raises:
            TopicNotFoundError: the topic does not exist.
        """
        current = yield from AdminCore._require.op(self, topic)
        config = dataclasses.replace(
            current,
            read_queues=current.read_queues if read_queues is None else read_queues,
            write_queues=current.write_queues if write_queues is None else write_queues,
            perm=current.perm if perm is None else perm,
            hot_retention_s=current.hot_retention_s if hot_retention_s is None else hot_retention_s,
            hot_retention_bytes=current.hot_retention_bytes if hot_retention_bytes is None else hot_retention_bytes,
            dedup_window_s=current.dedup_window_s if dedup_window_s is None else dedup_window_s,
        )
        (yield from StoreOps.save_topic.op(self._store, config))
        return config

    @operation
    def delete_topic(self, topic: str) -> Op[None]:
        """Delete ``topic`` and every message it stores — with a tier, its files there too (after Redis:
        once the manifest is gone nobody reads them).

        Raises:
            TopicNotFoundError: the topic does not exist.
            MQBrokerError: the store failed; or the topic was deleted but the tier refused to remove
                its files (the error names their folder: remove it by hand).
        """
        if not (yield from StoreOps.delete_topic.op(self._store, check_topic(topic))):
            raise TopicNotFoundError(f"topic {topic!r} does not exist")
        try:
            yield from StoreOps.delete_tier_files.op(self._store, topic)
        except MQBrokerError as e:
            raise MQBrokerError(f"topic {topic!r} was deleted, but not its tier files (remove them by hand): {e}") from e

    @operation
    def recover_topics(self, topics: Iterable[str] | None = None) -> Op[list[RecoveredTopic]]:
        """Rebuild what Redis evicted (``maxmemory-policy`` other than ``noeviction``) from what the
        queue streams still hold: a missing topic config is made from the stored queue ids
        (:func:`mq.operator.recovery.rebuilt_config`), and every queue's seq (next offset) is raised to what its
        log's last entry id and its groups' offsets show, never lowered (no new send reuses an
        offset). Existing configs are kept as they are. Safe to run again, and while clients run.

        Scans the whole namespace (every master of a cluster); set ``maxmemory-policy noeviction``
        first, or Redis may evict again. A group offset Redis evicted cannot be rebuilt: such a group
        starts where its ``consume_from_where`` says (``mq group reset-offset`` moves it back).

        Args:
            topics: the topics to recover (default: every topic the namespace stores a queue of).

        Returns:
            What was done, one :class:`~mq.operator.recovery.RecoveredTopic` per topic looked at.

        Raises:
            TopicNotFoundError: a topic named in ``topics`` has neither a config nor a stored queue.
        """
        present = yield from StoreOps.queue_keys_present.op(self._store)
        spans = yield from StoreOps.topic_spans.op(self._store)
        names = sorted(present) if topics is None else [check_topic(t) for t in topics]
        out: list[RecoveredTopic] = []
        for name in names:
            queues = present.get(name, {})
            if name in spans:
                config, span = spans[name]
            elif queues:
                config, span = rebuilt_config(name, queues), 0
            else:
                raise TopicNotFoundError(f"topic {name!r} has no config and no stored queue: nothing to recover")
            span = max(span, config.queue_count, max(queues, default=-1) + 1)
            results = yield from StoreOps.restore_queues.op(self._store, config, span)
            if name not in spans:  # HSETNX: a config someone created meanwhile is kept
                yield from StoreOps.save_topic.op(self._store, config, create_only=True)
            done = RecoveredTopic(name, name not in spans, restored(results))
            restored_ids = list(done.queues_restored)
            if done.config_rebuilt or done.queues_restored:
                log.warning("recovered topic %r: config rebuilt %s, queues restored %s", name, done.config_rebuilt, restored_ids)
            out.append(done)
        return out

    @operation
    def topics(self) -> Op[list[TopicConfig]]:
        """Every topic of the namespace, sorted by name."""
        return (yield from StoreOps.topics.op(self._store))

    @operation
    def topic_config(self, topic: str) -> Op[TopicConfig]:
        """The config of ``topic``. Raises TopicNotFoundError when it does not exist."""
        return (yield from AdminCore._require.op(self, topic))

    @operation
    def topic_status(self, topic: str) -> Op[dict[MessageQueue, QueueStats]]:
        """Min/max offset and last store time of every queue of ``topic`` (readable or not)."""
        config = yield from AdminCore._require.op(self, topic)
        stats = yield from StoreOps.queue_stats.op(self._store, topic, range(config.queue_count))
        return {MessageQueue(topic, DEFAULT_BROKER_NAME, q): s for q, s in stats.items()}

    @operation
    def tier_url(self) -> Op[str | None]:
        """The tier the namespace's broker service uploads to (``tier_url``), or None without one."""
        return (yield from StoreOps.namespace_setting.op(self._store, TIER_URL_SETTING)) or None

    @operation
    def tier_status(self, topic: str) -> Op[dict[MessageQueue, TierStats]]:
        """What the tier holds of every queue of ``topic``: offsets, segments, bytes (see
        :class:`TierStats`; a queue with nothing tiered has an empty range at its first offset).

        Raises:
            TopicNotFoundError: the topic does not exist.
        """
        config = yield from AdminCore._require.op(self, topic)
        queue_ids = range(config.queue_count)
        manifests = yield from StoreOps.segments_of.op(self._store, [(topic, q) for q in queue_ids])
        stats = yield from StoreOps.queue_stats.op(self._store, topic, queue_ids)
        out = {}
        for q, segs in zip(queue_ids, manifests):
            low = segs[0].start if segs else stats[q].min_offset
            end = segs[-1].end if segs else low
            out[MessageQueue(topic, DEFAULT_BROKER_NAME, q)] = TierStats(low, end, len(segs), sum(s.size_bytes for s in segs))
        return out

    @operation
    def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> Op[int]:
        """The offset of the first message in ``queue`` stored at or after ``timestamp_ms``.

        Returns the queue's max offset when every stored message is older.
        """
        if not isinstance(queue, MessageQueue):
            raise MQClientError(f"queue must be a MessageQueue, got {queue!r}")
        return (yield from StoreOps.search_offset.op(self._store, queue.topic, queue.queue_id, _check_timestamp(timestamp_ms)))

    # -- queries --------------------------------------------------------------------------------

    @operation
    def query_message(self, topic: str, msg_id: str) -> Op[MessageExt | None]:
        """The message of ``topic`` with id ``msg_id``, or None when it is not stored.

        With a tier and an id not in Redis, the ``msg_id`` column of the segments stored after the id's
        time less :data:`ID_CLOCK_SLACK_MS` (ids of this library carry it; others: every segment) is read.
        """
        config = yield from AdminCore._require.op(self, topic)
        found = yield from StoreOps.find_ids.op(self._store, topic, range(config.queue_count), msg_id)
        messages = yield from StoreOps.read_at.op(self._store, topic, found[:1])
        if not messages:  # not in Redis: the tier (our ids carry their send time: older segments are skipped)
            made_ms = msgid_time_ms(msg_id)
            begin_ms = None if made_ms is None else made_ms - ID_CLOCK_SLACK_MS
            messages = yield from StoreOps.find_in_tier.op(
                self._store, topic, range(config.queue_count), "msg_id", msg_id, 1, begin_ms=begin_ms
            )
        return messages[0] if messages else None

    @operation
    def query_messages_by_key(
        self, topic: str, key: str, *, max_num: int = MAX_KEY_QUERY, begin_ms: int | None = None, end_ms: int | None = None
    ) -> Op[list[MessageExt]]:
        """Messages of ``topic`` carrying business key ``key``, oldest first.

        Args:
            max_num: at most this many (1..64).
            begin_ms: only messages stored at or after this time (epoch ms) when given.
            end_ms: only messages stored at or before this time (epoch ms) when given.

        With a tier, its segments are searched too: the ``keys`` column of every segment the time
        bounds leave (give bounds: without them the whole tier's key column is read).
        """
        if not isinstance(max_num, int) or not 1 <= max_num <= MAX_KEY_QUERY:
            raise MQClientError(f"max_num must be in 1..{MAX_KEY_QUERY}, got {max_num!r}")
        config = yield from AdminCore._require.op(self, topic)
        queue_ids = range(config.queue_count)
        found = yield from StoreOps.find_keys.op(self._store, topic, queue_ids, key, limit=MAX_KEY_QUERY)
        stored = yield from StoreOps.read_at.op(self._store, topic, found)
        tiered = yield from StoreOps.find_in_tier.op(
            self._store, topic, queue_ids, "keys", key, max_num, begin_ms=begin_ms, end_ms=end_ms
        )
        held = {(m.queue_id, m.queue_offset) for m in stored}  # a message just tiered is in both until the trim
        messages = [
            m
            for m in stored + [t for t in tiered if (t.queue_id, t.queue_offset) not in held]
            if (begin_ms is None or m.store_timestamp_ms >= begin_ms) and (end_ms is None or m.store_timestamp_ms <= end_ms)
        ]
        messages.sort(key=lambda m: (m.store_timestamp_ms, m.queue_id, m.queue_offset))
        return messages[:max_num]

    # -- consumer groups ------------------------------------------------------------------------

    @operation
    def groups(self) -> Op[list[str]]:
        """Every consumer group that ever registered in the namespace."""
        return (yield from StoreOps.groups.op(self._store))

    @operation
    def create_group(
        self,
        group: str,
        *,
        consume_enable: bool = True,
        retry_max_times: int = 16,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
        fifo: bool = False,
    ) -> Op[GroupConfig]:
        """Create or replace the config of consumer group ``group`` [mqadmin ``updateSubGroup``].

        Args:
            consume_enable: False pauses every member within one heartbeat (1 s); True resumes.
            retry_max_times: retries before the DLQ for push consumers that do not set their own.
            consume_from_where: where members start on queues the group has no offset for.
            fifo: the group consumes message groups in order (RocketMQ 5 endpoint).

        Raises:
            InvalidNameError / MQClientError: a bad name or value (nothing is written).
        """
        config = GroupConfig(check_group(group), consume_enable, retry_max_times, consume_from_where, fifo)
        (yield from StoreOps.save_group_config.op(self._store, config.group, config.to_json()))
        return config

    @operation
    def update_group(self, /, group: str, **changes: Any) -> Op[GroupConfig]:
        """Change fields of a group's config (``consume_enable=False`` pauses it); the rest is kept.

        Raises:
            MQClientError: the group has no config (create it first), or a bad field or value.
        """
        current = yield from AdminCore.group_config.op(self, group)
        unknown = set(changes) - set(GroupConfig.__dataclass_fields__) | ({"group"} & set(changes))
        if unknown:
            raise MQClientError(
                f"unknown group setting(s) {sorted(unknown)}: use consume_enable, retry_max_times, consume_from_where or fifo"
            )
        config = dataclasses.replace(current, **changes)
        (yield from StoreOps.save_group_config.op(self._store, config.group, config.to_json()))
        return config

    @operation
    def delete_group(self, group: str) -> Op[bool]:
        """Delete a group's config (members keep running with their own settings); False when it had none."""
        return (yield from StoreOps.delete_group_config.op(self._store, check_group(group)))

    @operation
    def group_config(self, group: str) -> Op[GroupConfig]:
        """The config of ``group``.

        Raises:
            MQClientError: the group has no config (``create_group`` makes one).
        """
        config = parse_group_config(group, (yield from StoreOps.group_config_json.op(self._store, check_group(group))))
        if config is None:
            raise MQClientError(f"group {group!r} has no config: create it with Admin.create_group or `mq group create`")
        return config

    @operation
    def consumer_connections(self, group: str) -> Op[list[ClientInfo]]:
        """The live members of ``group``: client id, host, pid, subscriptions, last heartbeat."""
        return registry.live_clients(*(yield from StoreOps.group_clients_raw.op(self._store, check_group(group))))

    @operation
    def consumer_progress(self, group: str, topic: str | None = None) -> Op[list[QueueProgress]]:
        """Broker offset, committed offset, lag and messages lost to retention (``expired``) of ``group``
        on every readable queue.

        Args:
            topic: one topic; None means every topic the group has offsets on or subscribes to.
        """
        check_group(group)
        topics = [topic] if topic is not None else (yield from AdminCore._group_topics.op(self, group))
        configs = []
        for name in topics:
            configs.append((yield from AdminCore._require.op(self, name)))
        queues = [MessageQueue(c.name, DEFAULT_BROKER_NAME, q) for c in configs for q in range(c.read_queues) if c.readable(q)]
        # every topic's queues at once: one round trip each for the stats, the offsets and the expired counts
        stats = yield from StoreOps.queues_state.op(self._store, [(mq.topic, mq.queue_id) for mq in queues], offsets=False)
        committed = yield from StoreOps.read_offsets.op(self._store, group, queues)
        expired = yield from StoreOps.expired_unconsumed.op(self._store, [(mq.topic, mq.queue_id) for mq in queues])
        rows: list[QueueProgress] = []
        for mq, (s, _, _), lost in zip(queues, stats, expired):
            consumer = committed.get(mq, -1)
            rows.append(QueueProgress(mq, s.max_offset, consumer, s.lag(consumer), lost.get(group, 0)))
        return rows

    @operation
    def reset_offset_by_time(
        self, group: str, topic: str, timestamp_ms: int, *, force: bool = False
    ) -> Op[dict[MessageQueue, int]]:
        """Set ``group``'s offsets on ``topic`` to the first message stored at or after ``timestamp_ms``
        [mqadmin resetOffsetByTime]. Running members continue from the new offsets within one
        heartbeat (their cached messages of the topic are dropped); stopped ones start there.

        Args:
            force: reset a group the namespace does not know (never registered, no config).

        Returns the new offset of each queue.

        Raises:
            MQClientError: an unknown group (a typo would create a phantom group) unless ``force``.
        """
        timestamp_ms = _check_timestamp(timestamp_ms)
        config = yield from AdminCore._require.op(self, topic)
        check_group(group)
        found = yield from StoreOps.search_offsets.op(self._store, topic, range(config.queue_count), timestamp_ms)
        offsets = {MessageQueue(topic, DEFAULT_BROKER_NAME, q): o for q, o in found.items()}
        return (yield from AdminCore._reset.op(self, group, topic, offsets, force=force))

    @operation
    def reset_offset(self, group: str, queue: MessageQueue, offset: int, *, force: bool = False) -> Op[int]:
        """Set ``group``'s offset of one queue (running members continue from it within one
        heartbeat); an offset outside the stored range is clamped to it. Returns the offset set.

        Raises:
            MQClientError: an unknown group unless ``force``, or a bad offset.
        """
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise MQClientError(f"offset must be an int, got {offset!r}")
        (yield from AdminCore._require.op(self, queue.topic))
        stats = (yield from StoreOps.queue_stats.op(self._store, queue.topic, [queue.queue_id]))[queue.queue_id]
        clamped = min(max(offset, stats.min_offset), stats.max_offset)
        return (yield from AdminCore._reset.op(self, group, queue.topic, {queue: clamped}, force=force))[queue]

    @operation
    def _reset(self, group: str, topic: str, offsets: dict[MessageQueue, int], *, force: bool) -> Op[dict[MessageQueue, int]]:
        check_group(group)
        if not force and group not in (yield from StoreOps.groups.op(self._store)):
            raise MQClientError(
                f"unknown group {group!r} (it never registered and has no config): check the name, "
                "or pass force=True (mq: --force) to reset it anyway"
            )
        (yield from StoreOps.commit_offsets.op(self._store, group, offsets))
        (yield from StoreOps.announce_reset.op(self._store, group, topic, {q.queue_id: o for q, o in offsets.items()}))
        return offsets

    # -- message trace ------------------------------------------------------------------------

    @operation
    def set_trace(self, enabled: bool) -> Op[None]:
        """Turn the message trace on or off for every producer and consumer of the namespace that does
        not set ``trace`` itself (they see it within 30 s)."""
        if not isinstance(enabled, bool):
            raise MQClientError(f"enabled must be True or False, got {enabled!r}")
        (yield from StoreOps.publish_settings.op(self._store, {NAMESPACE_SETTING: "1" if enabled else "0"}))

    @operation
    def message_trace(self, topic: str, msg_id: str) -> Op[list[TraceEvent]]:
        """What happened to message ``msg_id`` of ``topic``, oldest first: its send, every group's
        consumptions and retries (recorded where tracing was on). Empty when nothing was recorded.

        Raises:
            TopicNotFoundError: the topic does not exist.
        """
        config = yield from AdminCore._require.op(self, topic)
        events: list[TraceEvent] = []
        found = yield from StoreOps.find_ids.op(self._store, topic, range(config.queue_count), msg_id)
        for qid in [found[0][0]] if found else range(config.queue_count):  # no longer stored: look everywhere
            lines = yield from StoreOps.read_trace.op(self._store, topic, qid, msg_id)
            events += [TraceEvent.from_json(line) for line in lines]
        return sorted(events, key=lambda e: (e.time_ms, e.kind != "send"))

    # -- dead letters ---------------------------------------------------------------------------

    @operation
    def dlq_messages(self, group: str, *, max_num: int = MAX_KEY_QUERY, offset: int = 0) -> Op[list[MessageExt]]:
        """The oldest ``max_num`` messages in ``%DLQ%<group>`` at or after DLQ offset ``offset`` (a page:
        the next one starts at the last letter's ``queue_offset + 1``): ``system_properties["RETRY_TOPIC"]``
        is where each was first sent, ``["RESENT"]`` is ``"true"`` for a letter already resent
        (:meth:`resend_dlq`); an empty list when the group has no dead letters.

        Raises:
            MQClientError: ``max_num`` not in 1..``MAX_RANGE_READ`` or a negative ``offset``.
        """
        topic = dlq_topic(check_group(group))
        for name, value, low, high in (("max_num", max_num, 1, MAX_RANGE_READ), ("offset", offset, 0, 2**62)):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise MQClientError(f"{name} must be an int in {low}..{high}, got {value!r}")
        if (yield from StoreOps.topic.op(self._store, topic)) is None:
            return []
        stats = (yield from StoreOps.queue_stats.op(self._store, topic, [0]))[0]
        letters = yield from StoreOps.read.op(self._store, topic, 0, max(offset, stats.min_offset), max_num)
        resent = yield from StoreOps.resent_marks.op(self._store, group, [str(m.queue_offset) for m in letters])
        for m, mark in zip(letters, resent):
            if mark:
                m.system_properties[RESENT] = "true"
        return letters

    @operation
    def resend_dlq(self, group: str, *, msg_ids: Iterable[str] | None = None) -> Op[int]:
        """Deliver dead letters of ``group`` again, to that group only; returns how many
        (:meth:`resend_dlq_report` tells which).

        Each copy goes to the group's retry topic ``%RETRY%<group>`` (read by its push consumers,
        concurrent and orderly, and its simple consumers, who see the original topic), so other groups
        of the topic never see it again [RocketMQ resends to the consumer group]. The copy keeps the msg id, body, tags, keys and
        properties, ``ORIGIN_MESSAGE_ID``, and links back to its letter (``DLQ_LETTER``:
        ``%DLQ%<group>:0@offset``). The letter stays in the DLQ, marked as resent (see
        :meth:`dlq_messages`), so each is resent once, however often this is called.

        Args:
            msg_ids: only letters with these ids (default: every dead letter not resent yet).

        A letter whose original topic is gone is skipped, left unmarked, logged at WARNING and listed
        in :attr:`last_resend_skipped`.
        """
        report = yield from AdminCore.resend_dlq_report.op(self, group, msg_ids=msg_ids)
        self.last_resend_skipped = report.skipped
        return len(report.resent)

    @operation
    def resend_dlq_report(self, group: str, *, msg_ids: Iterable[str] | None = None) -> Op[ResendReport]:
        """:meth:`resend_dlq`, returning the msg ids resent and the letters skipped (safe to call from
        several threads on one Admin: nothing is kept on it)."""
        topic = dlq_topic(check_group(group))
        if msg_ids is not None:
            if isinstance(msg_ids, str):
                raise MQClientError(f"msg_ids must be a list of msg id strings, not one str {msg_ids!r}")
            msg_ids = list(msg_ids)
            if not all(isinstance(i, str) for i in msg_ids):
                raise MQClientError(f"msg_ids must be a list of msg id strings, got {msg_ids!r}")
        if (yield from StoreOps.topic.op(self._store, topic)) is None:
            return ResendReport([], [])
        wanted = set(msg_ids) if msg_ids is not None else None
        resent: list[str] = []
        skipped: list[str] = []
        retry: str | None = None
        stats = (yield from StoreOps.queue_stats.op(self._store, topic, [0]))[0]
        offset = stats.min_offset
        while offset < stats.max_offset:
            batch = yield from StoreOps.read.op(self._store, topic, 0, offset, 256)
            if not batch:
                break
            offset = batch[-1].queue_offset + 1
            for m in batch:
                if wanted is not None and m.msg_id not in wanted:
                    continue
                target = original_topic(m)
                if (yield from StoreOps.topic.op(self._store, target)) is None:
                    skipped.append(f"{m.msg_id} ({target}: the topic is gone)")
                    continue
                if not (
                    yield from StoreOps.claim_resend.op(self._store, group, str(m.queue_offset))
                ):  # claimed first: resent at most once
                    continue
                try:
                    retry = (
                        retry or (yield from StoreOps.ensure_topic.op(self._store, TopicConfig(retry_topic(group), 1, 1))).name
                    )
                    (yield from StoreOps.put.op(self._store, retry, 0, [_resend_copy(m, retry, topic)], copies=True))
                except BaseException:
                    (yield from StoreOps.unclaim_resend.op(self._store, group, str(m.queue_offset)))
                    raise
                resent.append(m.msg_id)
        if skipped:
            log.warning("resend_dlq(%r): %d dead letter(s) skipped: %s", group, len(skipped), "; ".join(skipped[:20]))
        return ResendReport(resent, skipped)

    @operation
    def purge_dlq(self, group: str) -> Op[int]:
        """Remove every dead letter of ``group`` (and their resent marks); returns how many were removed."""
        topic = dlq_topic(check_group(group))
        if (yield from StoreOps.topic.op(self._store, topic)) is None:
            return 0
        purged = yield from StoreOps.trim.op(self._store, topic, 0, 2**62, count_unconsumed=False)
        (yield from StoreOps.clear_resent.op(self._store, group))
        return purged.removed

    # -- broker ---------------------------------------------------------------------------------

    @operation
    def broker_stats(self) -> Op[dict[str, Any] | None]:
        """The last stats snapshot of a broker service (topic totals, lag per group/topic, DLQ sizes,
        timer and half-message backlogs, when and by whom), or None when no service has taken one."""
        return (yield from StoreOps.stats.op(self._store))

    # -- transactions ---------------------------------------------------------------------------

    @operation
    def discarded_transactions(self, topic: str | None = None) -> Op[list[MessageExt]]:
        """Half messages rolled back after ``transaction_check_max`` unanswered checks (or the reserve
        time), oldest first. ``system_properties`` carry ``TRANSACTION_CHECK_TIMES``,
        ``DISCARD_REASON`` and ``HALF_ID``."""
        configs = (
            [(yield from AdminCore._require.op(self, topic))]
            if topic is not None
            else (yield from StoreOps.topics.op(self._store))
        )
        out: list[MessageExt] = []
        locations = [(c.name, q) for c in configs for q in range(c.queue_count)]
        for (name, q), entries in zip(locations, (yield from StoreOps.discarded_entries.op(self._store, locations))):
            for _, fields in entries:
                msg = decode_half(name, q, fields[b"half_id"].decode(), fields)
                msg.system_properties.update(
                    {
                        "TRANSACTION_CHECK_TIMES": fields[b"checks"].decode(),
                        "DISCARD_REASON": fields[b"reason"].decode(),
                        "HALF_ID": fields[b"half_id"].decode(),
                    }
                )
                out.append(msg)
        return sorted(out, key=lambda m: m.system_properties["HALF_ID"])

    @operation
    def _group_topics(self, group: str) -> Op[list[str]]:
        members = yield from AdminCore.consumer_connections.op(self, group)
        subscribed = {t for c in members for t in c.subscriptions}
        return sorted(subscribed | (yield from AdminCore._topics_with_offsets.op(self, group)))

    @operation
    def _topics_with_offsets(self, group: str, configs: Sequence[TopicConfig] | None = None) -> Op[set[str]]:
        """The topics (of ``configs``, default every topic) on whose queues ``group`` has a committed
        offset: one pipelined ``HGET`` per queue, in one round trip."""
        check_group(group)
        chosen = (yield from StoreOps.topics.op(self._store)) if configs is None else configs
        queues = [MessageQueue(c.name, DEFAULT_BROKER_NAME, q) for c in chosen for q in range(c.queue_count)]
        return {mq.topic for mq in (yield from StoreOps.read_offsets.op(self._store, group, queues))}

    @operation
    def _require(self, topic: str) -> Op[TopicConfig]:
        config = yield from StoreOps.topic.op(self._store, check_topic(topic))
        if config is None:
            raise TopicNotFoundError(f"topic {topic!r} does not exist; create it with Admin.create_topic or `mq topic create`")
        return config

    # -- operator tools (mq msg, mq stats, mq demo) ---------------------------------------------

    @operation
    def topic_exists(self, topic: str) -> Op[bool]:
        """Whether ``topic`` exists (``mq topic create`` says "created" or "updated" by it)."""
        return (yield from StoreOps.topic.op(self._store, check_topic(topic))) is not None

    @operation
    def messages(
        self, topic: str, queue_id: int, start: int, end: int | None = None, *, max_num: int = MAX_RANGE_READ
    ) -> Op[list[MessageExt]]:
        """The messages of one queue at offsets ``[start, end)`` (half-open), oldest first
        [mqadmin ``queryMsgByOffset`` / ``printMsg``]. Offsets already removed by retention are skipped.
        With a tier, the offsets it holds are read from its segments (one manifest read more).

        Args:
            end: None reads to the queue's max offset (the next message's).
            max_num: at most this many, the first ones (1..``MAX_RANGE_READ``).

        Raises:
            TopicNotFoundError: the topic does not exist.
            MQClientError: no such queue, or ``start`` / ``end`` / ``max_num`` out of range.
        """
        config = yield from AdminCore._require.op(self, topic)
        if not isinstance(queue_id, int) or not 0 <= queue_id < config.queue_count:
            raise MQClientError(f"topic {topic!r} has queues 0..{config.queue_count - 1}, not {queue_id!r}")
        if end is None:
            end = (
                max(start, (yield from StoreOps.queue_stats.op(self._store, topic, [queue_id]))[queue_id].max_offset)
                if isinstance(start, int)
                else 0
            )
        if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start <= end:
            raise MQClientError(f"need offsets 0 <= start <= end, got start={start!r} end={end!r}")
        if not isinstance(max_num, int) or not 1 <= max_num <= MAX_RANGE_READ:
            raise MQClientError(f"max_num must be in 1..{MAX_RANGE_READ}, got {max_num!r}")
        if start == end:
            return []
        want = min(end - start, max_num)
        # offsets the tier holds come from there (below Redis's first offset they are nowhere else)
        tiered, start = yield from StoreOps.read_tiered.op(self._store, topic, queue_id, start, want)
        tiered = [m for m in tiered if m.queue_offset < end]
        if len(tiered) >= want or start >= end:
            return tiered[:want]
        hot = yield from StoreOps.read.op(self._store, topic, queue_id, start, want - len(tiered))
        return (tiered + [m for m in hot if m.queue_offset < end])[:want]

    @operation
    def find_message(self, msg_id: str, topic: str | None = None) -> Op[list[MessageExt]]:
        """Every stored copy of message ``msg_id``: in ``topic`` only, or (None) in every topic of the
        namespace, by the id index of each queue (one ``HGET`` per queue, pipelined: bounded by the
        number of queues, never a scan of the messages). A message that was retried or dead-lettered
        has copies with the same id in ``%RETRY%<group>`` and ``%DLQ%<group>``; user topics come first.
        With a tier, each topic's segments stored after the id's time are searched too (their
        ``msg_id`` column: a cost that grows with what the tier holds since then)."""
        if not isinstance(msg_id, str) or not msg_id:
            raise MQClientError(f"msg_id must be a non-empty string, got {msg_id!r}")
        configs = (
            [(yield from AdminCore._require.op(self, topic))]
            if topic is not None
            else (yield from StoreOps.topics.op(self._store))
        )
        configs.sort(key=lambda c: (c.name.startswith((RETRY_PREFIX, DLQ_PREFIX)), c.name))
        found = yield from StoreOps.find_id_in.op(
            self._store, [(c.name, q) for c in configs for q in range(c.queue_count)], msg_id
        )
        held: dict[str, list[MessageExt]] = {}
        for name, copies in itertools.groupby(found, key=lambda f: f[0]):  # one round trip per topic
            held[name] = yield from StoreOps.read_at.op(self._store, name, [(qid, offset) for _, qid, offset in copies])
        out: list[MessageExt] = []
        made_ms = msgid_time_ms(msg_id)
        since_ms = None if made_ms is None else made_ms - ID_CLOCK_SLACK_MS
        for c in configs:  # with a tier, its copies too (none without one: find_in_tier reads nothing)
            redis_copies = held.get(c.name, [])
            queues = range(c.queue_count)
            tiered = yield from StoreOps.find_in_tier.op(self._store, c.name, queues, "msg_id", msg_id, 1, begin_ms=since_ms)
            seen = {(m.queue_id, m.queue_offset) for m in redis_copies}
            out += sorted(
                [*redis_copies, *(m for m in tiered if (m.queue_id, m.queue_offset) not in seen)],
                key=lambda m: (m.queue_id, m.queue_offset),
            )
        return out

    @operation
    def stats(self, *, window_s: float = STATS_WINDOW_S) -> Op[Rates | None]:
        """Messages stored per topic (in) and consumed per group (out) over the last ``window_s`` seconds,
        from the broker service's stats snapshots [mqadmin ``statsAll``]; None ("unknown") when no
        broker service has taken snapshots that far back, or none recently (is ``mq broker`` running?).

        Args:
            window_s: the window, seconds; the rates span the snapshots closest to it (one stats
                interval of the service, 10 s by default, of slack). At most the history kept (180 s).
        """
        if not isinstance(window_s, (int, float)) or not 0 < window_s <= STATS_HISTORY_S:
            raise MQClientError(f"window_s must be in (0, {STATS_HISTORY_S:g}] seconds, got {window_s!r}")
        history = yield from StoreOps.stats_history.op(self._store, 0)
        if not history or int(history[-1]["taken_at_ms"]) < time.time() * 1000 - window_s * 1000:
            return None
        return rates_over(history, window_s)

    @operation
    def delete_namespace(self) -> Op[int]:
        """Delete every key of this namespace (topics and their messages, groups, offsets, settings);
        returns how many keys the namespace had. Topics go through :meth:`delete_topic` and group configs
        through :meth:`delete_group`; what is left is found by ``SCAN MATCH`` on the namespace's hash-tag
        prefixes. Stop the namespace's producers, consumers and broker services first, or they write
        their keys again."""
        had = sum(1 for _ in (yield from StoreOps.namespace_keys.op(self._store)))
        for config in (yield from StoreOps.topics.op(self._store)):
            (yield from StoreOps.delete_topic.op(self._store, config.name))
        for group in (yield from AdminCore.groups.op(self)):
            (yield from StoreOps.delete_group_config.op(self._store, group))
        (yield from StoreOps.drop_namespace.op(self._store))
        return had

    @operation
    def namespace_empty(self) -> Op[bool]:
        """Whether no key of this namespace exists (``SCAN MATCH``)."""
        return not (yield from StoreOps.namespace_keys.op(self._store))


class Admin(AdminCore, AdminViews, SyncRunner):
    """Administration of one namespace (every method runs at once; :class:`mq.aio.Admin` is the asyncio
    form, with every method but the console's dashboard views of :class:`~mq.operator.admin_views.AdminViews`,
    which are sync-only so far).

    Args:
        url: store URL (see :mod:`mq.store.connection`); None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix separating independent deployments on one Redis.
    """

    _store: Store

    def __init__(self, url: str | None = None, namespace: str = "mq") -> None:
        conn = Connection(url, namespace)
        self._open(conn, Store(conn))

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


@dataclasses.dataclass(frozen=True)
class LiteTopicPage:
    """One page of :meth:`Admin.list_lite_topics`.

    Attributes:
        names: lite topic names, sorted within the page.
        cursor: pass it back for the next page; 0 when this was the last.
    """

    names: list[str]
    cursor: int


@dataclasses.dataclass(frozen=True)
class ResendReport:
    """What :meth:`Admin.resend_dlq_report` did.

    Attributes:
        resent: msg ids of the letters resent now, in DLQ order.
        skipped: ``"msg id (topic: why)"`` of each letter skipped (its original topic is gone).
    """

    resent: list[str]
    skipped: list[str]


def _check_timestamp(timestamp_ms: object) -> int:
    """An epoch-ms time as an int; NaN, infinities, bools and non-numbers raise MQClientError."""
    if isinstance(timestamp_ms, bool) or not isinstance(timestamp_ms, (int, float)) or not math.isfinite(timestamp_ms):
        raise MQClientError(f"timestamp_ms must be a finite number of epoch milliseconds, got {timestamp_ms!r}")
    return int(timestamp_ms)


def _resend_copy(letter: MessageExt, retry: str, dlq: str) -> Sequence[Any]:
    """The encoded copy of a dead letter for its group's retry topic, linked to the letter."""
    system = {k: v for k, v in letter.system_properties.items() if k not in (DLQ_REASON, RESENT)}
    system |= {
        RETRY_TOPIC: original_topic(letter),
        ORIGIN_MESSAGE_ID: system.get(ORIGIN_MESSAGE_ID, letter.msg_id),
        DLQ_LETTER: f"{dlq}:0@{letter.queue_offset}",
    }
    copy = Message(retry, letter.body, letter.tags, letter.keys, letter.properties)
    return codec.encode(copy, letter.msg_id, letter.born_timestamp_ms, system_properties=system)
