"""Figures only the pages show, gathered with :class:`mq.Admin` like :mod:`mq.console.service`:
the overview's busiest topics, the names the message search suggests."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mq.console.service import Console, Overview, is_system, overview_of, recent_rates, refreshed, snapshot_key
from mq.model.topic import TopicConfig
from mq.operator.rates import Rates

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


def overview_with_busiest(console: Console, *, limit: int = BUSIEST_LIMIT) -> tuple[Overview, list[TopicRate]]:
    """The overview and its :func:`busiest_topics`, from one read of the topic table and one of the
    broker's stats history — once per broker stats snapshot while there is a fresh one (see
    :func:`mq.console.service.overview`: the page's live part, every 5 s in every open tab, then costs
    the same with 10 or 10 000 topics)."""

    def compute() -> tuple[Overview, list[TopicRate]]:
        configs = console.admin.topics()
        rates = recent_rates(console.admin)
        return overview_of(console, configs, rates), busiest_topics(configs, rates, limit=limit)

    found, busiest = console.cached(f"overview, busiest {limit}", snapshot_key(console), compute)
    return refreshed(console, found), busiest


def busiest_topics(configs: Sequence[TopicConfig], rates: Rates | None, *, limit: int = BUSIEST_LIMIT) -> list[TopicRate]:
    """The ``limit`` user topics of ``configs`` with the most messages in per second, busiest first (ties
    by name), by ``rates`` (the overview's: the last minute of the broker service's stats snapshots, or
    what there is when the service has been taking them for less than a minute); the first ``limit``
    topics by name with an unknown rate when ``rates`` is None (fewer than two snapshots, or none
    recent: no broker service running)."""
    names = _user_names(configs)
    if rates is None:
        return [TopicRate(t, None, None) for t in names[:limit]]
    per_s = {t: rates.topics_in[t].per_s if t in rates.topics_in else 0.0 for t in names}
    return [TopicRate(t, per_s[t], rates.window_s) for t in sorted(names, key=lambda t: (-per_s[t], t))[:limit]]


def user_topics(console: Console) -> list[str]:
    """Every user topic's name (not retry or DLQ topics), sorted: one read of the topic table."""
    return _user_names(console.admin.topics())


def _user_names(configs: Sequence[TopicConfig]) -> list[str]:
    return sorted(c.name for c in configs if not is_system(c.name))
