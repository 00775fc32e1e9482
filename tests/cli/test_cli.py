"""The ``mq`` command line against a real Redis, and ``mq demo`` on the embedded store."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

import pytest

from mq import Admin, Message, MessageQueue, Producer
from mq.cli import build_parser, main
from mq.cli.demo import TOPIC, queue_names, split_settled
from tests.helpers import admin_once
from tests.procs import wait_for


def run_mq(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``mq`` in a separate process, as a user runs it."""
    return subprocess.run(
        [sys.executable, "-m", "mq", *args], capture_output=True, text=True, timeout=180, env={**os.environ, **(env or {})}
    )


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
    assert status[0].split() == ["QUEUE", "MIN", "MAX", "STORED", "LAST_STORE_TIME"]
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


@pytest.fixture(scope="module")
def embedded_demo() -> subprocess.CompletedProcess[str]:
    """``mq demo`` on the embedded store, run once for the tests that read its output."""
    return run_mq("demo", env={"MQ_URL": ""})


def test_demo_runs_on_the_embedded_store(embedded_demo: subprocess.CompletedProcess[str]) -> None:
    result = embedded_demo
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
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"rocketredis demo on memory:// \(namespace 'demo-[0-9a-f]{8}'\)", lines[0]), lines[0]
    assert re.fullmatch(r"Removed namespace 'demo-[0-9a-f]{8}' \(\d+ keys\); --keep keeps it", lines[-2]), lines[-2]
    assert lines[-1] == "Done. Try it on Redis: MQ_URL=redis://127.0.0.1:6379/0 make demo"


def test_demo_prints_every_offset_range_half_open(embedded_demo: subprocess.CompletedProcess[str]) -> None:
    out = embedded_demo.stdout
    assert "Offset ranges are half-open: [first, end) holds offsets first .. end-1." in out
    assert not re.search(r"\d\.\.\d", out), "an inclusive a..b range"  # the old step 3 printed 3..12 next to step 6's 0..18
    batch = re.search(r"3\. sent a batch of 10 to queue (\d), offsets \[(\d+), (\d+)\)", out)
    assert batch and int(batch[3]) - int(batch[2]) == 10, out
    ranges = dict(re.findall(r"queue (\d): offsets (\[\d+, \d+\))", out))
    assert len(ranges) == 4, out
    assert int(ranges[batch[1]].strip("[)").split(", ")[1]) >= int(batch[3])  # the batch's queue ends at or after it


def test_demo_step_7_prints_each_members_topic_queues_after_the_split(embedded_demo: subprocess.CompletedProcess[str]) -> None:
    # the old line, "split the queues [2, 3] and [0, 0]", mixed the retry topic's queue 0 in without its topic
    (line,) = [line for line in embedded_demo.stdout.splitlines() if line.startswith("7. ")]
    found = re.fullmatch(r"7\. consumer group DemoGroup: two members split the queues \[(.+)\] and \[(.+)\], then", line)
    assert found, line
    shares = [part.split(", ") for part in found.groups()]
    assert all(re.fullmatch(r"(DemoOrders|%RETRY%DemoGroup):\d+", name) for share in shares for name in share), line
    held = shares[0] + shares[1]
    assert len(held) == len(set(held)), line  # no queue held by both members
    assert {name for name in held if name.startswith("DemoOrders:")} == {f"DemoOrders:{q}" for q in range(4)}, line
    assert {name for name in held if name.startswith("%RETRY%")} == {"%RETRY%DemoGroup:0"}, line


@pytest.fixture
def demo_admin() -> Iterator[Admin]:
    with Admin(f"memory://{uuid.uuid4().hex}", "demo") as admin:
        admin.create_topic(TOPIC, read_queues=4, write_queues=4)
        yield admin


def queues(*ids: int, topic: str = TOPIC) -> set[MessageQueue]:
    return {MessageQueue(topic, "broker-a", q) for q in ids}


