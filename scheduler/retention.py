"""Retention: remove messages older than ``file_reserved_time_h``, consumed or not, with their
index entries, so the store's memory stays bounded [RocketMQ ``fileReservedTime``]."""

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
            removed += store.trim(name, qid, cutoff_ms)
    if removed:
        log.info("retention removed %d messages stored before %d", removed, cutoff_ms)
    return removed
