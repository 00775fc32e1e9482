"""Figures of a namespace read from the store: what the metrics endpoint serves and what the
broker service's stats job snapshots for ``Admin.broker_stats`` (``{ns}:stats``), with the last
:data:`STATS_HISTORY_S` seconds of snapshots kept for ``Admin.stats`` (rates in and out over a minute)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from mq.model.validation import DLQ_PREFIX, RETRY_PREFIX
from mq.operator.rates import STATS_HISTORY_S
from mq.store import Store


@dataclass
class Figures:
    """One reading of the namespace.

    Attributes:
        topic_messages: messages ever stored per user topic.
        dlq_messages: messages in each group's dead-letter queue.
        lag: (group, topic, queue id) → messages not consumed yet.
        consumed: (group, topic) → committed offsets summed over the topic's queues (what the group
            has consumed since offset 0; the rate out is its difference between two readings).
        expired: (group, topic) → messages retention removed before the group consumed them, ever
            (the store's counters, summed over the topic's queues).
        timer_backlog: delayed messages waiting to be due.
        half_backlog: transaction half messages not resolved yet.
        taken_at_ms: when the reading was taken, epoch ms.
    """

    topic_messages: dict[str, int] = field(default_factory=dict)
    dlq_messages: dict[str, int] = field(default_factory=dict)
    lag: dict[tuple[str, str, int], int] = field(default_factory=dict)
    consumed: dict[tuple[str, str], int] = field(default_factory=dict)
    expired: dict[tuple[str, str], int] = field(default_factory=dict)
    timer_backlog: int = 0
    half_backlog: int = 0
    taken_at_ms: int = 0


def read_figures(store: Store) -> Figures:
    """Read every figure with two pipelines per topic."""
    figures = Figures(taken_at_ms=int(time.time() * 1000))
    for config in store.topics():
        stats = store.queue_stats(config.name, list(range(config.queue_count)))
        if config.name.startswith(DLQ_PREFIX):
            figures.dlq_messages[config.name.removeprefix(DLQ_PREFIX)] = sum(s.stored for s in stats.values())
        elif not config.name.startswith(RETRY_PREFIX):
            figures.topic_messages[config.name] = sum(s.max_offset for s in stats.values())
        for q, (timers, halves, committed) in enumerate(store.queue_backlogs(config.name, range(config.queue_count))):
            figures.timer_backlog += timers
            figures.half_backlog += halves
            for group, offset in committed.items():
                figures.lag[(group, config.name, q)] = stats[q].lag(offset)
                figures.consumed[(group, config.name)] = figures.consumed.get((group, config.name), 0) + offset
        for counts in store.expired_unconsumed([(config.name, q) for q in range(config.queue_count)]):
            for group, n in counts.items():
                figures.expired[(group, config.name)] = figures.expired.get((group, config.name), 0) + n
    return figures


def save_snapshot(store: Store, figures: Figures, broker_id: str) -> None:
    """Store a summary of ``figures`` in ``{ns}:stats`` for admins, and in the history ``Admin.stats`` reads."""
    summary = {
        "taken_at_ms": figures.taken_at_ms,
        "by": broker_id,
        "topic_messages": figures.topic_messages,
        "dlq_messages": figures.dlq_messages,
        "group_lag": _lag_by_group_topic(figures.lag),
        "group_consumed": {f"{group}/{topic}": n for (group, topic), n in sorted(figures.consumed.items())},
        "timer_backlog": figures.timer_backlog,
        "half_backlog": figures.half_backlog,
    }
    store.save_stats(summary, history_s=STATS_HISTORY_S)


def _lag_by_group_topic(lag: dict[tuple[str, str, int], int]) -> dict[str, int]:
    """Lag summed over queues, keyed ``group/topic``."""
    totals: dict[str, int] = {}
    for (group, topic, _), n in lag.items():
        totals[f"{group}/{topic}"] = totals.get(f"{group}/{topic}", 0) + n
    return totals
