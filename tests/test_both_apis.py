"""Behaviour that must hold for the sync API and for ``mq.aio`` alike (issue 16): each test is written
once and runs for both (the ``api`` fixture, tests/apis.py), on standalone Redis and on the cluster.

The asyncio variants drive ``mq.aio`` objects on a loop in a blocking-portal thread, with async
listeners and checkers. Members in other processes (tests/consumer_proc.py) are sync members, or
asyncio ones (``--aio``) where the test says so.
"""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest

from mq import (
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    LocalTransactionState,
    Message,
    MessageModel,
    MessageSelector,
    SelectMessageQueueByHash,
    SendStatus,
)
from mq.consumer import simple_core
from scheduler import BrokerConfig, BrokerService
from tests.apis import Api
from tests.helpers import stays_quiet
from tests.procs import ConsumerProc, wait_for

#: Short delay levels: retries and delayed messages come back in a fraction of a second.
FAST_LEVELS = "100ms 200ms 300ms 400ms 500ms 600ms"
#: Check-backs one second after the half message, every second, three at most.
FAST_CHECKS = BrokerConfig(transaction_timeout_s=1.0, transaction_check_interval_s=1.0, transaction_check_max=3)


class Record:
    """A plain listener (concurrent or orderly) recording what it got, with the wall time of each call."""

    def __init__(self, status: object = ConsumeConcurrentlyStatus.CONSUME_SUCCESS) -> None:
        self.got: list[tuple[float, object]] = []
        self.lock = threading.Lock()
        self.status = status

    def __call__(self, msgs, ctx):  # type: ignore[no-untyped-def]
        with self.lock:
            self.got.extend((time.time(), m) for m in msgs)
        return self.status

    def messages(self) -> list:  # type: ignore[type-arg]
        with self.lock:
            return [m for _, m in self.got]

    def bodies(self) -> list[bytes]:
        return [m.body for m in self.messages()]


def _consumer(api: Api, group: str, url: str, ns: str, topic: str, listener: Record, expression: object = "*", **kw: object):  # type: ignore[no-untyped-def]
    consumer = api.push_consumer(group, url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, **kw)
    consumer.subscribe(topic, expression)
    consumer.register_message_listener(listener)
    return consumer


def test_send_and_query_keep_every_field(api: Api, backend_url: str, namespace: str) -> None:
    admin = api.admin(backend_url, namespace)
    admin.create_topic("fields", read_queues=4, write_queues=4)
    body = bytes(range(256)) * 4  # every byte value, including NUL and invalid UTF-8
    props = {"region": "HZ", "amount": "12.5", "名前": "値 with spaces"}
    with api.producer("pg", backend_url, namespace=namespace) as producer:
        r = producer.send(Message("fields", body, tags="TagA", keys=["order-1", "客户-7"], properties=props))
        assert r.status is SendStatus.SEND_OK
        chosen = producer.send(Message("fields", b"by key"), selector=SelectMessageQueueByHash(), arg="k-1")
        again = producer.send(Message("fields", b"by key 2"), selector=SelectMessageQueueByHash(), arg="k-1")
        assert chosen.message_queue == again.message_queue and again.queue_offset == chosen.queue_offset + 1
        batch = producer.send_batch([Message("fields", b"b%d" % i) for i in range(3)])
        assert batch.status is SendStatus.SEND_OK
    found_by_id = admin.query_message("fields", r.msg_id)
    for found in (found_by_id, *admin.query_messages_by_key("fields", "客户-7")):
        assert found is not None
        assert (found.body, found.tags, list(found.keys), found.properties) == (body, "TagA", ["order-1", "客户-7"], props)
        assert (found.msg_id, found.topic, found.message_queue, found.queue_offset) == (
            r.msg_id,
            "fields",
            r.message_queue,
            r.queue_offset,
        )
        assert found.reconsume_times == 0
        assert 0 < found.born_timestamp_ms <= found.store_timestamp_ms + 1000
    stored = admin.messages("fields", batch.message_queue.queue_id, 0)
    assert [m.body for m in stored if m.body in (b"b0", b"b1", b"b2")] == [b"b0", b"b1", b"b2"]  # one queue, in order
    assert admin.query_message("fields", "0" * 32) is None


