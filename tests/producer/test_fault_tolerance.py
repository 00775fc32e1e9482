"""Latency fault tolerance tables and choices (RocketMQ 4.x MQFaultStrategy), without Redis."""

from __future__ import annotations

import pytest

from mq.producer.fault import LatencyFaultTolerance, not_available_duration_ms


@pytest.mark.parametrize(
    ("latency_ms", "duration_ms"),
    [
        (0, 0),
        (49, 0),
        (50, 0),
        (100, 0),
        (549, 0),
        (550, 30000),
        (999, 30000),
        (1000, 60000),
        (2000, 120000),
        (3000, 180000),
        (14999, 180000),
        (15000, 600000),
        (30000, 600000),
    ],
)
def test_not_available_duration_table(latency_ms: int, duration_ms: int) -> None:
    assert not_available_duration_ms(latency_ms) == duration_ms


def test_failed_node_is_avoided_and_fast_nodes_are_not() -> None:
    ft = LatencyFaultTolerance()
    ft.update("a", 10)
    ft.update("b", 0, isolation=True)  # a send error counts as 30 s of latency: 10 min away
    ft.update("c", 600)  # slow: 30 s away
    assert ft.is_available("a")
    assert not ft.is_available("b")
    assert not ft.is_available("c")
    assert ft.is_available("never-seen")


def test_pick_one_at_least_prefers_the_better_half() -> None:
    ft = LatencyFaultTolerance()
    for node, latency in [("n1", 700), ("n2", 1200), ("n3", 2500), ("n4", 3500)]:
        ft.update(node, latency)
    picks = {ft.pick_one_at_least() for _ in range(10)}
    assert picks == {"n1", "n2"}  # every node unavailable: the lower-latency half, in turn
    assert LatencyFaultTolerance().pick_one_at_least() is None
