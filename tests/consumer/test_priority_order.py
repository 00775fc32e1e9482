"""The priority ordering policy (mq/consumer/priority.py, D142): which queue is read first, which held
message is handed out first. Unit tests: no store."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mq.consumer.priority import HeldMessages, priority_order, queue_level
from mq.errors import MQClientError
from mq.model.queue import MessageQueue
from mq.model.topic import TopicConfig


def _queues(topic: str, n: int) -> list[MessageQueue]:
    return [MessageQueue(topic, "broker-a", q) for q in range(n)]


def test_queue_level_is_queue_id_modulo_levels() -> None:
    levels = {"p": 4}
    assert [queue_level(q, levels) for q in _queues("p", 10)] == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    assert {queue_level(q, levels) for q in _queues("plain", 5)} == {0}  # no levels: all level 0


def test_without_levels_the_order_is_the_old_round_robin() -> None:
    queues = _queues("a", 5) + _queues("b", 3)
    for start in range(10):
        assert priority_order(queues, {}, start) == [queues[(start + i) % 8] for i in range(8)]
        assert priority_order(queues, {"other": 10}, start) == [queues[(start + i) % 8] for i in range(8)]


def test_higher_levels_first_round_robin_within_a_level() -> None:
    queues = _queues("p", 6)  # 3 levels: queues 2 and 5 hold level 2, 1 and 4 level 1, 0 and 3 level 0
    assert [q.queue_id for q in priority_order(queues, {"p": 3}, 0)] == [2, 5, 1, 4, 0, 3]
    assert [q.queue_id for q in priority_order(queues, {"p": 3}, 1)] == [5, 2, 4, 1, 3, 0]
    # a plain topic's queues are level 0: after every higher level of the priority topic
    mixed = _queues("plain", 2) + queues
    order = priority_order(mixed, {"p": 3}, 0)
    assert [(q.topic, q.queue_id) for q in order[:4]] == [("p", 2), ("p", 5), ("p", 1), ("p", 4)]
    assert {(q.topic, q.queue_id) for q in order[4:]} == {("plain", 0), ("plain", 1), ("p", 0), ("p", 3)}


def test_held_messages_highest_priority_first_each_queue_in_order() -> None:
    held: HeldMessages[str] = HeldMessages()
    held.put("q0", 0, "a0")
    held.put("q0", 0, "a1")
    held.put("q9", 9, "z0")
    held.put("q5", 5, "m0")
    held.put("q9", 9, "z1")
    held.put("q5", 5, "m1")
    assert len(held) == 6
    assert [held.take() for _ in range(6)] == ["z0", "z1", "m0", "m1", "a0", "a1"]
    assert len(held) == 0
    with pytest.raises(IndexError):
        held.take()


def test_held_messages_never_hand_out_a_queues_later_message_first() -> None:
    """A queue's position moves past what is handed out: a later message of a queue first would let a
    commit pass an earlier one not handed out yet. So within a queue it is put order, whatever the
    priorities (a top level may hold several priorities when a topic has fewer than 10 levels)."""
    held: HeldMessages[str] = HeldMessages()
    held.put("top", 8, "t0")
    held.put("top", 9, "t1")
    held.put("low", 3, "l0")
    assert [held.take() for _ in range(3)] == ["t0", "t1", "l0"]


def test_held_messages_without_priorities_keep_put_order() -> None:
    held: HeldMessages[int] = HeldMessages()
    for i in range(50):
        held.put(f"q{i % 7}", 0, i)
    assert [held.take() for _ in range(50)] == list(range(50))


@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 9)), max_size=200), st.integers(0, 10))
def test_held_messages_properties(puts: list[tuple[int, int]], interleave: int) -> None:
    """Whatever is put, with takes in between: every item comes out once; each queue's items in put
    order; and each take is of the highest priority among the queues' oldest held items."""
    held: HeldMessages[tuple[int, int, int]] = HeldMessages()
    pending: dict[int, list[tuple[int, int, int]]] = {}
    out: list[tuple[int, int, int]] = []

    def take() -> None:
        heads = [items[0] for items in pending.values() if items]
        got = held.take()
        assert got[1] == max(h[1] for h in heads)
        assert got == pending[got[0]].pop(0)
        out.append(got)

    for i, (queue, priority) in enumerate(puts):
        item = (queue, priority, i)
        held.put(queue, priority, item)
        pending.setdefault(queue, []).append(item)
        if interleave and i % interleave == 0:
            take()
    while len(held):
        take()
    assert sorted(out, key=lambda t: t[2]) == [(q, p, i) for i, (q, p) in enumerate(puts)]


def test_topic_config_levels() -> None:
    config = TopicConfig("p", read_queues=12, write_queues=12, priority_levels=5)
    assert [config.level_of(q) for q in range(12)] == [0, 1, 2, 3, 4] * 2 + [0, 1]
    assert [config.level_for(p) for p in range(10)] == [0, 1, 2, 3, 4, 4, 4, 4, 4, 4]  # the top level above it
    plain = TopicConfig("plain", read_queues=4, write_queues=4)
    assert plain.level_of(3) == 0 and plain.level_for(7) == 0
    assert '"priority_levels":5' in config.to_json() and "priority_levels" not in plain.to_json()
    for bad in (1, 11, 0, True, 2.0, "3"):
        with pytest.raises(MQClientError, match="priority_levels"):
            TopicConfig("p", read_queues=12, write_queues=12, priority_levels=bad)  # type: ignore[arg-type]
    with pytest.raises(MQClientError, match="at least 10 read and write queues"):
        TopicConfig("p", read_queues=16, write_queues=8, priority_levels=10)


def test_round_robin_spreads_within_a_level() -> None:
    """Over many rounds each queue of a level is read first about as often as the others."""
    queues = _queues("p", 20)
    firsts = [priority_order(queues, {"p": 10}, start)[0].queue_id for start in range(300)]
    assert set(firsts) == {9, 19} and abs(firsts.count(9) - firsts.count(19)) <= 1


def test_top_levels_first_pulls_only_a_priority_topics_highest_ready_level() -> None:
    from mq.consumer.priority import top_levels_first

    p = [MessageQueue("P", "b", i) for i in range(6)]  # 3 levels: queues 2 and 5 hold level 2
    plain = [MessageQueue("Plain", "b", i) for i in range(2)]
    levels = {"P": 3}
    same = lambda q: q  # noqa: E731 - the queues are their own MessageQueue here
    assert top_levels_first([*plain, *p], levels, same) == [p[2], p[5], *plain]
    # level 2 caught up (its waiters hold its queues, so they are not ready): level 1 is pulled next
    assert top_levels_first([p[0], p[1], p[3], p[4], *plain], levels, same) == [p[1], p[4], *plain]
    assert top_levels_first([p[0], p[3]], levels, same) == [p[0], p[3]]
    # without priority topics the ready list is pulled as it is
    assert top_levels_first([*plain], levels, same) == plain
    assert top_levels_first([*plain, *p], {}, same) == [*plain, *p]
