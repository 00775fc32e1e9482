"""The official RocketMQ 5 Python client (``rocketmq-python-client`` from PyPI) through ``mq proxy``:
its own example programs with only endpoint, topic and group filled in, and small programs of ours
on its API, each in a process of its own (tests/proxy_clients.py)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from mq import Admin, Message, Producer
from mq.consumer import ConsumeConcurrentlyStatus, PushConsumer
from mq.consumer.types import ConsumeFromWhere
from scheduler import BrokerService
from scheduler.config import BrokerConfig
from tests.leaks import owned
from tests.procs import wait_for
from tests.proxy_clients import ProxyProcess, example, json_lines, rr_client, run_python, start_rr_client
from tests.servers import RedisServer

pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


@dataclass
class Env:
    url: str
    namespace: str
    admin: Admin
    proxy: ProxyProcess
    workdir: pathlib.Path

    def topic(self, queues: int = 4) -> str:
        name = f"t{uuid.uuid4().hex[:8]}"
        self.admin.create_topic(name, read_queues=queues, write_queues=queues)
        return name

    def group(self, *, fifo: bool = False) -> str:
        name = f"g{uuid.uuid4().hex[:8]}"
        self.admin.create_group(name, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, fifo=fifo)
        return name

    def stored(self, topic: str) -> list:  # type: ignore[type-arg]
        config = self.admin.topic_config(topic)
        return [m for q in range(config.queue_count) for m in self.admin.messages(topic, q, 0)]


@pytest.fixture(scope="module")
def env(redis_server: RedisServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    namespace = f"px{uuid.uuid4().hex[:8]}"
    workdir = tmp_path_factory.mktemp("proxy-python")
    admin = owned(Admin(redis_server.url, namespace))
    config = BrokerConfig(transaction_timeout_s=1.0, transaction_check_interval_s=1.0)
    with BrokerService(redis_server.url, namespace, config):
        proxy = ProxyProcess(redis_server.url, namespace, workdir / "proxy.log")
        try:
            yield Env(redis_server.url, namespace, admin, proxy, workdir)
        finally:
            proxy.stop()
            admin.close()


def _fill(env: Env, topic: str, group: str | None = None) -> dict[str, str]:
    """The replacements that point an official example at the endpoint, ``topic`` and ``group``."""
    out = {'endpoints = "foobar.com:8080"': f'endpoints = "{env.proxy.endpoint}"'}
    out |= {'topic = "topic"': f'topic = "{topic}"'}
    if group:
        out['consumer_group = "consumer-group"'] = f'consumer_group = "{group}"'
    return out


def _sent_ids(stdout: str) -> list[str]:
    return re.findall(r"send message success\. .*?message_id:([0-9A-F]+)", stdout)


def test_normal_producer_example(env: Env) -> None:
    topic = env.topic()
    done = run_python(env.workdir, example("python/normal_producer_example.py", _fill(env, topic)))
    assert done.returncode == 0, done.stderr
    ids = _sent_ids(done.stdout)
    assert len(ids) == 10, done.stdout + done.stderr
    stored = env.stored(topic)
    assert sorted(m.msg_id for m in stored) == sorted(ids)  # the client's ids are the msg ids
    for m in stored:
        assert (m.body, m.tags, m.keys, m.properties) == (b"hello, rocketmq.", "tag", ("keys",), {"key": "value"})
    assert len({m.queue_id for m in stored}) == 4  # spread over the queues


def test_fifo_producer_example(env: Env) -> None:
    topic = env.topic(queues=8)
    fill = {
        'endpoints = "foobar.com:8080"': f'endpoints = "{env.proxy.endpoint}"',
        'topic = "fifo-test-topic"': f'topic = "{topic}"',
    }
    done = run_python(env.workdir, example("python/fifo_producer_example.py", fill))
    assert done.returncode == 0, done.stderr
    ids = _sent_ids(done.stdout)
    assert len(ids) == 9, done.stdout + done.stderr
    stored = {m.msg_id: m for m in env.stored(topic)}
    for group in ("1", "2"):
        sent = [i for n, i in enumerate(ids, start=1) if (group == "1") == (n % 2 != 0)]
        in_store = [stored[i] for i in sent]
        assert len({m.queue_id for m in in_store}) == 1  # one message group, one queue
        assert [m.queue_offset for m in in_store] == sorted(m.queue_offset for m in in_store)  # in send order
        assert all(m.system_properties["__SHARDINGKEY"] == group for m in in_store)


def test_delay_producer_example(env: Env) -> None:
    topic = env.topic()
    fill = {'endpoints = "foobar.com:8080"': f'endpoints = "{env.proxy.endpoint}"', 'topic = "delay-topic"': f'topic = "{topic}"'}
    sent_at = time.time()
    done = run_python(env.workdir, example("python/delay_producer_example.py", fill))
    assert done.returncode == 0, done.stderr
    [msg_id] = _sent_ids(done.stdout)
    assert env.stored(topic) == []  # waiting in the timer
    wait_for(lambda: len(env.stored(topic)) == 1, 30, "the delayed message")
    [m] = env.stored(topic)
    assert m.msg_id == msg_id
    assert m.store_timestamp_ms >= int(sent_at * 1000) + 9_000  # "delay 10 seconds" (int(time.time()) + 10)
    assert m.tags == "rocketmq-send-delay-message"


def test_transaction_example_answers_a_check_back_the_endpoint_starts(env: Env) -> None:
    topic = env.topic()
    path = env.workdir / "tx_example.py"
    path.write_text(example("python/transaction_producer_example.py", _fill(env, topic)))
    from tests.proxy_clients import python_client

    log = env.workdir / "tx_example.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(python_client()), str(path)], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    try:
        wait_for(lambda: "send message success" in log.read_text(), 60, "the half message sent")
        [msg_id] = _sent_ids(log.read_text())
        assert env.stored(topic) == []  # a half message: invisible
        wait_for(lambda: "do TestChecker check" in log.read_text(), 60, "the check-back pushed to the producer")
        wait_for(lambda: len(env.stored(topic)) == 1, 30, "the message committed by the checker's answer")
        [m] = env.stored(topic)
        assert m.msg_id == msg_id and m.body == b"hello, rocketmq."
        proc.communicate("\n", timeout=30)  # "Please Enter to Stop the Application."
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)


def test_simple_consumer_example_receives_and_acks_mq_producer_messages(env: Env) -> None:
    topic, group = env.topic(), env.group()
    with Producer("p", env.url, namespace=env.namespace) as producer:
        ids = [producer.send(Message(topic, b"m%d" % i, tags="t")).msg_id for i in range(5)]
    path = env.workdir / "sc_example.py"
    path.write_text(example("python/simple_consumer_example.py", _fill(env, topic, group)))
    from tests.proxy_clients import python_client

    log = env.workdir / "sc_example.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([str(python_client()), str(path)], stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: len(re.findall(r"ack message:\[(\w+)\]", log.read_text())) >= 5, 60, "5 acks")
    finally:
        proc.kill()
        proc.wait(10)
    assert sorted(re.findall(r"ack message:\[(\w+)\]", log.read_text())) == sorted(ids)
    progress = env.admin.consumer_progress(group, topic)
    assert sum(p.broker_offset for p in progress) == 5


def test_official_consumer_gets_every_field_of_mq_producer_messages(env: Env) -> None:
    topic, group = env.topic(), env.group()
    body = os.urandom(300)
    with Producer("p", env.url, namespace=env.namespace) as producer:
        sent = producer.send(Message(topic, body, tags="TagA", keys=["k1", "k2"], properties={"color": "red", "n": "7"}))
    [got] = rr_client("consume", env.proxy.endpoint, topic, group, "1", "30")
    assert got["message_id"] == sent.msg_id
    assert bytes.fromhex(got["body"]) == body
    assert (got["tag"], got["keys"], got["properties"]) == ("TagA", ["k1", "k2"], {"color": "red", "n": "7"})
    assert got["delivery_attempt"] == 1 and got["acked"]


def test_change_invisible_duration_gives_a_new_receipt_handle(env: Env) -> None:
    topic, group = env.topic(), env.group()
    with Producer("p", env.url, namespace=env.namespace) as producer:
        producer.send(Message(topic, b"x"))
    [got] = rr_client("consume", env.proxy.endpoint, topic, group, "1", "30", "--change", "20")
    assert got["receipt_handle"] != got["changed_from"]  # the client replaced its handle with ours
    assert got["acked"]  # the ack with the new handle was accepted
    assert rr_client("consume", env.proxy.endpoint, topic, group, "1", "6") == []  # and it is done


def test_message_not_acked_comes_back_with_attempt_2(env: Env) -> None:
    topic, group = env.topic(), env.group()
    with Producer("p", env.url, namespace=env.namespace) as producer:
        sent = producer.send(Message(topic, b"again"))
    got = rr_client("consume", env.proxy.endpoint, topic, group, "2", "60", "--no-ack", "--invisible", "10", "--batch", "1")
    assert [(g["message_id"], g["delivery_attempt"]) for g in got] == [(sent.msg_id, 1), (sent.msg_id, 2)]


def test_official_producer_messages_reach_mq_push_consumer_intact(env: Env) -> None:
    topic = env.topic()
    specs = [
        {"body": os.urandom(64).hex(), "tag": "TagA", "keys": ["order-1", "order-2"], "properties": {"region": "eu", "n": "1"}},
        {"body": os.urandom(64).hex(), "tag": "TagB", "message_group": "cart-9", "properties": {"x": "y"}},
    ]
    results = rr_client("produce", env.proxy.endpoint, topic, json.dumps(specs))
    assert [r["ok"] for r in results] == [True, True], results
    got: list = []  # type: ignore[type-arg]

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        got.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        f"g{uuid.uuid4().hex[:8]}", env.url, namespace=env.namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
    )
    consumer.subscribe(topic, "*")
    consumer.register_message_listener(listener)
    with consumer:
        wait_for(lambda: len(got) >= 2, 30, "2 messages")
    by_id = {m.msg_id: m for m in got}
    for spec, result in zip(specs, results):
        m = by_id[result["message_id"]]
        assert m.body == bytes.fromhex(spec["body"])
        assert m.tags == spec["tag"]
        assert sorted(m.keys) == sorted(spec.get("keys", []))
        assert m.properties == spec["properties"]
        assert m.system_properties.get("__SHARDINGKEY") == spec.get("message_group")


def test_fifo_20_groups_by_two_official_consumers_in_order(env: Env) -> None:
    topic, group = env.topic(queues=8), env.group(fifo=True)
    sent = rr_client("fifo", env.proxy.endpoint, topic, "20", "50", timeout_s=240)
    assert len(sent) == 1000
    logs = [env.workdir / f"fifo-{group}-{i}.log" for i in range(2)]
    procs = [start_rr_client("consume", env.proxy.endpoint, topic, group, "1000", "200", "--batch", "8", log=log) for log in logs]
    try:
        wait_for(lambda: sum(len(json_lines(log)) for log in logs) >= 1000, 200, "1000 messages consumed", poll_s=0.5)
    finally:
        for p in procs:
            p.kill()
            p.wait(10)
    records = [r for log in logs for r in json_lines(log)]
    assert all(json_lines(log) for log in logs)  # both consumers took part
    assert len(records) == 1000 and all(r["delivery_attempt"] == 1 for r in records)
    records.sort(key=lambda r: r["acked_at"])
    per_group: dict[str, list[int]] = {}
    for r in records:
        g, seq = bytes.fromhex(r["body"]).decode().split(":")
        assert r["message_group"] == f"group-{g}"
        per_group.setdefault(g, []).append(int(seq))
    assert per_group == {str(g): list(range(50)) for g in range(20)}


def test_delivery_time_in_milliseconds_is_refused_and_nothing_stored(env: Env) -> None:
    topic = env.topic()
    before = _namespace_data(env)
    spec = [{"body": b"late".hex(), "delivery_timestamp": int(time.time() * 1000) + 10_000}]  # ms where the client wants s
    [result] = rr_client("produce", env.proxy.endpoint, topic, json.dumps(spec))
    assert (result["ok"], result["code"]) == (False, 40012)  # ILLEGAL_DELIVERY_TIME
    assert _namespace_data(env) == before


def test_signature_checked_when_keys_are_set(env: Env) -> None:
    import urllib.request

    from tests.servers import free_port

    topic = env.topic()
    metrics_port = free_port()
    secured = ProxyProcess(
        env.url,
        env.namespace,
        env.workdir / "proxy-keys.log",
        "--access-key",
        "ak1",
        "--secret-key",
        "sk1",
        "--metrics-port",
        str(metrics_port),
    )
    try:
        before = _namespace_data(env)
        [refused] = rr_client("produce", secured.endpoint, topic, json.dumps([{"body": "00"}]), "--ak", "ak1", "--sk", "wrong")
        assert not refused["ok"]  # the client cannot even read the route
        assert _namespace_data(env) == before
        scraped = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
        assert re.search(r'mq_proxy_errors_total\{code="UNAUTHORIZED",rpc="QueryRoute"\} [1-9]', scraped), scraped[-2000:]
        [ok] = rr_client("produce", secured.endpoint, topic, json.dumps([{"body": "00"}]), "--ak", "ak1", "--sk", "sk1")
        assert ok["ok"] and [m.msg_id for m in env.stored(topic)] == [ok["message_id"]]
    finally:
        secured.stop()
    assert "sk1" not in secured.log.read_text()


def _namespace_data(env: Env) -> dict[bytes, bytes]:
    """The namespace's data, without what changes with time alone: the endpoint's copies of client
    settings, the broker service's health beats and stats, and group registries."""
    from tests.helpers import snapshot

    skip = (b":proxy:client:", b":brokers", b":stats", b":statshist", b":clients", b":info")
    return {k: v for k, v in snapshot(env.url, env.namespace).items() if not any(s in k for s in skip)}


