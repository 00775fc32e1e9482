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


async def _counting_reads(r: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, Any]]:
    """The store reads of topic and group configs the endpoint of ``r`` makes from now on."""
    backend = r.server.service.backend
    reads: list[tuple[str, Any]] = []
    real = backend.call

    async def counting(name: str, *args: Any, **kwargs: Any) -> Any:
        if name in ("topic", "group_config_json"):
            reads.append((name, args[0]))
        return await real(name, *args, **kwargs)

    monkeypatch.setattr(backend, "call", counting)
    return reads


async def test_calls_finding_a_config_stale_at_once_share_one_store_read(env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    async with running(*env) as r:
        endpoint = r.server.service
        reads = await _counting_reads(r, monkeypatch)
        configs = await asyncio.gather(*(endpoint._topic("T") for _ in range(32)))
        groups = await asyncio.gather(*(endpoint._group_config("G") for _ in range(32)))
        missing = await asyncio.gather(*(endpoint._topic("absent") for _ in range(8)), return_exceptions=True)
        again = await endpoint._topic("T")  # cached now: no read
    assert reads == [("topic", "T"), ("group_config_json", "G"), ("topic", "absent")]
    assert [c.write_queues for c in configs] == [4] * 32 and again is configs[0]
    assert groups == [None] * 32  # a group without a config
    assert [getattr(e, "code", e) for e in missing] == ["TOPIC_NOT_FOUND"] * 8  # each caller is told, none cached


async def test_a_caller_cancelled_while_a_shared_read_runs_leaves_it_to_the_others(
    env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with running(*env) as r:
        endpoint = r.server.service
        reads = await _counting_reads(r, monkeypatch)
        first = asyncio.ensure_future(endpoint._topic("T"))
        others = [asyncio.ensure_future(endpoint._topic("T")) for _ in range(4)]
        await asyncio.sleep(0)  # every caller waits on the one read now
        first.cancel()
        configs = await asyncio.gather(*others)
        with pytest.raises(asyncio.CancelledError):
            await first
    assert reads == [("topic", "T")]
    assert [c.write_queues for c in configs] == [4] * 4
