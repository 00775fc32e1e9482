"""``Admin``: topics, offsets and message queries [RocketMQ ``mqadmin`` / ``DefaultMQAdminExt``]."""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from mq.admin_views import AdminViews
from mq.connection import Connection
from mq.consumer import registry
from mq.consumer.registry import ClientInfo, parse_group_config
from mq.consumer.retry import dlq_topic, original_topic, retry_topic
from mq.consumer.types import ConsumeFromWhere
from mq.errors import MQClientError, TopicNotFoundError
from mq.group import GroupConfig
from mq.message import Message, MessageExt
from mq.properties import DLQ_LETTER, DLQ_REASON, ORIGIN_MESSAGE_ID, RESENT, RETRY_TOPIC
from mq.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.rates import STATS_HISTORY_S, Rates, rates_over
from mq.store import Store, codec
from mq.store.store import decode_half
from mq.topic import DEFAULT_QUEUE_NUMS, QueueProgress, QueueStats, TopicConfig
from mq.trace import NAMESPACE_SETTING, TraceEvent
from mq.validation import DLQ_PREFIX, RETRY_PREFIX, check_group, check_topic, check_user_topic

log = logging.getLogger("mq.admin")

#: Most messages one key query returns (RocketMQ's ``maxNum`` cap).
MAX_KEY_QUERY = 64
#: Most messages :meth:`Admin.messages` returns from one offset range.
MAX_RANGE_READ = 1024
#: The window of :meth:`Admin.stats`, seconds.
STATS_WINDOW_S = 60.0