def test_consumer_keeps_working_across_an_endpoint_restart(env: Env) -> None:
    from tests.servers import free_port

    topic, group = env.topic(), env.group()
    port = free_port()
    log = env.workdir / "proxy-restart.log"
    proxy = ProxyProcess(env.url, env.namespace, log, port=port)
    consumer_log = env.workdir / "restart-consumer.log"
    consumer = start_rr_client("consume", proxy.endpoint, topic, group, "3", "120", "--batch", "1", log=consumer_log)  # runs on
    try:
        with Producer("p", env.url, namespace=env.namespace) as producer:
            first = producer.send(Message(topic, b"before")).msg_id
            wait_for(lambda: len(json_lines(consumer_log)) == 1, 60, "the first message")
            wait_for(lambda: env.admin.consumer_connections(group) != [], 15, "the consumer live before the restart")
            proxy.stop()
            proxy = ProxyProcess(env.url, env.namespace, log, port=port)  # same address, fresh process
            second = producer.send(Message(topic, b"after")).msg_id
            wait_for(lambda: len(json_lines(consumer_log)) == 2, 90, "the second message, through the new endpoint")
        assert [(r["message_id"], r["acked"]) for r in json_lines(consumer_log)] == [(first, True), (second, True)]
        # the Python client does not reopen its Telemetry stream after the restart: its Heartbeat (every
        # 10 s) registers it from the settings the first endpoint kept in Redis
        wait_for(lambda: env.admin.consumer_connections(group) != [], 30, "the consumer live in its group's registry")
        assert all(c.status.get("via") == "rocketmq-proxy" for c in env.admin.consumer_connections(group))
    finally:
        consumer.kill()
        consumer.wait(10)
        proxy.stop()


