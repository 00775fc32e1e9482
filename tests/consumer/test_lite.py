"""Lite topics [RIP-83] with the simple consumer: created on send, per-member subscriptions changed at
run time, ordering within a lite topic, expiry by Redis (messages and offsets), the wake on any of a
member's lite topics, and a stopped member's lite topics handed to another member."""

from __future__ import annotations

import dataclasses
import threading
import time
from typing import Any

import pytest

from mq import Admin, Message, Producer, SimpleConsumer
from mq.consumer import lite as lite_member
from mq.errors import InvalidNameError, MQClientError
from mq.keys import Keys
from mq.model.message import MessageExt
from mq.store import Store
from mq.store.connection import Connection
from tests.helpers import raw_client, snapshot, stays_quiet
from tests.leaks import owned
from tests.procs import wait_for

PARENT = "LP"


@pytest.fixture
def parent(backend_url: str, namespace: str) -> Admin:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic(PARENT, read_queues=1, write_queues=1, lite=True, lite_expiration_s=60)
    return admin


def member(url: str, namespace: str, client_id: str, await_s: float = 0.5) -> SimpleConsumer:
    return SimpleConsumer(
        "lg", url, namespace=namespace, subscriptions={PARENT: "*"}, await_duration_s=await_s, client_id=client_id
    ).start()


