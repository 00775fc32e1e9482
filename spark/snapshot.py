"""Driver-side views of the store: which topics a read covers, queue offsets, group offsets.

Everything here runs where Spark plans a read (once per batch query or micro-batch) and fans out
over queues with one pipeline per topic, which redis-py groups by node on a cluster.
"""

from __future__ import annotations

import dataclasses
import fnmatch
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mq.errors import TopicNotFoundError
from mq.model.topic import QueueStats, TopicConfig
from mq.model.validation import is_system_topic
from mq.store import Store
from mq.store.connection import Connection, mask_url
from spark.options import ReadOptions, is_pattern

#: A queue of a topic: ``(topic, queue_id)``.
QueueId = tuple[str, int]

_CONFIG_FIELDS = frozenset(f.name for f in dataclasses.fields(TopicConfig))


@dataclass(frozen=True)
class TopicInfo:
    """A topic and how many queues it ever had.

    Attributes:
        config: the topic's config.
        span: queues that exist in the store (at least ``config.queue_count``; more after the
            counts shrank, as those queues keep their messages).
    """

    config: TopicConfig
    span: int

    @property
    def name(self) -> str:
        """The topic name."""
        return self.config.name


@contextmanager
def open_store(options: ReadOptions) -> Iterator[Store]:
    """A :class:`~mq.store.Store` on a fresh connection to the options' store, closed on exit."""
    conn = Connection(options.url, options.namespace)
    try:
        yield Store(conn)
    finally:
        conn.close()


def list_topics(conn: Connection) -> dict[str, TopicInfo]:
    """Every topic of the namespace, system topics included, by name."""
    return {name: TopicInfo(config, span) for name, (config, span) in Store(conn).topic_spans().items()}


def resolve_topics(conn: Connection, selectors: Sequence[str]) -> list[TopicInfo]:
    """The topics named by ``selectors`` (names and ``*`` patterns), sorted by name.

    No selectors means every user topic (retry, DLQ and system topics left out). A pattern that
    matches nothing selects nothing.

    Raises:
        TopicNotFoundError: a selector names a topic that does not exist.
    """
    known = list_topics(conn)
    if not selectors:
        return sorted((t for t in known.values() if not is_system_topic(t.name)), key=lambda t: t.name)
    chosen: dict[str, TopicInfo] = {}
    for selector in selectors:
        if is_pattern(selector):
            chosen.update({n: t for n, t in known.items() if fnmatch.fnmatchcase(n, selector)})
        elif selector in known:
            chosen[selector] = known[selector]
        else:
            raise TopicNotFoundError(
                f"unknown topic {selector!r} in namespace {conn.namespace!r} at {mask_url(conn.url)}; "
                f"topics there: {sorted(known) or 'none'}"
            )
    return [chosen[n] for n in sorted(chosen)]


def queue_stats(store: Store, topics: Iterable[TopicInfo]) -> dict[QueueId, QueueStats]:
    """Min/max offset and newest store time of every queue of ``topics``: the read's snapshot."""
    out: dict[QueueId, QueueStats] = {}
    for topic in topics:
        for qid, stats in store.queue_stats(topic.name, range(topic.span)).items():
            out[(topic.name, qid)] = stats
    return out


def topic_rows(store: Store, topics: Sequence[TopicInfo]) -> list[tuple[Any, ...]]:
    """Rows of the ``topics`` table (see :data:`spark.schema.TOPICS`)."""
    stats = queue_stats(store, topics)
    by_name = {t.name: t.config for t in topics}
    return [
        (
            t,
            q,
            s.min_offset,
            s.max_offset,
            s.stored,
            s.last_store_timestamp_ms or None,
            by_name[t].readable(q),
            by_name[t].writable(q),
        )
        for (t, q), s in sorted(stats.items())
    ]


def group_offsets(store: Store, topics: Sequence[TopicInfo]) -> dict[QueueId, dict[str, int]]:
    """Committed offset of every group on every queue of ``topics`` (``{queue: {group: offset}}``)."""
    queues = [(t.name, q) for t in topics for q in range(t.span)]
    return dict(zip(queues, store.group_offsets_of(queues)))


def offset_rows(store: Store, topics: Sequence[TopicInfo]) -> list[tuple[Any, ...]]:
    """Rows of the ``offsets`` table (see :data:`spark.schema.OFFSETS`).

    A group has a row for every readable queue of each topic it committed an offset on (consumer
    offset -1 where it has none yet), and for any other queue where it has an offset. Lag counts
    the messages still stored that the group has not consumed, as ``Admin.consumer_progress`` does.
    """
    stats = queue_stats(store, topics)
    committed = group_offsets(store, topics)
    rows = []
    for topic in topics:
        groups = sorted({g for q in range(topic.span) for g in committed[(topic.name, q)]})
        for group in groups:
            for qid in range(topic.span):
                offset = committed[(topic.name, qid)].get(group)
                if offset is None and not topic.config.readable(qid):
                    continue
                consumer = -1 if offset is None else offset
                s = stats[(topic.name, qid)]
                rows.append((group, topic.name, qid, s.max_offset, consumer, s.lag(consumer)))
    return rows
