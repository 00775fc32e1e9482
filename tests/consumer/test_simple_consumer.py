"""SimpleConsumer: invisibility, acks, redelivery with attempts, sharing, dead letters."""

from __future__ import annotations

import threading
import time

import pytest

from mq import Admin, Message, MessageSelector, Producer, SimpleConsumer
from mq.consumer import simple_core
from mq.errors import MQClientError
from tests.helpers import QUIET_PERIOD_S, admin_once
from tests.leaks import owned

#: The invisible time of the expiry test. RocketMQ's floor is 10 s (``MIN_INVISIBLE_S``, checked in the
#: client, never in the store): the test lowers the floor so that each expiry waited for takes 2 s, not
#: 10 s — the store runs the very same scripts whatever the duration (tests/aio/test_aio_simple.py
#: does the same).
INVISIBLE_S = 2.0


@pytest.mark.slow
def test_invisibility_ack_extend_shorten_and_dead_letter(
    backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(simple_core, "MIN_INVISIBLE_S", INVISIBLE_S)
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("S", read_queues=2, write_queues=2)
    sc = SimpleConsumer(
        "gs", backend_url, namespace=namespace, subscriptions={"S": "*"}, await_duration_s=0.5, max_delivery_attempts=2
    )
    with sc, Producer("p", backend_url, namespace=namespace) as producer:
        for body in (b"acked", b"redeliver", b"extend", b"shorten"):
            producer.send(Message("S", body))
        got = {v.body: v for v in sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S)}
        assert set(got) == {b"acked", b"redeliver", b"extend", b"shorten"}
        assert all(v.delivery_attempt == 1 for v in got.values())
        sc.ack(got[b"acked"])
        sc.change_invisible_duration(got[b"extend"], 2 * INVISIBLE_S)
        assert sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S) == []  # all invisible now
        time.sleep(INVISIBLE_S + 0.3)  # time passes: the invisible time runs out (the behaviour under test)
        again = {v.body: v for v in sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S)}
        assert set(again) == {b"redeliver", b"shorten"}  # not the acked one, not the extended one yet
        assert again[b"redeliver"].delivery_attempt == 2
        with pytest.raises(MQClientError, match="expired"):
            sc.ack(got[b"redeliver"])  # the old receipt is no longer valid
        sc.ack(again[b"shorten"])
        sc.change_invisible_duration(again[b"redeliver"], INVISIBLE_S)
        time.sleep(INVISIBLE_S + 0.3)  # time passes: the extended one's and the changed one's invisible times run out
        late = {v.body: v for v in sc.receive(max_messages=4, invisible_duration_s=INVISIBLE_S)}
        assert set(late) == {b"extend"} and late[b"extend"].delivery_attempt == 2  # after its doubled time
        # "redeliver" was due for its third attempt: past max_delivery_attempts=2 it is a dead letter
        dead = admin.dlq_messages("gs")
        assert [m.body for m in dead] == [b"redeliver"]
        assert dead[0].system_properties["DLQ_REASON"] == "max delivery attempts"
        sc.ack(late[b"extend"])


def test_two_receivers_never_hold_one_message_at_once(backend_url: str, namespace: str) -> None:
    admin_once(backend_url, namespace).create_topic("S2", read_queues=4, write_queues=4)
    held: dict[bytes, str] = {}
    seen: list[bytes] = []
    overlap: list[bytes] = []
    lock = threading.Lock()
    last_received = [time.monotonic()]

    def work(name: str, sc: SimpleConsumer) -> None:
        # until neither member got anything for the quiet period (a duplicate would come in it); at most 60 s
        started = time.monotonic()
        while time.monotonic() - last_received[0] < QUIET_PERIOD_S and time.monotonic() - started < 60:
            views = sc.receive(max_messages=8, invisible_duration_s=30)
            if views:
                last_received[0] = time.monotonic()
            for v in views:
                with lock:
                    if v.body in held:
                        overlap.append(v.body)
                    held[v.body] = name
                    seen.append(v.body)
                time.sleep(0.001)  # holds the message: another member receiving it meanwhile is an overlap
                with lock:
                    held.pop(v.body, None)
                sc.ack(v)

    consumers = [
        SimpleConsumer(
            "g2", backend_url, namespace=namespace, subscriptions={"S2": MessageSelector.by_tag("*")}, await_duration_s=0.3
        ).start()
        for _ in range(2)
    ]
    with Producer("p", backend_url, namespace=namespace) as producer:
        for i in range(300):
            producer.send(Message("S2", b"%d" % i))
    threads = [threading.Thread(target=work, args=(f"c{i}", c)) for i, c in enumerate(consumers)]
    last_received[0] = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    for c in consumers:
        c.shutdown()
    assert overlap == []
    assert sorted(seen, key=int) == [b"%d" % i for i in range(300)]  # each exactly once (acked in time)