def drain(consumer: SimpleConsumer, want: int, timeout_s: float = 15.0) -> list[Any]:
    """Receive and ack until ``want`` messages came (fails after ``timeout_s``)."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want:
        assert time.monotonic() < deadline, f"only {len(got)} of {want} lite messages arrived"
        views = consumer.receive(max_messages=32, invisible_duration_s=30)
        for v in views:
            consumer.ack(v)
        got += views
    return got


def test_the_first_send_creates_the_lite_topic_and_the_admin_lists_it_by_prefix(
    parent: Admin, backend_url: str, namespace: str
) -> None:
    assert parent.list_lite_topics(PARENT).names == []
    with Producer("lp", backend_url, namespace=namespace) as producer:
        first = producer.send(Message(PARENT, b"a", lite_topic="session-1"))
        second = producer.send_async(Message(PARENT, b"b", lite_topic="session-1")).result(10)
        other = producer.send(Message(PARENT, b"c", lite_topic="agent-7"))
    assert (first.queue_offset, second.queue_offset, other.queue_offset) == (0, 1, 0)
    assert first.message_queue.topic == PARENT
    assert parent.list_lite_topics(PARENT, "session").names == ["session-1"]
    assert sorted(parent.list_lite_topics(PARENT).names) == ["agent-7", "session-1"]
    # the scripts build the lite topic's keys in the shapes mq/keys.py names
    keys = Keys(namespace).lite(PARENT)
    client = raw_client(backend_url)
    try:
        assert client.hget(keys.state("session-1"), "seq") == b"2"
        assert client.hexists(keys.state("session-1"), "m:1")
        assert 0 < client.pttl(keys.state("session-1")) <= 60_000
    finally:
        client.close()


def test_pages_of_the_listing_cover_every_lite_topic_once(parent: Admin, backend_url: str, namespace: str) -> None:
    with Producer("lp", backend_url, namespace=namespace) as producer:
        for i in range(250):
            producer.send(Message(PARENT, b"x", lite_topic=f"s-{i}"))
        producer.send(Message(PARENT, b"x", lite_topic="t-0"))
    seen: list[str] = []
    cursor, pages = 0, 0
    while True:
        page = parent.list_lite_topics(PARENT, "s-", cursor=cursor, count=50)
        assert len(page.names) <= 50
        seen += page.names
        pages += 1
        cursor = page.cursor
        if not cursor:
            break
    assert sorted(seen) == sorted(f"s-{i}" for i in range(250))  # each once
    assert pages >= 5


def test_bad_lite_input_is_refused_before_any_write(parent: Admin, backend_url: str, namespace: str) -> None:
    parent.create_topic("plain", read_queues=1, write_queues=1)
    with Producer("lp", backend_url, namespace=namespace) as producer:
        producer.send(Message(PARENT, b"x", lite_topic="ok"))
        before = snapshot(backend_url, namespace)
        cases = [
            (lambda: producer.send(Message(PARENT, b"x", lite_topic="bad name")), InvalidNameError),
            (lambda: producer.send(Message(PARENT, b"x", lite_topic="s" * 65)), InvalidNameError),
            (lambda: producer.send(Message(PARENT, b"x", lite_topic="")), InvalidNameError),
            (lambda: producer.send(Message(PARENT, b"x", lite_topic="ok", delay_level=2)), MQClientError),
            (lambda: producer.send(Message("plain", b"x", lite_topic="ok")), MQClientError),
            (lambda: producer.send(Message(PARENT, b"x")), MQClientError),
            (lambda: producer.send_async(Message(PARENT, b"x")).result(10), MQClientError),
            (lambda: producer.send_batch([Message(PARENT, b"x", lite_topic="ok")]), MQClientError),
            (lambda: parent.create_topic("x", lite_expiration_s=5), MQClientError),
            (lambda: parent.create_topic("x", lite=True, lite_expiration_s=0), MQClientError),
            (lambda: parent.list_lite_topics("plain"), MQClientError),
        ]
        for action, error in cases:
            with pytest.raises(error):
                action()
        consumer = member(backend_url, namespace, "m-bad")
        with consumer:
            before = snapshot(backend_url, namespace)
            for p, name in ((PARENT, "a:b"), (PARENT, "x" * 65), ("plain", "ok"), ("nosuch", "ok")):
                with pytest.raises(MQClientError):
                    consumer.subscribe_lite(p, name)
            assert snapshot(backend_url, namespace) == before


def test_messages_of_a_lite_topic_come_in_send_order(parent: Admin, backend_url: str, namespace: str) -> None:
    with member(backend_url, namespace, "m-order") as consumer, Producer("lp", backend_url, namespace=namespace) as producer:
        consumer.subscribe_lite(PARENT, "chat")
        futures = [producer.send_async(Message(PARENT, b"%d" % i, lite_topic="chat")) for i in range(150)]
        assert [f.result(10).queue_offset for f in futures] == list(range(150))  # one producer's async sends keep their order
        for i in range(150, 200):
            producer.send(Message(PARENT, b"%d" % i, lite_topic="chat"))
        got = drain(consumer, 200)
    assert [int(v.body) for v in got] == list(range(200))
    assert [v.queue_offset for v in got] == list(range(200))
    assert {v.lite_topic for v in got} == {"chat"} and {v.topic for v in got} == {PARENT}


def test_each_member_gets_only_the_lite_topics_it_subscribed_changed_at_run_time(
    parent: Admin, backend_url: str, namespace: str
) -> None:
    a, b = member(backend_url, namespace, "m-a"), member(backend_url, namespace, "m-b")
    with a, b, Producer("lp", backend_url, namespace=namespace) as producer:
        a.subscribe_lite(PARENT, "s1")
        b.subscribe_lite(PARENT, "s2")
        producer.send(Message(PARENT, b"to-s1", lite_topic="s1"))
        producer.send(Message(PARENT, b"to-s2", lite_topic="s2"))
        assert [v.body for v in drain(a, 1)] == [b"to-s1"]
        assert [v.body for v in drain(b, 1)] == [b"to-s2"]
        # at run time: a drops s1, b takes it; a message sent before b subscribes waits for b
        a.unsubscribe_lite(PARENT, "s1")
        producer.send(Message(PARENT, b"s1-between", lite_topic="s1"))
        assert a.receive(max_messages=8, invisible_duration_s=30) == []
        b.subscribe_lite(PARENT, "s1")
        producer.send(Message(PARENT, b"s1-after", lite_topic="s1"))
        assert sorted(v.body for v in drain(b, 2)) == [b"s1-after", b"s1-between"]
        # the latest subscriber in a group owns a lite topic: a takes s2 from b
        a.subscribe_lite(PARENT, "s2")
        producer.send(Message(PARENT, b"s2-now", lite_topic="s2"))
        assert [v.body for v in drain(a, 1)] == [b"s2-now"]
        seen_by_b: list[Any] = []
        stays_quiet(lambda: len(seen_by_b.__iadd__(b.receive(8, 30))), "messages b receives")


def test_a_receive_wakes_on_a_send_to_any_of_many_subscribed_lite_topics(parent: Admin, backend_url: str, namespace: str) -> None:
    with member(backend_url, namespace, "m-wake", await_s=20) as consumer, Producer("lp", backend_url, namespace=namespace) as p:
        for i in range(300):
            consumer.subscribe_lite(PARENT, f"w-{i}")
        got: list[Any] = []
        started = threading.Event()

        def receive() -> None:
            started.set()
            got.extend(consumer.receive(max_messages=4, invisible_duration_s=30))

        thread = threading.Thread(target=receive)
        thread.start()
        started.wait(5)
        time.sleep(0.3)  # the receive is blocked in its wait before the send (the path under test)
        began = time.monotonic()
        p.send(Message(PARENT, b"ping", lite_topic="w-217"))
        thread.join(20)
        took = time.monotonic() - began
        assert [(v.body, v.lite_topic) for v in got] == [(b"ping", "w-217")]
        assert took < 10, f"the receive waited {took:.1f} s of its 20: it was not woken by the send"
        consumer.ack(got[0])


@pytest.mark.slow
def test_a_lite_topic_expires_with_its_messages_and_offsets_and_a_later_send_creates_it_afresh(
    backend_url: str, namespace: str
) -> None:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic(PARENT, read_queues=1, write_queues=1, lite=True, lite_expiration_s=1)
    keys = Keys(namespace).lite(PARENT)
    client = raw_client(backend_url)
    try:
        with member(backend_url, namespace, "m-exp") as consumer, Producer("lp", backend_url, namespace=namespace) as p:
            consumer.subscribe_lite(PARENT, "brief")
            for body in (b"one", b"two", b"three"):
                p.send(Message(PARENT, body, lite_topic="brief"))
            views = consumer.receive(max_messages=2, invisible_duration_s=30)
            assert [v.body for v in views] == [b"one", b"two"]
            consumer.ack(views[0])  # one acked, one in flight, one never handed out: all go with the topic
            lite_keys = [keys.state("brief"), keys.inflight("lg", "brief")]
            assert client.exists(*lite_keys) == 2
            wait_for(lambda: client.exists(*lite_keys) == 0, 10, "Redis to expire the idle lite topic")
            assert admin.list_lite_topics(PARENT).names == []
            with pytest.raises(MQClientError, match="expired"):
                consumer.ack(views[1])
            again = p.send(Message(PARENT, b"fresh", lite_topic="brief"))
            assert again.queue_offset == 0  # created afresh: offsets from 0
            got = drain(consumer, 1)
            assert [(v.body, v.queue_offset, v.delivery_attempt) for v in got] == [(b"fresh", 0, 1)]
    finally:
        client.close()


@pytest.mark.slow
def test_a_stopped_members_lite_topics_go_to_another_member(
    parent: Admin, backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(lite_member, "LITE_MEMBER_TIMEOUT_S", 2.0)
    crashed = member(backend_url, namespace, "m-crash")
    survivor = member(backend_url, namespace, "m-live")
    store = owned(Store(Connection(backend_url, namespace)))
    with survivor, Producer("lp", backend_url, namespace=namespace) as producer:
        names = [f"c-{i}" for i in range(40)]
        for name in names:
            crashed.subscribe_lite(PARENT, name)
        survivor.subscribe_lite(PARENT, "own")
        producer.send(Message(PARENT, b"before", lite_topic="c-0"))
        assert [v.body for v in drain(crashed, 1)] == [b"before"]
        # the crash: it stops calling anything and never says goodbye (its connections just close)
        crashed._conn.close()
        crashed._poll.close()
        producer.send(Message(PARENT, b"while-down", lite_topic="c-5"))
        for name in names[10:]:
            producer.send(Message(PARENT, name.encode(), lite_topic=name))
        got = drain(survivor, 31, timeout_s=30)
        assert sorted(v.body for v in got) == sorted([b"while-down", *(n.encode() for n in names[10:])])
        assert store.lite_subscriptions(PARENT, "lg", "m-live") == {"own", *names}
        assert store.lite_subscriptions(PARENT, "lg", "m-crash") == set()


def test_a_clean_shutdown_hands_the_lite_topics_over_at_the_next_beat(parent: Admin, backend_url: str, namespace: str) -> None:
    leaving = member(backend_url, namespace, "m-leave")
    with member(backend_url, namespace, "m-stay") as staying, Producer("lp", backend_url, namespace=namespace) as producer:
        leaving.subscribe_lite(PARENT, "handed")
        staying.subscribe_lite(PARENT, "mine")
        leaving.shutdown()
        producer.send(Message(PARENT, b"after-leave", lite_topic="handed"))
        assert [v.body for v in drain(staying, 1)] == [b"after-leave"]


def test_a_lite_receipt_can_be_renewed_and_acked(parent: Admin, backend_url: str, namespace: str) -> None:
    with member(backend_url, namespace, "m-renew") as consumer, Producer("lp", backend_url, namespace=namespace) as p:
        consumer.subscribe_lite(PARENT, "r")
        p.send(Message(PARENT, b"r0", lite_topic="r"))
        (view,) = drain_unacked(consumer, 1)
        renewed = consumer.change_invisible_duration(view, 60)
        with pytest.raises(MQClientError, match="expired"):
            consumer.ack(view)
        consumer.ack(renewed)
        with pytest.raises(MQClientError, match="expired"):
            consumer.ack(renewed)


def drain_unacked(consumer: SimpleConsumer, want: int) -> list[Any]:
    got: list[Any] = []
    deadline = time.monotonic() + 15
    while len(got) < want:
        assert time.monotonic() < deadline
        got += consumer.receive(max_messages=want - len(got), invisible_duration_s=30)
    return got


def test_a_stored_message_copied_by_dataclasses_replace_keeps_its_lite_topic() -> None:
    # a consumer's retry copies messages with dataclasses.replace (mq/consumer/concurrently.py): the
    # lite_topic field must be one MessageExt's constructor takes (it was not, and every retry failed)
    stored = MessageExt("t", b"x", msg_id="i", queue_id=0, queue_offset=3, born_timestamp_ms=1, store_timestamp_ms=2)
    assert dataclasses.replace(stored, reconsume_times=1).lite_topic is None
    stored.lite_topic = "s-1"
    copy = dataclasses.replace(stored, reconsume_times=1)
    assert (copy.lite_topic, copy.reconsume_times, copy.queue_offset) == ("s-1", 1, 3)
