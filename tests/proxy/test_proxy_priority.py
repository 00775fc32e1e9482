"""Priority messages through ``mq proxy`` with our generated stubs (D142): the ``priority`` field the
official clients send (``SystemProperties.priority``, rocketmq-apis field 22, message type PRIORITY),
routes that announce it on priority topics, and receive handing out the highest priorities first."""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import pytest

from mq import Admin
from mq.consumer.types import ConsumeFromWhere
from mq.proxy.pb import definition, service
from tests.consumer.test_priority import FIRST, send_backlog, top
from tests.proxy.test_proxy import _message, _receive, running
from tests.servers import RedisServer

pytestmark = pytest.mark.anyio
Code = definition.Code


@pytest.fixture
def priority_env(redis_server: RedisServer) -> Any:
    namespace = f"pp{uuid.uuid4().hex[:8]}"
    with contextlib.closing(Admin(redis_server.url, namespace)) as admin:
        admin.create_topic("P", read_queues=10, write_queues=10, priority_levels=10)
        admin.create_topic("T", read_queues=2, write_queues=2)
        admin.create_group("G", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        admin.create_group("F", consume_from_where=ConsumeFromWhere.FIRST_OFFSET, fifo=True)
        yield redis_server.url, namespace


async def test_routes_announce_priority_on_priority_topics_only(priority_env: Any) -> None:
    async with running(*priority_env) as r:
        for topic, expected in (
            ("P", {definition.NORMAL, definition.DELAY, definition.TRANSACTION, definition.PRIORITY}),
            ("T", {definition.NORMAL, definition.FIFO, definition.DELAY, definition.TRANSACTION}),
        ):
            req = service.QueryRouteRequest()
            req.topic.name = topic
            res = await r.stub.QueryRoute(req)
            assert {t for q in res.message_queues for t in q.accept_message_types} == expected


async def test_the_priority_field_routes_and_comes_back(priority_env: Any) -> None:
    url, namespace = priority_env
    async with running(url, namespace) as r:
        messages = [_message("P", b"p%d" % p, message_type=definition.PRIORITY, priority=p) for p in (3, 9, 0, 9, 5)] + [
            _message("P", b"normal")
        ]  # a NORMAL message on a priority topic: priority 0
        sent = await r.stub.SendMessage(service.SendMessageRequest(messages=messages))
        assert sent.status.code == Code.Value("OK") and len(sent.entries) == 6
        with contextlib.closing(Admin(url, namespace)) as admin:
            stored = {m.body: (m.queue_id, m.priority) for q in range(10) for m in admin.messages("P", q, 0)}
        assert stored == {b"p3": (3, 3), b"p9": (9, 9), b"p0": (0, 0), b"p5": (5, 5), b"normal": (0, 0)}
        status, got = await _receive(r.stub, "G", "P", batch_size=6)
        assert status.code == Code.Value("OK")
        assert [m.body for m in got] == [b"p9", b"p9", b"p5", b"p3", b"p0", b"normal"]
        assert [m.system_properties.priority for m in got] == [9, 9, 5, 3, 0, 0]
        assert [m.system_properties.HasField("priority") for m in got] == [True] * 4 + [False] * 2
        assert {m.system_properties.message_type for m in got[:4]} == {definition.PRIORITY}
        assert got[5].system_properties.message_type == definition.NORMAL


@pytest.mark.parametrize(
    ("topic", "system", "code"),
    [
        ("T", {"priority": 3}, "BAD_REQUEST"),  # a plain topic has no levels
        ("P", {"priority": 10, "message_type": definition.PRIORITY}, "BAD_REQUEST"),
        ("P", {"priority": -1, "message_type": definition.PRIORITY}, "BAD_REQUEST"),
        ("P", {"priority": 2, "message_type": definition.PRIORITY, "message_group": "g"}, "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE"),
        ("P", {"message_type": definition.FIFO, "message_group": "g"}, "BAD_REQUEST"),  # no FIFO on a priority topic
    ],
)
async def test_bad_priority_sends_are_refused_and_store_nothing(priority_env: Any, topic: str, system: Any, code: str) -> None:
    async with running(*priority_env) as r:
        before = r.unchanged()
        sent = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message(topic, **system)]))
        assert sent.status.code == Code.Value(code), sent.status.message
        assert r.unchanged() == before


async def test_fifo_group_cannot_receive_a_priority_topic(priority_env: Any) -> None:
    async with running(*priority_env) as r:
        await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("P", priority=1)]))
        status, got = await _receive(r.stub, "F", "P", poll_s=0)
        assert status.code == Code.Value("BAD_REQUEST") and "FIFO" in status.message and got == []


async def test_receive_hands_out_the_highest_priorities_of_a_backlog_first(priority_env: Any) -> None:
    url, namespace = priority_env
    priorities = send_backlog(url, namespace, "P")
    got: list[int] = []
    async with running(url, namespace) as r:
        while len(got) < FIRST:
            status, msgs = await _receive(r.stub, "G", "P", batch_size=32, poll_s=0)
            assert status.code == Code.Value("OK"), status.message
            got += [m.system_properties.priority for m in msgs]
    assert got[:FIRST] == top(priorities)
    assert got == sorted(got, reverse=True)
