"""Retention without a tier is no longer silent (issue 28, item 3): a group whose committed offset falls
below a queue's first offset is told how many messages it never consumed — a WARNING naming the group,
topic, queue and count (once per loss), the counter ``rocketredis_messages_expired_unconsumed_total``,
and ``expired`` beside the lag in ``Admin.consumer_progress``, ``mq group progress`` and the console —
counted once however many broker services trim, against real redis-server processes."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
    SendStatus,
    aio,
)
from mq.cli import main
from mq.console import create_app
from mq.errors import MQBrokerError
from mq.model.topic import TopicConfig
from mq.store import Store, codec
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService
from scheduler.metrics import StoreCollector
from scheduler.retention import apply_retention
from tests.helpers import admin_once, raw_client, snapshot, stays_quiet
from tests.leaks import owned
from tests.procs import wait_for

COUNTER = "rocketredis_messages_expired_unconsumed_total"


@pytest.fixture
def store(backend_url: str, namespace: str) -> Iterator[Store]:
    s = owned(Store(Connection(backend_url, namespace)))
    yield s
    s.conn.close()


def _send(url: str, namespace: str, topic: str, per_queue: dict[int, int]) -> None:
    """``per_queue[q]`` messages into queue ``q`` of ``topic``, each acknowledged SEND_OK."""
    with Producer("p", url, namespace=namespace) as producer:
        for qid, n in per_queue.items():
            for i in range(n):
                result = producer.send(Message(topic, b"m%d" % i, keys=["k%d" % i]), queue=MessageQueue(topic, "broker-a", qid))
                assert result.status is SendStatus.SEND_OK


def _counter(store: Store) -> dict[tuple[str, str], float]:
    """The expired counter's samples as the broker service's metrics endpoint exports them (text format)."""
    registry = CollectorRegistry()
    registry.register(StoreCollector(store, health_timeout_s=10))
    text = generate_latest(registry).decode()
    return {
        (s.labels["group"], s.labels["topic"]): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == COUNTER
    }


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "scheduler.retention" and r.levelno == logging.WARNING]


async def _aio_progress(url: str, namespace: str, group: str, topic: str) -> list[tuple[int, int, int]]:
    async with aio.Admin(url, namespace) as admin:
        return [(r.consumer_offset, r.lag, r.expired) for r in await admin.consumer_progress(group, topic)]


def _trim_all(store: Store) -> int:
    time.sleep(0.01)  # every message stored before now is older than a zero retention
    return apply_retention(store, reserved_time_h=0)


def test_a_group_behind_retention_is_told_what_it_lost(
    backend_url: str, namespace: str, store: Store, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("R", read_queues=2, write_queues=2)
    admin.create_group("lagging")
    _send(backend_url, namespace, "R", {0: 70, 1: 30})
    q0, q1 = MessageQueue("R", "broker-a", 0), MessageQueue("R", "broker-a", 1)
    store.commit_offsets("lagging", {q0: 20, q1: 0})  # consumed 20 of queue 0, nothing of queue 1

    caplog.set_level(logging.WARNING, logger="scheduler.retention")
    assert _trim_all(store) == 100
    assert _warnings(caplog) == [
        "retention removed 50 messages of topic 'R' queue 0 that group 'lagging' had not consumed: they are lost "
        "to it (consume faster, or raise file_reserved_time_h)",
        "retention removed 30 messages of topic 'R' queue 1 that group 'lagging' had not consumed: they are lost "
        "to it (consume faster, or raise file_reserved_time_h)",
    ]

    # today's silent case: lag 0 — now with the loss beside it
    rows = admin.consumer_progress("lagging", "R")
    assert [(r.consumer_offset, r.lag, r.expired) for r in rows] == [(20, 0, 50), (0, 0, 30)]
    assert asyncio.run(_aio_progress(backend_url, namespace, "lagging", "R")) == [(20, 0, 50), (0, 0, 30)]
    assert _counter(store) == {("lagging", "R"): 80.0}

    assert main(["group", "progress", "lagging", "--url", backend_url, "--namespace", namespace]) == 0
    out = capsys.readouterr().out
    header, first, second = out.splitlines()[:3]
    assert header.split() == ["TOPIC", "QUEUE", "BROKER_OFFSET", "CONSUMER_OFFSET", "LAG", "EXPIRED"]
    assert first.split() == ["R", "0", "70", "20", "0", "50"] and second.split() == ["R", "1", "30", "0", "0", "30"]
    assert "total lag: 0" in out
    assert "expired: 80 messages removed by retention before the group consumed them (lost to it)" in out

    with TestClient(create_app(backend_url, namespace), base_url="http://127.0.0.1") as c:
        data = c.get("/api/groups/lagging").json()
        page = c.get("/groups/lagging").text
    assert [(p["queue_id"], p["lag"], p["expired"]) for p in data["progress"]] == [(0, 0, 50), (1, 0, 30)]
    assert data["total_lag"] == 0 and data["total_expired"] == 80
    assert 'id="expired-warning"' in page and "Retention removed 80 messages" in page

    # once per loss: another pass removes nothing and says nothing; new losses add to the count
    caplog.clear()
    assert _trim_all(store) == 0
    assert _warnings(caplog) == []
    _send(backend_url, namespace, "R", {0: 10})
    assert _trim_all(store) == 10
    assert _warnings(caplog) == [
        "retention removed 10 messages of topic 'R' queue 0 that group 'lagging' had not consumed: they are lost "
        "to it (consume faster, or raise file_reserved_time_h)"
    ]
    assert [r.expired for r in admin.consumer_progress("lagging", "R")] == [60, 30]
    assert _counter(store) == {("lagging", "R"): 90.0}
    admin.close()


def _poll(consumer: PullConsumer, n: int) -> list[bytes]:
    got: list[bytes] = []
    deadline = time.monotonic() + 20
    while len(got) < n and time.monotonic() < deadline:
        got += [m.body for m in consumer.poll(timeout_s=0.5)]
    return got


def _behind(url: str, namespace: str) -> PullConsumer:
    """A member of group "behind" on topic L that commits only when told (so its position is exact)."""
    consumer = PullConsumer(
        "behind", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, auto_commit=False, pull_batch_size=4
    )
    consumer.subscribe("L", "*")
    return consumer


def test_a_pull_consumer_that_fell_behind_a_broker_service_retention_resumes_and_is_told(
    backend_url: str, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The issue's case end to end: a real consumer reads 12 of 40 messages and stops, a broker service's
    retention removes the other 28 unread; the group is told 28, and when it resumes it reads the new
    messages only, its lag 0 and its loss still shown."""
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("L", read_queues=1, write_queues=1)
    queue = MessageQueue("L", "broker-a", 0)
    _send(backend_url, namespace, "L", {0: 40})
    with _behind(backend_url, namespace) as consumer:
        assert _poll(consumer, 12) == [b"m%d" % i for i in range(12)]
        consumer.commit()
    assert [(r.consumer_offset, r.lag, r.expired) for r in admin.consumer_progress("behind", "L")] == [(12, 28, 0)]

    caplog.set_level(logging.WARNING, logger="scheduler.retention")
    with BrokerService(backend_url, namespace, BrokerConfig(file_reserved_time_h=0.5 / 3600, retention_interval_s=0.2)):
        wait_for(lambda: admin.topic_status("L")[queue].min_offset == 40, 20, "retention to remove every message")
    assert sum(int(m.split()[2]) for m in _warnings(caplog) if "topic 'L' queue 0 that group 'behind'" in m) == 28
    assert [(r.consumer_offset, r.lag, r.expired) for r in admin.consumer_progress("behind", "L")] == [(12, 0, 28)]

    _send(backend_url, namespace, "L", {0: 5})
    with _behind(backend_url, namespace) as consumer:
        assert _poll(consumer, 5) == [b"m%d" % i for i in range(5)]  # the new ones (bodies restart at m0)
        assert consumer.poll(timeout_s=0.3) == []
        consumer.commit()
    assert [(r.consumer_offset, r.lag, r.expired) for r in admin.consumer_progress("behind", "L")] == [(45, 0, 28)]
    admin.close()


