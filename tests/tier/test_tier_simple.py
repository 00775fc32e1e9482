"""Simple consumers on a half-tiered queue (tier on a folder): a group new to the topic with
FIRST_OFFSET receives the tiered messages first, with its filter, in order, then Redis's with no gap or
duplicate at the boundary — the sync ``SimpleConsumer``, ``mq.aio.SimpleConsumer`` and the RocketMQ 5
endpoint's ``ReceiveMessage`` (all three hand out through ``receive-simple-6.lua`` and
``claim-tiered-3.lua``); a tiered message not acked in time is handed out again from the tier."""

from __future__ import annotations

import asyncio
import contextlib
import pathlib
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mq import Admin, ConsumeFromWhere, MessageSelector, SimpleConsumer, aio
from mq.model.queue import MessageQueue
from mq.proxy.pb import definition
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerService
from tests.helpers import QUIET_PERIOD_S
from tests.leaks import owned
from tests.proxy.test_proxy import _receive, running
from tests.tier_helpers import body_number, send_numbered, tier_config

TOPIC = "tiered-simple"
#: offsets 0..99 in the tier only, 100..119 in Redis only
TIERED, HOT = range(100), range(100, 120)
EVEN = [n for n in [*TIERED, *HOT] if n % 2 == 0]


@pytest.fixture
def half_tiered(backend_url: str, namespace: str, tmp_path: pathlib.Path) -> Iterator[tuple[str, str]]:
    """A one-queue topic whose first 100 messages are in the tier only and the next 20 in Redis only."""
    with Admin(backend_url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    send_numbered(backend_url, namespace, TOPIC, 0, TIERED)
    service = BrokerService(backend_url, namespace, tier_config(f"file://{tmp_path}/tier", hot_retention_s=0.001))
    assert service.tier is not None
    service.start()  # publishes the tier's URL for the consumers
    try:
        service.tier.run()
        send_numbered(backend_url, namespace, TOPIC, 0, HOT)
        store = owned(Store(Connection(backend_url, namespace)))
        assert store.segments(TOPIC, 0)[-1].end == 100 and store.hot_queue(TOPIC, 0).first == 100
        store.conn.close()
        yield backend_url, namespace
    finally:
        service.shutdown()


def _check(numbers: list[int], offsets: list[int]) -> None:
    assert numbers == EVEN and offsets == EVEN  # the group's filter, in order, nothing missing or twice


def test_sync_simple_consumer_reads_the_tier_then_redis(half_tiered: tuple[str, str]) -> None:
    url, ns = half_tiered
    sc = SimpleConsumer(
        "simple-sync",
        url,
        namespace=ns,
        subscriptions={TOPIC: MessageSelector.by_tag("even")},
        await_duration_s=0.2,
        consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
    )
    got = []
    with sc:
        deadline = time.monotonic() + 30
        while len(got) < len(EVEN) and time.monotonic() < deadline:
            for view in sc.receive(max_messages=7, invisible_duration_s=30):
                got.append(view)
                sc.ack(view)
        quiet_until = time.monotonic() + QUIET_PERIOD_S
        while time.monotonic() < quiet_until:
            got += sc.receive(max_messages=7, invisible_duration_s=30)  # a duplicate would show here
    _check([body_number(v.body) for v in got], [v.queue_offset for v in got])
    assert all(v.delivery_attempt == 1 and v.tags == "even" for v in got)


def test_a_tiered_message_not_acked_in_time_is_handed_out_again_from_the_tier(half_tiered: tuple[str, str]) -> None:
    url, ns = half_tiered
    with SimpleConsumer(
        "simple-again", url, namespace=ns, subscriptions={TOPIC: "*"}, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
    ) as sc:
        first = sc.receive(max_messages=3, invisible_duration_s=10)
        assert [v.queue_offset for v in first] == [0, 1, 2]
        store = owned(Store(Connection(url, ns)))
        later = store.server_time_ms() + 11_000  # past their invisible time
        again = store.receive_simple(
            "simple-again", MessageQueue(TOPIC, "broker-a", 0), now_ms=later, invisible_ms=30_000,
            max_messages=3, max_attempts=16, filter_type="", filter_data="", max_scan=64,
        )  # fmt: skip
        store.conn.close()
    assert [(d.offset, d.attempt) for d in again] == [(0, 2), (1, 2), (2, 2)]
    assert [body_number(d.message.body) for d in again if d.message is not None] == [0, 1, 2]


@pytest.mark.anyio
async def test_aio_simple_consumer_reads_the_tier_then_redis(half_tiered: tuple[str, str]) -> None:
    url, ns = half_tiered
    got = []
    async with aio.SimpleConsumer(
        "simple-aio",
        url,
        namespace=ns,
        subscriptions={TOPIC: MessageSelector.by_sql("TAGS = 'even' AND n IS NOT NULL")},
        await_duration_s=0.2,
        consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
    ) as sc:
        deadline = time.monotonic() + 30
        while len(got) < len(EVEN) and time.monotonic() < deadline:
            for view in await sc.receive(7, 30):
                got.append(view)
                await sc.ack(view)
        quiet_until = time.monotonic() + QUIET_PERIOD_S
        while time.monotonic() < quiet_until:
            got += await sc.receive(7, 30)
    _check([body_number(v.body) for v in got], [v.queue_offset for v in got])


@pytest.mark.anyio
async def test_the_endpoints_receive_reads_the_tier_then_redis_with_an_sql_filter(half_tiered: tuple[str, str]) -> None:
    url, ns = half_tiered
    with contextlib.closing(Admin(url, ns)) as admin:
        admin.create_group("simple-proxy", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    got: list[Any] = []
    async with running(url, ns) as r:
        deadline = time.monotonic() + 30
        while len(got) < len(EVEN) and time.monotonic() < deadline:
            status, messages = await _receive(r.stub, "simple-proxy", TOPIC, batch_size=7, poll_s=0, sql="TAGS = 'even'")
            assert status.code in (definition.Code.Value("OK"), definition.Code.Value("MESSAGE_NOT_FOUND"))
            got += messages
        await asyncio.sleep(QUIET_PERIOD_S)
        status, more = await _receive(r.stub, "simple-proxy", TOPIC, batch_size=7, poll_s=0, sql="TAGS = 'even'")
        assert status.code == definition.Code.Value("MESSAGE_NOT_FOUND") and more == []
    _check([body_number(m.body) for m in got], [m.system_properties.queue_offset for m in got])


def test_a_fifo_group_reads_the_tier_one_message_a_group_then_redis(redis_server, namespace: str, tmp_path: pathlib.Path) -> None:  # type: ignore[no-untyped-def]
    """``receive-fifo-6.lua`` over a half-tiered queue: message groups a a b a b in the tier only, then
    b c in Redis — the same batches as on Redis alone (tests/proxy/test_proxy.py's FIFO case), the message
    not acked in time handed out again from the tier."""
    from mq import Message
    from mq.store import codec

    url, tier_url = redis_server.url, f"file://{tmp_path}/tier"
    with Admin(url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    store = owned(Store(Connection(url, namespace)))

    def put(first: int, groups: str) -> None:
        for i, group in enumerate(groups, first):
            message = codec.encode(Message(TOPIC, b"%d" % i), f"id{i}", system_properties={"__SHARDINGKEY": group})
            store.put(TOPIC, 0, [message])

    put(0, "aabab")
    service = BrokerService(url, namespace, tier_config(tier_url, hot_retention_s=0.001))
    assert service.tier is not None
    service.tier.run()
    service._store.publish_settings({"tier_url": tier_url})
    put(5, "bc")
    assert [(s.start, s.end) for s in store.segments(TOPIC, 0)] == [(0, 5)] and store.hot_queue(TOPIC, 0).first == 5
    queue = MessageQueue(TOPIC, "broker-a", 0)
    store.seed_offsets("F", {queue: 0})

    def receive(now_ms: int) -> list[tuple[int, int, bytes]]:
        got = store.receive_simple(
            "F", queue, now_ms=now_ms, invisible_ms=10_000, max_messages=8, max_attempts=5,
            filter_type="", filter_data="", max_scan=64, fifo=True,
        )  # fmt: skip
        return [(d.offset, d.attempt, d.message.body if d.message else b"") for d in got]

    now = store.server_time_ms()
    assert receive(now) == [(0, 1, b"0")]  # stops at the second "a": one message per group per batch
    assert receive(now) == []  # the queue waits while a message is in flight
    assert receive(now + 11_000) == [(0, 2, b"0")]  # not acked in time: again, read from the tier
    assert store.ack_simple("F", queue, 0, now + 11_000 + 10_000, None)
    assert receive(now + 12_000) == [(1, 1, b"1"), (2, 1, b"2")]  # the next "a" and the first "b"
    assert store.ack_simple("F", queue, 1, now + 22_000, None) and store.ack_simple("F", queue, 2, now + 22_000, None)
    assert receive(now + 13_000) == [(3, 1, b"3"), (4, 1, b"4")]  # the tier's last two
    assert store.ack_simple("F", queue, 3, now + 23_000, None) and store.ack_simple("F", queue, 4, now + 23_000, None)
    assert receive(now + 14_000) == [(5, 1, b"5"), (6, 1, b"6")]  # then Redis, no gap
    store.conn.close()
    service.shutdown()
