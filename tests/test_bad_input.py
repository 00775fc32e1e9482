"""Bad input is refused with an MQClientError naming the value, before anything is written."""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from mq import Admin, Message, MessageQueue, Producer
from mq.errors import InvalidNameError, MessageTooLargeError, MQClientError, TopicNotFoundError
from tests.helpers import admin_once, snapshot
from tests.leaks import owned
from tests.servers import RedisServer
from tests.written_around import close_opened, open_store  # noqa: F401 - close_opened: autouse

LIMIT = 1024  # a small max_message_size keeps the oversize cases cheap


def _cases() -> dict[str, tuple[Callable[[Producer], object], type[Exception], str]]:
    ok = b"x"
    return {
        "invalid topic name": (lambda p: p.send(Message("bad topic!", ok)), InvalidNameError, "bad topic!"),
        "topic name too long": (lambda p: p.send(Message("t" * 128, ok)), InvalidNameError, "t" * 128),
        "reserved topic": (lambda p: p.send(Message("SCHEDULE_TOPIC_XXXX", ok)), InvalidNameError, "SCHEDULE_TOPIC_XXXX"),
        "retry topic": (lambda p: p.send(Message("%RETRY%g", ok)), InvalidNameError, "%RETRY%g"),
        "empty body": (lambda p: p.send(Message("ok", b"")), MQClientError, "empty"),
        "body over the limit": (lambda p: p.send(Message("ok", b"x" * (LIMIT + 1))), MessageTooLargeError, str(LIMIT + 1)),
        "reserved property": (lambda p: p.send(Message("ok", ok, properties={"DELAY": "3"})), MQClientError, "DELAY"),
        "non-str property": (lambda p: p.send(Message("ok", ok, properties={"n": 3})), MQClientError, "3"),  # type: ignore[dict-item]
        "unknown topic": (lambda p: p.send(Message("nosuch", ok)), TopicNotFoundError, "nosuch"),
        "negative delay level": (lambda p: p.send(Message("ok", ok, delay_level=-1)), MQClientError, "-1"),
        "batch mixed topics": (lambda p: p.send_batch([Message("ok", ok), Message("ok2", ok)]), MQClientError, "ok2"),
        "batch over the limit": (
            lambda p: p.send_batch([Message("ok", b"x" * 600), Message("ok", b"x" * 600)]),
            MessageTooLargeError,
            "1200",
        ),
        "empty batch": (lambda p: p.send_batch([]), MQClientError, "non-empty"),
        "delayed batch": (lambda p: p.send_batch([Message("ok", ok, delay_level=2)]), MQClientError, "delayed"),
        "foreign queue": (lambda p: p.send(Message("ok", ok), queue=MessageQueue("ok2", "broker-a", 0)), MQClientError, "ok2"),
        "missing queue": (lambda p: p.send(Message("ok", ok), queue=MessageQueue("ok", "broker-a", 9)), TopicNotFoundError, "9"),
        "async unknown topic": (lambda p: p.send_async(Message("nosuch", ok)), TopicNotFoundError, "nosuch"),
        "async empty body": (lambda p: p.send_async(Message("ok", b"")), MQClientError, "empty"),
        "dedup id not a str": (lambda p: p.send(Message("ok", ok, dedup_id=7)), MQClientError, "int"),  # type: ignore[arg-type]
        "empty dedup id": (lambda p: p.send(Message("ok", ok, dedup_id="")), MQClientError, "dedup_id"),
        "dedup id too long": (lambda p: p.send(Message("ok", ok, dedup_id="d" * 129)), MQClientError, "1..128"),
        "dedup id with a control character": (lambda p: p.send(Message("ok", ok, dedup_id="a\x1fb")), MQClientError, "a\\x1fb"),
        "dedup id on a delayed message": (
            lambda p: p.send(Message("ok", ok, delay_level=2, dedup_id="d1")),
            MQClientError,
            "d1",
        ),
        "dedup id in a batch": (lambda p: p.send_batch([Message("ok", ok, dedup_id="d2")]), MQClientError, "d2"),
        "async dedup id too long": (lambda p: p.send_async(Message("ok", ok, dedup_id="d" * 200)), MQClientError, "1..128"),
        "dedup id on a lite topic message": (
            lambda p: p.send(Message("ok", ok, lite_topic="sess-1", dedup_id="d3")),
            MQClientError,
            "lite topics are not deduplicated",
        ),
        "dedup id with a priority on a plain topic": (
            lambda p: p.send(Message("ok", ok, priority=2, dedup_id="d4")),
            MQClientError,
            "priority 2",
        ),
        "priority above 9": (lambda p: p.send(Message("prio", ok, priority=10)), MQClientError, "10"),
        "negative priority": (lambda p: p.send(Message("prio", ok, priority=-1)), MQClientError, "-1"),
        "bool priority": (lambda p: p.send(Message("prio", ok, priority=True)), MQClientError, "True"),
        "priority on a plain topic": (lambda p: p.send(Message("ok", ok, priority=3)), MQClientError, "priority 3"),
        "async priority on a plain topic": (lambda p: p.send_async(Message("ok", ok, priority=3)), MQClientError, "'ok'"),
        "batch mixed priorities": (
            lambda p: p.send_batch([Message("prio", ok), Message("prio", ok, priority=1)]),
            MQClientError,
            "one priority",
        ),
        "selector on a priority topic": (
            lambda p: p.send(Message("prio", ok), selector=lambda qs, m, a: qs[0]),
            MQClientError,
            "selector",
        ),
        "queue of another level": (
            lambda p: p.send(Message("prio", ok, priority=1), queue=MessageQueue("prio", "broker-a", 0)),
            MQClientError,
            "level",
        ),
    }


