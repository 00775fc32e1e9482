"""The streaming reader: ``spark.readStream.format("mq")`` follows topics by queue offsets.

Its offset is ``{topic: {"queue_id": offset}}`` (next offset to read per queue, the same JSON
Spark checkpoints), so a restarted query resumes exactly where its checkpoint says, and each
micro-batch reads the ranges between two such offsets: every message once per micro-batch
sequence. Queues that appear later (a topic grew, or a pattern matched a new topic) are read from
their start. ``commit`` records nothing in the store: consumer groups are never touched.

A queue whose offset in the checkpoint is beyond its end (the store was recreated, or a failover
discarded a tail the query had read and will give those offsets to new messages) is read again
from its oldest entry, with a WARNING naming the queue and the gap: duplicates rather than loss,
as a consumer group's rewind (docs/decisions.md D70). The query has no committed offset in the store
to rewind to, so the whole retained queue is the only range known to hold every new message; a
rewound queue shows in a batch's offsets as an end below its start.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition

from spark import plan, snapshot
from spark.options import EARLIEST, LATEST
from spark.reader import RangeReader

if TYPE_CHECKING:
    from mq.model.topic import QueueStats

log = logging.getLogger("spark.stream")

try:
    from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow as _AvailableNow
except ImportError:  # older pyspark: Trigger.AvailableNow is not offered to Python sources
    _AvailableNow = object  # type: ignore[assignment,misc]


class MessagesStreamReader(RangeReader, DataSourceStreamReader, _AvailableNow):
    """Streaming reader of the ``messages`` table; pickled to the tasks, so it holds only options.

    Options: ``starting_offsets`` (``latest`` by default; ``earliest``; or JSON offsets, where a
    queue left out starts at its earliest message) and ``max_messages_per_trigger``. Supports
    ``trigger(availableNow=True)`` where pyspark offers it to Python sources (4.3 does).
    """

    #: Trigger.AvailableNow: every queue's max offset when the query started; None otherwise.
    _target: dict[snapshot.QueueId, int] | None = None

    def _stats(self) -> dict[snapshot.QueueId, QueueStats]:
        with snapshot.open_store(self.options) as store:
            return snapshot.queue_stats(store, snapshot.resolve_topics(store.conn, self.options.topics))

    def initialOffset(self) -> dict[str, Any]:
        """Where a new query starts (a restarted one starts from its checkpoint instead).

        Raises:
            TopicNotFoundError: a ``topic`` entry names a topic that does not exist.
            MQClientError: JSON ``starting_offsets`` name a topic or queue the query does not read.
        """
        start = plan.resolve(self.options.starting_offsets or LATEST, self._stats(), missing=EARLIEST, option="starting_offsets")
        return dict(plan.to_json(start))

    def latestOffset(self, start: Mapping[str, Any] | None = None, limit: Any = None) -> dict[str, Any]:
        """The end of the next micro-batch: every queue's max offset, capped by the read limit.

        Args:
            start: the previous end (pyspark ≥ 4.2 passes it; older releases call without it).
            limit: Spark's read limit (``ReadMaxRows`` caps the batch; anything else reads all).
        """
        begin = plan.from_json(start or {})
        stats = self._stats()
        end = {q: s.max_offset for q, s in stats.items()}
        # where each queue's next batch reads from: a queue beyond its end is read from its start
        reads = {q: 0 if q in end and o > end[q] else o for q, o in begin.items()}
        for queue, offset in begin.items():
            if queue not in end:  # its topic went away: the queue never goes back
                end[queue] = offset
            elif offset > end[queue]:
                log.warning(
                    "streaming offset %d of %s queue %d is beyond the queue's end (%d: a gap of %d offsets; the store "
                    "was recreated, or a failover lost messages this query had read): the queue is read again from "
                    "its oldest entry (%d), duplicates rather than loss",
                    offset,
                    queue[0],
                    queue[1],
                    end[queue],
                    offset - end[queue],
                    stats[queue].min_offset,
                )
        if self._target is not None:  # Trigger.AvailableNow: nothing stored after the query started
            end = {q: max(reads.get(q, 0), min(e, self._target.get(q, 0))) for q, e in end.items()}
        most = getattr(limit, "max_rows", None) if limit is not None else self.options.max_messages_per_trigger
        if most is not None and start is not None:
            end = plan.cap(reads, end, int(most))
        return dict(plan.to_json(end))

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: remember every queue's max offset now; later batches stop there.

        A queue that appears later (its topic grew, a pattern matched a new topic) is not read
        by this run: its target is its start.
        """
        self._target = {q: s.max_offset for q, s in self._stats().items()}

    def getDefaultReadLimit(self) -> Any:
        """``ReadMaxRows(max_messages_per_trigger)`` when that option is set, else read everything."""
        if self.options.max_messages_per_trigger is None:
            return super().getDefaultReadLimit()
        from pyspark.sql.streaming.datasource import ReadMaxRows

        return ReadMaxRows(self.options.max_messages_per_trigger)

    def partitions(self, start: Mapping[str, Any], end: Mapping[str, Any]) -> list[InputPartition]:
        """Balanced partitions over ``[start, end)`` of every queue."""
        begin, finish = plan.from_json(start), plan.from_json(end)
        # an end below its start: the queue was beyond its end, and is read again from its start
        return self.plan_ranges({q: (b if (b := begin.get(q, 0)) <= e else 0, e) for q, e in finish.items()})

    def commit(self, end: Mapping[str, Any]) -> None:
        """Nothing to do: the checkpoint holds the offsets, and consumer groups are not touched."""