@pytest.mark.slow
def test_a_group_with_a_member_in_another_process_consumes_each_message_once(
    api: Api, backend_url: str, namespace: str, tmp_path, procs
) -> None:  # type: ignore[no-untyped-def]
    """One member here (this API) and one sync member in another process split the queues; each
    message is consumed once by the two."""
    api.admin(backend_url, namespace).create_topic("G", read_queues=8, write_queues=8)
    here = Record()
    consumer = _consumer(api, "g", backend_url, namespace, "G", here)
    consumer.start()
    procs.append(ConsumerProc(backend_url, namespace, "g", "G", tmp_path / "other.log", "--first"))

    def split() -> bool:
        mine = {q.queue_id for q in consumer.assigned_queues() if q.topic == "G"}
        theirs = procs[0].assigned()
        return bool(mine) and bool(theirs) and mine.isdisjoint(theirs) and mine | theirs == set(range(8))  # type: ignore[operator]

    wait_for(split, 30, "the two members to split 8 queues")
    with api.producer("p", backend_url, namespace=namespace) as producer:
        for i in range(400):
            producer.send(Message("G", b"%d" % i))
    wait_for(lambda: len(here.bodies()) + len(procs[0].consumed()) >= 400, 30, "400 messages consumed", poll_s=0.2)
    stays_quiet(lambda: len(here.bodies()) + len(procs[0].consumed()), "deliveries of the 400 messages")
    seen = Counter([b.decode() for b in here.bodies()] + procs[0].consumed())
    assert set(seen) == {str(i) for i in range(400)} and set(seen.values()) == {1}
    assert here.bodies() and procs[0].consumed(), "both members consumed"
    consumer.shutdown()


def test_broadcasting_gives_every_member_every_message(api: Api, backend_url: str, namespace: str) -> None:
    api.admin(backend_url, namespace).create_topic("B", read_queues=4, write_queues=4)
    first, second = Record(), Record()
    kw = {"message_model": MessageModel.BROADCASTING}
    with (
        _consumer(api, "gb", backend_url, namespace, "B", first, **kw),
        _consumer(api, "gb", backend_url, namespace, "B", second, **kw),
    ):
        with api.producer("p", backend_url, namespace=namespace) as producer:
            for i in range(60):
                producer.send(Message("B", b"%d" % i))
        wait_for(lambda: len(first.bodies()) >= 60 and len(second.bodies()) >= 60, 20, "60 messages each")
        stays_quiet(lambda: (len(first.bodies()), len(second.bodies())), "each member's deliveries")
    want = sorted(b"%d" % i for i in range(60))
    assert sorted(first.bodies()) == want and sorted(second.bodies()) == want


def test_tag_and_sql92_filters(api: Api, backend_url: str, namespace: str) -> None:
    api.admin(backend_url, namespace).create_topic("F", read_queues=4, write_queues=4)
    tags_got, sql_got = Record(), Record()
    sql = MessageSelector.by_sql("TAGS = 'a' AND region IN ('HZ','SH')")
    with (
        _consumer(api, "gt", backend_url, namespace, "F", tags_got, "a || c"),
        _consumer(api, "gs", backend_url, namespace, "F", sql_got, sql),
    ):
        sent = []
        with api.producer("p", backend_url, namespace=namespace) as producer:
            for i, (tag, region) in enumerate([("a", "HZ"), ("a", "BJ"), ("b", "SH"), ("a", "SH"), ("c", "HZ")] * 10):
                producer.send(Message("F", b"%d" % i, tags=tag, properties={"region": region}))
                sent.append((b"%d" % i, tag, region))
        want_sql = sorted(b for b, t, r in sent if t == "a" and r in ("HZ", "SH"))
        want_tags = sorted(b for b, t, _ in sent if t in ("a", "c"))
        wait_for(lambda: len(sql_got.bodies()) >= len(want_sql) and len(tags_got.bodies()) >= len(want_tags), 20, "filtered")
        stays_quiet(lambda: (len(sql_got.bodies()), len(tags_got.bodies())), "the filtered deliveries")
    assert sorted(sql_got.bodies()) == want_sql
    assert sorted(tags_got.bodies()) == want_tags


