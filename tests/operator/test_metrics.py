"""Prometheus metrics: the broker's namespace series with correct values, and client histograms."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    LocalTransactionState,
    Message,
    MessageQueue,
    Producer,
    PushConsumer,
    TransactionProducer,
)
from mq.observe.metrics import enable_client_metrics
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService
from scheduler.metrics import serve_metrics
from tests.helpers import admin_once
from tests.leaks import open_sockets, owned
from tests.procs import wait_for
from tests.servers import free_port


def _scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}


def test_broker_metrics_have_the_right_values(redis_server, namespace: str) -> None:
    url = redis_server.url
    admin = owned(Admin(url, namespace))
    admin.create_topic("M", read_queues=2, write_queues=2)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(10):
            producer.send(Message("M", b"%d" % i), queue=MessageQueue("M", "broker-a", i % 2))
        producer.send(Message("M", b"later", deliver_time_ms=int(time.time() * 1000) + 3_600_000))  # timer backlog 1
    owned(Store(Connection(url, namespace))).commit_offsets(
        "lagging", {MessageQueue("M", "broker-a", 0): 2, MessageQueue("M", "broker-a", 1): 5}
    )
    failing = PushConsumer("dead-letters", url, namespace=namespace, max_reconsume_times=0)
    failing.subscribe("M", "*")
    failing.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    unsure = TransactionProducer("tx", url, namespace=namespace, checker=lambda m: LocalTransactionState.UNKNOW)
    with BrokerService(url, namespace, BrokerConfig(message_delay_level="100ms")), failing, unsure as tp:
        wait_for(lambda: MessageQueue("M", "broker-a", 0) in failing.assigned_queues(), 10, "the failing group's queue 0")
        with Producer("p2", url, namespace=namespace) as producer:
            producer.send(Message("M", b"poison"), queue=MessageQueue("M", "broker-a", 0))
        tp.send_message_in_transaction(
            Message("M", b"half"), lambda m, a: LocalTransactionState.UNKNOW, check_immunity_time_s=3600
        )
        wait_for(lambda: len(admin.dlq_messages("dead-letters")) == 1, 10, "the forced dead letter")
        port = free_port()
        with serve_metrics(port, url, namespace):
            m = _scrape(port)
    assert m[("rocketredis_topic_messages", (("topic", "M"),))] == 11
    assert m[("rocketredis_group_lag", (("group", "lagging"), ("queue", "0"), ("topic", "M")))] == 6 - 2  # 5 + poison on queue 0
    assert m[("rocketredis_group_lag", (("group", "lagging"), ("queue", "1"), ("topic", "M")))] == 5 - 5
    assert m[("rocketredis_dlq_messages", (("group", "dead-letters"),))] == 1
    assert m[("rocketredis_timer_backlog", ())] == 1
    assert m[("rocketredis_half_backlog", ())] == 1
    assert m[("rocketredis_brokers_healthy", ())] == 1


def test_group_lag_follows_a_real_consumer(redis_server, namespace: str) -> None:
    """The lag series after a push consumer consumed and committed (0), then after 3 more sends (3)."""
    url = redis_server.url
    admin_once(url, namespace).create_topic("L", read_queues=2, write_queues=2)
    got: list[bytes] = []
    consumer = PushConsumer("readers", url, namespace=namespace)
    consumer.subscribe("L", "*")

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer.register_message_listener(listener)
    port = free_port()
    server = serve_metrics(port, url, namespace)

    def lag() -> float:
        series = _scrape(port).items()
        return sum(v for (name, labels), v in series if name == "rocketredis_group_lag" and ("group", "readers") in labels)

    with server, Producer("p", url, namespace=namespace) as producer:
        with consumer:
            wait_for(lambda: any(q.topic == "L" for q in consumer.assigned_queues()), 10, "the consumer's queues")
            for i in range(10):
                producer.send(Message("L", b"%d" % i))
            wait_for(lambda: len(got) == 10, 10, "the consumer to get all 10")
        assert lag() == 0  # committed at shutdown
        for i in range(3):
            producer.send(Message("L", b"more-%d" % i))
        assert lag() == 3


def test_client_metrics_record_sends_consumption_and_rebalances(redis_server, namespace: str) -> None:
    registry = CollectorRegistry()
    import mq.observe.metrics

    mq.observe.metrics.CLIENT_METRICS = None
    try:
        port = free_port()
        enable_client_metrics(port, registry=registry)
        url = redis_server.url
        admin_once(url, namespace).create_topic("C", read_queues=2, write_queues=2)
        got: list[bytes] = []
        consumer = PushConsumer("cg", url, namespace=namespace)
        consumer.subscribe("C", "*")
        consumer.register_message_listener(
            lambda msgs, ctx: (got.extend(m.body for m in msgs), ConsumeConcurrentlyStatus.CONSUME_SUCCESS)[1]
        )
        with consumer, Producer("p", url, namespace=namespace) as producer:
            wait_for(lambda: len([q for q in consumer.assigned_queues() if q.topic == "C"]) == 2, 10, "both queues")
            for i in range(7):
                producer.send(Message("C", b"%d" % i))
            wait_for(lambda: len(got) == 7, 10, "7 consumed")
        m = _scrape(port)
    finally:
        mq.observe.metrics.close_client_metrics_server()
        mq.observe.metrics.CLIENT_METRICS = None
    assert m[("rocketredis_send_latency_seconds_count", (("topic", "C"),))] == 7
    assert m[("rocketredis_consume_latency_seconds_count", (("group", "cg"), ("topic", "C")))] == 7
    assert m[("rocketredis_rebalance_total", (("group", "cg"),))] >= 1


def test_broker_stats_snapshot_for_admins(redis_server, namespace: str) -> None:
    url = redis_server.url
    admin = owned(Admin(url, namespace))
    admin.create_topic("St", read_queues=2, write_queues=2)
    assert admin.broker_stats() is None
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(4):
            producer.send(Message("St", b"%d" % i))
    owned(Store(Connection(url, namespace))).commit_offsets("g", {MessageQueue("St", "broker-a", 0): 0})
    with BrokerService(url, namespace, BrokerConfig(stats_interval_s=0.5)) as service:
        wait_for(lambda: admin.broker_stats() is not None, 5, "a stats snapshot")
    stats = admin.broker_stats()
    assert stats is not None
    assert stats["by"] == service.id and stats["topic_messages"] == {"St": 4}
    assert stats["group_lag"] == {"g/St": 2} and stats["timer_backlog"] == 0


def test_closing_the_metrics_server_stops_it_and_closes_its_connection(redis_server, namespace: str) -> None:
    """serve_metrics used to return only the registry: its HTTP server and store connection lived until
    the process ended (the leak check found the connection open after each metrics test)."""
    port = free_port()
    server = serve_metrics(port, redis_server.url, namespace)
    assert ("rocketredis_timer_backlog", ()) in _scrape(port)
    assert open_sockets(server._store.conn) == 1
    server.close()
    assert open_sockets(server._store.conn) == 0
    with pytest.raises(OSError):
        _scrape(port)
