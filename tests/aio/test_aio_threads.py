"""No ``mq.aio`` class starts a thread (issue 16): the threads of the process are the same before, during
and after a full round trip of each class on real Redis (the test starts none of its own; threads of
earlier tests that end meanwhile do not count)."""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, LocalTransactionState, Message, aio
from tests.helpers import QUIET_PERIOD_S


async def _maybe(value: Any) -> Any:
    """``value``, awaited when it is awaitable (for methods that may be plain or coroutines)."""
    return await value if inspect.isawaitable(value) else value


async def _send(url: str, ns: str, topic: str, n: int) -> None:
    async with aio.Producer("p", url, namespace=ns) as producer:
        for i in range(n):
            await producer.send(Message(topic, b"%d" % i))


async def admin_round_trip(url: str, ns: str, threads: Callable[[], None]) -> None:
    async with aio.Admin(url, ns) as admin:
        await admin.create_topic("A", read_queues=2, write_queues=2)
        await _send(url, ns, "A", 3)
        status = await admin.topic_status("A")
        assert sum(s.max_offset for s in status.values()) == 3
        assert [m.body for m in await admin.messages("A", 0, 0)] + [m.body for m in await admin.messages("A", 1, 0)]
        threads()


async def producer_round_trip(url: str, ns: str, threads: Callable[[], None]) -> None:
    async with aio.Admin(url, ns) as admin, aio.Producer("p", url, namespace=ns) as producer:
        await admin.create_topic("A", read_queues=2, write_queues=2)
        r = await producer.send(Message("A", b"one"))
        await producer.send_batch([Message("A", b"b%d" % i) for i in range(3)])
        await producer.send_oneway(Message("A", b"oneway"))
        found = await admin.query_message("A", r.msg_id)
        assert found is not None and found.body == b"one"
        threads()


async def transaction_producer_round_trip(url: str, ns: str, threads: Callable[[], None]) -> None:
    async def checker(msg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    async def executor(msg: Any, arg: Any) -> LocalTransactionState:
        return LocalTransactionState.COMMIT_MESSAGE

    async with aio.Admin(url, ns) as admin, aio.TransactionProducer("tx", url, namespace=ns, checker=checker) as tp:
        await admin.create_topic("A", read_queues=2, write_queues=2)
        r = await tp.send_message_in_transaction(Message("A", b"tx"), executor)
        assert r.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE and r.queue_offset >= 0
        threads()


async def _three_received(fetch: Callable[[], Awaitable[list[bytes]]]) -> None:
    """Call ``fetch`` until it gave the three messages ``_send`` sent, then for the quiet period (each once)."""
    got: list[bytes] = []
    with anyio.fail_after(20):
        while len(got) < 3:
            got += await fetch()
    quiet_until = time.monotonic() + QUIET_PERIOD_S  # a duplicate would come in it
    while time.monotonic() < quiet_until:
        got += await fetch()
    assert sorted(got) == [b"0", b"1", b"2"]


async def push_consumer_round_trip(url: str, ns: str, threads: Callable[[], None]) -> None:
    got: list[bytes] = []

    async def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def new_ones() -> list[bytes]:
        await anyio.sleep(0.05)  # the poll interval of _three_received's bounded wait
        taken = got[:]
        del got[:]
        return taken

    async with aio.Admin(url, ns) as admin:
        await admin.create_topic("A", read_queues=2, write_queues=2)
        consumer = aio.PushConsumer("g", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        await _maybe(consumer.subscribe("A", "*"))
        await _maybe(consumer.register_message_listener(listener))
        async with consumer:
            await _send(url, ns, "A", 3)
            await _three_received(new_ones)
            threads()


async def pull_consumer_round_trip(url: str, ns: str, threads: Callable[[], None]) -> None:
    async with aio.Admin(url, ns) as admin:
        await admin.create_topic("A", read_queues=2, write_queues=2)
        await _send(url, ns, "A", 3)
        consumer = aio.PullConsumer("g", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        await _maybe(consumer.subscribe("A", "*"))

        async def polled() -> list[bytes]:
            return [m.body for m in await consumer.poll(timeout_s=0.5)]

        async with consumer:
            await _three_received(polled)
            await consumer.commit()
            threads()


async def simple_consumer_round_trip(url: str, ns: str, threads: Callable[[], None]) -> None:
    async with aio.Admin(url, ns) as admin:
        await admin.create_topic("A", read_queues=2, write_queues=2)
        await _send(url, ns, "A", 3)
        consumer = aio.SimpleConsumer(
            "g",
            url,
            namespace=ns,
            subscriptions={"A": "*"},
            await_duration_s=0.5,
            consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
        )

        async def received() -> list[bytes]:
            views = await consumer.receive(max_messages=3, invisible_duration_s=10)
            for view in views:
                await consumer.ack(view)
            return [v.body for v in views]

        async with consumer:
            await _three_received(received)
            threads()


ROUND_TRIPS = {
    "Admin": admin_round_trip,
    "Producer": producer_round_trip,
    "TransactionProducer": transaction_producer_round_trip,
    "PushConsumer": push_consumer_round_trip,
    "PullConsumer": pull_consumer_round_trip,
    "SimpleConsumer": simple_consumer_round_trip,
}


def test_every_class_has_a_round_trip_here() -> None:
    assert set(ROUND_TRIPS) == set(aio.__all__)


@pytest.mark.anyio
@pytest.mark.parametrize("cls", sorted(ROUND_TRIPS))
async def test_no_thread_is_started(cls: str, redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    before = set(threading.enumerate())
    during: list[set[threading.Thread]] = []
    await ROUND_TRIPS[cls](redis_server.url, namespace, lambda: during.append(set(threading.enumerate())))
    # a thread ending at shutdown is gone within a moment; one still running never goes
    deadline = time.monotonic() + 2.0
    while set(threading.enumerate()) - before and time.monotonic() < deadline:
        time.sleep(0.02)
    after = set(threading.enumerate())
    assert during, "the round trip reached its end"
    assert {t.name for t in during[0] - before} == set(), "threads started during the round trip"
    assert {t.name for t in after - before} == set(), "threads left running after the round trip"
