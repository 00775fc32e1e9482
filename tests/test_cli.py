"""The ``mq`` command line against a real Redis, and ``mq demo`` on the embedded store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from mq.cli import main


def run_mq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mq`` in a separate process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "mq", *args], capture_output=True, text=True, timeout=180,
                          env={**os.environ, **(env or {})})  # fmt: skip


def test_topic_send_query_round_trip(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--url", redis_server.url, "--namespace", namespace]
    assert main(["topic", "create", "cli", "--read-queues", "4", "--write-queues", "4", *common]) == 0
    assert "read_queues=4" in capsys.readouterr().out
    assert main(["send", "cli", "hello wörld", "--tags", "A", "--keys", "k1 k2", "-p", "region=HZ", *common]) == 0
    sent = capsys.readouterr().out
    assert sent.startswith("SEND_OK")
    msg_id = sent.split("msg_id=")[1].split()[0]

    assert main(["query", "cli", "--key", "k2", *common]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["msg_id"], found["body"], found["tags"], found["keys"]) == (msg_id, "hello wörld", "A", ["k1", "k2"])
    assert found["properties"] == {"region": "HZ"}
    assert main(["query", "cli", "--id", msg_id, *common]) == 0
    assert json.loads(capsys.readouterr().out)["msg_id"] == msg_id

    assert main(["topic", "list", *common]) == 0
    assert "cli" in capsys.readouterr().out
    assert main(["topic", "status", "cli", *common]) == 0
    status = capsys.readouterr().out.splitlines()
    assert status[0].split() == ["QUEUE", "MIN", "MAX", "STORED", "LAST_STORE_MS"]
    assert sum(int(line.split()[3]) for line in status[1:]) == 1

    assert main(["topic", "update", "cli", "--write-queues", "2", *common]) == 0
    assert "write_queues=2" in capsys.readouterr().out
    assert main(["topic", "delete", "cli", *common]) == 0
    assert main(["query", "cli", "--id", msg_id, *common]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_errors_exit_non_zero_with_a_message(redis_server, namespace: str) -> None:
    result = run_mq("send", "nosuch", "x", "--url", redis_server.url, "--namespace", namespace)
    assert result.returncode == 1
    assert "nosuch" in result.stderr and "Traceback" not in result.stderr


def test_demo_runs_on_the_embedded_store() -> None:
    result = run_mq("demo", env={"MQ_URL": ""})
    assert result.returncode == 0, result.stderr
    assert "memory://" in result.stdout
    assert "query by key order-1001: ['order-1001 created', 'order-1001 paid', 'order-1001 shipped']" in result.stdout
    assert "member 1 got 20, member 2 got 20, none twice: True" in result.stdout
    assert "tag filter 'paid' (filtered in Redis): ['order-1001 paid'," in result.stdout
    assert "DemoGroup lag after consuming: 0" in result.stdout
    assert "(due after 2 s): ['cancel order-1001 if unpaid']" in result.stdout
    assert "13. retry: failed -> ok" in result.stdout
    assert "50 of 50 orders consumed exactly as created -> paid -> shipped" in result.stdout
    assert "consumers saw ['order-3001 created', 'order-3003 created'] (the unknown one committed by check-back)" in result.stdout
    assert "run the demo on Redis to get it" in result.stdout
    assert "resend_dlq resent 1; after the fix: failed -> failed -> ok" in result.stdout


def test_demo_runs_on_redis(redis_server, namespace: str) -> None:
    result = run_mq("demo", "--url", redis_server.url, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    assert redis_server.url in result.stdout
    assert "16. Spark summary (spark.read.format('mq')):" in result.stdout
    assert "topic DemoOrders: 85 messages" in result.stdout


def test_group_commands(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer

    common = ["--url", redis_server.url, "--namespace", namespace]
    Admin(redis_server.url, namespace).create_topic("gt", read_queues=2, write_queues=2)
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        for i in range(10):
            producer.send(Message("gt", b"%d" % i))
    got: list[int] = []
    consumer = PushConsumer("cli-group", redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("gt", "*")
    consumer.register_message_listener(lambda msgs, ctx: (got.extend(m.queue_offset for m in msgs),
                                                           ConsumeConcurrentlyStatus.CONSUME_SUCCESS)[1])  # fmt: skip
    with consumer:
        deadline = time.monotonic() + 10
        while len(got) < 10 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert main(["group", "list", *common]) == 0
        assert "cli-group  1" in capsys.readouterr().out
        assert main(["group", "connections", "cli-group", *common]) == 0
        out = capsys.readouterr().out
        assert consumer.client_id in out and "gt=*" in out
    assert main(["group", "progress", "cli-group", *common]) == 0
    assert "total lag: 0" in capsys.readouterr().out
    assert main(["group", "reset-offset", "cli-group", "gt", "--timestamp-ms", "0", *common]) == 0
    capsys.readouterr()
    assert main(["group", "progress", "cli-group", "--topic", "gt", *common]) == 0
    assert "total lag: 10" in capsys.readouterr().out


def test_dlq_commands(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    from mq import Admin, ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
    from scheduler import BrokerConfig, BrokerService

    url, common = redis_server.url, ["--url", redis_server.url, "--namespace", namespace]
    Admin(url, namespace).create_topic("dq", read_queues=1, write_queues=1)
    consumer = PushConsumer("cli-dlq", url, namespace=namespace, max_reconsume_times=0)
    consumer.subscribe("dq", "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    with BrokerService(url, namespace, BrokerConfig(message_delay_level="100ms")), consumer, \
            Producer("p", url, namespace=namespace) as producer:  # fmt: skip
        time.sleep(0.5)
        sent = producer.send(Message("dq", b"bad order"))
        deadline = time.monotonic() + 10
        while not Admin(url, namespace).dlq_messages("cli-dlq") and time.monotonic() < deadline:
            time.sleep(0.05)
    assert main(["dlq", "list", "cli-dlq", *common]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (listed["msg_id"], listed["body"], listed["system_properties"]["RETRY_TOPIC"]) == (sent.msg_id, "bad order", "dq")
    assert main(["dlq", "resend", "cli-dlq", "--id", sent.msg_id, *common]) == 0
    assert "resent 1 message(s)" in capsys.readouterr().out
    assert Admin(url, namespace).topic_status("dq")[sent.message_queue].max_offset == 2


@pytest.mark.spark
def test_analytics_command_writes_a_table_and_a_chart(redis_server, namespace: str, tmp_path) -> None:
    from mq import Admin, Message, Producer

    Admin(redis_server.url, namespace).create_topic("an", read_queues=2, write_queues=2)
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        for i in range(20):
            producer.send(Message("an", b"%d" % i, keys=[f"k{i % 3}"]))
    result = run_mq("analytics", "skew", "--url", redis_server.url, "--namespace", namespace, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    pngs = list(tmp_path.rglob("*.png"))
    assert pngs and all(p.stat().st_size > 0 for p in pngs)
    assert list(tmp_path.rglob("*.csv")) or list(tmp_path.rglob("*.parquet"))
