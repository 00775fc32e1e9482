"""Retention: remove messages older than ``file_reserved_time_h``, consumed or not, with their
index entries, so the store's memory stays bounded [RocketMQ ``fileReservedTime``]. Messages a group
had not consumed are counted in the store by the trim itself and reported here once, at WARNING."""

from __future__ import annotations

import logging
import time

from mq.store import Store

log = logging.getLogger("scheduler.retention")


def apply_retention(store: Store, reserved_time_h: float) -> int:
    """Trim every queue every topic ever had (its span: a shrunk topic's high queues keep messages
    too); returns how many messages were removed."""
    cutoff_ms = int((time.time() - reserved_time_h * 3600) * 1000)
    removed = 0
    for name, (_, span) in sorted(store.topic_spans().items()):
        for qid in range(span):
            trimmed = store.trim(name, qid, cutoff_ms)
            removed += trimmed.removed
            report_expired(name, qid, trimmed.expired_unconsumed)
    if removed:
        log.info("retention removed %d messages stored before %d", removed, cutoff_ms)
    return removed


def report_expired(topic: str, queue_id: int, expired: dict[str, int]) -> None:
    """Tell each group that lost messages to retention: one WARNING per group and trim (the store has
    counted them: ``rocketredis_messages_expired_unconsumed_total``, ``mq group progress``)."""
    for group, n in sorted(expired.items()):
        log.warning(
            "retention removed %d messages of topic %r queue %d that group %r had not consumed: they are lost to it "
            "(consume faster, or raise file_reserved_time_h)",
            n,
            topic,
            queue_id,
            group,
        )
