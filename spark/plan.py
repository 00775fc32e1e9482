"""Planning: offset specs to per-queue ranges, and ranges to balanced, picklable partitions.

Offsets are the store's dense queue offsets; a range ``[start, end)`` is what one read covers,
so a plan made from offsets read once on the driver is a snapshot: messages stored later have
offsets at or past ``end`` and are never half-included.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import InputPartition

from mq.errors import MQClientError
from mq.model.topic import QueueStats
from mq.store import Store
from spark.options import EARLIEST, LATEST, OffsetSpec, ReadOptions
from spark.snapshot import QueueId

#: JSON form of per-queue offsets, as Spark checkpoints them: ``{topic: {"queue_id": offset}}``.
JsonOffsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class QueueRange(InputPartition):
    """One partition: offsets ``[start, end)`` of one queue (end exclusive). Picklable."""

    topic: str
    queue_id: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """Messages the range spans (trimmed ones included)."""
        return self.end - self.start


@dataclass(frozen=True)
class ReadPartition(InputPartition):
    """One partition: the ranges one task reads, one after the other — one queue's, or several small
    queues' when they are packed together (see :func:`plan`). Picklable."""

    ranges: tuple[QueueRange, ...]

    @property
    def size(self) -> int:
        """Messages the ranges span (trimmed ones included)."""
        return sum(r.size for r in self.ranges)


@dataclass(frozen=True)
class RowsPartition(InputPartition):
    """The only partition of a small table: its rows, computed on the driver at planning."""

    rows: tuple[tuple[Any, ...], ...]


def resolve(spec: OffsetSpec, stats: Mapping[QueueId, QueueStats], *, missing: str, option: str) -> dict[QueueId, int]:
    """Per-queue offsets for ``spec`` (the value of option ``option``); queues a JSON spec leaves out
    take ``missing`` (a word).

    Raises:
        MQClientError: a JSON spec names a topic the read does not cover or a queue its topic does
            not have (D102: a typo must not read everything, or up to the latest offset, silently).
    """
    if not isinstance(spec, str):
        check_named(option, spec, stats)
    out = {}
    for queue, s in stats.items():
        word = spec if isinstance(spec, str) else missing
        explicit = None if isinstance(spec, str) else spec.get(queue[0], {}).get(queue[1])
        out[queue] = explicit if explicit is not None else s.min_offset if word == EARLIEST else s.max_offset
    return out


def check_named(option: str, spec: Mapping[str, Mapping[int, int]], stats: Mapping[QueueId, QueueStats]) -> None:
    """Refuse JSON offsets naming a topic that is not among the read's (``stats``' topics) or a queue
    its topic does not have, naming each one.

    Raises:
        MQClientError: something named is not read.
    """
    queues: dict[str, list[int]] = {}
    for topic, qid in sorted(stats):
        queues.setdefault(topic, []).append(qid)
    unknown = [repr(t) for t in spec if t not in queues]
    missing = [
        f"{t!r} queue {q} (it has queues {_span(queues[t])})"
        for t, qs in spec.items()
        if t in queues
        for q in qs
        if q not in queues[t]
    ]
    if unknown or missing:
        names = "; ".join([*([f"topic(s) {', '.join(unknown)}"] if unknown else []), *missing])
        read = ", ".join(map(repr, queues)) or "none"
        raise MQClientError(
            f"option {option!r} names what this read does not cover: {names}. Topics read: {read} "
            "(a typo, or a topic the 'topic' option leaves out)"
        )


def _span(qids: list[int]) -> str:
    return f"{qids[0]}-{qids[-1]}" if qids == list(range(qids[0], qids[-1] + 1)) and len(qids) > 1 else ", ".join(map(str, qids))


def batch_ranges(store: Store, stats: Mapping[QueueId, QueueStats], opts: ReadOptions) -> dict[QueueId, tuple[int, int]]:
    """``[start, end)`` of every queue for a batch read, narrowed by the store-time options."""
    starts = resolve(opts.starting_offsets or EARLIEST, stats, missing=EARLIEST, option="starting_offsets")
    ends = resolve(opts.ending_offsets, stats, missing=LATEST, option="ending_offsets")
    ranges = {}
    for queue, s in stats.items():
        start, end = max(starts[queue], s.min_offset), min(ends[queue], s.max_offset)
        if start < end and opts.min_store_time_ms is not None:
            start = max(start, store.search_offset(queue[0], queue[1], opts.min_store_time_ms))
        if start < end and opts.max_store_time_ms is not None:
            end = min(end, store.search_offset(queue[0], queue[1], opts.max_store_time_ms + 1))
        ranges[queue] = (start, end)
    return ranges


def plan(
    ranges: Mapping[QueueId, tuple[int, int]], *, min_partitions: int | None, max_partition_messages: int, pack_queues: bool
) -> list[ReadPartition]:
    """Partitions covering ``ranges``, none over ``total / min_partitions`` or ``max_partition_messages``
    messages: big queues are cut into equal pieces, and with ``pack_queues`` the pieces (small queues
    whole) are then packed, in queue order, into as few partitions as those bounds allow (default:
    partitions of up to ``max_partition_messages``). Without it every partition holds one queue's
    piece, and every non-empty queue has at least one (default: one per queue).
    """
    sizes = {q: end - start for q, (start, end) in ranges.items() if end > start}
    if not sizes:
        return []
    wanted = min_partitions or (1 if pack_queues else len(sizes))
    target = max(1, min(max_partition_messages, math.ceil(sum(sizes.values()) / wanted)))
    pieces = []
    for (topic, qid), size in sorted(sizes.items()):
        start = ranges[(topic, qid)][0]
        count = math.ceil(size / target)
        cuts = [start + size * i // count for i in range(count + 1)]
        pieces += [QueueRange(topic, qid, lo, hi) for lo, hi in itertools.pairwise(cuts)]
    if not pack_queues:
        return [ReadPartition((piece,)) for piece in pieces]
    bins: list[list[QueueRange]] = []
    for piece in pieces:
        if not bins or sum(r.size for r in bins[-1]) + piece.size > target:
            bins.append([])
        bins[-1].append(piece)
    return [ReadPartition(tuple(b)) for b in bins]


def to_json(offsets: Mapping[QueueId, int]) -> JsonOffsets:
    """``{(topic, qid): offset}`` as Spark checkpoints it (JSON object keys are strings)."""
    out: JsonOffsets = {}
    for (topic, qid), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(qid)] = int(offset)
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> dict[QueueId, int]:
    """The inverse of :func:`to_json`."""
    return {(topic, int(qid)): int(o) for topic, queues in offsets.items() for qid, o in queues.items()}


def cap(start: Mapping[QueueId, int], end: Mapping[QueueId, int], limit: int) -> dict[QueueId, int]:
    """``end`` lowered so that at most ``limit`` messages lie between ``start`` and it, shared out in
    proportion to each queue's backlog (at least one message moves while any is waiting)."""
    backlog = {q: max(0, e - start.get(q, 0)) for q, e in end.items()}
    total = sum(backlog.values())
    if total <= limit:
        return dict(end)
    out = {q: start.get(q, 0) + backlog[q] * limit // total for q in end}
    if all(out[q] == start.get(q, 0) for q in end):
        first = next(q for q in sorted(end) if backlog[q])
        out[first] += 1
    return out
