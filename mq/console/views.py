"""Figures only the pages show, gathered with :class:`mq.Admin` like :mod:`mq.console.service`:
the overview's busiest topics, the names the message search suggests."""

from __future__ import annotations

from dataclasses import dataclass

from mq.console.service import Console, _recent_rates
from mq.validation import DLQ_PREFIX, RETRY_PREFIX

#: Topics the overview lists.
BUSIEST_LIMIT = 10


@dataclass(frozen=True)
class TopicRate:
    """A user topic and the messages stored in it per second (None: unknown, fewer than two broker
    stats snapshots).

    Attributes:
        topic: the topic.
        in_per_s: messages stored per second over ``window_s``.
        window_s: the window, seconds: the last minute, or less when the snapshots do not reach back so far.
    """

    topic: str
    in_per_s: float | None
    window_s: float | None


def busiest_topics(console: Console, *, limit: int = BUSIEST_LIMIT) -> list[TopicRate]:
    """The ``limit`` user topics with the most messages in per second, busiest first (ties by name), over
    the last minute of the broker service's stats snapshots — or over what there is, when the service
    has been taking them for less than a minute; the first ``limit`` topics by name with an unknown rate
    when there are fewer than two snapshots, or none recent (no broker service running)."""
    names = user_topics(console)
    rates = _recent_rates(console.admin)  # the overview's own rates: the same window
    if rates is None:
        return [TopicRate(t, None, None) for t in names[:limit]]
    per_s = {t: rates.topics_in[t].per_s if t in rates.topics_in else 0.0 for t in names}
    return [TopicRate(t, per_s[t], rates.window_s) for t in sorted(names, key=lambda t: (-per_s[t], t))[:limit]]


def user_topics(console: Console) -> list[str]:
    """Every user topic's name (not retry or DLQ topics), sorted: one read of the topic table."""
    return sorted(c.name for c in console.admin.topics() if not c.name.startswith((RETRY_PREFIX, DLQ_PREFIX)))
