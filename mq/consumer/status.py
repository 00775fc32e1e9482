"""A member's runtime state, published with its heartbeat for ``mq group status`` [RocketMQ
``consumerStatus``]: per queue the cached messages and bytes, next and committed offsets and the
last pull; the consume rate over the last interval; whether the group is paused."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from mq.consumer.process_queue import ProcessQueue
from mq.model.queue import MessageQueue


class StatusMeter:
    """Turns the process queues into the published status, measuring the consume rate between calls."""

    def __init__(self) -> None:
        self._consumed = 0
        self._at = 0.0

    def status(self, pqs: Mapping[MessageQueue, ProcessQueue], *, paused: bool) -> dict[str, Any]:
        """The status now (rates over the time since the previous call)."""
        now_s, mono = time.time(), time.monotonic()
        total = sum(pq.consumed_total for pq in pqs.values())
        rate = (total - self._consumed) / (mono - self._at) if self._at and mono > self._at else 0.0
        self._consumed, self._at = total, mono
        queues = {
            f"{mq.topic}:{mq.queue_id}": {
                "cached": pq.count,
                "cached_bytes": pq.size_bytes,
                "next_offset": pq.next_offset,
                "committed": pq.stored_offset,
                "last_pull_ms": int((now_s - (mono - pq.last_pull_s)) * 1000) if pq.last_pull_s else 0,
            }
            for mq, pq in sorted(pqs.items())
        }
        return {"queues": queues, "consume_tps": round(max(rate, 0.0), 1), "paused": paused, "updated_ms": int(now_s * 1000)}
