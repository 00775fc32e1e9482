"""Topic administration: create, update (shrink/grow), delete, status and offset search."""

from __future__ import annotations

import time

import pytest

from mq import Admin, Message, MessageQueue, Producer
from mq.errors import MQClientError, QueueNotWritableError, TopicNotFoundError


@pytest.fixture
def admin(backend_url: str, namespace: str):
    with Admin(backend_url, namespace) as a:
        yield a


def test_shrinking_write_queues_keeps_everything_readable(admin: Admin, backend_url: str, namespace: str) -> None:
    admin.create_topic("shrink", read_queues=8, write_queues=8)
    with Producer("pg", backend_url, namespace=namespace) as producer:
        for i in range(80):
            producer.send(Message("shrink", b"before %d" % i))
        admin.update_topic("shrink", write_queues=4)  # the producer's cached route still says 8
        after = [producer.send(Message("shrink", b"after %d" % i)) for i in range(80)]
        assert {r.message_queue.queue_id for r in after} == {0, 1, 2, 3}
        assert len(producer.fetch_publish_queues("shrink")) == 4
        with pytest.raises(QueueNotWritableError):
            producer.send(Message("shrink", b"x"), queue=MessageQueue("shrink", "broker-a", 6))

        status = admin.topic_status("shrink")
        assert len(status) == 8  # all 8 stay readable
        assert sum(s.max_offset for s in status.values()) == 160  # nothing stored is lost
        assert all(status[MessageQueue("shrink", "broker-a", q)].max_offset == 10 for q in range(4, 8))
        config = admin.topic_config("shrink")
        assert (config.read_queues, config.write_queues) == (8, 4)

        admin.update_topic("shrink", write_queues=8)  # growing back is immediate
        grown = [producer.send(Message("shrink", b"grown %d" % i)) for i in range(80)]
        assert {r.message_queue.queue_id for r in grown} == set(range(8))
        high = [r for r in grown if r.message_queue.queue_id >= 4]
        assert all(r.queue_offset >= 10 for r in high)  # offsets continue, never reused


def test_shrinking_read_queues_keeps_messages(admin: Admin, backend_url: str, namespace: str) -> None:
    admin.create_topic("rq", read_queues=4, write_queues=4)
    with Producer("pg", backend_url, namespace=namespace) as producer:
        sent = [producer.send(Message("rq", b"%d" % i, keys="k")) for i in range(8)]
    admin.update_topic("rq", write_queues=2)
    admin.update_topic("rq", read_queues=2)
    admin.update_topic("rq", read_queues=4, write_queues=4)
    assert sum(s.max_offset for s in admin.topic_status("rq").values()) == 8
    assert {m.msg_id for m in admin.query_messages_by_key("rq", "k")} == {r.msg_id for r in sent}


def test_create_list_delete(admin: Admin, backend_url: str, namespace: str) -> None:
    admin.create_topic("b-topic", read_queues=2, write_queues=2, order=True)
    admin.create_topic("a-topic", read_queues=3, write_queues=1, perm="rw")
    assert [(t.name, t.read_queues, t.write_queues, t.order) for t in admin.topics()] == [
        ("a-topic", 3, 1, False),
        ("b-topic", 2, 2, True),
    ]
    with Producer("pg", backend_url, namespace=namespace) as producer:
        r = producer.send(Message("b-topic", b"x"))
        admin.delete_topic("b-topic")
        assert [t.name for t in admin.topics()] == ["a-topic"]
        with pytest.raises(TopicNotFoundError):
            admin.query_message("b-topic", r.msg_id)
        with pytest.raises(TopicNotFoundError):  # the producer notices the deletion
            producer.send(Message("b-topic", b"x"))
    with pytest.raises(TopicNotFoundError):
        admin.delete_topic("b-topic")
    with pytest.raises(TopicNotFoundError):
        admin.update_topic("nosuch", write_queues=1)


def test_read_only_topic_refuses_sends(admin: Admin, backend_url: str, namespace: str) -> None:
    admin.create_topic("ro", read_queues=2, write_queues=2, perm="r")
    with Producer("pg", backend_url, namespace=namespace) as producer, pytest.raises(MQClientError, match="not writable"):
        producer.send(Message("ro", b"x"))


def test_search_offset_by_store_time(admin: Admin, backend_url: str, namespace: str) -> None:
    admin.create_topic("search", read_queues=1, write_queues=1)
    mq = MessageQueue("search", "broker-a", 0)
    assert admin.search_offset(mq, 0) == 0  # empty queue: max offset
    with Producer("pg", backend_url, namespace=namespace) as producer:
        first = [producer.send(Message("search", b"a")) for _ in range(5)]
        time.sleep(0.05)  # the clock moves on: no message is stored in the middle's millisecond
        middle_ms = int(time.time() * 1000)
        time.sleep(0.05)
        second = [producer.send(Message("search", b"b")) for _ in range(5)]
    assert first[-1].queue_offset == 4
    assert admin.search_offset(mq, 0) == 0
    assert admin.search_offset(mq, middle_ms) == second[0].queue_offset == 5
    assert admin.search_offset(mq, int(time.time() * 1000) + 60_000) == 10
    stats = admin.topic_status("search")[mq]
    assert stats.last_store_timestamp_ms >= middle_ms
    with pytest.raises(TopicNotFoundError):
        admin.search_offset(MessageQueue("search", "broker-a", 3), 0)