def test_the_demos_split_is_settled_when_the_members_hold_every_queue_once(demo_admin: Admin) -> None:
    demo_admin.create_topic("Other", read_queues=1, write_queues=1)
    other = queues(0, topic="Other")
    assert split_settled(demo_admin, [queues(0, 1), queues(2, 3)], [TOPIC])
    assert split_settled(demo_admin, [queues(0, 1) | other, queues(2, 3)], [TOPIC, "Other"])
    assert not split_settled(demo_admin, [queues(0, 1), queues(2, 3)], [TOPIC, "Other"])  # Other's queue not taken yet
    assert not split_settled(demo_admin, [queues(0, 1, 2), queues(2, 3)], [TOPIC])  # queue 2 during a hand-over
    assert not split_settled(demo_admin, [queues(0, 1), queues(2)], [TOPIC])  # queue 3 not taken yet
    assert not split_settled(demo_admin, [queues(0, 1, 2, 3), set()], [TOPIC])  # the second member has nothing yet
    demo_admin.update_topic(TOPIC, read_queues=2)
    assert split_settled(demo_admin, [queues(0), queues(1)], [TOPIC])  # only the readable queues count
    assert queue_names(queues(1, 0) | queues(0, topic="%RETRY%G")) == "DemoOrders:0, DemoOrders:1, %RETRY%G:0"


def namespace_keys(server, namespace: str) -> list[bytes]:  # type: ignore[no-untyped-def]
    client = server.client()
    return [k for pattern in (f"{{{namespace}}}:*", f"{{{namespace}:*") for k in client.scan_iter(match=pattern)]


def test_demo_runs_on_redis(redis_server, namespace: str) -> None:
    result = run_mq("demo", "--url", redis_server.url, "--namespace", namespace)
    assert result.returncode == 0, result.stderr
    assert redis_server.url in result.stdout
    spark = re.search(r"16\. Spark summary \(spark.read.format\('mq'\)\); Spark's own output is in (\S+):", result.stdout)
    assert spark, result.stdout
    assert "topic DemoOrders: 85 messages" in result.stdout
    # the JVM's warnings went to the log, not between the demo's lines
    for noise in ("WARN", "log4j", "SparkContext", "Setting default log level"):
        assert noise not in result.stdout and noise not in result.stderr, noise
    lines = result.stdout.splitlines()
    assert "Try it on Redis" not in result.stdout and lines[-1] == "Done."
    assert lines[-2].startswith(f"Removed namespace {namespace!r} (")
    assert namespace_keys(redis_server, namespace) == []  # nothing left behind


