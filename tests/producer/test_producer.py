"""Producer sends on real Redis (standalone and cluster): queue choice, offsets, fields, modes."""

from __future__ import annotations

import collections

import pytest

from mq import Admin, Message, MessageQueue, Producer, SendStatus
from mq.errors import MQClientError
from tests.helpers import admin_once


@pytest.fixture
def admin(backend_url: str, namespace: str):
    with Admin(backend_url, namespace) as a:
        yield a


@pytest.fixture
def producer(backend_url: str, namespace: str):
    with Producer("pg", backend_url, namespace=namespace) as p:
        yield p


def test_round_robin_spreads_evenly_and_offsets_are_dense(admin: Admin, producer: Producer) -> None:
    admin.create_topic("rr", read_queues=8, write_queues=8)
    per_queue: dict[int, list[int]] = collections.defaultdict(list)
    for i in range(10_000):
        r = producer.send(Message("rr", b"m%d" % i))
        assert r.status is SendStatus.SEND_OK
        per_queue[r.message_queue.queue_id].append(r.queue_offset)
    assert sorted(per_queue) == list(range(8))
    for qid, offsets in per_queue.items():
        assert abs(len(offsets) - 1250) <= 1, (qid, len(offsets))
        assert offsets == list(range(len(offsets))), f"queue {qid} offsets not dense from 0"
    status = admin.topic_status("rr")
    assert {mq.queue_id: s.max_offset for mq, s in status.items()} == {q: len(o) for q, o in per_queue.items()}
    assert all(s.min_offset == 0 for s in status.values())


def test_query_returns_every_field_intact(admin: Admin, producer: Producer) -> None:
    admin.create_topic("fields", read_queues=4, write_queues=4)
    body = bytes(range(256)) * 4  # every byte value, including NUL and invalid UTF-8
    props = {"region": "HZ", "amount": "12.5", "名前": "値 with spaces"}
    msg = Message("fields", body, tags="TagA", keys=["order-1", "客户-7"], properties=props)
    r = producer.send(msg)
    for found in (admin.query_message("fields", r.msg_id), *admin.query_messages_by_key("fields", "客户-7")):
        assert found is not None
        assert found.body == body
        assert found.tags == "TagA"
        assert list(found.keys) == ["order-1", "客户-7"]
        assert found.properties == props
        assert found.msg_id == r.msg_id
        assert found.topic == "fields"
        assert found.queue_id == r.message_queue.queue_id
        assert found.queue_offset == r.queue_offset
        assert found.reconsume_times == 0
        assert 0 < found.born_timestamp_ms <= found.store_timestamp_ms + 1000
        assert found.message_queue == r.message_queue
    assert admin.query_message("fields", "0" * 32) is None
    assert admin.query_messages_by_key("fields", "order") == []  # a prefix of a key is not that key


def test_key_query_limits_and_time_range(admin: Admin, producer: Producer) -> None:
    admin.create_topic("keys", read_queues=4, write_queues=4)
    results = [producer.send(Message("keys", b"%d" % i, keys="shared other")) for i in range(70)]
    found = admin.query_messages_by_key("keys", "shared")
    assert len(found) == 64
    oldest = admin.query_messages_by_key("keys", "other", max_num=5)
    assert len(oldest) == 5
    newest_of_oldest = max(m.store_timestamp_ms for m in oldest)
    assert all(m.store_timestamp_ms >= newest_of_oldest for m in found if m.msg_id not in {o.msg_id for o in oldest})
    stored = sorted(m.store_timestamp_ms for m in admin.query_messages_by_key("keys", "shared"))
    later = admin.query_messages_by_key("keys", "shared", begin_ms=stored[-1] + 1)
    assert later == [] or all(m.store_timestamp_ms > stored[-1] for m in later)
    assert {m.msg_id for m in found} <= {r.msg_id for r in results}
    with pytest.raises(MQClientError, match="max_num"):
        admin.query_messages_by_key("keys", "shared", max_num=65)


def test_explicit_queue_and_selector(admin: Admin, producer: Producer) -> None:
    admin.create_topic("pick", read_queues=4, write_queues=4)
    q2 = MessageQueue("pick", "broker-a", 2)
    assert producer.send(Message("pick", b"x"), queue=q2).message_queue == q2

    def last_queue(mqs, msg, arg):
        return mqs[-1]

    assert producer.send(Message("pick", b"x"), selector=last_queue).message_queue.queue_id == 3
    with pytest.raises(MQClientError, match="does not belong"):
        producer.send(Message("pick", b"x"), queue=MessageQueue("other", "broker-a", 0))


def test_async_oneway_and_batch(admin: Admin, producer: Producer) -> None:
    admin.create_topic("modes", read_queues=4, write_queues=4)
    futures = [producer.send_async(Message("modes", b"a%d" % i)) for i in range(500)]
    results = [f.result(timeout=10) for f in futures]
    assert len({r.msg_id for r in results}) == 500
    for _ in range(10):
        producer.send_oneway(Message("modes", b"oneway"))

    batch = [Message("modes", b"b%d" % i, keys="batch-key") for i in range(32)]
    r = producer.send_batch(batch)
    assert len(r.msg_ids) == 32
    stored = admin.query_messages_by_key("modes", "batch-key")
    assert [m.queue_offset for m in stored] == list(range(r.queue_offset, r.queue_offset + 32))
    assert {m.queue_id for m in stored} == {r.message_queue.queue_id}
    assert [m.body for m in stored] == [m.body for m in batch]

    producer.shutdown()  # flushes pending oneway sends
    total = sum(s.max_offset for s in admin.topic_status("modes").values())
    assert total == 500 + 10 + 32


def test_send_before_start_is_refused(backend_url: str, namespace: str) -> None:
    admin_once(backend_url, namespace).create_topic("idle", read_queues=1, write_queues=1)
    p = Producer("pg", backend_url, namespace=namespace)
    with pytest.raises(MQClientError, match="not started"):
        p.send(Message("idle", b"x"))


def test_key_query_returns_the_oldest_of_a_busy_key(admin: Admin, producer: Producer) -> None:
    admin.create_topic("busy", read_queues=1, write_queues=1)
    for i in range(150):  # offsets 0..149 on one queue: "100" sorts before "20" as text
        producer.send(Message("busy", b"%d" % i, keys="k"))
    found = admin.query_messages_by_key("busy", "k")
    assert [m.queue_offset for m in found] == list(range(64))


def test_async_sends_to_one_queue_keep_send_order(admin: Admin, producer: Producer) -> None:
    admin.create_topic("order", read_queues=2, write_queues=2)
    q = MessageQueue("order", "broker-a", 1)
    futures = [producer.send_async(Message("order", b"%d" % i), queue=q) for i in range(300)]
    offsets = [f.result(timeout=10).queue_offset for f in futures]
    assert offsets == list(range(300))
    stored = {m.queue_offset: m.body for m in (admin.query_message("order", f.result().msg_id) for f in futures) if m}
    assert [stored[i] for i in range(300)] == [b"%d" % i for i in range(300)]


def test_msg_ids_unique_across_processes() -> None:
    import subprocess
    import sys

    code = "from mq.model.msgid import new_msg_id\nprint('\\n'.join(new_msg_id() for _ in range(2000)))"
    procs = [
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60) for _ in range(3)
    ]
    ids = [line for p in procs for line in p.stdout.split()]
    assert len(ids) == len(set(ids)) == 6000
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
