"""Recall of delayed and timer messages on real Redis (standalone and cluster), racing the broker's delivery."""

from __future__ import annotations

import base64
import random
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mq import Admin, Message, Producer, aio
from mq.errors import MQClientError
from mq.model.recall import MAX_HANDLE_LENGTH, PREFIX, make_handle, parse_handle
from mq.store import Store
from mq.store.connection import Connection
from scheduler.timers import TimerDelivery
from tests.helpers import raw_client, snapshot
from tests.leaks import owned
from tests.servers import wait_until


@pytest.fixture
def producer(backend_url: str, namespace: str) -> Iterator[Producer]:
    with Admin(backend_url, namespace) as admin:
        admin.create_topic("later", read_queues=4, write_queues=4)
    with Producer("pg", backend_url, namespace=namespace) as p:
        yield p


@pytest.fixture
def store(backend_url: str, namespace: str) -> Store:
    return owned(Store(Connection(backend_url, namespace)))


def _log_ids(store: Store, topic: str, queues: int) -> list[str]:
    """Every message id delivered into the topic's queues (in queue order, duplicates kept)."""
    return [m.msg_id for q in range(queues) for m in store.read(topic, q, 0, 1_000_000)]


def _deliver_until(store: Store, done: Callable[[], bool], what: str) -> None:
    """Run the broker's timer delivery round by round until ``done()`` (bounded)."""
    delivery = TimerDelivery(store, poll_ms=10, batch=100, stop=threading.Event())

    def round_then_check() -> bool:
        delivery.deliver_once()
        return done()

    wait_until(round_then_check, 10, what)


def test_recall_before_due_removes_the_message_and_it_is_never_delivered(producer: Producer, store: Store) -> None:
    due = int(time.time() * 1000) + 200
    recalled = producer.send(Message("later", b"recalled", deliver_time_ms=due))
    # its neighbour in the same queue, due at the same instant: once it is delivered, so would the other be
    kept = producer.send(Message("later", b"kept", deliver_time_ms=due), queue=recalled.message_queue)
    assert recalled.recall_handle and recalled.recall_handle.startswith(PREFIX) and recalled.queue_offset == -1
    assert producer.recall(recalled.recall_handle) is True
    _deliver_until(store, lambda: len(_log_ids(store, "later", 4)) >= 1, "the kept message's delivery")
    assert _log_ids(store, "later", 4) == [kept.msg_id]
    assert producer.recall(recalled.recall_handle) is False  # a second recall finds nothing to remove


def test_recall_after_delivery_is_false_and_the_message_stays(producer: Producer, store: Store) -> None:
    sent = producer.send(Message("later", b"x", delay_level=1))
    assert sent.recall_handle is not None
    now = int(time.time() * 1000) + 2_000  # past its due time (level 1 is 1 s): the broker's round delivers it
    store.deliver_due([(sent.message_queue.topic, sent.message_queue.queue_id)], now, 100)
    assert _log_ids(store, "later", 4) == [sent.msg_id]
    assert producer.recall(sent.recall_handle) is False
    assert _log_ids(store, "later", 4) == [sent.msg_id]


def test_a_message_sent_at_once_has_no_recall_handle(producer: Producer) -> None:
    assert producer.send(Message("later", b"now")).recall_handle is None


def test_forged_handles_remove_nothing_and_foreign_ones_are_refused(producer: Producer, store: Store, namespace: str) -> None:
    due = int(time.time() * 1000) + 60_000
    a = producer.send(Message("later", b"a", deliver_time_ms=due))
    b = producer.send(Message("later", b"b", deliver_time_ms=due), queue=a.message_queue)
    assert a.recall_handle and b.recall_handle
    ta, tb = parse_handle(a.recall_handle, namespace), parse_handle(b.recall_handle, namespace)
    # a's entry with b's message id, and b's id on an entry that is not b's: both name no stored message
    assert producer.recall(make_handle(namespace, "later", ta.queue_id, ta.entry_id, tb.msg_id)) is False
    assert producer.recall(make_handle(namespace, "later", ta.queue_id, "1-0", ta.msg_id)) is False
    other_queue = (ta.queue_id + 1) % 4
    assert producer.recall(make_handle(namespace, "later", other_queue, ta.entry_id, ta.msg_id)) is False
    with pytest.raises(MQClientError, match="namespace"):
        producer.recall(make_handle("elsewhere", "later", ta.queue_id, ta.entry_id, ta.msg_id))
    with pytest.raises(MQClientError, match="not a recall handle"):
        producer.recall(a.recall_handle + "A")
    # both are still scheduled: their own handles remove them
    assert producer.recall(a.recall_handle) is True and producer.recall(b.recall_handle) is True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    hostile=st.one_of(
        st.text(max_size=200),
        st.text(alphabet="ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_=+/.", max_size=120).map(
            lambda s: PREFIX + s
        ),
        st.binary(max_size=120).map(lambda b: PREFIX + base64.urlsafe_b64encode(b).decode().rstrip("=")),
        st.tuples(
            st.text(max_size=20), st.text(max_size=20), st.text(max_size=8), st.text(max_size=30), st.text(max_size=40)
        ).map(lambda t: PREFIX + base64.urlsafe_b64encode(":".join(t).encode()).decode().rstrip("=")),
        st.just("x" * (MAX_HANDLE_LENGTH + 1)),
    )
)
def test_hostile_handles_are_refused_or_false_and_write_nothing(redis_server: object, namespace: str, hostile: str) -> None:
    url = redis_server.url  # type: ignore[attr-defined]
    with Admin(url, namespace) as admin:
        admin.create_topic("later", read_queues=2, write_queues=2)
    with Producer("pg", url, namespace=namespace) as p:
        sent = p.send(Message("later", b"stays", deliver_time_ms=int(time.time() * 1000) + 60_000))
        before = snapshot(url, namespace)
        try:
            assert p.recall(hostile) is False
        except MQClientError as e:
            assert "recall handle" in str(e)
        assert snapshot(url, namespace) == before
        assert sent.recall_handle != hostile