def test_demo_refuses_a_namespace_that_holds_keys(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    admin_once(redis_server.url, namespace).create_topic("Mine", read_queues=1, write_queues=1)
    assert main(["demo", "--url", redis_server.url, "--namespace", namespace]) == 1
    assert "already holds keys" in capsys.readouterr().err
    assert admin_once(redis_server.url, namespace).topic_exists("Mine") and len(namespace_keys(redis_server, namespace)) >= 1


def test_group_commands(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer

    common = ["--url", redis_server.url, "--namespace", namespace]
    admin_once(redis_server.url, namespace).create_topic("gt", read_queues=2, write_queues=2)
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        for i in range(10):
            producer.send(Message("gt", b"%d" % i))
    got: list[int] = []
    consumer = PushConsumer("cli-group", redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("gt", "*")
    consumer.register_message_listener(
        lambda msgs, ctx: (got.extend(m.queue_offset for m in msgs), ConsumeConcurrentlyStatus.CONSUME_SUCCESS)[1]
    )
    with consumer:
        wait_for(lambda: len(got) >= 10, 10, "the ten messages consumed")
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
    from mq import ConsumeConcurrentlyStatus, Message, Producer, PushConsumer
    from scheduler import BrokerConfig, BrokerService

    url, common = redis_server.url, ["--url", redis_server.url, "--namespace", namespace]
    admin_once(url, namespace).create_topic("dq", read_queues=1, write_queues=1)
    consumer = PushConsumer("cli-dlq", url, namespace=namespace, max_reconsume_times=0)
    consumer.subscribe("dq", "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    with (
        BrokerService(url, namespace, BrokerConfig(message_delay_level="100ms")),
        consumer,
        Producer("p", url, namespace=namespace) as producer,
    ):
        wait_for(lambda: any(q.topic == "dq" for q in consumer.assigned_queues()), 10, "the consumer's queue")
        sent = producer.send(Message("dq", b"bad order"))
        wait_for(lambda: bool(admin_once(url, namespace).dlq_messages("cli-dlq")), 10, "the dead letter")
    assert main(["dlq", "list", "cli-dlq", *common]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert (listed["msg_id"], listed["body"], listed["system_properties"]["RETRY_TOPIC"]) == (sent.msg_id, "bad order", "dq")
    assert main(["dlq", "resend", "cli-dlq", "--id", sent.msg_id, *common]) == 0
    assert "resent 1 message(s)" in capsys.readouterr().out
    assert admin_once(url, namespace).topic_status("dq")[sent.message_queue].max_offset == 1  # not resent to the topic
    [copy] = admin_once(url, namespace).messages("%RETRY%cli-dlq", 0, 0)[-1:]  # but to the group's retry topic
    assert copy.msg_id == sent.msg_id and copy.system_properties["DLQ_LETTER"].startswith("%DLQ%cli-dlq:0@")


@pytest.mark.spark
def test_analytics_command_writes_a_table_and_a_chart(redis_server, namespace: str, tmp_path) -> None:
    admin_once(redis_server.url, namespace).create_topic("an", read_queues=2, write_queues=2)
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        for i in range(20):
            producer.send(Message("an", b"%d" % i, keys=[f"k{i % 3}"]))
    result = run_mq("analytics", "skew", "--url", redis_server.url, "--namespace", namespace, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    pngs = list(tmp_path.rglob("*.png"))
    assert pngs and all(p.stat().st_size > 0 for p in pngs)
    assert list(tmp_path.rglob("*.csv")) or list(tmp_path.rglob("*.parquet"))


def leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command of the parser that runs something, as (``mq topic create``, its parser)."""
    subcommands = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subcommands:
        yield " ".join(("mq", *path)), parser
    for action in subcommands:
        described = {choice.dest: choice.help for choice in action._choices_actions}
        for name, sub in action.choices.items():
            assert described.get(name), f"{' '.join(('mq', *path, name))} has no help in its parent's list"
            assert sub.description, f"{' '.join(('mq', *path, name))} has no description"
            yield from leaves(sub, (*path, name))


def test_every_command_and_option_has_help_with_its_default() -> None:
    commands = dict(leaves(build_parser()))
    assert {
        "mq demo",
        "mq topic create",
        "mq group reset-offset",
        "mq dlq resend",
        "mq tx list",
        "mq broker",
        "mq msg",
        "mq stats",
    } <= set(commands)
    for command, parser in commands.items():
        assert callable(parser.get_default("func")), f"{command} has no handler"
        options = {s for a in parser._actions for s in a.option_strings}
        assert {"--url", "--namespace"} <= options, f"{command} lacks the shared options"
        one_of = {a for g in parser._mutually_exclusive_groups if g.required for a in g._group_actions}
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            name = "/".join(action.option_strings) or action.dest
            assert action.help, f"{command} {name} has no help"
            if not action.option_strings:
                continue  # a positional argument: always given
            text = action.help % {**vars(action), "prog": parser.prog}  # as argparse expands it
            if action.required or action in one_of:
                assert "required" in text, f"{command} {name}: the help does not say it is required: {text!r}"
            else:
                assert "default" in text, f"{command} {name}: the help does not give the default: {text!r}"
                if action.default not in (None, False, [], argparse.SUPPRESS):
                    assert str(action.default) in text, f"{command} {name}: {text!r} does not say {action.default!r}"


def test_an_unknown_option_is_refused_by_the_leaf_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["topic", "list", "--nope"])
    assert info.value.code == 2
    assert "unrecognized arguments: --nope" in capsys.readouterr().err


def test_group_config_commands(redis_server, namespace: str, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from mq.cli import main

    common = ["--url", redis_server.url, "--namespace", namespace]
    assert main(["group", "create", "cg", "--retry-max-times", "3", "--consume-from-where", "FIRST_OFFSET", *common]) == 0
    created = json.loads(capsys.readouterr().out)
    assert (created["retry_max_times"], created["consume_from_where"], created["consume_enable"]) == (3, "FIRST_OFFSET", True)
    assert main(["group", "update", "cg", "--consume-enable", "false", *common]) == 0
    capsys.readouterr()
    assert main(["group", "show", "cg", *common]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert (shown["consume_enable"], shown["retry_max_times"]) == (False, 3)
    assert main(["group", "update", "cg", "--retry-max-times", "500", *common]) == 1  # refused by the library
    assert "retry_max_times" in capsys.readouterr().err
    assert main(["group", "delete", "cg", *common]) == 0
    assert main(["group", "delete", "cg", *common]) == 1
    assert main(["group", "show", "cg", *common]) == 1


def test_group_status_shows_each_members_queues(redis_server, namespace: str, capsys) -> None:  # type: ignore[no-untyped-def]
    from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer
    from mq.cli import main

    common = ["--url", redis_server.url, "--namespace", namespace]
    admin_once(redis_server.url, namespace).create_topic("gs", read_queues=2, write_queues=2)
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        producer.send(Message("gs", b"x"))
    consumer = PushConsumer(
        "status-group", redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
    )
    consumer.subscribe("gs")
    consumed: list[bytes] = []
    consumer.register_message_listener(
        lambda msgs, ctx: (consumed.extend(m.body for m in msgs), ConsumeConcurrentlyStatus.CONSUME_SUCCESS)[1]
    )
    with consumer:
        assert consumer._core is not None
        wait_for(
            lambda: consumed == [b"x"] and len([q for q in consumer.assigned_queues() if q.topic == "gs"]) == 2,
            10,
            "both queues held and the message consumed",
        )
        consumer._core.publish_status()
        deadline = time.monotonic() + 5
        out = ""
        while "gs:1" not in out and time.monotonic() < deadline:
            assert main(["group", "status", "status-group", *common]) == 0
            out = capsys.readouterr().out
            time.sleep(0.3)  # the poll interval of this bounded wait (the assertion below fails it)
    assert "gs:0" in out and "gs:1" in out and "NEXT_OFFSET" in out and "msg/s consumed" in out
    assert main(["group", "reset-offset", "no-such-group", "gs", "--timestamp-ms", "0", *common]) == 1
    assert "unknown group" in capsys.readouterr().err
    assert main(["group", "reset-offset", "no-such-group", "gs", "--timestamp-ms", "0", "--force", *common]) == 0


def test_topic_dedup_window_options_and_views(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--url", redis_server.url, "--namespace", namespace]
    assert main(["topic", "create", "dd", "--read-queues", "2", "--write-queues", "2", *common]) == 0
    assert "dedup_window_s=120" in capsys.readouterr().out  # the default, NATS's
    assert main(["topic", "update", "dd", "--dedup-window-s", "900", *common]) == 0
    assert "dedup_window_s=900" in capsys.readouterr().out
    assert main(["topic", "create", "dd2", "--dedup-window-s", "30", *common]) == 0
    capsys.readouterr()
    assert main(["topic", "list", *common]) == 0
    rows = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert rows[0][-2:] == ["DEDUP_S", "PRIORITY_LEVELS"]
    assert {r[0]: r[-1] for r in rows[1:]} == {"dd": "900", "dd2": "30"}  # no priority levels: an empty last cell
    assert main(["topic", "update", "dd", "--dedup-window-s", "0", *common]) == 1
    assert "dedup_window_s must be an int in 1..604800" in capsys.readouterr().err


def test_lite_parent_create_and_list_by_prefix_a_page_at_a_time(
    redis_server, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--url", redis_server.url, "--namespace", namespace]
    assert main(["topic", "create", "LP", "--lite", "--lite-expiration-s", "120", "--read-queues", "1", *common]) == 0
    assert "lite (expires after 120 s idle)" in capsys.readouterr().out
    with Producer("cli-lite", redis_server.url, namespace=namespace) as producer:
        for name in ("sess-a", "sess-b", "sess-c", "agent-x"):
            producer.send(Message("LP", b"x", lite_topic=name))
    names: list[str] = []
    args = ["topic", "lite", "LP", "--prefix", "sess-", "--count", "2", *common]
    for _ in range(10):
        assert main(args) == 0
        lines = capsys.readouterr().out.splitlines()
        names += lines[:-1]
        if lines[-1] == "(last page)":
            break
        args = [*args, "--cursor", lines[-1].split()[-1]]
    assert sorted(names) == ["sess-a", "sess-b", "sess-c"]
    assert main(["topic", "lite", "nosuch", *common]) == 1
