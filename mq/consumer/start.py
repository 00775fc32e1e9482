"""Where a consumer starts on a queue its group has no offset for [RocketMQ ``ConsumeFromWhere``].

- LAST_OFFSET: the first message stored at or after the group first consumed the topic (server clock,
  D13) — new messages only, and a queue added to the topic later is read from its start;
- FIRST_OFFSET: the oldest message still stored (a retry topic always starts there);
- TIMESTAMP: the first message stored at or after ``consume_timestamp_ms`` (default 30 minutes
  before the consumer started).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from mq.consumer.types import ConsumeFromWhere
from mq.errors import MQBrokerError
from mq.model.queue import MessageQueue
from mq.model.validation import RETRY_PREFIX
from mq.store import Store
from mq.store.connection import is_out_of_memory
from mq.store.ops import Op
from mq.store.store import StoreOps

#: Default of ``consume_timestamp_ms``: 30 minutes before start [RocketMQ ``consumeTimestamp``].
DEFAULT_CONSUME_TIMESTAMP_AGO_MS = 30 * 60 * 1000


@dataclass
class StartPolicy:
    """How a member picks the first offset of a queue its group has not consumed.

    Attributes:
        where: LAST_OFFSET, FIRST_OFFSET or TIMESTAMP (the group's config wins when it has one).
        timestamp_ms: TIMESTAMP's time, epoch ms (None: 30 minutes before ``started_ms``).
        started_ms: when this member started (server clock), ms.
        group_wide: clustering: LAST_OFFSET counts from when the *group* first consumed the topic;
            broadcasting: from when this member started.
    """

    where: ConsumeFromWhere
    timestamp_ms: int | None
    started_ms: int = 0
    group_wide: bool = True

    def offsets(self, store: Store, group: str, queues: Sequence[MessageQueue]) -> Op[dict[MessageQueue, int]]:
        """The first offset of each queue of ``queues`` (an operation: see :mod:`mq.store.ops`)."""
        offsets = {}
        for q in queues:
            offsets[q] = yield from self._offset(store, group, q)
        return offsets

    def _offset(self, store: Store, group: str, mq: MessageQueue) -> Op[int]:
        stats = (yield from StoreOps.queue_stats.op(store, mq.topic, [mq.queue_id]))[mq.queue_id]
        if self.where is ConsumeFromWhere.FIRST_OFFSET or mq.topic.startswith(RETRY_PREFIX):
            return stats.min_offset
        if self.where is ConsumeFromWhere.TIMESTAMP:
            ts = self.timestamp_ms or self.started_ms - DEFAULT_CONSUME_TIMESTAMP_AGO_MS
        else:
            ts = (yield from self._since(store, group, mq.topic)) if self.group_wide else self.started_ms
        return max(stats.min_offset, (yield from StoreOps.search_offset.op(store, mq.topic, mq.queue_id, ts)))

    def _since(self, store: Store, group: str, topic: str) -> Op[int]:
        """When the group first consumed ``topic``; this member's start while a full store (``OOM``)
        cannot record it."""
        try:
            return (yield from StoreOps.group_since.op(store, group, topic, self.started_ms))
        except MQBrokerError as e:
            if not is_out_of_memory(e):
                raise
            return self.started_ms
