"""What the tier uploader does to one queue, decided from what it read (sans-I/O, no clock of its own).

Two decisions per queue and run:

- :func:`upload_range`: which offsets go into the next segment (none when too few are waiting and
  none is old enough, unless hot retention needs them out of Redis);
- :func:`hot_cut`: below which offset hot retention wants Redis emptied; the trim itself never goes
  past the manifest's end, and the part of the cut the tier does not hold yet is the *stall*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class TierPolicy:
    """The uploader's settings (see :class:`scheduler.config.BrokerConfig`).

    Attributes:
        segment_messages: most messages per segment.
        segment_age_s: a segment is cut once its oldest message waited this long, even if smaller.
        hot_retention_s: Redis keeps a tiered message this long (None: see ``reserved_s``).
        hot_retention_bytes: Redis keeps at most about this much of a queue's log (None: no bound).
        reserved_s: the total retention (``file_reserved_time_h``): without hot settings, Redis keeps
            messages this long, as it does without a tier.
    """

    segment_messages: int
    segment_age_s: float
    hot_retention_s: float | None
    hot_retention_bytes: int | None
    reserved_s: float


def upload_range(
    start: int, seq: int, oldest_store_ms: int | None, now_ms: int, cut: int, policy: TierPolicy
) -> tuple[int, int] | None:
    """The offsets ``[start, end)`` of the next segment, or None when nothing should go yet.

    Args:
        start: where the tier ends (or Redis's first offset when nothing is tiered).
        seq: the queue's next offset.
        oldest_store_ms: store time of the message at ``start`` (None when there is none).
        now_ms: the current time, epoch ms.
        cut: :func:`hot_cut`'s offset: messages below it must leave Redis, so they go now.
    """
    waiting = seq - start
    if waiting <= 0 or oldest_store_ms is None:
        return None
    due = waiting >= policy.segment_messages or cut > start or now_ms - oldest_store_ms >= policy.segment_age_s * 1000
    return (start, start + min(waiting, policy.segment_messages)) if due else None


def hot_cut(first: int, seq: int, length: int, memory_bytes: int, time_cut: int, policy: TierPolicy) -> int:
    """The offset below which hot retention wants Redis emptied.

    Args:
        first, seq: Redis's first and next offsets of the queue.
        length, memory_bytes: entries in the log and the log's memory, bytes.
        time_cut: the first offset stored at or after ``now - hot_retention_s`` (or ``now -
            reserved_s`` without hot settings): older ones go by time.
    """
    cut = time_cut
    if policy.hot_retention_bytes is not None and memory_bytes > policy.hot_retention_bytes and length > 0:
        over = math.ceil(length * (memory_bytes - policy.hot_retention_bytes) / memory_bytes)
        cut = max(cut, first + over)
    return min(max(cut, first), seq)
