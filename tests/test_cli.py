"""The ``mq`` command line against a real Redis, and ``mq demo`` on the embedded store."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from mq.cli import main


def run_mq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mq`` in a separate process, as a user runs it."""
    return subprocess.run([sys.executable, "-m", "mq", *args], capture_output=True, text=True, timeout=60,
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


def test_demo_runs_on_redis(redis_server, namespace: str) -> None:
    result = run_mq("demo", "--url", redis_server.url, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    assert redis_server.url in result.stdout
