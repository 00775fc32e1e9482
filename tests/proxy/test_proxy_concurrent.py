"""Concurrent SendMessage calls: every message is stored once at the offset its answer names, and a
put refused while others are in flight fails only its own call."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest

from mq import Admin
from mq.proxy.codes import OK
from mq.proxy.pb import service
from mq.store import Store
from mq.store.connection import Connection
from tests.proxy.test_proxy import _message, running
from tests.servers import RedisServer

pytestmark = pytest.mark.anyio


@pytest.fixture
def env(redis_server: RedisServer) -> Any:
    namespace = f"pr{uuid.uuid4().hex[:8]}"
    with contextlib.closing(Admin(redis_server.url, namespace)) as admin:
        admin.create_topic("T", read_queues=4, write_queues=4)
        yield redis_server.url, namespace


async def test_concurrent_sends_each_get_their_own_message_and_offset(env: Any) -> None:
    async with running(*env) as r:
        sends = 200

        async def one(n: int) -> Any:
            return await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T", b"m%d" % n)]))

        answers = await asyncio.gather(*(one(n) for n in range(sends)))
    assert all(a.status.code == OK for a in answers)
    with contextlib.closing(Connection(*env)) as conn:
        store = Store(conn)
        stored = [m for qid in range(4) for m in store.read("T", qid, 0, sends)]
    assert sorted(m.body for m in stored) == sorted(b"m%d" % n for n in range(sends))
    # each answer names its own message and the offset it was stored at (not a neighbour's of its round)
    answered = {a.entries[0].message_id: a.entries[0].offset for a in answers}
    assert answered == {m.msg_id: m.queue_offset for m in stored}


async def test_a_put_refused_among_concurrent_calls_fails_each_alike(env: Any) -> None:
    url, namespace = env
    async with running(url, namespace) as r:
        good = service.SendMessageRequest(messages=[_message("T", b"ok")])
        first = await r.stub.SendMessage(good)  # the topic's config is cached by the endpoint now
        assert first.status.code == OK
        with contextlib.closing(Admin(url, namespace)) as admin:
            admin.delete_topic("T")  # the cached config still names its queues: the put script refuses
        answers = await asyncio.gather(*(r.stub.SendMessage(good) for _ in range(8)))
    assert all(a.status.code != OK for a in answers)
    assert {a.status.code for a in answers} == {answers[0].status.code}
