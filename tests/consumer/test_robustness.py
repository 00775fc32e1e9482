"""Consumers when something goes wrong: undecodable entries, a queue lost to another member, a listener
that never returns or raises SystemExit, a bad retry level, a full store, a missing topic; and a pull
consumer commits only what ``commit()`` commits. Standalone Redis and the cluster."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)
from mq.consumer.types import ConsumeConcurrentlyContext
from mq.errors import MQClientError
from mq.store import Store
from mq.store.connection import Connection
from tests.helpers import admin_once, blocked_readers, raw_client
from tests.leaks import owned
from tests.procs import wait_for


def _fill(url: str, namespace: str, topic: str, n: int, queue: int = 0) -> None:
    mq = MessageQueue(topic, "broker-a", queue)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(0, n, 256):
            producer.send_batch([Message(topic, b"%d" % j) for j in range(i, min(n, i + 256))], queue=mq)


def test_pull_consumer_commits_only_what_commit_commits(backend_url: str, namespace: str, admin: Admin) -> None:
    """seek(0), poll 128, seek(100), commit(), shutdown: the group's offset is 100, not 2 000."""
    admin.create_topic("P", read_queues=1, write_queues=1)
    _fill(backend_url, namespace, "P", 2000)
    q = MessageQueue("P", "broker-a", 0)
    pc = PullConsumer("pg", backend_url, namespace=namespace, auto_commit=False)
    pc.assign([q])
    with pc:
        assert pc.committed(q) == -1  # nothing committed before commit()
        pc.seek(q, 0)
        polled: list[int] = []
        deadline = time.monotonic() + 20
        while len(polled) < 128 and time.monotonic() < deadline:
            polled += [m.queue_offset for m in pc.poll(timeout_s=1.0)]
        assert polled[:128] == list(range(128))
        assert pc.committed(q) == -1
        pc.seek(q, 100)
        pc.commit()
        assert pc.committed(q) == 100
    progress = {p.message_queue: p for p in admin.consumer_progress("pg", "P")}
    assert progress[q].consumer_offset == 100
    assert progress[q].lag == 1900