def test_filters_and_bad_arguments(redis_server, namespace: str) -> None:
    admin_once(redis_server.url, namespace).create_topic("S3", read_queues=1, write_queues=1)
    sc = SimpleConsumer(
        "g3", redis_server.url, namespace=namespace, await_duration_s=0.2, subscriptions={"S3": MessageSelector.by_sql("n > 5")}
    )
    with sc, Producer("p", redis_server.url, namespace=namespace) as producer:
        for n in range(10):
            producer.send(Message("S3", b"%d" % n, properties={"n": str(n)}))
        views = sc.receive(max_messages=16, invisible_duration_s=10)
        assert [v.body for v in views] == [b"6", b"7", b"8", b"9"]
        with pytest.raises(MQClientError, match="invisible"):
            sc.receive(invisible_duration_s=1)
        with pytest.raises(MQClientError, match="max_messages"):
            sc.receive(max_messages=0)
    with pytest.raises(MQClientError, match="subscription"):
        SimpleConsumer("g3", redis_server.url, namespace=namespace, subscriptions={})


def test_receive_waits_for_a_message_without_spinning(redis_server, namespace: str) -> None:
    admin_once(redis_server.url, namespace).create_topic("S4", read_queues=2, write_queues=2)
    with (
        SimpleConsumer("g4", redis_server.url, namespace=namespace, subscriptions={"S4": "*"}, await_duration_s=20) as sc,
        Producer("p", redis_server.url, namespace=namespace) as producer,
    ):
        sender = threading.Timer(0.5, lambda: producer.send(Message("S4", b"later")))
        sender.start()
        started = time.monotonic()
        views = sc.receive(max_messages=1, invisible_duration_s=10)
        took = time.monotonic() - started
        sender.join(10)  # its send may still be reading the reply: the producer is closed after it
    assert [v.body for v in views] == [b"later"]
    assert took >= 0.4, took  # it waited for the send
    # no speed bound: woken by the send, not by its 20 s await running out (only that fails this)
    assert took < 10, took


def test_queues_added_to_a_topic_are_read_from_their_start(
    backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A topic that grows: a running consumer picks the new queues up, and a member starting
    later reads what landed on them before it started (only a group new to a topic skips history)."""
    from mq.consumer import simple
    from mq.model.queue import MessageQueue

    monkeypatch.setattr(simple, "QUEUE_REFRESH_S", 0.2)
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("G", read_queues=2, write_queues=2)

    def drain(sc: SimpleConsumer, want: set[bytes]) -> set[bytes]:
        got: set[bytes] = set()
        deadline = time.monotonic() + 10
        while not want <= got and time.monotonic() < deadline:
            for view in sc.receive(max_messages=16, invisible_duration_s=10):
                got.add(view.body)
                sc.ack(view)
        return got

    def send_to_every_queue(producer: Producer, tag: str, queues: int) -> set[bytes]:
        bodies = {f"{tag}-q{q}".encode() for q in range(queues)}
        for q in range(queues):
            producer.send(Message("G", f"{tag}-q{q}".encode()), queue=MessageQueue("G", "broker-a", q))
        return bodies

    with Producer("p", backend_url, namespace=namespace) as producer:
        with SimpleConsumer("gg", backend_url, namespace=namespace, subscriptions={"G": "*"}, await_duration_s=0.3) as sc:
            assert sc.receive(max_messages=4, invisible_duration_s=10) == []
            admin.update_topic("G", read_queues=4, write_queues=4)
            running = send_to_every_queue(producer, "running", 4)
            assert drain(sc, running) == running
        admin.update_topic("G", read_queues=6, write_queues=6)
        while_down = send_to_every_queue(producer, "down", 6)
        with SimpleConsumer("gg", backend_url, namespace=namespace, subscriptions={"G": "*"}, await_duration_s=0.3) as sc:
            assert drain(sc, while_down) == while_down


def test_invisibility_is_on_the_stores_clock_not_a_skewed_host(
    backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host an hour behind: with its own clock it would hand a received message out again at once
    (visible an hour ago + 30 s); on the store's clock it stays invisible for 30 s."""
    from mq.consumer.simple_core import parse_receipt
    from mq.store import Store
    from mq.store.connection import Connection

    admin_once(backend_url, namespace).create_topic("SK", read_queues=1, write_queues=1)
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() - 3600)
    skewed = SimpleConsumer("gk", backend_url, namespace=namespace, subscriptions={"SK": "*"}, await_duration_s=2)
    with skewed, Producer("p", backend_url, namespace=namespace) as producer:
        producer.send(Message("SK", b"once"))
        [view] = skewed.receive(max_messages=1, invisible_duration_s=30)
        changed = skewed.change_invisible_duration(view, 40)
    monkeypatch.undo()
    conn = owned(Connection(backend_url, namespace))
    server_ms = Store(conn).server_time_ms()
    conn.close()
    for handle, seconds in ((view.receipt_handle, 30), (changed.receipt_handle, 40)):
        visible_at = parse_receipt(handle)[2]
        assert abs(visible_at - (server_ms + seconds * 1000)) < 2_000, (seconds, visible_at - server_ms)
    with SimpleConsumer("gk", backend_url, namespace=namespace, subscriptions={"SK": "*"}, await_duration_s=0.2) as other:
        assert other.receive(max_messages=1, invisible_duration_s=30) == []  # still invisible
