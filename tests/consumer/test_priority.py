"""Priority messages [RocketMQ 5.4 RIP-80] through the consumers (D142): with a backlog of 10 000
mixed-priority messages, the first 1 000 handed out are the highest-priority ones."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)
from mq.errors import MQClientError
from mq.model.queue import MessageQueue
from tests.leaks import owned
from tests.procs import wait_for
from tests.servers import RedisServer

BACKLOG = 10_000
FIRST = 1_000


def send_backlog(url: str, namespace: str, topic: str, n: int = BACKLOG, seed: int = 31) -> list[int]:
    """Send ``n`` messages of random priorities 0..9 (in random order); their priorities, as sent."""
    rng = random.Random(seed)
    priorities = [rng.randrange(10) for _ in range(n)]
    with Producer("p", url, namespace=namespace) as producer:
        futures = [producer.send_async(Message(topic, b"%d" % i, priority=p)) for i, p in enumerate(priorities)]
        for f in futures:
            f.result(timeout=60)
    return priorities


def top(priorities: list[int], n: int = FIRST) -> list[int]:
    """The ``n`` highest priorities of ``priorities``, highest first."""
    return sorted(priorities, reverse=True)[:n]


@pytest.fixture
def backlog(redis_server: RedisServer, namespace: str) -> Iterator[tuple[str, list[int]]]:
    """Topic ``P`` (10 levels, 10 queues: one a level) holding the 10 000-message backlog."""
    admin = owned(Admin(redis_server.url, namespace))
    admin.create_topic("P", read_queues=10, write_queues=10, priority_levels=10)
    priorities = send_backlog(redis_server.url, namespace, "P")
    stats = admin.topic_status("P")
    # each queue holds exactly its level's messages
    assert {mq.queue_id: s.stored for mq, s in stats.items()} == {p: c for p, c in Counter(priorities).items()}
    yield redis_server.url, priorities


def test_simple_consumer_hands_out_the_highest_priorities_first(backlog: tuple[str, list[int]], namespace: str) -> None:
    url, priorities = backlog
    sc = SimpleConsumer(
        "gs", url, namespace=namespace, subscriptions={"P": "*"}, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
    )
    got: list[int] = []
    with sc:
        while len(got) < FIRST:
            views = sc.receive(max_messages=32, invisible_duration_s=60)
            assert views, "the backlog ran dry"
            got += [v.priority for v in views]
    assert got[:FIRST] == top(priorities)  # the highest ones, highest first
    assert got == sorted(got, reverse=True)  # never a lower one before a higher one


def test_pull_consumer_hands_out_the_highest_priorities_first(backlog: tuple[str, list[int]], namespace: str) -> None:
    """The pull consumer hands out the highest priority among what it holds: once it holds the backlog
    (1 000 a queue at most, its flow control), the first 1 000 polled are the highest ones."""
    url, priorities = backlog
    per_queue = Counter(priorities)
    expected_held = sum(min(c, 1000) for c in per_queue.values())
    consumer = PullConsumer("gp", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=50)
    consumer.subscribe("P")
    got: list[int] = []
    with consumer:
        # the consumer's own buffer (internal): what it holds once the pulls of every queue came in
        wait_for(lambda: len(consumer._buffer) >= expected_held, 30, "the backlog held")
        while len(got) < FIRST:
            msgs = consumer.poll(timeout_s=5)
            assert msgs, "nothing polled"
            got += [m.priority for m in msgs]
        consumer.commit()
        committed = {q: consumer.committed(MessageQueue("P", "broker-a", q)) for q in range(10)}
    assert got[:FIRST] == top(priorities)
    assert got == sorted(got, reverse=True)
    # offsets stay per queue: the commit covers exactly what was polled of each queue
    polled = Counter(got)
    assert committed == {q: polled.get(q, 0) for q in range(10)}


def test_push_consumer_hands_out_the_highest_priorities_first(backlog: tuple[str, list[int]], namespace: str) -> None:
    url, priorities = backlog
    got: list[int] = []

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        got.extend([m.priority for m in msgs])  # one list.extend: atomic under the GIL
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("gpush", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("P")
    consumer.register_message_listener(listener)
    with consumer:
        wait_for(lambda: len(got) >= FIRST, 60, "the first 1 000 deliveries")
    # the 1 000 highest priorities, in some order: the pool's 20 threads run concurrent listener calls
    # in no set order, so a call of the next level may end before the last calls of the one above
    assert sorted(got[:FIRST], reverse=True) == top(priorities)


@pytest.mark.anyio
async def test_asyncio_push_consumer_hands_out_the_highest_priorities_first(
    backlog: tuple[str, list[int]], namespace: str
) -> None:
    """The asyncio push consumer pulls through the same plan (``top_levels_first``) as the sync one."""
    import asyncio

    from mq.aio import PushConsumer as AioPushConsumer

    url, priorities = backlog
    got: list[int] = []

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        got.extend([m.priority for m in msgs])
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = AioPushConsumer("gaiopush", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("P")
    consumer.register_message_listener(listener)
    async with consumer:
        for _ in range(600):
            if len(got) >= FIRST:
                break
            await asyncio.sleep(0.1)
    assert len(got) >= FIRST, f"only {len(got)} delivered in 60 s"
    assert sorted(got[:FIRST], reverse=True) == top(priorities)


def test_simple_and_pull_priorities_with_fewer_levels_and_a_plain_topic(redis_server: RedisServer, namespace: str) -> None:
    """3 levels over 6 queues (priorities above 2 share the top level, in queue order) beside a plain
    topic read by the same simple consumer: the top level first, the plain topic with level 0."""
    url = redis_server.url
    admin = owned(Admin(url, namespace))
    admin.create_topic("L", read_queues=6, write_queues=6, priority_levels=3)
    admin.create_topic("Plain", read_queues=2, write_queues=2)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(12):
            producer.send(Message("Plain", b"plain%d" % i))
        for p in (0, 9, 1, 5, 2, 0, 1, 9):
            result = producer.send(Message("L", b"L%d" % p, priority=p))
            assert result.message_queue.queue_id % 3 == min(p, 2)
    sc = SimpleConsumer(
        "g3", url, namespace=namespace, subscriptions={"L": "*", "Plain": "*"}, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
    )
    with sc:
        first = sc.receive(max_messages=4, invisible_duration_s=60)
    assert sorted(v.priority for v in first) == [2, 5, 9, 9]  # the top level: priorities 2, 5, 9 and 9
    assert all(v.topic == "L" for v in first)


def test_fifo_consumption_of_a_priority_topic_is_refused(redis_server: RedisServer, namespace: str) -> None:
    from mq.consumer.simple_core import receive_round_op
    from mq.store import Store
    from mq.store.connection import Connection

    store = owned(Store(Connection(redis_server.url, namespace)))
    queues = [MessageQueue("P", "broker-a", q) for q in range(2)]
    op = receive_round_op(
        store, "g", queues, start=0, want=1, now_ms=0, invisible_ms=1000, max_attempts=1,
        filter_of=lambda q: ("", ""), fifo=True, levels={"P": 2},
    )  # fmt: skip
    with pytest.raises(MQClientError, match="FIFO"):
        store.run(op)
