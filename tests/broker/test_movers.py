"""The broker service's movers and threads: the timer moves each message once and dead-letters what it
cannot store, in bounded calls; half messages and DLQ letters are moved once; the timer and check-back
threads survive what one round throws at them."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from mq import Admin, Message, Producer
from mq.keys import timer_member
from tests.procs import wait_for
from tests.servers import RedisServer
from tests.written_around import close_opened, encoded, open_store, raw  # noqa: F401 - close_opened: autouse


def test_the_timer_moves_each_message_once_and_dead_letters_what_it_cannot_store(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    from scheduler.timers import TimerDelivery

    url = redis_server.url
    store = open_store(url, namespace)
    keys = store.queue_keys("h", 0)
    now = int(time.time() * 1000)
    store.put_delayed("h", 0, encoded(b"good-1"), now - 10)
    client = raw(url)  # written around the library (the client role has XADD): 5 000 keys
    bad_id = client.xadd(keys.delayed, {"i": "bad", "b": b"x", "bt": 1, "k": "\x1f".join(f"k{i}" for i in range(5000))})
    client.zadd(keys.timer, {bad_id: now - 5})
    store.put_delayed("h", 0, encoded(b"good-2"), now - 1)
    client.zadd(store.keys.timers, {timer_member("h", 0): now - 10})

    delivery = TimerDelivery(store, poll_ms=50, batch=100, stop=threading.Event())
    with caplog.at_level(logging.ERROR, logger="scheduler.timers"):
        for _ in range(3):
            delivery.deliver_once()
    assert [m.body for m in store.read("h", 0, 0, 10)] == [b"good-1", b"good-2"]  # each once, in due order
    dead = store.timer_dead_letters("h", 0)
    assert len(dead) == 1 and dead[0][0] == bad_id.decode() and "keys" in dead[0][1]
    assert client.zcard(keys.timer) == 0 and client.xlen(keys.delayed) == 0
    assert "could not be delivered" in caplog.text


@pytest.mark.parametrize(("count", "body_size", "keys", "most"), [(5, 300 * 1024, 0, 3), (40, 8, 64, 32)])
def test_a_timer_move_stops_at_one_calls_bytes_or_keys(
    redis_server: RedisServer, namespace: str, count: int, body_size: int, keys: int, most: int
) -> None:
    """docs/security.md: one ``deliver-due`` call moves at most 1 MiB and 2 048 keys (then the next call
    moves the rest): five 300 KiB messages due at once go 3 then 2, forty of 64 keys go 32 then 8."""
    store = open_store(redis_server.url, namespace)
    due = int(time.time() * 1000) + 60_000
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        for i in range(count):
            body = b"%08d" % i + b"x" * (body_size - 8)
            producer.send(Message("h", body, keys=[f"k{i}-{k}" for k in range(keys)], deliver_time_ms=due))
    [first] = store.deliver_due([("h", 0)], due, 1000)
    [second] = store.deliver_due([("h", 0)], due, 1000)
    assert (first.moved, second.moved) == (most, count - most), (first, second)
    assert [m.body[:8] for m in store.read("h", 0, 0, count)] == [b"%08d" % i for i in range(count)]


def test_a_half_message_that_cannot_be_committed_is_discarded_once(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    store = open_store(url, namespace)
    keys = store.queue_keys("h", 0)
    client = raw(url)
    half = client.xadd(keys.half, {"i": "tx", "b": b"x", "bt": 1, "st": 5})  # "st" is the store's own field
    client.zadd(keys.halfidx, {half: 1})
    assert store.end_transaction("h", 0, half.decode(), True) == (True, -1)
    assert store.end_transaction("h", 0, half.decode(), True) == (False, -1)
    assert store.read("h", 0, 0, 10) == []
    with Admin(url, namespace) as admin:
        discarded = admin.discarded_transactions("h")
    reasons = [m.system_properties["DISCARD_REASON"] for m in discarded]
    assert reasons == ["malformed: field st is the store time, set by the store"]


def test_resend_dlq_resends_each_letter_once_and_skips_letters_whose_topic_is_gone(
    redis_server: RedisServer, namespace: str
) -> None:
    from mq.consumer.retry import SendBack

    url = redis_server.url
    store = open_store(url, namespace, "live")
    with Admin(url, namespace) as admin:
        admin.create_topic("gone", read_queues=1, write_queues=1)
    with Producer("p", url, namespace=namespace) as producer:
        ids = {t: producer.send(Message(t, t.encode())).msg_id for t in ("live", "gone")}
    back = SendBack(store, "g", max_reconsume_times=0)
    for topic in ("gone", "live"):
        back.dead_letter(store.read(topic, 0, 0, 1)[0], "test")
    with Admin(url, namespace) as admin:
        admin.delete_topic("gone")
        assert admin.resend_dlq("g", msg_ids=[ids["live"]]) == 1
        assert admin.resend_dlq("g", msg_ids=[ids["live"]]) == 0  # once, even when named again
        assert admin.resend_dlq("g") == 0  # the letter of "gone" is skipped, every time, without failing
        assert len(admin.last_resend_skipped) == 1 and ids["gone"] in admin.last_resend_skipped[0]
        assert [m.body for m in store.read("live", 0, 0, 10)] == [b"live"]  # resent to the group, not the topic
        assert [m.body for m in store.read("%RETRY%g", 0, 0, 10)] == [b"live"]
        admin.create_topic("gone", read_queues=1, write_queues=1)
        assert admin.resend_dlq("g") == 1  # skipped letters stay unmarked: resent once the topic is back


def test_the_check_back_thread_survives_a_malformed_request(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A request written around the library (the client role has XADD) used to end the thread with a
    KeyError: every later check-back of the group went unanswered."""
    from mq import LocalTransactionState, TransactionProducer

    url = redis_server.url
    store = open_store(url, namespace)
    txcheck = store.keys.group("tx").txcheck
    producer = TransactionProducer("tx", url, namespace=namespace, checker=lambda msg: LocalTransactionState.COMMIT_MESSAGE)
    with producer, caplog.at_level(logging.ERROR, logger="mq.producer"):
        sent = producer.send_message_in_transaction(Message("h", b"tx"), lambda msg, arg: LocalTransactionState.UNKNOW)
        topic, qid, half_id = sent.transaction_id.split(":")
        client = raw(url)
        client.xadd(txcheck, {"nonsense": "x"})
        client.xadd(txcheck, {"topic": topic, "queue_id": qid, "half_id": half_id, "checks": 1})
        wait_for(lambda: [m.body for m in store.read("h", 0, 0, 5)] == [b"tx"], 10, "the check-back after a bad request")
    assert "could not be answered" in caplog.text


def test_the_timer_thread_survives_an_unexpected_error(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:

    from scheduler.timers import TimerDelivery

    store = open_store(redis_server.url, namespace)
    stop = threading.Event()
    delivery = TimerDelivery(store, poll_ms=20, batch=100, stop=stop)
    real = delivery.deliver_once
    calls: list[int] = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in one round")
        return real()

    monkeypatch.setattr(delivery, "deliver_once", flaky)
    with caplog.at_level(logging.ERROR, logger="scheduler.timers"):
        delivery.ensure_running()
        wait_for(lambda: len(calls) >= 3, 10, "rounds after the failing one")
        stop.set()
        delivery.join()
    assert "timer delivery round failed unexpectedly" in caplog.text
