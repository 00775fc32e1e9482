"""The consumer core's loss and duplicate fixes (issue 12), on standalone Redis and on the cluster."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator

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
from mq.connection import Connection
from mq.consumer.types import ConsumeConcurrentlyContext
from mq.errors import MQClientError
from mq.store import Store
from tests.helpers import admin_once, blocked_readers, raw_client
from tests.leaks import owned
from tests.procs import wait_for


@pytest.fixture
def admin(backend_url: str, namespace: str) -> Iterator[Admin]:
    with Admin(backend_url, namespace) as a:
        yield a


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


def test_timer_retention_and_sweep_cover_queues_of_a_shrunk_topic(backend_url: str, namespace: str, admin: Admin) -> None:
    from scheduler.retention import apply_retention

    admin.create_topic("S", read_queues=4, write_queues=4)
    _fill(backend_url, namespace, "S", 3, queue=3)
    admin.update_topic("S", read_queues=2, write_queues=2)
    store = owned(Store(Connection(backend_url, namespace)))
    time.sleep(0.01)  # the clock moves on: the messages are older than a zero retention
    assert apply_retention(store, reserved_time_h=0) == 3  # the messages on queue 3 are trimmed too


def test_group_pause_and_resume_reach_push_pull_and_simple_consumers(backend_url: str, namespace: str, admin: Admin) -> None:
    admin.create_topic("G", read_queues=2, write_queues=2)
    for group in ("g-push", "g-pull", "g-simple"):
        admin.create_group(group, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pushed: list[bytes] = []
    push = PushConsumer("g-push", backend_url, namespace=namespace)
    push.subscribe("G")
    ok = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
    push.register_message_listener(lambda msgs, ctx: pushed.extend(m.body for m in msgs) or ok)
    pull = PullConsumer("g-pull", backend_url, namespace=namespace)
    pull.subscribe("G")
    simple = SimpleConsumer("g-simple", backend_url, namespace=namespace, subscriptions={"G": "*"}, await_duration_s=0.5)
    pulled: list[bytes] = []
    received: list[bytes] = []

    def drain_pull_and_simple() -> None:
        pulled.extend(m.body for m in pull.poll(timeout_s=0.2))
        for v in simple.receive(max_messages=16):
            received.append(v.body)
            simple.ack(v)

    with push, pull, simple, Producer("p", backend_url, namespace=namespace) as producer:
        producer.send(Message("G", b"before"))
        wait_for(
            lambda: (drain_pull_and_simple(), b"before" in pushed and b"before" in pulled and b"before" in received)[1],
            15,
            "the first message everywhere",
        )
        for group in ("g-push", "g-pull", "g-simple"):
            admin.update_group(group, consume_enable=False)
        assert push._core is not None and pull._core is not None
        wait_for(  # each member sees the pause at its next heartbeat (1 s; the simple consumer's, in a receive)
            lambda: (
                drain_pull_and_simple(),
                not push._core.active()  # type: ignore[union-attr]
                and not pull._core.active()  # type: ignore[union-attr]
                and simple.group_config is not None
                and not simple.group_config.consume_enable,
            )[1],
            15,
            "every member to see its group paused",
        )
        producer.send(Message("G", b"paused"))
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            drain_pull_and_simple()
        assert b"paused" not in pushed + pulled + received
        for group in ("g-push", "g-pull", "g-simple"):
            admin.update_group(group, consume_enable=True)
        wait_for(
            lambda: (drain_pull_and_simple(), b"paused" in pushed and b"paused" in pulled and b"paused" in received)[1],
            15,
            "the paused message after resume",
        )


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


def test_bad_group_configs_are_refused_before_anything_is_written(redis_server, namespace: str) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers import snapshot

    url = redis_server.url
    admin = owned(Admin(url, namespace))
    before = snapshot(url, namespace)
    bad = [
        {"consume_enable": "yes"},
        {"retry_max_times": -1},
        {"retry_max_times": 1000},
        {"retry_max_times": True},
        {"consume_from_where": "SOMEWHERE"},
        {"fifo": 1},
    ]
    for kwargs in bad:
        with pytest.raises(MQClientError):
            admin.create_group("cfg", **kwargs)
    with pytest.raises(MQClientError):
        admin.create_group("bad group name!")
    with pytest.raises(MQClientError, match="no config"):
        admin.update_group("cfg", consume_enable=False)
    assert snapshot(url, namespace) == before
    admin.create_group("cfg", retry_max_times=3, fifo=True)
    with pytest.raises(MQClientError, match="unknown group setting"):
        admin.update_group("cfg", colour="blue")
    with pytest.raises(MQClientError):
        admin.update_group("cfg", retry_max_times="3")
    config = admin.group_config("cfg")
    assert (config.retry_max_times, config.fifo, config.consume_enable) == (3, True, True)
    assert "cfg" in admin.groups()
    assert admin.delete_group("cfg") is True
    assert admin.delete_group("cfg") is False
    with pytest.raises(MQClientError):
        admin.group_config("cfg")


def test_retry_due_times_follow_the_servers_clock_not_a_skewed_host(
    backend_url: str, namespace: str, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mq.consumer.retry import SendBack, retry_topic

    admin.create_topic("K", read_queues=1, write_queues=1)
    _fill(backend_url, namespace, "K", 1)
    store = owned(Store(Connection(backend_url, namespace)))
    msg = store.read("K", 0, 0, 1)[0]
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # this host runs an hour ahead
    SendBack(store, "kg", 16).send_back(msg, delay_level=1)  # level 1 = 1 s
    monkeypatch.undo()
    timer = store.queue_keys(retry_topic("kg"), 0).timer
    client = raw_client(backend_url)
    [(_, due)] = client.zrange(timer, 0, -1, withscores=True)
    server_ms = store.server_time_ms()
    client.close()
    assert 0 <= due - server_ms <= 1500, due - server_ms  # one second ahead of the server, not an hour


def test_reset_offset_reaches_running_members_and_refuses_unknown_groups(backend_url: str, namespace: str, admin: Admin) -> None:
    admin.create_topic("R", read_queues=2, write_queues=2)
    _fill(backend_url, namespace, "R", 20, queue=0)
    _fill(backend_url, namespace, "R", 20, queue=1)
    got: list[tuple[int, int]] = []
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            got.extend((m.queue_id, m.queue_offset) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("rg", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("R")
    consumer.register_message_listener(listener)
    with consumer:
        wait_for(lambda: len(got) >= 40, 15, "everything consumed once")
        wait_for(lambda: all(p.consumer_offset == 20 for p in admin.consumer_progress("rg", "R")), 15, "offsets at 20")
        with lock:
            got.clear()
        admin.reset_offset_by_time("rg", "R", 0)  # back to the start of both queues, while running
        wait_for(lambda: len(got) >= 40, 15, "the running member to consume again from the reset offsets")
        assert sorted(set(got)) == [(q, o) for q in (0, 1) for o in range(20)]
        with lock:
            got.clear()
        q1 = MessageQueue("R", "broker-a", 1)
        assert admin.reset_offset("rg", q1, 15) == 15
        wait_for(lambda: len(got) >= 5, 15, "the tail of queue 1 again")
        assert sorted(set(got)) == [(1, o) for o in range(15, 20)]
        wait_for(lambda: all(p.consumer_offset == 20 for p in admin.consumer_progress("rg", "R")), 15, "committed again")
    with pytest.raises(MQClientError, match="unknown group"):
        admin.reset_offset_by_time("rg-typo", "R", 0)
    assert "rg-typo" not in admin.groups()
    assert admin.reset_offset_by_time("rg-typo", "R", 0, force=True)


def test_members_publish_their_runtime_status(backend_url: str, namespace: str, admin: Admin) -> None:
    admin.create_topic("ST", read_queues=2, write_queues=2)
    _fill(backend_url, namespace, "ST", 10)
    consumer = PushConsumer("stg", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("ST")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    with consumer:
        assert consumer._core is not None
        wait_for(lambda: admin.consumer_progress("stg", "ST")[0].consumer_offset == 10, 15, "queue 0 consumed")
        # the committing thread takes its reply in just after the store has it
        pq0 = next(pq for mq, pq in consumer._core.process_queues.items() if (mq.topic, mq.queue_id) == ("ST", 0))
        wait_for(lambda: pq0.stored_offset == 10, 5, "the commit taken in")
        consumer._core.publish_status()  # the 10 s job, now
        wait_for(lambda: bool(admin.consumer_connections("stg")[0].status), 5, "the status with a heartbeat")
        status = admin.consumer_connections("stg")[0].status
    assert set(status["queues"]) == {"ST:0", "ST:1", "%RETRY%stg:0"}
    q0 = status["queues"]["ST:0"]
    assert (q0["cached"], q0["next_offset"], q0["committed"]) == (0, 10, 10)
    assert q0["last_pull_ms"] > 0 and status["paused"] is False and status["consume_tps"] >= 0


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


def test_producers_reread_delay_levels_and_time_delays_on_the_stores_clock(
    backend_url: str, namespace: str, admin: Admin, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Delay levels were cached forever by producers, and delayed sends were timed on the sender's clock."""
    from mq import timer as timer_module

    admin.create_topic("DL", read_queues=1, write_queues=1)
    store = owned(Store(Connection(backend_url, namespace)))
    timer = store.queue_keys("DL", 0).timer
    client = raw_client(backend_url)

    def last_due_ahead_ms() -> int:
        [(_, due)] = client.zrange(timer, -1, -1, withscores=True)
        now = client.time()
        seconds, micros = next(iter(now.values())) if isinstance(now, dict) else now  # a cluster answers per node
        return int(due) - (int(seconds) * 1000 + int(micros) // 1000)

    monkeypatch.setattr(timer_module, "DELAY_LEVELS_TTL_S", 0.2)
    with Producer("p", backend_url, namespace=namespace) as producer:
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + 3600)  # this host runs an hour ahead
        producer.send(Message("DL", b"a", delay_level=1))  # default level 1: 1 s
        assert 0 <= last_due_ahead_ms() <= 1500
        store.publish_settings({"message_delay_level": "7s 8s"})  # a broker service publishes new levels
        time.sleep(0.3)  # time passes: the producer's cached levels are past their 0.2 s TTL
        producer.send(Message("DL", b"b", delay_level=1))
        assert 6000 <= last_due_ahead_ms() <= 7500
    client.close()


def test_the_timer_sweep_reindexes_queues_of_a_shrunk_topic(backend_url: str, namespace: str, admin: Admin) -> None:
    from scheduler.index import QueueIndex

    admin.create_topic("SW", read_queues=4, write_queues=4)
    with Producer("p", backend_url, namespace=namespace) as producer:
        producer.send(Message("SW", b"later", delay_level=5), queue=MessageQueue("SW", "broker-a", 3))
    admin.update_topic("SW", read_queues=2, write_queues=2)
    store = owned(Store(Connection(backend_url, namespace)))
    client = raw_client(backend_url)
    client.delete(store.keys.timers)  # the index write was lost (a producer crashed between its writes)
    QueueIndex(store, store.keys.timers, lambda keys: keys.timer).sweep()
    assert [m.decode() for m in client.zrange(store.keys.timers, 0, -1)] == ["SW\x1f3"]
    client.close()