@pytest.mark.slow
def test_orderly_consumption_keeps_key_order_across_a_sigkill(
    api: Api, backend_url: str, namespace: str, tmp_path, procs
) -> None:  # type: ignore[no-untyped-def]
    """Three members of this API (one here, two in processes), one SIGKILLed mid-stream: the first
    deliveries of each sharding key come in send order."""
    api.admin(backend_url, namespace).create_topic("O", read_queues=8, write_queues=8, order=True)
    flags = ("--orderly", "--first", *(["--aio"] if api.name == "aio" else []))
    procs += [ConsumerProc(backend_url, namespace, "og", "O", tmp_path / f"c{i}.log", *flags) for i in range(2)]
    here = Record(ConsumeOrderlyStatus.SUCCESS)
    consumer = api.push_consumer("og", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("O", "*")
    consumer.register_orderly_listener(here)
    consumer.start()
    wait_for(lambda: all(p.assigned() for p in procs) and consumer.assigned_queues(), 30, "three orderly members with queues")
    keys = [f"key{k}" for k in range(30)]
    selector = SelectMessageQueueByHash()
    with api.producer("p", backend_url, namespace=namespace) as producer:
        for seq in range(20):
            for key in keys:
                producer.send(Message("O", f"{key}:{seq}".encode()), selector=selector, arg=key)
            if seq == 8:
                procs[0].kill()  # mid-stream
            time.sleep(0.05)  # paces the stream: the crash lands while it flows
    expected = {f"{k}:{s}" for k in keys for s in range(20)}

    def consumed() -> set[str]:
        return {b.decode() for b in here.bodies()} | {b for p in procs for b in p.consumed()}

    wait_for(lambda: expected <= consumed(), 60, "every event consumed", poll_s=0.5)
    consumer.shutdown()
    first: dict[str, float] = {}  # body → wall time of its first delivery, by any member
    records = [(ts, body) for p in procs for ts, _, _, body in p.records()] + [(ts, m.body.decode()) for ts, m in here.got]  # type: ignore[attr-defined]
    for ts, body in records:
        first[body] = min(first.get(body, ts), ts)
    by_key: dict[str, list[tuple[float, int]]] = {}
    for body, ts in first.items():
        key, seq = body.split(":")
        by_key.setdefault(key, []).append((ts, int(seq)))
    assert set(by_key) == set(keys)
    for key, pairs in by_key.items():
        assert [seq for _, seq in sorted(pairs)] == list(range(20)), f"{key} first deliveries out of order"
    assert here.got and procs[1].records(), "the member here and the survivor both consumed"


def test_delayed_and_timer_messages_arrive_when_due(api: Api, backend_url: str, namespace: str) -> None:
    api.admin(backend_url, namespace).create_topic("D", read_queues=2, write_queues=2)
    got = Record()
    with (
        BrokerService(backend_url, namespace, BrokerConfig(message_delay_level=FAST_LEVELS)),
        _consumer(api, "gd", backend_url, namespace, "D", got),
        api.producer("p", backend_url, namespace=namespace) as producer,
    ):
        sent_ms = time.time() * 1000
        level = producer.send(Message("D", b"level 3", delay_level=3))  # 300 ms with FAST_LEVELS
        timer = producer.send(Message("D", b"timer", deliver_time_ms=int(sent_ms) + 700))
        assert level.queue_offset == -1 and timer.queue_offset == -1  # offsets come on delivery
        wait_for(lambda: len(got.bodies()) >= 2, 10, "both delivered")
        stays_quiet(lambda: len(got.bodies()), "the deliveries")
    arrived = {m.body: ts * 1000 for ts, m in got.got}  # type: ignore[attr-defined]
    assert set(arrived) == {b"level 3", b"timer"} and len(got.bodies()) == 2
    assert arrived[b"level 3"] >= sent_ms + 300
    assert arrived[b"timer"] >= sent_ms + 700
    for m in got.messages():
        assert m.store_timestamp_ms >= sent_ms + (300 if m.body == b"level 3" else 700) - 5  # stored when due


def test_failed_messages_are_retried_then_dead_lettered_then_resent(api: Api, backend_url: str, namespace: str) -> None:
    admin = api.admin(backend_url, namespace)
    admin.create_topic("R", read_queues=2, write_queues=2)
    failing = Record(ConsumeConcurrentlyStatus.RECONSUME_LATER)
    with BrokerService(backend_url, namespace, BrokerConfig(message_delay_level=FAST_LEVELS)):
        with (
            _consumer(api, "gr", backend_url, namespace, "R", failing, max_reconsume_times=2),
            api.producer("p", backend_url, namespace=namespace) as producer,
        ):
            r = producer.send(Message("R", b"poison", tags="bad", keys=["order-9"], properties={"x": "y"}))
            wait_for(lambda: len(admin.dlq_messages("gr")) == 1, 15, "the message to reach the DLQ")
            stays_quiet(lambda: len(failing.messages()), "the deliveries of the dead letter")
        assert [m.reconsume_times for m in failing.messages()] == [0, 1, 2]  # delivered exactly 3 times
        assert {m.topic for m in failing.messages()} == {"R"}  # the listener always sees the original topic
        [dead] = admin.dlq_messages("gr")
        assert (dead.msg_id, dead.body, dead.tags, list(dead.keys), dead.properties) == (
            r.msg_id,
            b"poison",
            "bad",
            ["order-9"],
            {"x": "y"},
        )
        assert dead.system_properties["RETRY_TOPIC"] == "R"
        healthy = Record()
        with _consumer(api, "gr", backend_url, namespace, "R", healthy) as consumer:
            wait_for(lambda: any(q.topic == "%RETRY%gr" for q in consumer.assigned_queues()), 10, "the retry topic's queue held")
            assert admin.resend_dlq("gr") == 1
            assert admin.resend_dlq("gr") == 0  # already resent
            wait_for(lambda: len(healthy.bodies()) >= 1, 10, "the resent message")
        assert healthy.messages()[0].body == b"poison" and healthy.messages()[0].topic == "R"


def test_an_orderly_groups_dead_letters_are_resent_to_its_orderly_members(api: Api, backend_url: str, namespace: str) -> None:
    """An orderly member reads its group's retry topic too (as RocketMQ's do), so a dead letter resent
    with ``Admin.resend_dlq`` comes back to it, showing the topic it was sent to."""
    admin = api.admin(backend_url, namespace)
    admin.create_topic("OR", read_queues=1, write_queues=1, order=True)
    healthy = Record(ConsumeOrderlyStatus.SUCCESS)
    failing = Record(ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT)
    consumer = api.push_consumer(
        "ogr", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, max_reconsume_times=1
    )
    consumer.subscribe("OR", "*")
    consumer.register_orderly_listener(
        lambda msgs, ctx: (failing if msgs[0].body == b"poison" and len(failing.got) < 2 else healthy)(msgs, ctx)
    )
    with consumer, api.producer("p", backend_url, namespace=namespace) as producer:
        r = producer.send(Message("OR", b"poison", keys=["k1"]))
        producer.send(Message("OR", b"next"))
        wait_for(lambda: healthy.bodies() == [b"next"], 15, "the queue to move on past the poison message")
        assert [m.msg_id for m in admin.dlq_messages("ogr")] == [r.msg_id] and len(failing.got) == 2
        assert admin.resend_dlq("ogr") == 1
        wait_for(lambda: len(healthy.bodies()) == 2, 15, "the resent letter")
    again = healthy.messages()[1]
    assert (again.msg_id, again.body, again.topic, list(again.keys)) == (r.msg_id, b"poison", "OR", ["k1"])


def test_transaction_unknown_is_resolved_by_the_check_back(api: Api, backend_url: str, namespace: str) -> None:
    """The executor says UNKNOW; the broker service asks the group's checker (async for ``aio``),
    which commits one and rolls the other back: only committed messages are ever stored in the topic."""
    admin = api.admin(backend_url, namespace)
    admin.create_topic("T", read_queues=4, write_queues=4)
    answers = {
        b"check says commit": LocalTransactionState.COMMIT_MESSAGE,
        b"check says rollback": LocalTransactionState.ROLLBACK_MESSAGE,
    }
    checked: list[bytes] = []

    def checker(msg):  # type: ignore[no-untyped-def]
        checked.append(msg.body)
        return answers[msg.body]

    def stored() -> list[bytes]:
        return sorted(m.body for q in range(4) for m in admin.messages("T", q, 0))

    with (
        BrokerService(backend_url, namespace, FAST_CHECKS),
        api.transaction_producer("txg", backend_url, namespace=namespace, checker=checker) as tp,
    ):
        committed = tp.send_message_in_transaction(
            Message("T", b"committed by executor"), lambda m, a: LocalTransactionState.COMMIT_MESSAGE
        )
        assert committed.local_transaction_state is LocalTransactionState.COMMIT_MESSAGE and committed.queue_offset >= 0
        for body in answers:
            r = tp.send_message_in_transaction(Message("T", body), lambda m, a: LocalTransactionState.UNKNOW)
            assert r.local_transaction_state is LocalTransactionState.UNKNOW and r.queue_offset == -1
        assert stored() == [b"committed by executor"]  # the unknown ones wait, invisible
        wait_for(lambda: len(stored()) >= 2 and set(checked) == set(answers), 10, "both checks answered")
        stays_quiet(lambda: len(stored()), "the messages stored in the topic")
    assert stored() == [b"check says commit", b"committed by executor"]
    assert set(checked) == set(answers)


@pytest.mark.slow
def test_simple_consumer_invisibility_ack_and_redelivery(
    api: Api, backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(simple_core, "MIN_INVISIBLE_S", 1.0)  # seconds, not the 10 s floor: a shorter test
    api.admin(backend_url, namespace).create_topic("S", read_queues=2, write_queues=2)
    sc = api.simple_consumer("gs", backend_url, namespace=namespace, subscriptions={"S": "*"}, await_duration_s=0.5)
    with sc, api.producer("p", backend_url, namespace=namespace) as producer:
        for body in (b"acked", b"redeliver", b"extend"):
            producer.send(Message("S", body))
        got: dict[bytes, object] = {}
        handed_out: dict[bytes, float] = {}  # monotonic time before the receive that handed each out

        def received_all() -> bool:
            before = time.monotonic()
            for v in sc.receive(max_messages=3, invisible_duration_s=3):
                got[v.body], handed_out[v.body] = v, before
            return len(got) == 3

        wait_for(received_all, 10, "all three")
        assert all(v.delivery_attempt == 1 for v in got.values())  # type: ignore[attr-defined]
        sc.ack(got[b"acked"])
        extended_at = time.monotonic()
        sc.change_invisible_duration(got[b"extend"], 6)
        assert sc.receive(max_messages=3, invisible_duration_s=3) == []  # all invisible now
        again: dict[bytes, object] = {}

        def received(into: dict[bytes, object]) -> bool:
            into.update({v.body: v for v in sc.receive(max_messages=3, invisible_duration_s=3)})
            return bool(into)

        wait_for(lambda: received(again), 10, "the redelivery after the 3 s invisible time")
        assert time.monotonic() - handed_out[b"redeliver"] >= 3.0, "visible again before its invisible time ran out"
        assert set(again) == {b"redeliver"} and again[b"redeliver"].delivery_attempt == 2  # type: ignore[attr-defined]
        sc.ack(again[b"redeliver"])
        late: dict[bytes, object] = {}
        wait_for(lambda: received(late), 10, "the extended message after its 6 s")
        assert time.monotonic() - extended_at >= 6.0, "visible again before its extended invisible time ran out"
        assert set(late) == {b"extend"} and late[b"extend"].delivery_attempt == 2  # type: ignore[attr-defined]
        sc.ack(late[b"extend"])
        assert sc.receive(max_messages=3, invisible_duration_s=3) == []


def test_pull_consumer_polls_seeks_and_commits(api: Api, backend_url: str, namespace: str) -> None:
    api.admin(backend_url, namespace).create_topic("P", read_queues=1, write_queues=1)
    with api.producer("p", backend_url, namespace=namespace) as producer:
        for i in range(10):
            producer.send(Message("P", b"%d" % i))
    pc = api.pull_consumer(
        "gp", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, auto_commit=False
    )
    pc.subscribe("P", "*")
    with pc:
        got: list[bytes] = []
        wait_for(lambda: got.extend(m.body for m in pc.poll(timeout_s=0.5)) or len(got) >= 10, 10, "ten messages")
        assert got == [b"%d" % i for i in range(10)]
        [queue] = [q for q in pc.assigned_queues() if q.topic == "P"]
        pc.seek(queue, 7)
        again: list[bytes] = []
        wait_for(lambda: again.extend(m.body for m in pc.poll(timeout_s=0.5)) or len(again) >= 3, 10, "the three after the seek")
        assert again == [b"7", b"8", b"9"]
        assert pc.committed(queue) in (-1, 0)  # nothing committed before commit()
        pc.commit()
        assert pc.committed(queue) == 10
    [progress] = api.admin(backend_url, namespace).consumer_progress("gp", "P")
    assert progress.consumer_offset == 10 and progress.lag == 0