def test_a_bad_retry_delay_level_is_a_clear_error_and_wedges_nothing(
    backend_url: str, namespace: str, admin: Admin, caplog: pytest.LogCaptureFixture
) -> None:
    admin.create_topic("W", read_queues=1, write_queues=1)
    got: list[bytes] = []
    lock = threading.Lock()
    failed_once: set[bytes] = set()

    def listener(msgs, ctx: ConsumeConcurrentlyContext):  # type: ignore[no-untyped-def]
        with lock:
            got.extend(m.body for m in msgs)
        if msgs[0].body == b"3" and b"3" not in failed_once:
            failed_once.add(b"3")
            ctx.delay_level_when_next_consume = "x"  # type: ignore[assignment]
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("wg", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("W")
    consumer.register_message_listener(listener)
    _fill(backend_url, namespace, "W", 10)
    with caplog.at_level(logging.WARNING, logger="mq.consumer"), consumer:
        wait_for(lambda: {b"%d" % i for i in range(10)} <= set(got), 15, "all ten delivered")
        # the failed one is retried through the retry topic (level 3 = 10 s is not awaited here);
        # the group's offset moves past every message
        wait_for(lambda: admin.consumer_progress("wg", "W")[0].consumer_offset == 10, 15, "offset 10")
    assert any("delay_level_when_next_consume must be an int" in r.getMessage() for r in caplog.records)


def test_context_refuses_bad_values_at_once() -> None:
    ctx = ConsumeConcurrentlyContext(MessageQueue("t", "broker-a", 0))
    for bad in ("x", 1.5, True, -2, None):
        with pytest.raises(MQClientError, match="delay_level_when_next_consume"):
            ctx.delay_level_when_next_consume = bad  # type: ignore[assignment]
    ctx.delay_level_when_next_consume = -1
    ctx.delay_level_when_next_consume = 5
    with pytest.raises(MQClientError, match="ack_index"):
        ctx.ack_index = "0"  # type: ignore[assignment]


def _with_bad_entries(url: str, namespace: str, topic: str) -> list[bytes]:
    """5 good messages, one entry without the expected fields, one with non-UTF-8 tags and one whose
    properties are not an object (raw XADD), then 5 more; returns the good bodies."""
    _fill(url, namespace, topic, 5)
    client = raw_client(url)
    keys = owned(Connection(url, namespace)).keys.queue(topic, 0)
    seq = int(client.hget(keys.meta, "seq"))
    client.xadd(keys.log, {"junk": "1"}, id=f"0-{seq + 1}")
    client.xadd(keys.log, {"i": "x", "b": "y", "bt": "1", "st": "1", "t": b"\xff\xfe"}, id=f"0-{seq + 2}")
    client.xadd(keys.log, {"i": "x", "b": "y", "bt": "1", "st": "1", "p": '["not", "an", "object"]'}, id=f"0-{seq + 3}")
    client.hset(keys.meta, "seq", seq + 3)
    client.close()
    with Producer("p", url, namespace=namespace) as producer:
        producer.send_batch([Message(topic, b"%d" % j) for j in range(5, 10)], queue=MessageQueue(topic, "broker-a", 0))
    return [b"%d" % i for i in range(10)]


def test_undecodable_entries_are_skipped_by_every_consumer(
    backend_url: str, namespace: str, admin: Admin, caplog: pytest.LogCaptureFixture
) -> None:
    admin.create_topic("U", read_queues=1, write_queues=1)
    good = _with_bad_entries(backend_url, namespace, "U")
    got: list[bytes] = []
    with caplog.at_level(logging.ERROR, logger="mq.store"):
        first = ConsumeFromWhere.FIRST_OFFSET
        push = PushConsumer("u-push", backend_url, namespace=namespace, consume_from_where=first)
        push.subscribe("U")
        push.register_message_listener(
            lambda msgs, ctx: got.extend(m.body for m in msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        )
        with push:
            wait_for(lambda: sorted(got) == sorted(good), 15, "push consumer got the ten good ones")
        pulled: list[bytes] = []
        pc = PullConsumer("u-pull", backend_url, namespace=namespace, consume_from_where=first)
        pc.subscribe("U")
        with pc:
            deadline = time.monotonic() + 15
            while len(pulled) < 10 and time.monotonic() < deadline:
                pulled += [m.body for m in pc.poll(timeout_s=1.0)]
        assert sorted(pulled) == sorted(good)
        received: list[bytes] = []
        with SimpleConsumer(
            "u-simple",
            backend_url,
            namespace=namespace,
            subscriptions={"U": "*"},
            consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
            await_duration_s=1,
        ) as sc:
            deadline = time.monotonic() + 15
            while len(received) < 10 and time.monotonic() < deadline:
                for view in sc.receive(max_messages=16):
                    received.append(view.body)
                    sc.ack(view)
            assert not sc.receive(max_messages=16)  # the bad entries are never handed out
        assert sorted(received) == sorted(good)
    assert any("not a message this library wrote" in r.getMessage() for r in caplog.records)


def test_a_consumer_that_lost_its_queue_never_moves_the_new_owners_offset_back(
    backend_url: str, namespace: str, admin: Admin, caplog: pytest.LogCaptureFixture
) -> None:
    admin.create_topic("L", read_queues=1, write_queues=1)
    _fill(backend_url, namespace, "L", 50)
    got: list[int] = []
    consumer = PushConsumer("lg", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("L")
    ok = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    consumer.register_message_listener(lambda msgs, ctx: got.extend(m.queue_offset for m in msgs) or ok)
    store = owned(Store(Connection(backend_url, namespace)))
    q = MessageQueue("L", "broker-a", 0)
    client = raw_client(backend_url)
    with caplog.at_level(logging.WARNING, logger="mq.consumer"), consumer:
        wait_for(lambda: len(got) >= 50, 15, "fifty consumed")
        # another member takes the queue over (as after a missed heartbeat) and commits further on
        client.hset(store.queue_keys("L", 0).owners, "lg", "someone-else")
        client.hset(store.queue_keys("L", 0).offsets, "lg", 70)
        _fill(backend_url, namespace, "L", 30)  # the old owner's next pull or commit meets the guard
        wait_for(
            lambda: any("lost" in r.getMessage() and str(q) in r.getMessage() for r in caplog.records),
            15,
            "the old owner notices it lost the queue",
        )
        seen = []
        deadline = time.monotonic() + 6  # more than a persist interval: a stale commit would land now
        while time.monotonic() < deadline:
            seen.append(int(client.hget(store.queue_keys("L", 0).offsets, "lg")))
            time.sleep(0.05)  # the poll interval of the 6 s watch
        # "someone-else" is no live member, so the old owner may claim the queue back: from 70 on
        assert min(seen) >= 70, seen
    client.close()


def test_simple_consumer_of_a_first_offset_group_starts_at_the_first_message(
    backend_url: str, namespace: str, admin: Admin
) -> None:
    admin.create_topic("F", read_queues=2, write_queues=2)
    _fill(backend_url, namespace, "F", 5)
    admin.create_group("fresh", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    with SimpleConsumer("fresh", backend_url, namespace=namespace, subscriptions={"F": "*"}, await_duration_s=1) as sc:
        views = sc.receive(max_messages=16)
        assert sorted(v.body for v in views) == [b"%d" % i for i in range(5)]
    with SimpleConsumer("new-by-default", backend_url, namespace=namespace, subscriptions={"F": "*"}, await_duration_s=0.2) as sc:
        assert sc.receive(max_messages=16) == []  # LAST_OFFSET: new messages only


def test_a_consumer_starts_and_consumes_on_a_full_store(namespace: str) -> None:
    """At maxmemory (noeviction) Redis refuses plain writes; the consumer's start-up writes that can
    wait (group list, starting offsets, retry topic) wait, and its scripts keep consuming."""
    from tests.servers import RedisServer

    with RedisServer(extra_args=["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]) as server:
        url = server.url
        admin_once(url, namespace).create_topic("OOM", read_queues=2, write_queues=2)
        _fill(url, namespace, "OOM", 20)
        client = server.client()
        with pytest.raises(Exception, match="maxmemory"):
            for i in range(10_000):
                client.set(f"filler:{i}", b"x" * 65536)
        got: list[bytes] = []
        consumer = PushConsumer("full", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        consumer.subscribe("OOM")
        consumer.register_message_listener(
            lambda msgs, ctx: got.extend(m.body for m in msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        )
        with consumer:
            wait_for(lambda: len(got) >= 20, 15, "the stored messages consumed on a full store")
        assert sorted(got) == sorted(b"%d" % i for i in range(20))
        client.close()


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrent", "orderly"])
def test_shutdown_returns_within_its_bound_when_a_listener_never_returns(
    redis_server, namespace: str, orderly: bool, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    """Issue 13, finding 8: a listener stuck forever no longer makes shutdown() hang."""
    from mq import ConsumeOrderlyStatus

    url = redis_server.url
    admin_once(url, namespace).create_topic("H", read_queues=1, write_queues=1)
    release = threading.Event()
    entered = threading.Event()

    def stuck(msgs, ctx):  # type: ignore[no-untyped-def]
        entered.set()
        release.wait(60)
        return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("hg", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("H")
    (consumer.register_orderly_listener if orderly else consumer.register_message_listener)(stuck)
    _fill(url, namespace, "H", 3)
    try:
        consumer.start()
        assert entered.wait(15)
        started = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="mq.consumer"):
            clean = consumer.shutdown(timeout_s=2.0)
        took = time.monotonic() - started
        assert clean is False and took < 2.0 + 3.0, took
        assert any("still run" in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]
    finally:
        release.set()
    # nothing of the stuck call was committed: it is delivered again
    assert admin_once(url, namespace).consumer_progress("hg", "H")[0].consumer_offset in (-1, 0)


def test_a_listener_raising_system_exit_counts_as_a_failure(
    redis_server, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    """Issue 13, finding 9: SystemExit / KeyboardInterrupt from a listener is logged and retried like
    any failure; the queue's offset moves on past it."""
    url = redis_server.url
    admin = owned(Admin(url, namespace))
    admin.create_topic("SX", read_queues=1, write_queues=1)
    _fill(url, namespace, "SX", 50)
    raised: list[bool] = []

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        if msgs[0].queue_offset == 0 and not raised:
            raised.append(True)
            raise SystemExit(3)
        if msgs[0].queue_offset == 1 and len(raised) == 1:
            raised.append(True)
            raise KeyboardInterrupt
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("sx", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("SX")
    consumer.register_message_listener(listener)
    with caplog.at_level(logging.ERROR, logger="mq.consumer"), consumer:
        wait_for(lambda: admin.consumer_progress("sx", "SX")[0].consumer_offset == 50, 15, "the offset past all 50")
    assert len(raised) == 2
    assert any("SystemExit" in r.getMessage() for r in caplog.records)
    assert any("KeyboardInterrupt" in r.getMessage() for r in caplog.records)
    retried = owned(Store(Connection(url, namespace))).queue_stats("%RETRY%sx", [0])[0]
    assert retried.max_offset == 0  # sent back as delayed retries (the broker delivers them later)
    client = raw_client(url)
    assert client.zcard(owned(Store(Connection(url, namespace))).queue_keys("%RETRY%sx", 0).timer) == 2
    client.close()


def test_an_idle_consumers_waiter_passes_a_non_utf8_entry_and_delivers_the_next(
    redis_server, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    """Issue 13, finding 10: a non-UTF-8 field reaching a caught-up queue's long-poll waiter."""
    url = redis_server.url
    admin_once(url, namespace).create_topic("NU", read_queues=1, write_queues=1)
    got: list[bytes] = []
    consumer = PushConsumer("nu", url, namespace=namespace)
    consumer.subscribe("NU")
    consumer.register_message_listener(
        lambda msgs, ctx: got.extend(m.body for m in msgs) or ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    )
    with caplog.at_level(logging.ERROR, logger="mq.store"), consumer:
        wait_for(lambda: blocked_readers(url) >= 2, 10, "NU's waiter (and the retry topic's) blocked in XREAD")
        client = raw_client(url)
        keys = owned(Connection(url, namespace)).keys.queue("NU", 0)
        seq = int(client.hget(keys.meta, "seq") or 0)
        client.xadd(keys.log, {"i": "x", "b": "y", "bt": "1", "st": "1", "t": b"\xff"}, id=f"0-{seq + 1}")
        client.hset(keys.meta, "seq", seq + 1)
        client.close()
        wait_for(
            lambda: any("not a message this library wrote" in r.getMessage() for r in caplog.records), 10, "the bad entry read"
        )
        _fill(url, namespace, "NU", 1)
        wait_for(lambda: got == [b"0"], 10, "the good message after the bad entry")
    assert any("not a message this library wrote" in r.getMessage() for r in caplog.records)


def test_a_simple_consumer_started_on_a_missing_topic_leaves_no_member(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    url = redis_server.url
    sc = SimpleConsumer("ghost", url, namespace=namespace, subscriptions={"nope": "*"})
    with pytest.raises(MQClientError, match="does not exist"):
        sc.start()
    assert admin_once(url, namespace).consumer_connections("ghost") == []
