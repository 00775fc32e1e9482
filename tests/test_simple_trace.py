"""The message trace of simple consumers (sync and ``mq.aio``), standalone and cluster: an ack is a
``consume`` event ``ACK``, a delivery not acked within its invisible time an ``INVISIBLE_TIMEOUT``
event (seen when the message is handed out again), a dead letter a ``dlq`` event — each with the
delivery attempt it ended; with tracing off nothing is recorded.

The shortest invisible duration (10 s, as RocketMQ 5) is lowered to 0.5 s here so redelivery takes
a second; the store's logic does not depend on it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

import mq.consumer.simple_core as simple_core
from mq import Admin, Message, Producer, SimpleConsumer, aio
from mq.consumer.simple_core import MessageView

INVISIBLE_S = 0.6


@pytest.fixture(autouse=True)
def short_invisibility(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simple_core, "MIN_INVISIBLE_S", 0.5)


class Receiver:
    """One simple consumer of group ``gs`` on topic ``ST``, sync or asyncio, driven by plain calls."""

    def __init__(self, style: str, url: str, namespace: str, trace: bool | None) -> None:
        options: dict[str, Any] = {
            "namespace": namespace,
            "subscriptions": {"ST": "*"},
            "await_duration_s": 0.3,
            "max_delivery_attempts": 2,
            "trace": trace,
        }
        self._loop = asyncio.new_event_loop() if style == "aio" else None
        self._consumer: Any = (aio.SimpleConsumer if self._loop else SimpleConsumer)("gs", url, **options)
        self._call(self._consumer.start)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._loop.run_until_complete(fn(*args)) if self._loop else fn(*args)

    def receive(self) -> list[MessageView]:
        return list(self._call(self._consumer.receive, 4, INVISIBLE_S))

    def ack(self, view: MessageView) -> None:
        self._call(self._consumer.ack, view)

    def close(self) -> None:
        self._call(self._consumer.shutdown)
        if self._loop:
            self._loop.close()


def scenario(style: str, url: str, namespace: str, trace: bool | None) -> dict[bytes, str]:
    """Send ``acked`` and ``dropped`` (traced producer); receive both, ack ``acked``, let ``dropped`` run
    out of its two deliveries into the DLQ. Returns the msg id of each body."""
    Admin(url, namespace).create_topic("ST", read_queues=1, write_queues=1)
    receiver = Receiver(style, url, namespace, trace)  # a new group starts at the queue's end
    try:
        with Producer("p", url, namespace=namespace, trace=trace) as producer:
            ids = {body: producer.send(Message("ST", body)).msg_id for body in (b"acked", b"dropped")}
        first = {v.body: v for v in receiver.receive()}
        assert set(first) == {b"acked", b"dropped"}
        receiver.ack(first[b"acked"])
        time.sleep(INVISIBLE_S + 0.2)
        [again] = receiver.receive()
        assert (again.body, again.delivery_attempt) == (b"dropped", 2)
        time.sleep(INVISIBLE_S + 0.2)
        assert receiver.receive() == []  # its third delivery would be past max_delivery_attempts=2: dead
    finally:
        receiver.close()  # writes the events left
    assert [m.msg_id for m in Admin(url, namespace).dlq_messages("gs")] == [ids[b"dropped"]]
    return ids


@pytest.mark.parametrize("style", ["sync", "aio"])
def test_acks_timeouts_and_dead_letters_are_traced(style: str, backend_url: str, namespace: str) -> None:
    began_ms = int(time.time() * 1000)
    ids = scenario(style, backend_url, namespace, True)
    admin = Admin(backend_url, namespace)
    acked = admin.message_trace("ST", ids[b"acked"])
    assert [(e.kind, e.group, e.status, e.attempt) for e in acked] == [("send", "p", "SEND_OK", 1), ("consume", "gs", "ACK", 1)]
    send, ack = acked
    assert ack.time_ms >= send.time_ms >= began_ms - 5_000 and 0 <= ack.cost_ms < 5_000
    assert (ack.topic, ack.queue_id, ack.offset) == ("ST", 0, 0) and ack.host and ack.client_id
    dropped = admin.message_trace("ST", ids[b"dropped"])
    assert [(e.kind, e.group, e.status, e.attempt) for e in dropped] == [
        ("send", "p", "SEND_OK", 1),
        ("consume", "gs", "INVISIBLE_TIMEOUT", 1),
        ("dlq", "gs", "%DLQ%gs", 2),
    ]
    timeout, dead = dropped[1:]
    assert dead.time_ms - timeout.time_ms >= INVISIBLE_S * 1000 - 50  # one invisible time apart (store clock)


@pytest.mark.parametrize("style", ["sync", "aio"])
def test_nothing_is_traced_when_tracing_is_off(style: str, redis_server: Any, namespace: str) -> None:
    ids = scenario(style, redis_server.url, namespace, None)  # the namespace setting is off by default
    admin = Admin(redis_server.url, namespace)
    assert all(admin.message_trace("ST", msg_id) == [] for msg_id in ids.values())