def test_handles_round_trip_and_are_url_safe() -> None:
    h = make_handle("ns-1", "%RETRY%g", 7, "1700000000000-12", "01AB:cd.ef_9")
    assert h.startswith(PREFIX) and all(c.isalnum() or c in "._-" for c in h)
    t = parse_handle(h, "ns-1")
    assert (t.topic, t.queue_id, t.entry_id, t.msg_id) == ("%RETRY%g", 7, "1700000000000-12", "01AB:cd.ef_9")


@pytest.mark.anyio
async def test_the_asyncio_producer_recalls(backend_url: str, namespace: str) -> None:
    with Admin(backend_url, namespace) as admin:
        admin.create_topic("later", read_queues=2, write_queues=2)
    async with aio.Producer("pg", backend_url, namespace=namespace) as p:
        sent = await p.send(Message("later", b"a", deliver_time_ms=int(time.time() * 1000) + 60_000))
        assert sent.recall_handle is not None
        assert await p.recall(sent.recall_handle) is True
        assert await p.recall(sent.recall_handle) is False


#: Messages of the race test; it takes seconds (see docs/benchmarks.md, "Recall race").
RACE_MESSAGES = 10_000


def test_recall_racing_due_delivery_never_both_never_neither(
    producer: Producer, store: Store, backend_url: str, namespace: str
) -> None:
    """10 000 messages due at the same instant (already past); the broker's delivery thread moves them
    while a thread recalls each, in random order: every message ends delivered once or recalled True."""
    began = time.monotonic()
    due = int(time.time() * 1000)
    sent = [producer.send(Message("later", b"%d" % i, deliver_time_ms=due)) for i in range(RACE_MESSAGES)]
    handles = [(s.msg_id, s.recall_handle) for s in sent]
    random.Random(31).shuffle(handles)
    sent_s = time.monotonic() - began
    recalled: list[str] = []
    stop = threading.Event()
    # small rounds: delivery lasts as long as the recalls do, so the two meet throughout
    delivery = TimerDelivery(store, poll_ms=5, batch=8, stop=stop)
    start = threading.Barrier(2)

    def recall_all() -> None:
        start.wait()
        for msg_id, handle in handles:
            assert handle is not None
            if producer.recall(handle):
                recalled.append(msg_id)

    def deliver_all() -> None:
        start.wait()
        delivery.run()

    raced = time.monotonic()
    threads = [threading.Thread(target=recall_all), threading.Thread(target=deliver_all)]
    for t in threads:
        t.start()
    try:
        threads[0].join(60)
        assert not threads[0].is_alive(), "the recalls did not finish within 60 s"
        wait_until(lambda: delivery.delivered + len(recalled) >= RACE_MESSAGES, 60, "every message delivered or recalled")
    finally:
        stop.set()
        threads[1].join(10)
    race_s = time.monotonic() - raced
    delivered = _log_ids(store, "later", 4)
    assert len(delivered) == len(set(delivered)), "a message was delivered twice"
    both = set(delivered) & set(recalled)
    assert not both, f"{len(both)} message(s) both delivered and recalled True"
    assert set(delivered) | set(recalled) == {s.msg_id for s in sent}, "a message neither delivered nor recalled"
    # the race ran: both sides won some (else this test would prove nothing about their meeting)
    assert recalled and delivered, (len(recalled), len(delivered))
    client = raw_client(backend_url)
    try:
        assert all(client.zcard(store.queue_keys("later", q).timer) == 0 for q in range(4))
    finally:
        client.close()
    # the figures of docs/benchmarks.md ("Recall race"), shown with -s
    print(f"recall race: sent {RACE_MESSAGES} in {sent_s:.2f} s, raced in {race_s:.2f} s;", len(recalled), "recalled")
