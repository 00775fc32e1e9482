"""``mq.aio.SimpleConsumer`` on real Redis (standalone and cluster): invisibility, acks, redelivery,
dead letters, filters, a group shared with a sync member, cancellation that loses nothing, no thread.

The shortest invisible duration (10 s, as RocketMQ 5) is lowered to 1 s here so redelivery tests
take seconds; the store's logic does not depend on it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import mq.consumer.simple_core as simple_core
from mq import Admin, Message, Producer, SimpleConsumer, aio
from mq.errors import MQClientError
from mq.store.ops import Cmd, operation
from mq.store.store import StoreOps
from tests.helpers import QUIET_PERIOD_S

pytestmark = pytest.mark.anyio
INVISIBLE_S = 1.0


@pytest.fixture(autouse=True)
def short_invisibility(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simple_core, "MIN_INVISIBLE_S", 0.5)


@pytest.fixture
def admin(backend_url: str, namespace: str) -> Iterator[Admin]:
    with Admin(backend_url, namespace) as a:
        a.create_topic("S", read_queues=2, write_queues=2)
        yield a


def send(url: str, namespace: str, *msgs: Message) -> None:
    with Producer("p", url, namespace=namespace) as producer:
        for m in msgs:
            producer.send(m)


def consumer(url: str, namespace: str, **options: Any) -> aio.SimpleConsumer:
    options = {"subscriptions": {"S": "*"}, "await_duration_s": 0.5, **options}
    return aio.SimpleConsumer("gs", url, namespace=namespace, **options)


async def test_invisibility_ack_extend_redelivery_and_dead_letter(admin: Admin, backend_url: str, namespace: str) -> None:
    async with consumer(backend_url, namespace, max_delivery_attempts=2) as sc:
        send(backend_url, namespace, *(Message("S", b) for b in (b"acked", b"redeliver", b"extend")))
        got = {v.body: v for v in await sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S)}
        assert set(got) == {b"acked", b"redeliver", b"extend"}
        assert all(v.delivery_attempt == 1 for v in got.values())
        await sc.ack(got[b"acked"])
        extended = await sc.change_invisible_duration(got[b"extend"], 3 * INVISIBLE_S)
        assert await sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S) == []  # all invisible now
        await asyncio.sleep(INVISIBLE_S + 0.3)  # time passes: the invisible time runs out (the behaviour under test)
        again = {v.body: v for v in await sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S)}
        assert set(again) == {b"redeliver"} and again[b"redeliver"].delivery_attempt == 2
        with pytest.raises(MQClientError, match="expired"):
            await sc.ack(got[b"redeliver"])  # the old receipt is no longer valid
        await asyncio.sleep(2 * INVISIBLE_S + 0.3)  # time passes: the extended invisible time runs out
        late = {v.body: v for v in await sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S)}
        assert set(late) == {b"extend"} and late[b"extend"].delivery_attempt == 2
        await sc.ack(late[b"extend"])
        with pytest.raises(MQClientError, match="expired"):
            await sc.ack(extended)
    dead = admin.dlq_messages("gs")  # "redeliver" was due for its third attempt: past 2, a dead letter
    assert [m.body for m in dead] == [b"redeliver"]
    assert dead[0].system_properties["DLQ_REASON"] == "max delivery attempts"


async def test_a_cancelled_receive_loses_nothing(
    admin: Admin, backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed_out = asyncio.Event()
    real = StoreOps.receive_simple.op

    def slow_after_handing_out(self: Any, *args: Any, **kwargs: Any) -> Any:  # the store operation, delayed
        result = yield from real(self, *args, **kwargs)
        if result and not handed_out.is_set():
            handed_out.set()
            yield Cmd(lambda client: asyncio.sleep(30))  # cancelled here: the store already handed it out
        return result

    monkeypatch.setattr(StoreOps, "receive_simple", operation(slow_after_handing_out))
    async with consumer(backend_url, namespace) as sc:
        send(backend_url, namespace, Message("S", b"kept"))
        task = asyncio.create_task(sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S))
        await asyncio.wait_for(handed_out.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S) == []  # invisible for now
        await asyncio.sleep(INVISIBLE_S + 0.3)  # time passes: the invisible time runs out
        [view] = await sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S)
        assert (view.body, view.delivery_attempt) == (b"kept", 2)
        await sc.ack(view)


async def test_tag_filter_and_waiting_for_a_message(admin: Admin, backend_url: str, namespace: str) -> None:
    async with consumer(backend_url, namespace, subscriptions={"S": "TagA || TagB"}, await_duration_s=5) as sc:
        waiting = asyncio.create_task(sc.receive(max_messages=8, invisible_duration_s=30))
        await asyncio.sleep(0.2)  # the receive waits first (had it not, it would find the message: no false failure)
        send(backend_url, namespace, Message("S", b"a", tags="TagA"), Message("S", b"c", tags="TagC"))
        views = await asyncio.wait_for(waiting, 10)
        send(backend_url, namespace, Message("S", b"b", tags="TagB"))
        views += await sc.receive(max_messages=8, invisible_duration_s=30)
        assert sorted(v.body for v in views) == [b"a", b"b"]
        for v in views:
            await sc.ack(v)


async def test_a_sync_and_an_async_member_share_the_group(admin: Admin, backend_url: str, namespace: str) -> None:
    seen: list[bytes] = []
    with SimpleConsumer("gs", backend_url, namespace=namespace, subscriptions={"S": "*"}, await_duration_s=0) as sync_sc:
        async with consumer(backend_url, namespace) as async_sc:
            send(backend_url, namespace, *(Message("S", b"%02d" % i) for i in range(20)))
            for _ in range(10):
                for views in (sync_sc.receive(max_messages=3, invisible_duration_s=30), await async_sc.receive(3, 30)):
                    seen += [v.body for v in views]
                    for v in views:
                        await async_sc.ack(v)  # a receipt works with any member
            quiet_until = time.monotonic() + QUIET_PERIOD_S  # then nothing more (a duplicate would come now)
            while time.monotonic() < quiet_until:
                seen += [v.body for v in sync_sc.receive(max_messages=3, invisible_duration_s=30)]
                seen += [v.body for v in await async_sc.receive(3, 30)]
    assert sorted(seen) == [b"%02d" % i for i in range(20)]  # each exactly once


async def test_bad_input_and_not_started(admin: Admin, backend_url: str, namespace: str) -> None:
    sc = consumer(backend_url, namespace)
    with pytest.raises(MQClientError, match="not started"):
        await sc.receive()
    with pytest.raises(MQClientError, match="does not exist"):
        await consumer(backend_url, namespace, subscriptions={"nope": "*"}).start()
    assert admin.consumer_connections("gs") == []  # nothing stays registered
    async with sc:
        with pytest.raises(MQClientError, match="max_messages"):
            await sc.receive(max_messages=33)
        with pytest.raises(MQClientError, match="invisible_duration_s"):
            await sc.receive(invisible_duration_s=13 * 3600)
        with pytest.raises(MQClientError, match="malformed receipt"):
            view = simple_core.MessageView.__new__(simple_core.MessageView)
            view.msg_id, view.receipt_handle = "x", "nonsense"
            await sc.ack(view)
    with pytest.raises(MQClientError, match="await_duration_s"):
        consumer(backend_url, namespace, await_duration_s=61)


async def test_no_thread_is_started(admin: Admin, backend_url: str, namespace: str) -> None:
    before = set(threading.enumerate())
    async with consumer(backend_url, namespace, await_duration_s=1) as sc:
        send(backend_url, namespace, Message("S", b"x"))  # (a sync producer: its threads are not counted)
        before = set(threading.enumerate())
        [view] = await sc.receive(invisible_duration_s=INVISIBLE_S)
        await sc.ack(view)
        assert await sc.receive(invisible_duration_s=INVISIBLE_S) == []  # a wait for news
        started = set(threading.enumerate()) - before
    assert started == set(), started