CASES = _cases()


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_refused_and_store_unchanged(case: str, backend_url: str, namespace: str) -> None:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("ok", read_queues=2, write_queues=2)
    admin.create_topic("ok2", read_queues=2, write_queues=2)
    admin.create_topic("prio", read_queues=2, write_queues=2, priority_levels=2)
    with Producer("pg", backend_url, namespace=namespace, max_message_size=LIMIT) as producer:
        producer.send(Message("ok", b"before"))
        before = snapshot(backend_url, namespace)
        action, error, quoted = CASES[case]
        with pytest.raises(error) as info:
            action(producer)
        assert quoted in str(info.value)
        assert snapshot(backend_url, namespace) == before


def test_str_body_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="bytes"):
        Message("t", "text")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "quoted"),
    [
        ({"read_queues": 0}, "0"),
        ({"write_queues": 5000}, "5000"),
        ({"perm": "x"}, "'x'"),
        ({"dedup_window_s": 0}, "dedup_window_s"),
        ({"dedup_window_s": 7 * 24 * 3600 + 1}, "604801"),
        ({"dedup_window_s": 1.5}, "1.5"),
        ({"dedup_window_s": True}, "True"),
        ({"priority_levels": 11}, "11"),
        ({"priority_levels": 1}, "1"),
        ({"priority_levels": 10, "read_queues": 4, "write_queues": 4}, "at least 10"),
        ({"priority_levels": 4, "order": True}, "ordered"),
    ],
)
def test_bad_topic_config_is_refused(kwargs: dict[str, object], quoted: str, backend_url: str, namespace: str) -> None:
    admin = owned(Admin(backend_url, namespace))
    before = snapshot(backend_url, namespace)
    with pytest.raises(MQClientError) as info:
        admin.create_topic("cfg", **kwargs)  # type: ignore[arg-type]
    assert quoted in str(info.value)
    assert snapshot(backend_url, namespace) == before


@pytest.mark.parametrize("name", ["", "a b", "x" * 128, "RMQ_SYS_TRANS_HALF_TOPIC", "%DLQ%grp", "naïve"])
def test_bad_topic_names_are_refused(name: str, backend_url: str, namespace: str) -> None:
    with pytest.raises(InvalidNameError):
        admin_once(backend_url, namespace).create_topic(name)
    assert snapshot(backend_url, namespace) == {}


@pytest.mark.parametrize("group", ["", "g g", "g" * 121])
def test_bad_group_names_are_refused(group: str) -> None:
    with pytest.raises(InvalidNameError):
        Producer(group, "memory://bad-groups")


def test_admin_input_checks(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    open_store(url, namespace)
    with Admin(url, namespace) as admin:
        for bad in (math.nan, math.inf, True, "1"):
            with pytest.raises(MQClientError, match="timestamp_ms"):
                admin.reset_offset_by_time("g", "h", bad)  # type: ignore[arg-type]
        with pytest.raises(MQClientError, match="timestamp_ms"):
            admin.search_offset(MessageQueue("h", "broker-a", 0), math.nan)  # type: ignore[arg-type]
        with pytest.raises(MQClientError, match="msg_ids"):
            admin.resend_dlq("g", msg_ids="one-id")
