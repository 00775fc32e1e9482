"""Lite topics [RIP-83] with ``mq.aio``: the asyncio producer creates them on send, the asyncio simple
consumer subscribes at run time, is woken by a send, gets a message again after its invisible time
and dead-letters it past ``max_delivery_attempts``. The shortest invisible duration is lowered to
0.5 s here (as in test_aio_simple.py): the store's scripts do not depend on it."""

from __future__ import annotations

import asyncio
import time

import pytest

import mq.consumer.simple_core as simple_core
from mq import Admin, Message, aio
from mq.model.properties import LITE_TOPIC, RETRY_TOPIC
from tests.leaks import owned

pytestmark = pytest.mark.anyio
INVISIBLE_S = 1.0


@pytest.fixture(autouse=True)
def short_invisibility(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simple_core, "MIN_INVISIBLE_S", 0.5)


async def test_aio_lite_send_wake_redelivery_and_dead_letter(backend_url: str, namespace: str) -> None:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("LP", read_queues=1, write_queues=1, lite=True, lite_expiration_s=60)
    consumer = aio.SimpleConsumer(
        "alg", backend_url, namespace=namespace, subscriptions={"LP": "*"}, await_duration_s=10, max_delivery_attempts=2
    )
    async with consumer, aio.Producer("alp", backend_url, namespace=namespace) as producer:
        await consumer.subscribe_lite("LP", "conv-1")
        waiting = asyncio.ensure_future(consumer.receive(max_messages=4, invisible_duration_s=INVISIBLE_S))
        await asyncio.sleep(0.3)  # the receive is blocked before the send (the wake under test)
        began = time.monotonic()
        sent = await producer.send(Message("LP", b"hello", lite_topic="conv-1"))
        views = await waiting
        assert time.monotonic() - began < 8, "the receive was not woken by the send"
        assert sent.queue_offset == 0
        assert [(v.body, v.lite_topic, v.delivery_attempt) for v in views] == [(b"hello", "conv-1", 1)]
        # not acked: handed out again after its invisible time, then dead past max_delivery_attempts=2
        again = await consumer.receive(max_messages=4, invisible_duration_s=INVISIBLE_S)
        assert [(v.body, v.delivery_attempt) for v in again] == [(b"hello", 2)]
        consumer.await_duration_s = 2.0  # longer than the invisible time: the third attempt comes due within it
        assert await consumer.receive(max_messages=4, invisible_duration_s=INVISIBLE_S) == []  # third attempt: a dead letter
        dead = admin.dlq_messages("alg")
        assert [m.body for m in dead] == [b"hello"]
        assert (dead[0].system_properties[RETRY_TOPIC], dead[0].system_properties[LITE_TOPIC]) == ("LP", "conv-1")
        await consumer.unsubscribe_lite("LP", "conv-1")
        await producer.send(Message("LP", b"unheard", lite_topic="conv-1"))
        assert await consumer.receive(max_messages=4, invisible_duration_s=INVISIBLE_S) == []