def test_push_consumer_example_consumes_and_acks(env: Env) -> None:
    from tests.proxy_clients import python_client

    topic, group = env.topic(), env.group()
    with Producer("p", env.url, namespace=env.namespace) as producer:
        for i in range(5):
            producer.send(Message(topic, b"push %d" % i))
    path = env.workdir / "push_example.py"
    path.write_text(example("python/push_consumer_example.py", _fill(env, topic, group)))
    log = env.workdir / "push_example.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [str(python_client()), str(path)], stdin=subprocess.PIPE, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    try:
        wait_for(lambda: log.read_text().count("consume message,") >= 5, 90, "5 messages consumed")
        proc.communicate("\n", timeout=30)  # "Please Enter to Stop the Application."
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate(timeout=10)
    assert log.read_text().count("consume message,") == 5
    assert rr_client("consume", env.proxy.endpoint, topic, group, "1", "6") == []  # all acked


def test_official_client_priority_messages_route_by_level_and_come_back_highest_first(env: Env) -> None:
    """rocketmq-python-client 5.1.2 sends ``Message.priority`` (type PRIORITY, field 22) when the
    route announces PRIORITY (it checks the queue's accepted types); its consumer reads it back (D142)."""
    topic, group = f"t{uuid.uuid4().hex[:8]}", env.group()
    env.admin.create_topic(topic, read_queues=10, write_queues=10, priority_levels=10)
    specs = [{"body": (b"p%d" % p).hex(), "priority": p} for p in (0, 9, 3, 9, 5)] + [{"body": b"none".hex()}]
    results = rr_client("produce", env.proxy.endpoint, topic, json.dumps(specs))
    assert all(r["ok"] for r in results), results
    stored = {m.body: (m.queue_id, m.priority) for m in env.stored(topic)}
    assert stored == {b"p0": (0, 0), b"p9": (9, 9), b"p3": (3, 3), b"p5": (5, 5), b"none": (0, 0)}
    got = rr_client("consume", env.proxy.endpoint, topic, group, "6", "30")
    assert [bytes.fromhex(g["body"]) for g in got][:4] == [b"p9", b"p9", b"p5", b"p3"]
    assert [g["priority"] for g in got][:4] == [9, 9, 5, 3]
    assert {bytes.fromhex(g["body"]) for g in got[4:]} == {b"p0", b"none"}