def test_a_group_that_consumed_everything_sees_nothing(
    backend_url: str, namespace: str, store: Store, caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("C", read_queues=2, write_queues=2)
    _send(backend_url, namespace, "C", {0: 25, 1: 15})
    got: list[int] = []
    consumer = PushConsumer("caught-up", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("C", "*")
    consumer.register_message_listener(
        lambda msgs, ctx: (got.extend(1 for _ in msgs), ConsumeConcurrentlyStatus.CONSUME_SUCCESS)[1]
    )
    with consumer:
        wait_for(lambda: len(got) >= 40, 20, "every message consumed")
    assert [r.consumer_offset for r in admin.consumer_progress("caught-up", "C")] == [25, 15]  # committed at shutdown

    caplog.set_level(logging.WARNING, logger="scheduler.retention")
    assert _trim_all(store) == 40
    assert _warnings(caplog) == []
    assert [(r.lag, r.expired) for r in admin.consumer_progress("caught-up", "C")] == [(0, 0), (0, 0)]
    assert _counter(store) == {}
    assert main(["group", "progress", "caught-up", "--url", backend_url, "--namespace", namespace]) == 0
    assert "expired:" not in capsys.readouterr().out
    with TestClient(create_app(backend_url, namespace), base_url="http://127.0.0.1") as c:
        data = c.get("/api/groups/caught-up").json()
        page = c.get("/groups/caught-up").text
    assert data["total_expired"] == 0 and all(p["expired"] == 0 for p in data["progress"])
    assert 'id="expired-warning"' not in page
    admin.close()


def test_two_broker_services_and_a_restart_count_each_loss_once(
    backend_url: str, namespace: str, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    """Two broker services trim the same queues at the same time (several 1 000-message chunks), then a
    third starts after they stop: the count is what was removed unread, exactly, and the WARNINGs of
    all of them add up to it."""
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("D", read_queues=1, write_queues=1)
    _send(backend_url, namespace, "D", {0: 3200})
    store.commit_offsets("slow", {MessageQueue("D", "broker-a", 0): 700})
    caplog.set_level(logging.WARNING, logger="scheduler.retention")
    config = BrokerConfig(file_reserved_time_h=0.5 / 3600, retention_interval_s=0.2)
    with BrokerService(backend_url, namespace, config), BrokerService(backend_url, namespace, config):
        wait_for(lambda: admin.topic_status("D")[MessageQueue("D", "broker-a", 0)].min_offset == 3200, 20, "all trimmed")
        stays_quiet(lambda: len(_warnings(caplog)), "the loss warnings")  # ten more rounds of both: nothing more to count
    told = sum(int(m.split()[2]) for m in _warnings(caplog) if "group 'slow'" in m)
    assert told == 2500
    assert [r.expired for r in admin.consumer_progress("slow", "D")] == [2500]
    assert _counter(store) == {("slow", "D"): 2500.0}

    caplog.clear()
    with BrokerService(backend_url, namespace, config):  # a restarted service finds the count in Redis
        stays_quiet(lambda: len(_warnings(caplog)), "the loss warnings")  # ten rounds: it tells nothing again
    assert _warnings(caplog) == []
    assert _counter(owned(Store(Connection(backend_url, namespace)))) == {("slow", "D"): 2500.0}
    admin.close()


def test_a_trim_that_cannot_count_changes_nothing(backend_url: str, namespace: str, store: Store) -> None:
    """A malformed counter fails the trim before it writes: no message is removed without being counted."""
    admin_once(backend_url, namespace).create_topic("B", read_queues=1, write_queues=1)
    _send(backend_url, namespace, "B", {0: 5})
    store.commit_offsets("g", {MessageQueue("B", "broker-a", 0): 1})
    client = raw_client(backend_url)
    client.hset(store.queue_keys("B", 0).expired, "g", "not a number")
    client.close()
    before = snapshot(backend_url, namespace)
    time.sleep(0.01)  # the clock moves on: the message is older than the trim time
    with pytest.raises(MQBrokerError, match="expired count of group g is not a number"):
        store.trim("B", 0, int(time.time() * 1000))
    assert snapshot(backend_url, namespace) == before


def test_a_purged_dead_letter_queue_is_not_counted_as_expired(redis_server, namespace: str) -> None:
    """``Admin.purge_dlq`` removes by an operator's decision: no expired count for a group reading the DLQ."""
    url = redis_server.url
    admin = owned(Admin(url, namespace))
    store = owned(Store(Connection(url, namespace)))
    store.ensure_topic(TopicConfig("%DLQ%g", 1, 1))  # as the consumer's retry path creates it
    store.put("%DLQ%g", 0, [codec.encode(Message("%DLQ%g", b"d%d" % i), f"id-{i}", 1) for i in range(4)])
    store.commit_offsets("dlq-reader", {MessageQueue("%DLQ%g", "broker-a", 0): 0})
    assert admin.purge_dlq("g") == 4
    assert [r.expired for r in admin.consumer_progress("dlq-reader", "%DLQ%g")] == [0]
    store.conn.close()
    admin.close()
