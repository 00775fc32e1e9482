"""Latency fault tolerance [RocketMQ 4.x ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl``].

After each send the producer records how long the node took; a slow or failed node is avoided for
a while. A "node" is the Redis master that serves a queue's slot (one node on a standalone Redis).
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass

#: Latency thresholds, ms [RocketMQ ``latencyMax``].
LATENCY_MAX_MS = (50, 100, 550, 1000, 2000, 3000, 15000)
#: How long a node is avoided for each threshold, ms [RocketMQ ``notAvailableDuration``].
NOT_AVAILABLE_DURATION_MS = (0, 0, 30000, 60000, 120000, 180000, 600000)
#: The latency a failed send counts as, ms (RocketMQ isolates a failing broker with 30 s).
ISOLATION_LATENCY_MS = 30000


def not_available_duration_ms(latency_ms: float) -> int:
    """``notAvailableDuration[i]`` for the largest ``i`` with ``latency_ms >= latencyMax[i]``, else 0."""
    for limit, duration in zip(reversed(LATENCY_MAX_MS), reversed(NOT_AVAILABLE_DURATION_MS)):
        if latency_ms >= limit:
            return duration
    return 0


@dataclass
class FaultItem:
    """What is known of one node: its last latency and until when it is avoided (monotonic ms)."""

    node: str
    latency_ms: float
    available_from_ms: float

    def available(self, now_ms: float) -> bool:
        """Whether the node may be used at ``now_ms``."""
        return now_ms >= self.available_from_ms


class LatencyFaultTolerance:
    """Remembers slow and failed nodes; thread-safe."""

    def __init__(self) -> None:
        self._items: dict[str, FaultItem] = {}
        self._lock = threading.Lock()
        self._worst = itertools.count()

    @staticmethod
    def _now_ms() -> float:
        return time.monotonic() * 1000

    def update(self, node: str, latency_ms: float, *, isolation: bool = False) -> None:
        """Record a send to ``node``; ``isolation`` marks a failed send."""
        latency = ISOLATION_LATENCY_MS if isolation else latency_ms
        item = FaultItem(node, latency, self._now_ms() + not_available_duration_ms(latency))
        with self._lock:
            self._items[node] = item

    def is_available(self, node: str) -> bool:
        """Whether ``node`` may be used now (unknown nodes are)."""
        with self._lock:
            item = self._items.get(node)
        return item is None or item.available(self._now_ms())

    def pick_one_at_least(self) -> str | None:
        """When every node is avoided: one of the better half (available first, then lower latency)."""
        now = self._now_ms()
        with self._lock:
            items = sorted(self._items.values(), key=lambda i: (not i.available(now), i.latency_ms, i.available_from_ms))
        if not items:
            return None
        half = len(items) // 2
        return items[0].node if half <= 0 else items[next(self._worst) % half].node
