"""Message rates in and out over a recent window, from two stats snapshots of the broker service
(``Admin.stats``, ``mq stats``) [RocketMQ ``mqadmin statsAll``].

In is what topics stored (the difference of messages ever stored per user topic), out is what groups
consumed (the difference of their committed offsets summed per topic). A committed offset that moved
back (an offset reset) counts as 0 consumed, not as a negative rate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Seconds of snapshots the broker service keeps in ``{ns}:statshist``: enough for a one-minute rate
#: with snapshots 10 s apart, and the longest window ``Admin.stats`` takes.
STATS_HISTORY_S = 180.0


@dataclass(frozen=True)
class Rate:
    """Messages counted over a window.

    Attributes:
        count: messages in the window.
        per_s: ``count`` divided by the window, messages per second.
    """

    count: int
    per_s: float


@dataclass(frozen=True)
class Rates:
    """Rates over the window between two snapshots.

    Attributes:
        since_ms, until_ms: when the older and the newer snapshot were taken, epoch ms.
        topics_in: user topic → messages stored.
        groups_out: group → messages consumed, over every topic it consumes (its retry topic too).
        group_topics_out: (group, topic) → messages the group consumed from the topic.
    """

    since_ms: int
    until_ms: int
    topics_in: dict[str, Rate]
    groups_out: dict[str, Rate]
    group_topics_out: dict[tuple[str, str], Rate]

    @property
    def window_s(self) -> float:
        """Seconds between the two snapshots."""
        return (self.until_ms - self.since_ms) / 1000


def rates_over(history: Sequence[Mapping[str, Any]], window_s: float) -> Rates | None:
    """Rates between the newest snapshot of ``history`` (oldest first) and the newest one taken at
    least ``window_s`` seconds before it; None when the history does not reach back that far."""
    if not history:
        return None
    newest = history[-1]
    until_ms = int(newest["taken_at_ms"])
    older = [s for s in history if int(s["taken_at_ms"]) <= until_ms - window_s * 1000]
    if not older:
        return None
    oldest = older[-1]
    since_ms = int(oldest["taken_at_ms"])
    seconds = (until_ms - since_ms) / 1000

    def rate(count: int) -> Rate:
        return Rate(count, count / seconds)

    window = [s for s in history if int(s["taken_at_ms"]) >= since_ms]

    def grown(name: str, *, new_from_zero: bool) -> dict[str, int]:
        """Growth of each counter of ``name`` over the window; a counter missing from the older snapshot
        grows from 0 (a new topic) or from its first reading in the window (a group's first offsets
        are where it starts, not what it consumed)."""
        out = {}
        for k, v in newest.get(name, {}).items():
            readings = [int(s[name][k]) for s in window if k in s.get(name, {})]
            base = readings[0] if readings and (k in oldest.get(name, {}) or not new_from_zero) else 0
            out[k] = max(0, int(v) - base)
        return out

    pairs = {k.partition("/")[::2]: n for k, n in grown("group_consumed", new_from_zero=False).items()}
    groups: dict[str, int] = {}
    for (group, _), n in pairs.items():
        groups[group] = groups.get(group, 0) + n
    return Rates(
        since_ms=since_ms,
        until_ms=until_ms,
        topics_in={t: rate(n) for t, n in sorted(grown("topic_messages", new_from_zero=True).items())},
        groups_out={g: rate(n) for g, n in sorted(groups.items())},
        group_topics_out={(g, t): rate(n) for (g, t), n in sorted(pairs.items())},
    )
