"""Operator tooling (issue 15): ISO times in and out, write warnings on memory://, created vs
updated, -p checks, ``mq msg`` (offset range, id in every topic), ``mq stats`` (rates from the broker
service's snapshots) and ``Admin.delete_namespace`` — against real redis-server processes."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer
from mq.cli import main
from mq.cli.common import parse_time_ms
from mq.errors import MQClientError, TopicNotFoundError
from mq.model.times import format_ms
from mq.operator.rates import rates_over
from scheduler import BrokerConfig, BrokerService
from tests.cli.test_cli import run_mq
from tests.helpers import admin_once, stays_quiet
from tests.leaks import owned
from tests.procs import wait_for

# -- times, version, small CLI checks -------------------------------------------------------------


def test_times_are_read_as_iso_8601_or_epoch_ms() -> None:
    assert parse_time_ms("1700000000123") == 1_700_000_000_123
    assert parse_time_ms("0") == 0
    assert parse_time_ms("2023-11-14T22:13:20.123Z") == 1_700_000_000_123
    assert parse_time_ms("2023-11-15T06:13:20.123+08:00") == 1_700_000_000_123
    naive = datetime(2023, 11, 14, 22, 13, 20)  # local time, whatever the machine's zone is
    assert parse_time_ms("2023-11-14T22:13:20") == int(naive.astimezone().timestamp() * 1000)
    for bad in ("yesterday", "2023-13-01", "-5", ""):
        with pytest.raises(argparse.ArgumentTypeError, match="ISO 8601"):
            parse_time_ms(bad)


def test_times_are_printed_as_iso_8601_with_the_zone() -> None:
    text = format_ms(1_700_000_000_123)
    shown = datetime.fromisoformat(text)
    assert shown.utcoffset() == datetime.fromtimestamp(1_700_000_000.123).astimezone().utcoffset()  # the local zone
    assert shown.astimezone(UTC) == datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    assert parse_time_ms(text) == 1_700_000_000_123  # what is printed can be typed back
    assert format_ms(1_700_000_000_123, raw=True) == "1700000000123"
    assert format_ms(0) == format_ms(None) == "-"


def test_times_follow_the_local_zone_in_and_out() -> None:
    code = (
        "from mq.cli.common import parse_time_ms; from mq.model.times import format_ms; print(format_ms(1700000000123)); "
        "print(parse_time_ms('2023-11-15T06:13:20.123'))"
    )
    for tz, shown in (("UTC-8", "2023-11-15T06:13:20.123+08:00"), ("UTC+0", "2023-11-14T22:13:20.123+00:00")):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env={**os.environ, "TZ": tz}, check=True
        ).stdout.split()
        assert out[0] == shown
        assert out[1] == ("1700000000123" if tz == "UTC-8" else str(1_700_000_000_123 + 8 * 3600 * 1000))


def test_write_commands_on_memory_warn_that_nothing_persists() -> None:
    wrote = run_mq("topic", "create", "t1", env={"MQ_URL": ""})
    assert wrote.returncode == 0, wrote.stderr
    assert "warning: memory:// is an in-process store: nothing this command writes persists" in wrote.stderr
    sent = run_mq("send", "t1", "x", env={"MQ_URL": ""})  # the topic is gone: a new process, a new store
    assert "nothing this command writes persists" in sent.stderr and sent.returncode == 1
    read = run_mq("topic", "list", env={"MQ_URL": ""})
    assert "note: memory:// is an in-process store and empty in a new command" in read.stderr
    assert "persists" not in read.stderr


def test_commands_on_redis_do_not_warn(redis_server, namespace: str) -> None:
    result = run_mq("topic", "create", "t1", "--url", redis_server.url, "--namespace", namespace)
    assert result.returncode == 0 and result.stderr == ""


def test_topic_create_says_created_then_updated(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    common = ["--url", redis_server.url, "--namespace", namespace]
    assert main(["topic", "create", "cu", "--read-queues", "2", "--write-queues", "2", *common]) == 0
    assert capsys.readouterr().out.startswith("created cu: read_queues=2")
    assert main(["topic", "create", "cu", "--read-queues", "3", "--write-queues", "3", *common]) == 0
    assert capsys.readouterr().out.startswith("updated cu: read_queues=3")
    with Admin(redis_server.url, namespace) as admin:
        assert admin.topic_exists("cu") and not admin.topic_exists("nope")


def test_a_property_without_equals_is_refused_before_anything_is_sent(redis_server, namespace: str) -> None:
    admin_once(redis_server.url, namespace).create_topic("pp", read_queues=1, write_queues=1)
    result = run_mq("send", "pp", "x", "-p", "badprop", "--url", redis_server.url, "--namespace", namespace)
    assert result.returncode == 2
    assert "expected NAME=VALUE, got 'badprop'" in result.stderr
    assert admin_once(redis_server.url, namespace).topic_status("pp")  # exists ...
    assert sum(s.max_offset for s in admin_once(redis_server.url, namespace).topic_status("pp").values()) == 0  # ... empty


def _sent_at(redis_url: str, namespace: str, topic: str, count: int) -> list[int]:
    """Send ``count`` messages to queue 0 of ``topic``, 20 ms apart; their store times."""
    with Producer("p", redis_url, namespace=namespace) as producer:
        results = []
        for i in range(count):
            results.append(producer.send(Message(topic, b"%d" % i)))
            time.sleep(0.02)  # the clock moves on: different store times
    with Admin(redis_url, namespace) as admin:
        return [m.store_timestamp_ms for m in admin.messages(topic, 0, 0, count)]


def test_reset_offset_takes_an_iso_time(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    url, common = redis_server.url, ["--url", redis_server.url, "--namespace", namespace]
    admin_once(url, namespace).create_topic("ri", read_queues=1, write_queues=1)
    stored = _sent_at(url, namespace, "ri", 10)
    assert len(set(stored)) > 1
    when = format_ms(stored[6])  # as `mq topic status` prints times
    assert main(["group", "reset-offset", "gi", "ri", "--timestamp", when, "--force", *common]) == 0
    capsys.readouterr()
    expected = min(i for i, t in enumerate(stored) if t >= stored[6])
    with Admin(url, namespace) as admin:
        assert [p.consumer_offset for p in admin.consumer_progress("gi", "ri")] == [expected]
    naive = datetime.fromtimestamp(stored[2] / 1000).isoformat(timespec="milliseconds")  # local time, no zone
    assert main(["group", "reset-offset", "gi", "ri", "--timestamp", naive, "--force", *common]) == 0
    assert main(["group", "reset-offset", "gi", "ri", "--timestamp-ms", str(stored[8]), "--force", *common]) == 0
    capsys.readouterr()
    with Admin(url, namespace) as admin:
        assert [p.consumer_offset for p in admin.consumer_progress("gi", "ri")] == [stored.index(stored[8])]
    with pytest.raises(SystemExit):
        main(["group", "reset-offset", "gi", "ri", "--timestamp", "tomorrow", *common])
    assert "ISO 8601" in capsys.readouterr().err


def test_query_by_key_takes_iso_bounds(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    url, common = redis_server.url, ["--url", redis_server.url, "--namespace", namespace]
    admin_once(url, namespace).create_topic("qb", read_queues=1, write_queues=1)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(6):
            producer.send(Message("qb", b"%d" % i, keys=["k"]))
            time.sleep(0.02)  # the clock moves on: different store times
    stored = [m.store_timestamp_ms for m in admin_once(url, namespace).messages("qb", 0, 0)]
    begin, end = format_ms(stored[2]), datetime.fromtimestamp(stored[4] / 1000).isoformat(timespec="milliseconds")
    assert main(["query", "qb", "--key", "k", "--begin", begin, "--end", end, *common]) == 0
    bodies = [json.loads(line)["body"] for line in capsys.readouterr().out.splitlines()]
    assert bodies == [str(i) for i in range(6) if stored[2] <= stored[i] <= stored[4]] and "3" in bodies


def test_status_and_connections_print_readable_times(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    url, common = redis_server.url, ["--url", redis_server.url, "--namespace", namespace]
    admin_once(url, namespace).create_topic("rt", read_queues=1, write_queues=1)
    stored = _sent_at(url, namespace, "rt", 2)
    assert main(["topic", "status", "rt", *common]) == 0
    header, row = capsys.readouterr().out.splitlines()
    assert header.split() == ["QUEUE", "MIN", "MAX", "STORED", "LAST_STORE_TIME"]
    shown = datetime.fromisoformat(row.split()[4])
    assert shown.tzinfo is not None and int(shown.timestamp() * 1000) == stored[-1]
    assert main(["topic", "status", "rt", "--raw-ms", *common]) == 0
    assert capsys.readouterr().out.splitlines()[1].split()[4] == str(stored[-1])

    consumer = PushConsumer("rtg", url, namespace=namespace)
    consumer.subscribe("rt", "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with consumer:
        before = datetime.now().astimezone() - timedelta(seconds=60)
        assert main(["group", "connections", "rtg", *common]) == 0
        header, row = capsys.readouterr().out.splitlines()
    assert header.split()[-1] == "LAST_HEARTBEAT"
    beat = datetime.fromisoformat(row.split()[-1])
    assert beat.tzinfo is not None and before < beat <= datetime.now().astimezone()


# -- mq msg ---------------------------------------------------------------------------------------


def test_msg_prints_a_half_open_offset_range(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    url, common = redis_server.url, ["--url", redis_server.url, "--namespace", namespace]
    admin_once(url, namespace).create_topic("mr", read_queues=2, write_queues=2)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(12):
            producer.send(Message("mr", b"m%d" % i), selector=lambda queues, msg, arg: queues[arg % 2], arg=i)
    assert main(["msg", "mr", "--queue", "1", "--from", "2", "--to", "5", *common]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(m["queue_id"], m["queue_offset"], m["body"]) for m in printed] == [(1, 2, "m5"), (1, 3, "m7"), (1, 4, "m9")]
    assert main(["msg", "mr", "--queue", "0", "--from", "4", *common]) == 0  # to the end of the queue
    assert [json.loads(line)["body"] for line in capsys.readouterr().out.splitlines()] == ["m8", "m10"]
    assert main(["msg", "mr", "--queue", "0", "--from", "6", *common]) == 1
    assert "no message found" in capsys.readouterr().err
    assert main(["msg", "mr", *common]) == 2  # neither --queue nor --id
    assert main(["msg", "mr", "--queue", "7", *common]) == 1
    assert "queues 0..1" in capsys.readouterr().err
    with Admin(url, namespace) as admin:
        assert [m.queue_offset for m in admin.messages("mr", 0, 0, 6, max_num=2)] == [0, 1]
        assert admin.messages("mr", 0, 3, 3) == []
        with pytest.raises(MQClientError, match="start <= end"):
            admin.messages("mr", 0, 5, 2)
        with pytest.raises(TopicNotFoundError):
            admin.messages("nope", 0, 0, 1)


def test_msg_finds_an_id_in_every_topic(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    url, common = redis_server.url, ["--url", redis_server.url, "--namespace", namespace]
    with Admin(url, namespace) as admin:
        for name in ("fa", "fb", "fc"):
            admin.create_topic(name, read_queues=4, write_queues=4)
    consumer = PushConsumer(
        "fg", url, namespace=namespace, max_reconsume_times=0, consume_from_where=ConsumeFromWhere.FIRST_OFFSET
    )
    consumer.subscribe("fb", "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.RECONSUME_LATER)
    with (
        BrokerService(url, namespace, BrokerConfig(message_delay_level="100ms")),
        consumer,
        Producer("p", url, namespace=namespace) as producer,
    ):
        for name in ("fa", "fc"):
            producer.send(Message(name, b"other"))
        sent = producer.send(Message("fb", b"dead soon"))
        wait_for(lambda: bool(admin_once(url, namespace).dlq_messages("fg")), 15, "the dead letter")
    assert main(["msg", "--id", sent.msg_id, *common]) == 0
    copies = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert copies[0]["topic"] == "fb" and copies[0]["queue_offset"] == sent.queue_offset
    assert "%DLQ%fg" in [c["topic"] for c in copies]
    assert {c["msg_id"] for c in copies} == {sent.msg_id} and {c["body"] for c in copies} == {"dead soon"}
    assert main(["msg", "fb", "--id", sent.msg_id, *common]) == 0  # with the topic: that topic only
    assert [json.loads(line)["topic"] for line in capsys.readouterr().out.splitlines()] == ["fb"]
    assert main(["msg", "--id", sent.msg_id, "--topic", "fb", *common]) == 0
    assert [json.loads(line)["topic"] for line in capsys.readouterr().out.splitlines()] == ["fb"]
    assert main(["msg", "fa", "--id", sent.msg_id, "--topic", "fb", *common]) == 2
    assert main(["msg", "fa", "--id", sent.msg_id, *common]) == 1
    assert main(["msg", "--id", "0" * 32, *common]) == 1


# -- mq stats -------------------------------------------------------------------------------------


def test_rates_come_from_two_snapshots_a_window_apart() -> None:
    def snap(at_s: float, stored: int, consumed: dict[str, int]) -> dict[str, object]:
        return {"taken_at_ms": int(at_s * 1000), "topic_messages": {"t": stored}, "group_consumed": consumed}

    history = [
        snap(0, 100, {"g/t": 90}),
        snap(10, 130, {"g/t": 95}),
        snap(60, 400, {"g/t": 380, "h/t": 50}),
        snap(70, 700, {"g/t": 690, "h/t": 80}),
    ]
    rates = rates_over(history, 60)
    assert rates is not None and (rates.since_ms, rates.until_ms) == (10_000, 70_000)
    assert rates.topics_in["t"].count == 570 and rates.topics_in["t"].per_s == pytest.approx(9.5)
    assert rates.groups_out["g"].count == 595
    assert rates.groups_out["h"].count == 30  # first seen within the window: counted from its first reading
    assert rates.group_topics_out[("g", "t")].count == 595
    assert rates_over(history, 71) is None  # the history does not reach back that far
    assert rates_over([], 60) is None
    reset = [snap(0, 10, {"g/t": 10}), snap(60, 10, {"g/t": 0})]  # an offset reset moved back
    assert rates_over(reset, 60).groups_out["g"].count == 0  # type: ignore[union-attr]


def test_stats_rates_with_a_real_broker_service(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:
    url, common = redis_server.url, ["--url", redis_server.url, "--namespace", namespace]
    admin = owned(Admin(url, namespace))
    admin.create_topic("st", read_queues=2, write_queues=2)
    assert admin.stats() is None  # no broker service yet
    assert main(["stats", *common]) == 1
    assert capsys.readouterr().out.startswith("unknown: no broker service")
    got: list[int] = []
    consumer = PushConsumer("stg", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("st", "*")
    consumer.register_message_listener(
        lambda msgs, ctx: (got.extend(m.queue_offset for m in msgs), ConsumeConcurrentlyStatus.CONSUME_SUCCESS)[1]
    )
    with BrokerService(url, namespace, BrokerConfig(stats_interval_s=0.2)):
        consumer.start()
        # the group's starting offsets (0) are in a snapshot before anything is sent
        wait_for(lambda: (admin.broker_stats() or {}).get("group_consumed", {}).get("stg/st") == 0, 15, "seeded offsets")
        assert admin.stats(window_s=60) is None  # the service has not run for a minute
        before_ms = int(time.time() * 1000)
        # a snapshot after before_ms still shows nothing sent
        wait_for(lambda: int((admin.broker_stats() or {}).get("taken_at_ms", 0)) > before_ms, 10, "a snapshot after before_ms")
        with Producer("p", url, namespace=namespace) as producer:
            for i in range(30):
                producer.send(Message("st", b"%d" % i))
        wait_for(lambda: len(got) >= 30, 15, "consumption")
        consumer.shutdown()  # commits the offsets
        wait_for(lambda: (admin.broker_stats() or {}).get("group_consumed", {}).get("stg/st") == 30, 15, "a snapshot")
    # the service is stopped: no newer snapshot moves the window while the rates are read
    until_ms = int(admin.broker_stats()["taken_at_ms"])  # type: ignore[index]
    window_s = (until_ms - before_ms) / 1000  # the window that starts at the last snapshot before sending
    rates = admin.stats(window_s=window_s)
    assert main(["stats", "--window-s", str(window_s), *common]) == 0
    table = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"over [\d.]+ s, from \S+ to \S+", table[0]) and table[2].split()[:2] == ["st", "30"]
    assert table[table.index("") + 2].split()[:2] == ["stg", "30"]
    assert main(["stats", "--window-s", str(window_s), "--json", *common]) == 0
    assert rates is not None and rates.since_ms <= before_ms
    assert rates.topics_in["st"].count == 30 and rates.topics_in["st"].per_s == pytest.approx(30 / rates.window_s)
    assert rates.groups_out["stg"].count == 30 and rates.group_topics_out[("stg", "st")].count == 30
    printed = json.loads(capsys.readouterr().out)
    assert printed["topics_in"]["st"]["count"] == 30 and printed["groups_out"]["stg"]["count"] == 30
    with pytest.raises(MQClientError, match="window_s"):
        admin.stats(window_s=0)
    admin.close()


# -- removing a namespace -------------------------------------------------------------------------


def test_delete_namespace_removes_every_key_of_it_and_no_other(backend_url: str, namespace: str) -> None:
    neighbour = namespace + "x"  # a namespace whose name starts with this one's
    for ns in (namespace, neighbour):
        with Admin(backend_url, ns) as admin:
            admin.create_topic("dn", read_queues=4, write_queues=4)  # queues spread over a cluster's masters
            admin.create_group("dng")
        with Producer("p", backend_url, namespace=ns) as producer:
            for _ in range(8):
                producer.send(Message("dn", b"x", keys=["k"]))
    with Admin(backend_url, namespace) as admin, Admin(backend_url, neighbour) as other:
        mine, theirs = set(admin._store.namespace_keys()), set(other._store.namespace_keys())
        assert mine and theirs and not mine & theirs
        assert all(k.startswith((f"{{{namespace}}}", f"{{{namespace}:")) for k in mine)
        assert {k.split(":")[1] for k in mine if k.startswith(f"{{{namespace}:dn:")} == {"dn"}
        assert len({k.split("}")[0] for k in mine if ":dn:" in k}) == 4  # every queue's keys were found
        assert admin.delete_namespace() == len(mine)
        assert set(admin._store.namespace_keys()) == set() and admin.topics() == []
        assert set(other._store.namespace_keys()) == theirs and len(other.query_messages_by_key("dn", "k")) == 8


def test_the_stats_history_keeps_only_its_last_seconds(redis_server, namespace: str) -> None:
    with Admin(redis_server.url, namespace) as admin:
        store = admin._store
        for at_ms in (1_000, 1_500, 2_500, 4_000):
            store.save_stats({"taken_at_ms": at_ms, "topic_messages": {"t": at_ms}}, history_s=2.0)
        assert [s["taken_at_ms"] for s in store.stats_history(0)] == [2_500, 4_000]  # 1 000 and 1 500: > 2 s older
        assert [s["taken_at_ms"] for s in store.stats_history(3_000)] == [4_000]
        assert store.stats() == {"taken_at_ms": 4_000, "topic_messages": {"t": 4_000}}
        store.save_stats({"taken_at_ms": 9_000})  # no history asked: the snapshot only
        assert [s["taken_at_ms"] for s in store.stats_history(0)] == [2_500, 4_000]


def test_a_resent_dead_letter_reaches_only_its_group_once_with_a_link(backend_url: str, namespace: str, capsys) -> None:  # type: ignore[no-untyped-def]
    """Group A dead-letters a message that group B consumed fine; resending A's letter reaches A
    again (once, however often resend is called) and never B; the copy links to its letter."""
    import threading

    from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, PushConsumer
    from scheduler import BrokerConfig, BrokerService

    url = backend_url
    admin = owned(Admin(url, namespace))
    admin.create_topic("DL", read_queues=1, write_queues=1)
    got: dict[str, list] = {"A": [], "B": []}
    lock = threading.Lock()
    fixed = threading.Event()

    def listener_of(group: str):  # type: ignore[no-untyped-def]
        def listener(msgs, ctx):  # type: ignore[no-untyped-def]
            with lock:
                got[group].extend(msgs)
            if group == "A" and not fixed.is_set():
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        return listener

    consumers = []
    for group in ("A", "B"):
        c = PushConsumer(group, url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, max_reconsume_times=0)
        c.subscribe("DL")
        c.register_message_listener(listener_of(group))
        consumers.append(c)
    with BrokerService(url, namespace, BrokerConfig(timer_poll_ms=20)), consumers[0], consumers[1]:
        with Producer("p", url, namespace=namespace) as producer:
            sent = producer.send(Message("DL", b"charge", keys=["order-9"]))
        wait_for(lambda: len(admin.dlq_messages("A")) == 1 and len(got["B"]) == 1, 20, "A's dead letter, B's consumption")
        assert admin.dlq_messages("B") == []
        assert "RESENT" not in admin.dlq_messages("A")[0].system_properties
        fixed.set()
        assert admin.resend_dlq("A") == 1
        assert admin.resend_dlq("A") == 0  # once
        assert admin.resend_dlq("A", msg_ids=[sent.msg_id]) == 0
        wait_for(lambda: len(got["A"]) == 2, 20, "the resent copy at group A")
        stays_quiet(lambda: (len(got["A"]), len(got["B"])), "each group's deliveries")
    assert len(got["B"]) == 1  # group B never saw it again
    again = got["A"][1]
    assert again.topic == "DL" and again.body == b"charge" and again.msg_id == sent.msg_id
    assert again.system_properties["ORIGIN_MESSAGE_ID"] == sent.msg_id
    assert again.system_properties["DLQ_LETTER"] == "%DLQ%A:0@0"
    assert admin.dlq_messages("A")[0].system_properties["RESENT"] == "true"
    assert main(["dlq", "list", "A", "--url", url, "--namespace", namespace]) == 0
    assert '"RESENT": "true"' in capsys.readouterr().out
    assert main(["dlq", "purge", "A", "--url", url, "--namespace", namespace]) == 0
    assert "removed 1 dead letter" in capsys.readouterr().out
    assert admin.dlq_messages("A") == []
