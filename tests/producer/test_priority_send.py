"""Sending priority messages (D142): every way of sending puts a message in a queue of its level, and
the stored message keeps its priority (query, read)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from mq import Admin, LocalTransactionState, Message, MessageQueue, Producer, TransactionProducer, aio
from mq.errors import MQClientError
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService
from tests.leaks import owned
from tests.procs import wait_for

#: 4 levels over 8 queues: queues 3 and 7 hold the top level (priorities 3..9), 0 and 4 level 0.
LEVELS, QUEUES = 4, 8


def level_of(result_queue: MessageQueue) -> int:
    return result_queue.queue_id % LEVELS


@pytest.fixture
def admin(backend_url: str, namespace: str) -> Iterator[Admin]:
    with Admin(backend_url, namespace) as a:
        a.create_topic("P", read_queues=QUEUES, write_queues=QUEUES, priority_levels=LEVELS)
        yield a


def test_sync_async_oneway_and_batch_go_to_their_level(admin: Admin, backend_url: str, namespace: str) -> None:
    with Producer("pg", backend_url, namespace=namespace) as producer:
        for p in range(10):
            for _ in range(3):  # round-robin among the level's queues
                r = producer.send(Message("P", b"s%d" % p, priority=p))
                assert level_of(r.message_queue) == min(p, LEVELS - 1)
        futures = {p: producer.send_async(Message("P", b"a%d" % p, priority=p)) for p in range(10)}
        for p, f in futures.items():
            assert level_of(f.result(10).message_queue) == min(p, LEVELS - 1)
        batch = producer.send_batch([Message("P", b"b%d" % i, priority=2) for i in range(5)])
        assert level_of(batch.message_queue) == 2
        producer.send_oneway(Message("P", b"oneway", priority=1))
        explicit = producer.send(Message("P", b"explicit", priority=9), queue=MessageQueue("P", "broker-a", 3))
        assert explicit.message_queue.queue_id == 3
        found = admin.query_message("P", futures[6].result().msg_id)
        assert found is not None and found.priority == 6 and found.system_properties["PRIORITY"] == "6"
        assert {m.priority for m in admin.messages("P", batch.message_queue.queue_id, batch.queue_offset)[:5]} == {2}
    # the queues of the top level hold every priority from 3 up, in send order
    top = [m for q in (3, 7) for m in admin.messages("P", q, 0)]
    assert {m.priority for m in top} == set(range(3, 10))
    wait_for(lambda: any(m.body == b"oneway" for q in (1, 5) for m in admin.messages("P", q, 0)), 10, "the oneway send")


def test_queues_used_are_those_of_the_level(admin: Admin, backend_url: str, namespace: str) -> None:
    with Producer("pg", backend_url, namespace=namespace) as producer:
        used = {producer.send(Message("P", b"x", priority=1)).message_queue.queue_id for _ in range(20)}
        plain = {producer.send(Message("P", b"x")).message_queue.queue_id for _ in range(20)}
    assert used == {1, 5} and plain == {0, 4}  # priority 0 stays in level 0 too


def test_transaction_and_delayed_priority_messages(admin: Admin, backend_url: str, namespace: str) -> None:
    commit = LocalTransactionState.COMMIT_MESSAGE
    with TransactionProducer("txg", backend_url, namespace=namespace, checker=lambda m: commit) as tp:
        r = tp.send_message_in_transaction(Message("P", b"tx", priority=5), lambda m, a: commit)
    assert r.local_transaction_state is commit and level_of(r.message_queue) == 3
    found = admin.query_message("P", r.msg_id)
    assert found is not None and found.priority == 5
    with (
        BrokerService(backend_url, namespace, BrokerConfig(message_delay_level="100ms 200ms")),
        Producer("pg", backend_url, namespace=namespace) as producer,
    ):
        due = int(time.time() * 1000) + 200
        delayed = producer.send(Message("P", b"later", priority=2, deliver_time_ms=due))
        assert level_of(delayed.message_queue) == 2
        store = owned(Store(Connection(backend_url, namespace)))
        qid = delayed.message_queue.queue_id
        wait_for(lambda: [m.body for m in store.read("P", qid, 0, 10)] == [b"later"], 10, "the delayed message delivered")
        assert store.read("P", qid, 0, 10)[0].priority == 2


@pytest.mark.anyio
async def test_aio_producer_routes_by_priority(admin: Admin, backend_url: str, namespace: str) -> None:
    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        for p in (0, 1, 2, 3, 9):
            r = await producer.send(Message("P", b"x", priority=p))
            assert level_of(r.message_queue) == min(p, LEVELS - 1)
        batch = await producer.send_batch([Message("P", b"b", priority=3), Message("P", b"c", priority=3)])
        assert level_of(batch.message_queue) == 3
        with pytest.raises(MQClientError, match="selector"):
            await producer.send(Message("P", b"x"), selector=lambda qs, m, a: qs[0])
    admin.create_topic("Plain", read_queues=2, write_queues=2)
    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        with pytest.raises(MQClientError, match="priority 4"):
            await producer.send(Message("Plain", b"x", priority=4))
