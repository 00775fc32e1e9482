"""Simple consumers (sync and ``mq.aio``, the ``api`` fixture), standalone and cluster: the message
trace (an ack is a ``consume`` event ``ACK``, a delivery not acked within its invisible time an
``INVISIBLE_TIMEOUT`` event, seen when the message is handed out again, a dead letter a ``dlq``
event — each with the delivery attempt it ended; with tracing off nothing is recorded), and dead
letters resent by ``Admin.resend_dlq`` coming back to the group's simple consumers.

The shortest invisible duration (10 s, as RocketMQ 5) is lowered to 0.5 s here so redelivery takes
a second; the store's logic does not depend on it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import mq.consumer.simple_core as simple_core
from mq import Admin, Message
from mq.errors import MQClientError
from tests.apis import Api
from tests.helpers import admin_once
from tests.leaks import owned
from tests.procs import wait_for

INVISIBLE_S = 0.6


@pytest.fixture(autouse=True)
def short_times(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(simple_core, "MIN_INVISIBLE_S", 0.5)
    monkeypatch.setattr(simple_core, "QUEUE_REFRESH_S", 0.2)  # a retry topic made later is seen at once


def simple_consumer(api: Api, url: str, namespace: str, trace: bool | None) -> Any:
    """A started simple consumer of group ``gs`` on ``ST`` (two deliveries before the DLQ)."""
    options: dict[str, Any] = {"subscriptions": {"ST": "*"}, "await_duration_s": 0.3, "max_delivery_attempts": 2}
    return api.simple_consumer("gs", url, namespace=namespace, trace=trace, **options).start()


def scenario(api: Api, url: str, namespace: str, trace: bool | None) -> dict[bytes, str]:
    """Send ``acked`` and ``dropped`` (a producer traced as ``trace`` says); receive both, ack ``acked``,
    let ``dropped`` run out of its two deliveries into the DLQ. Returns the msg id of each body."""
    admin_once(url, namespace).create_topic("ST", read_queues=1, write_queues=1)
    consumer = simple_consumer(api, url, namespace, trace)  # a new group starts at the queue's end
    with api.producer("p", url, namespace=namespace, trace=trace) as producer:
        ids = {body: producer.send(Message("ST", body)).msg_id for body in (b"acked", b"dropped")}
    first = {v.body: v for v in consumer.receive(4, INVISIBLE_S)}
    assert set(first) == {b"acked", b"dropped"}
    consumer.ack(first[b"acked"])
    time.sleep(INVISIBLE_S + 0.2)  # time passes: the invisible time runs out
    [again] = consumer.receive(4, INVISIBLE_S)
    assert (again.body, again.delivery_attempt) == (b"dropped", 2)
    time.sleep(INVISIBLE_S + 0.2)  # time passes: the invisible time runs out
    assert consumer.receive(4, INVISIBLE_S) == []  # its third delivery would be past max_delivery_attempts=2: dead
    consumer.shutdown()  # writes the events left
    assert [m.msg_id for m in admin_once(url, namespace).dlq_messages("gs")] == [ids[b"dropped"]]
    return ids


def test_acks_timeouts_and_dead_letters_are_traced(api: Api, backend_url: str, namespace: str) -> None:
    began_ms = int(time.time() * 1000)
    ids = scenario(api, backend_url, namespace, True)
    admin = owned(Admin(backend_url, namespace))
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


def test_nothing_is_traced_when_tracing_is_off(api: Api, redis_server: Any, namespace: str) -> None:
    ids = scenario(api, redis_server.url, namespace, None)  # the namespace setting is off by default
    admin = owned(Admin(redis_server.url, namespace))
    assert all(admin.message_trace("ST", msg_id) == [] for msg_id in ids.values())


def test_resent_dead_letters_come_back_to_the_groups_simple_consumers(api: Api, backend_url: str, namespace: str) -> None:
    """The group's retry topic is made by the resend, after the consumer started: the consumer reads it
    from its first message, shows the original topic, and its receipts (ack, change) name the retry queue."""
    ids = scenario(api, backend_url, namespace, False)
    consumer = simple_consumer(api, backend_url, namespace, False)
    admin = owned(Admin(backend_url, namespace))
    assert admin.resend_dlq("gs") == 1
    got: list[Any] = []
    wait_for(lambda: bool(got.extend(consumer.receive(4, INVISIBLE_S)) or got), 10, "the resent letter")
    [view] = got
    assert (view.msg_id, view.body, view.topic, view.delivery_attempt) == (ids[b"dropped"], b"dropped", "ST", 1)
    assert view.receipt_handle.endswith(":%RETRY%gs")
    changed = consumer.change_invisible_duration(view, 5)
    with pytest.raises(MQClientError, match="expired"):
        consumer.ack(view)  # the old receipt
    consumer.ack(changed)
    time.sleep(INVISIBLE_S + 0.2)  # time passes: the invisible time runs out
    assert consumer.receive(4, INVISIBLE_S) == []  # acked: never handed out again
    consumer.shutdown()
    assert admin.resend_dlq("gs") == 0  # resent once only
