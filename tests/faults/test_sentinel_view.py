"""Following Sentinel's view (D76, D77): clients leave a master the sentinels no longer name, even one
that still answers, and a send rides out a failover within its time budget.

The sentinels are re-pointed with ``SENTINEL REMOVE`` / ``MONITOR`` to another server while the old
master stays up and writable — what an old master is to its clients after a partition heals, before
Sentinel demotes it — so nothing but the sentinels' answer tells the clients to move.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer, SendStatus
from mq.store import Store
from mq.store.connection import Connection
from tests.helpers import blocked_readers, wait_for_async
from tests.procs import wait_for
from tests.servers import RedisServer, SentinelProcs

pytestmark = [pytest.mark.ha, pytest.mark.slow]


@pytest.fixture
def other() -> Iterator[RedisServer]:
    """A standalone server the sentinels will be told is the master."""
    with RedisServer() as server:
        yield server


def _repoint(topology: SentinelProcs, port: int) -> None:
    """Make every sentinel name the server on ``port`` as master (the old one keeps running as master)."""
    for s in topology.sentinels:
        with s.probe() as c:
            c.execute_command("SENTINEL", "REMOVE", topology.MASTER_NAME)
            c.execute_command("SENTINEL", "MONITOR", topology.MASTER_NAME, "127.0.0.1", port, 2)


def _stored(url: str, namespace: str) -> list[bytes]:
    conn = Connection(url, namespace)
    try:
        return [m.body for m in Store(conn).read("t", 0, 0, 1000)]
    finally:
        conn.close()


def test_producer_leaves_a_master_the_sentinels_no_longer_name(
    sentinel: SentinelProcs, other: RedisServer, namespace: str
) -> None:
    old = sentinel.master
    for url in (sentinel.url, other.url):
        Admin(url, namespace).create_topic("t", read_queues=1, write_queues=1)
    with Producer("p", sentinel.url, namespace=namespace) as producer:
        assert producer.send(Message("t", b"before")).status is SendStatus.SEND_OK
        _repoint(sentinel, other.port)
        i = 0

        def moved() -> bool:
            nonlocal i
            i += 1
            producer.send(Message("t", b"m%d" % i))
            return bool(_stored(other.url, namespace))

        wait_for(moved, 10, "a send to land on the master the sentinels name now")
        on_old = len(_stored(old.url, namespace))
        for _ in range(5):
            assert producer.send(Message("t", b"after")).status is SendStatus.SEND_OK
    assert len(_stored(old.url, namespace)) == on_old  # nothing more went to the old master
    assert _stored(other.url, namespace)[-5:] == [b"after"] * 5


def test_async_client_leaves_a_master_the_sentinels_no_longer_name(sentinel: SentinelProcs, other: RedisServer) -> None:
    async def go() -> None:
        conn = Connection(sentinel.url, "ns")
        try:
            await conn.async_client.set("k", "old")
            _repoint(sentinel, other.port)
            deadline = time.monotonic() + 10
            with other.client() as seen:
                while seen.get("k") is None and time.monotonic() < deadline:
                    await conn.async_client.set("k", "new")
                    await asyncio.sleep(0.05)
                assert seen.get("k") == b"new"
        finally:
            await conn.aclose()

    asyncio.run(go())


def test_consumer_follows_the_master_the_sentinels_name(sentinel: SentinelProcs, other: RedisServer, namespace: str) -> None:
    for url in (sentinel.url, other.url):
        Admin(url, namespace).create_topic("t", read_queues=1, write_queues=1)
    seen: list[bytes] = []
    consumer = PushConsumer("g", sentinel.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("t")
    consumer.register_message_listener(
        lambda msgs, ctx: seen.extend(m.body for m in msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    )
    consumer.start()
    try:
        with Producer("p", sentinel.url, namespace=namespace) as producer:
            producer.send(Message("t", b"on-old"))
        wait_for(lambda: b"on-old" in seen, 15, "the first message consumed")
        _repoint(sentinel, other.port)
        with Producer("p", other.url, namespace=namespace) as direct:
            for i in range(3):
                direct.send(Message("t", b"on-new-%d" % i))
        # the long-poll waiters held connections to the old master: they must move to the new one
        wait_for(lambda: b"on-new-2" in seen, 15, "a message stored on the new master consumed")
    finally:
        consumer.shutdown()


def test_send_rides_out_a_crash_failover_within_its_budget(sentinel: SentinelProcs, namespace: str) -> None:
    Admin(sentinel.url, namespace).create_topic("t", read_queues=1, write_queues=1)
    with Producer("p", sentinel.url, namespace=namespace) as producer:
        producer.send(Message("t", b"before"))
        old = sentinel.kill_master()
        # no master answers until the sentinels promote the replica: the send waits for it, within 30 s
        result = producer.send(Message("t", b"during"), timeout_s=30)
        assert result.status is SendStatus.SEND_OK
        new = sentinel.wait_failover(old.port)
    assert _stored(new.url, namespace)[-1] == b"during"


def test_asyncio_consumer_follows_the_master_the_sentinels_name(
    sentinel: SentinelProcs, other: RedisServer, namespace: str
) -> None:
    from mq import aio

    for url in (sentinel.url, other.url):
        Admin(url, namespace).create_topic("t", read_queues=1, write_queues=1)

    old_url = sentinel.master.url

    async def go() -> None:
        seen: list[bytes] = []

        async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
            seen.extend(m.body for m in msgs)
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = aio.PushConsumer("g", sentinel.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        consumer.subscribe("t")
        consumer.register_message_listener(listener)
        await consumer.start()
        try:
            with Producer("p", sentinel.url, namespace=namespace) as producer:
                producer.send(Message("t", b"on-old"))
            deadline = time.monotonic() + 15
            while b"on-old" not in seen and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert b"on-old" in seen
            # the waiters (the topic's and the retry topic's) are blocked in their long polls on the old master now
            await wait_for_async(lambda: blocked_readers(old_url) >= 2, 10, "the waiters blocked on the old master")
            _repoint(sentinel, other.port)
            with Producer("p", other.url, namespace=namespace) as direct:
                for i in range(3):
                    direct.send(Message("t", b"on-new-%d" % i))
            deadline = time.monotonic() + 15
            while b"on-new-2" not in seen and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert b"on-new-2" in seen
        finally:
            await consumer.shutdown()

    asyncio.run(go())


def test_a_blocked_read_moves_to_the_new_master(sentinel: SentinelProcs, other: RedisServer) -> None:
    """A read blocked on the old master is woken by the view and, retried, waits on the new one: a
    value pushed there answers it (on its own it would block for its 20 s)."""
    conn = Connection(sentinel.url, "ns", socket_timeout_s=30)
    held = conn.held()
    try:
        result: list[Any] = []
        blocked = threading.Thread(target=lambda: result.append(held.client.blpop(["wake"], timeout=20)))
        blocked.start()
        wait_for(lambda: blocked_readers(sentinel.master.url, "blpop") == 1, 10, "the read blocked on the old master")
        _repoint(sentinel, other.port)
        wait_for(lambda: blocked_readers(other.url, "blpop") == 1, 10, "the read retried on the new master")
        with other.client() as new:
            new.rpush("wake", "on-new")
        blocked.join(10)
        assert result == [(b"wake", b"on-new")]
    finally:
        held.release_held()
        conn.close()


def test_an_asyncio_blocked_read_moves_to_the_new_master(sentinel: SentinelProcs, other: RedisServer) -> None:
    old_url = sentinel.master.url

    async def go() -> None:
        conn = Connection(sentinel.url, "ns", socket_timeout_s=30)
        try:
            await conn.async_client.ping()
            blocked = asyncio.ensure_future(conn.async_client.blpop(["wake"], timeout=20))
            await wait_for_async(lambda: blocked_readers(old_url, "blpop") == 1, 10, "the read blocked on the old master")
            _repoint(sentinel, other.port)
            await wait_for_async(lambda: blocked_readers(other.url, "blpop") == 1, 10, "the read retried on the new master")
            with other.client() as new:
                new.rpush("wake", "on-new")
            assert tuple(await asyncio.wait_for(blocked, 10)) == (b"wake", b"on-new")
        finally:
            await conn.aclose()

    asyncio.run(go())


def test_asyncio_send_rides_out_a_crash_failover_within_its_budget(sentinel: SentinelProcs, namespace: str) -> None:
    from mq import aio

    Admin(sentinel.url, namespace).create_topic("t", read_queues=1, write_queues=1)

    async def go() -> None:
        async with aio.Producer("p", sentinel.url, namespace=namespace) as producer:
            await producer.send(Message("t", b"before"))
            old = sentinel.kill_master()
            result = await producer.send(Message("t", b"during"), timeout_s=30)  # its retries pause in the loop
            assert result.status is SendStatus.SEND_OK
            new = await asyncio.to_thread(sentinel.wait_failover, old.port)
            assert _stored(new.url, namespace)[-1] == b"during"

    asyncio.run(go())