class Admin(AdminViews):
    """Administration of one namespace.

    Args:
        url: store URL (see :mod:`mq.connection`); None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix separating independent deployments on one Redis.
    """

    def __init__(self, url: str | None = None, namespace: str = "mq") -> None:
        self._conn = Connection(url, namespace)
        self._store = Store(self._conn)
        #: dead letters the last :meth:`resend_dlq` skipped: ``"msg id (topic: why)"`` each
        self.last_resend_skipped: list[str] = []

    def __repr__(self) -> str:
        return f"Admin({self._conn!r})"

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    # -- topics ---------------------------------------------------------------------------------

    def create_topic(
        self,
        topic: str,
        *,
        read_queues: int = DEFAULT_QUEUE_NUMS,
        write_queues: int = DEFAULT_QUEUE_NUMS,
        perm: str = "rw",
        order: bool = False,
    ) -> TopicConfig:
        """Create ``topic``, or update it when it exists (as ``mqadmin updateTopic`` does).

        Raises:
            InvalidNameError: the name is invalid or reserved.
            MQClientError: bad queue counts or perm.
        """
        config = TopicConfig(check_user_topic(topic), read_queues, write_queues, perm, bool(order))
        self._store.save_topic(config)
        return config

    def update_topic(
        self, topic: str, *, read_queues: int | None = None, write_queues: int | None = None, perm: str | None = None
    ) -> TopicConfig:
        """Change queue counts or perm of an existing topic; None keeps a value.

        Growing takes effect at once. To shrink safely, lower ``write_queues`` first, let consumers
        drain the high queues, then lower ``read_queues``; messages are never deleted by this.

        Raises:
            TopicNotFoundError: the topic does not exist.
        """
        current = self._require(topic)
        config = dataclasses.replace(
            current,
            read_queues=current.read_queues if read_queues is None else read_queues,
            write_queues=current.write_queues if write_queues is None else write_queues,
            perm=current.perm if perm is None else perm,
        )
        self._store.save_topic(config)
        return config

    def delete_topic(self, topic: str) -> None:
        """Delete ``topic`` and every message it stores.

        Raises:
            TopicNotFoundError: the topic does not exist.
        """
        if not self._store.delete_topic(check_topic(topic)):
            raise TopicNotFoundError(f"topic {topic!r} does not exist")

    def topics(self) -> list[TopicConfig]:
        """Every topic of the namespace, sorted by name."""
        return self._store.topics()

    def topic_config(self, topic: str) -> TopicConfig:
        """The config of ``topic``. Raises TopicNotFoundError when it does not exist."""
        return self._require(topic)

    def topic_status(self, topic: str) -> dict[MessageQueue, QueueStats]:
        """Min/max offset and last store time of every queue of ``topic`` (readable or not)."""
        config = self._require(topic)
        stats = self._store.queue_stats(topic, range(config.queue_count))
        return {MessageQueue(topic, DEFAULT_BROKER_NAME, q): s for q, s in stats.items()}

    def search_offset(self, queue: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the first message in ``queue`` stored at or after ``timestamp_ms``.

        Returns the queue's max offset when every stored message is older.
        """
        if not isinstance(queue, MessageQueue):
            raise MQClientError(f"queue must be a MessageQueue, got {queue!r}")
        return self._store.search_offset(queue.topic, queue.queue_id, _check_timestamp(timestamp_ms))

    # -- queries --------------------------------------------------------------------------------

    def query_message(self, topic: str, msg_id: str) -> MessageExt | None:
        """The message of ``topic`` with id ``msg_id``, or None when it is not stored."""
        config = self._require(topic)
        found = self._store.find_ids(topic, range(config.queue_count), msg_id)
        messages = self._store.read_at(topic, found[:1])
        return messages[0] if messages else None

    def query_messages_by_key(
        self, topic: str, key: str, *, max_num: int = MAX_KEY_QUERY, begin_ms: int | None = None, end_ms: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``topic`` carrying business key ``key``, oldest first.

        Args:
            max_num: at most this many (1..64).
            begin_ms, end_ms: only messages stored in ``[begin_ms, end_ms]`` (epoch ms) when given.
        """
        if not isinstance(max_num, int) or not 1 <= max_num <= MAX_KEY_QUERY:
            raise MQClientError(f"max_num must be in 1..{MAX_KEY_QUERY}, got {max_num!r}")
        config = self._require(topic)
        found = self._store.find_keys(topic, range(config.queue_count), key, limit=MAX_KEY_QUERY)
        messages = [
            m
            for m in self._store.read_at(topic, found)
            if (begin_ms is None or m.store_timestamp_ms >= begin_ms) and (end_ms is None or m.store_timestamp_ms <= end_ms)
        ]
        messages.sort(key=lambda m: (m.store_timestamp_ms, m.queue_id, m.queue_offset))
        return messages[:max_num]

    # -- consumer groups ------------------------------------------------------------------------

    def groups(self) -> list[str]:
        """Every consumer group that ever registered in the namespace."""
        return registry.groups(self._store)

    def create_group(
        self,
        group: str,
        *,
        consume_enable: bool = True,
        retry_max_times: int = 16,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET,
        fifo: bool = False,
    ) -> GroupConfig:
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
        self._store.save_group_config(config.group, config.to_json())
        return config

    def update_group(self, group: str, **changes: Any) -> GroupConfig:
        """Change fields of a group's config (``consume_enable=False`` pauses it); the rest is kept.

        Raises:
            MQClientError: the group has no config (create it first), or a bad field or value.
        """
        current = self.group_config(group)
        unknown = set(changes) - set(GroupConfig.__dataclass_fields__) | ({"group"} & set(changes))
        if unknown:
            raise MQClientError(
                f"unknown group setting(s) {sorted(unknown)}: use consume_enable, retry_max_times, consume_from_where or fifo"
            )
        config = dataclasses.replace(current, **changes)
        self._store.save_group_config(config.group, config.to_json())
        return config

    def delete_group(self, group: str) -> bool:
        """Delete a group's config (members keep running with their own settings); False when it had none."""
        return self._store.delete_group_config(check_group(group))

    def group_config(self, group: str) -> GroupConfig:
        """The config of ``group``.

        Raises:
            MQClientError: the group has no config (``create_group`` makes one).
        """
        config = parse_group_config(group, self._store.group_config_json(check_group(group)))
        if config is None:
            raise MQClientError(f"group {group!r} has no config: create it with Admin.create_group or `mq group create`")
        return config

    def consumer_connections(self, group: str) -> list[ClientInfo]:
        """The live members of ``group``: client id, host, pid, subscriptions, last heartbeat."""
        return registry.group_clients(self._store, check_group(group))

    def consumer_progress(self, group: str, topic: str | None = None) -> list[QueueProgress]:
        """Broker offset, committed offset and lag of ``group`` on every readable queue.

        Args:
            topic: one topic; None means every topic the group has offsets on or subscribes to.
        """
        check_group(group)
        topics = [topic] if topic is not None else self._group_topics(group)
        rows: list[QueueProgress] = []
        for name in topics:
            config = self._require(name)
            qids = [q for q in range(config.read_queues) if config.readable(q)]
            stats = self._store.queue_stats(name, qids)
            queues = [MessageQueue(name, DEFAULT_BROKER_NAME, q) for q in qids]
            committed = self._store.read_offsets(group, queues)
            for mq in queues:
                s = stats[mq.queue_id]
                consumer = committed.get(mq, -1)
                lag = s.max_offset - max(consumer, s.min_offset)
                rows.append(QueueProgress(mq, s.max_offset, consumer, lag))
        return rows

    def reset_offset_by_time(self, group: str, topic: str, timestamp_ms: int, *, force: bool = False) -> dict[MessageQueue, int]:
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
        config = self._require(topic)
        check_group(group)
        offsets = {
            MessageQueue(topic, DEFAULT_BROKER_NAME, q): self._store.search_offset(topic, q, timestamp_ms)
            for q in range(config.queue_count)
        }
        return self._reset(group, topic, offsets, force=force)

    def reset_offset(self, group: str, queue: MessageQueue, offset: int, *, force: bool = False) -> int:
        """Set ``group``'s offset of one queue (running members continue from it within one
        heartbeat); an offset outside the stored range is clamped to it. Returns the offset set.

        Raises:
            MQClientError: an unknown group unless ``force``, or a bad offset.
        """
        if not isinstance(offset, int) or isinstance(offset, bool):
            raise MQClientError(f"offset must be an int, got {offset!r}")
        self._require(queue.topic)
        stats = self._store.queue_stats(queue.topic, [queue.queue_id])[queue.queue_id]
        clamped = min(max(offset, stats.min_offset), stats.max_offset)
        return self._reset(group, queue.topic, {queue: clamped}, force=force)[queue]

    def _reset(self, group: str, topic: str, offsets: dict[MessageQueue, int], *, force: bool) -> dict[MessageQueue, int]:
        check_group(group)
        if not force and group not in self._store.groups():
            raise MQClientError(
                f"unknown group {group!r} (it never registered and has no config): check the name, "
                "or pass force=True (mq: --force) to reset it anyway"
            )
        self._store.commit_offsets(group, offsets)
        self._store.announce_reset(group, topic, {q.queue_id: o for q, o in offsets.items()})
        return offsets

    # -- message trace ------------------------------------------------------------------------

    def set_trace(self, enabled: bool) -> None:
        """Turn the message trace on or off for every producer and consumer of the namespace that does
        not set ``trace`` itself (they see it within 30 s)."""
        if not isinstance(enabled, bool):
            raise MQClientError(f"enabled must be True or False, got {enabled!r}")
        self._store.publish_settings({NAMESPACE_SETTING: "1" if enabled else "0"})

    def message_trace(self, topic: str, msg_id: str) -> list[TraceEvent]:
        """What happened to message ``msg_id`` of ``topic``, oldest first: its send, every group's
        consumptions and retries (recorded where tracing was on). Empty when nothing was recorded.

        Raises:
            TopicNotFoundError: the topic does not exist.
        """
        config = self._require(topic)
        events: list[TraceEvent] = []
        found = self._store.find_ids(topic, range(config.queue_count), msg_id)
        for qid in [found[0][0]] if found else range(config.queue_count):  # no longer stored: look everywhere
            events += [TraceEvent.from_json(line) for line in self._store.read_trace(topic, qid, msg_id)]
        return sorted(events, key=lambda e: (e.time_ms, e.kind != "send"))

    # -- dead letters ---------------------------------------------------------------------------

    def dlq_messages(self, group: str, *, max_num: int = MAX_KEY_QUERY, offset: int = 0) -> list[MessageExt]:
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
        if self._store.topic(topic) is None:
            return []
        stats = self._store.queue_stats(topic, [0])[0]
        letters = self._store.read(topic, 0, max(offset, stats.min_offset), max_num)
        resent = self._store.resent_marks(group, [str(m.queue_offset) for m in letters])
        for m, mark in zip(letters, resent):
            if mark:
                m.system_properties[RESENT] = "true"
        return letters

    def resend_dlq(self, group: str, *, msg_ids: Iterable[str] | None = None) -> int:
        """Deliver dead letters of ``group`` again, to that group only; returns how many
        (:meth:`resend_dlq_report` tells which).

        Each copy goes to the group's retry topic ``%RETRY%<group>`` (read by its concurrent push
        consumers, who see the original topic), so other groups of the topic never see it again
        [RocketMQ resends to the consumer group]. The copy keeps the msg id, body, tags, keys and
        properties, ``ORIGIN_MESSAGE_ID``, and links back to its letter (``DLQ_LETTER``:
        ``%DLQ%<group>:0@offset``). The letter stays in the DLQ, marked as resent (see
        :meth:`dlq_messages`), so each is resent once, however often this is called.

        Args:
            msg_ids: only letters with these ids (default: every dead letter not resent yet).

        A letter whose original topic is gone is skipped, left unmarked, logged at WARNING and listed
        in :attr:`last_resend_skipped`.
        """
        report = self.resend_dlq_report(group, msg_ids=msg_ids)
        self.last_resend_skipped = report.skipped
        return len(report.resent)

    def resend_dlq_report(self, group: str, *, msg_ids: Iterable[str] | None = None) -> ResendReport:
        """:meth:`resend_dlq`, returning the msg ids resent and the letters skipped (safe to call from
        several threads on one Admin: nothing is kept on it)."""
        topic = dlq_topic(check_group(group))
        if msg_ids is not None:
            if isinstance(msg_ids, str):
                raise MQClientError(f"msg_ids must be a list of msg id strings, not one str {msg_ids!r}")
            msg_ids = list(msg_ids)
            if not all(isinstance(i, str) for i in msg_ids):
                raise MQClientError(f"msg_ids must be a list of msg id strings, got {msg_ids!r}")
        if self._store.topic(topic) is None:
            return ResendReport([], [])
        wanted = set(msg_ids) if msg_ids is not None else None
        resent: list[str] = []
        skipped: list[str] = []
        retry: str | None = None
        stats = self._store.queue_stats(topic, [0])[0]
        offset = stats.min_offset
        while offset < stats.max_offset:
            batch = self._store.read(topic, 0, offset, 256)
            if not batch:
                break
            offset = batch[-1].queue_offset + 1
            for m in batch:
                if wanted is not None and m.msg_id not in wanted:
                    continue
                target = original_topic(m)
                if self._store.topic(target) is None:
                    skipped.append(f"{m.msg_id} ({target}: the topic is gone)")
                    continue
                if not self._store.claim_resend(group, str(m.queue_offset)):  # claimed first: resent at most once
                    continue
                try:
                    retry = retry or self._store.ensure_topic(TopicConfig(retry_topic(group), 1, 1)).name
                    self._store.put(retry, 0, [_resend_copy(m, retry, topic)])
                except BaseException:
                    self._store.unclaim_resend(group, str(m.queue_offset))
                    raise
                resent.append(m.msg_id)
        if skipped:
            log.warning("resend_dlq(%r): %d dead letter(s) skipped: %s", group, len(skipped), "; ".join(skipped[:20]))
        return ResendReport(resent, skipped)

    def purge_dlq(self, group: str) -> int:
        """Remove every dead letter of ``group`` (and their resent marks); returns how many were removed."""
        topic = dlq_topic(check_group(group))
        if self._store.topic(topic) is None:
            return 0
        removed = self._store.trim(topic, 0, 2**62)
        self._store.clear_resent(group)
        return removed

    # -- broker ---------------------------------------------------------------------------------

    def broker_stats(self) -> dict[str, Any] | None:
        """The last stats snapshot of a broker service (topic totals, lag per group/topic, DLQ sizes,
        timer and half-message backlogs, when and by whom), or None when no service has taken one."""
        return self._store.stats()

    # -- transactions ---------------------------------------------------------------------------

    def discarded_transactions(self, topic: str | None = None) -> list[MessageExt]:
        """Half messages rolled back after ``transaction_check_max`` unanswered checks (or the reserve
        time), oldest first. ``system_properties`` carry ``TRANSACTION_CHECK_TIMES``,
        ``DISCARD_REASON`` and ``HALF_ID``."""
        configs = [self._require(topic)] if topic is not None else self._store.topics()
        out: list[MessageExt] = []
        locations = [(c.name, q) for c in configs for q in range(c.queue_count)]
        for (name, q), entries in zip(locations, self._store.discarded_entries(locations)):
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

    def _group_topics(self, group: str) -> list[str]:
        subscribed = {t for c in self.consumer_connections(group) for t in c.subscriptions}
        with_offsets = set()
        for config in self._store.topics():
            queues = [MessageQueue(config.name, DEFAULT_BROKER_NAME, q) for q in range(config.queue_count)]
            if self._store.read_offsets(group, queues):
                with_offsets.add(config.name)
        return sorted(subscribed | with_offsets)

    def _require(self, topic: str) -> TopicConfig:
        config = self._store.topic(check_topic(topic))
        if config is None:
            raise TopicNotFoundError(f"topic {topic!r} does not exist; create it with Admin.create_topic or `mq topic create`")
        return config

    # -- operator tools (mq msg, mq stats, mq demo) ---------------------------------------------

    def topic_exists(self, topic: str) -> bool:
        """Whether ``topic`` exists (``mq topic create`` says "created" or "updated" by it)."""
        return self._store.topic(check_topic(topic)) is not None

    def messages(
        self, topic: str, queue_id: int, start: int, end: int | None = None, *, max_num: int = MAX_RANGE_READ
    ) -> list[MessageExt]:
        """The messages of one queue at offsets ``[start, end)`` (half-open), oldest first
        [mqadmin ``queryMsgByOffset`` / ``printMsg``]. Offsets already removed by retention are skipped.

        Args:
            end: None reads to the queue's max offset (the next message's).
            max_num: at most this many, the first ones (1..``MAX_RANGE_READ``).

        Raises:
            TopicNotFoundError: the topic does not exist.
            MQClientError: no such queue, or ``start`` / ``end`` / ``max_num`` out of range.
        """
        config = self._require(topic)
        if not isinstance(queue_id, int) or not 0 <= queue_id < config.queue_count:
            raise MQClientError(f"topic {topic!r} has queues 0..{config.queue_count - 1}, not {queue_id!r}")
        if end is None:
            end = max(start, self._store.queue_stats(topic, [queue_id])[queue_id].max_offset) if isinstance(start, int) else 0
        if not isinstance(start, int) or not isinstance(end, int) or not 0 <= start <= end:
            raise MQClientError(f"need offsets 0 <= start <= end, got start={start!r} end={end!r}")
        if not isinstance(max_num, int) or not 1 <= max_num <= MAX_RANGE_READ:
            raise MQClientError(f"max_num must be in 1..{MAX_RANGE_READ}, got {max_num!r}")
        if start == end:
            return []
        return self._store.read(topic, queue_id, start, min(end - start, max_num))[: min(end - start, max_num)]

    def find_message(self, msg_id: str, topic: str | None = None) -> list[MessageExt]:
        """Every stored copy of message ``msg_id``: in ``topic`` only, or (None) in every topic of the
        namespace, by the id index of each queue (one ``HGET`` per queue, pipelined: bounded by the
        number of queues, never a scan of the messages). A message that was retried or dead-lettered
        has copies with the same id in ``%RETRY%<group>`` and ``%DLQ%<group>``; user topics come first."""
        if not isinstance(msg_id, str) or not msg_id:
            raise MQClientError(f"msg_id must be a non-empty string, got {msg_id!r}")
        configs = [self._require(topic)] if topic is not None else self._store.topics()
        configs.sort(key=lambda c: (c.name.startswith((RETRY_PREFIX, DLQ_PREFIX)), c.name))
        found = self._store.find_id_in([(c.name, q) for c in configs for q in range(c.queue_count)], msg_id)
        out: list[MessageExt] = []
        for name, qid, offset in found:
            out += self._store.read_at(name, [(qid, offset)])
        return out

    def stats(self, *, window_s: float = STATS_WINDOW_S) -> Rates | None:
        """Messages stored per topic (in) and consumed per group (out) over the last ``window_s`` seconds,
        from the broker service's stats snapshots [mqadmin ``statsAll``]; None ("unknown") when no
        broker service has taken snapshots that far back, or none recently (is ``mq broker`` running?).

        Args:
            window_s: the window, seconds; the rates span the snapshots closest to it (one stats
                interval of the service, 10 s by default, of slack). At most the history kept (180 s).
        """
        if not isinstance(window_s, (int, float)) or not 0 < window_s <= STATS_HISTORY_S:
            raise MQClientError(f"window_s must be in (0, {STATS_HISTORY_S:g}] seconds, got {window_s!r}")
        history = self._store.stats_history(0)
        if not history or int(history[-1]["taken_at_ms"]) < time.time() * 1000 - window_s * 1000:
            return None
        return rates_over(history, window_s)

    def delete_namespace(self) -> int:
        """Delete every key of this namespace (topics and their messages, groups, offsets, settings);
        returns how many keys the namespace had. Topics go through :meth:`delete_topic` and group configs
        through :meth:`delete_group`; what is left is found by ``SCAN MATCH`` on the namespace's hash-tag
        prefixes. Stop the namespace's producers, consumers and broker services first, or they write
        their keys again."""
        had = sum(1 for _ in self._store.namespace_keys())
        for config in self._store.topics():
            self._store.delete_topic(config.name)
        for group in self.groups():
            self._store.delete_group_config(group)
        self._store.drop_namespace()
        return had

    def namespace_empty(self) -> bool:
        """Whether no key of this namespace exists (``SCAN MATCH``)."""
        return not self._store.namespace_keys()


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


def _resend_copy(letter: MessageExt, retry: str, dlq: str) -> list[Any]:
    """The encoded copy of a dead letter for its group's retry topic, linked to the letter."""
    system = {k: v for k, v in letter.system_properties.items() if k not in (DLQ_REASON, RESENT)}
    system |= {
        RETRY_TOPIC: original_topic(letter),
        ORIGIN_MESSAGE_ID: system.get(ORIGIN_MESSAGE_ID, letter.msg_id),
        DLQ_LETTER: f"{dlq}:0@{letter.queue_offset}",
    }
    copy = Message(retry, letter.body, letter.tags, letter.keys, letter.properties)
    return codec.encode(copy, letter.msg_id, letter.born_timestamp_ms, system_properties=system)
