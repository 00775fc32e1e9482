"""The broker service: timer delivery, restarts and replicas, retry and DLQ, retention, health."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer, SendStatus
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService, healthy_brokers
from tests.helpers import admin_once, stays_quiet
from tests.leaks import owned
from tests.procs import ROOT, wait_for
from tests.servers import RedisServer

#: Short delay levels so retries come back in a fraction of a second.
FAST_LEVELS = "100ms 200ms 300ms 400ms 500ms 600ms"


def _stored(url: str, ns: str, topic: str) -> list:
    store = owned(Store(Connection(url, ns)))
    out = []
    for qid in range(store.topic(topic).queue_count):  # type: ignore[union-attr]
        out += store.read(topic, qid, 0, 100_000)
    store.conn.close()
    return out


@pytest.fixture
def broker(backend_url: str, namespace: str) -> Iterator[BrokerService]:
    with BrokerService(backend_url, namespace, BrokerConfig(message_delay_level=FAST_LEVELS)) as service:
        yield service


def test_timer_messages_are_never_early_and_all_delivered(backend_url: str, namespace: str, broker) -> None:  # type: ignore[no-untyped-def]
    admin_once(backend_url, namespace).create_topic("timed", read_queues=4, write_queues=4)
    now = int(time.time() * 1000)
    dues = {}
    with Producer("p", backend_url, namespace=namespace) as producer:
        for i in range(200):
            due = now + 300 + (i * 37) % 1000
            r = producer.send(Message("timed", b"%d" % i, deliver_time_ms=due))
            assert r.queue_offset == -1  # assigned on delivery
            dues[r.msg_id] = due
        assert producer.send(Message("timed", b"past", deliver_time_ms=now - 5000)).queue_offset == -1
    # the broker runs in this process: polling the store (a new cluster client each time) while the
    # messages fall due would take the GIL from its delivery thread and measure the test, not the broker
    time.sleep(max(0.0, max(dues.values()) / 1000 - time.time()) + 0.1)
    wait_for(lambda: len(_stored(backend_url, namespace, "timed")) >= 201, 10, "all timer messages delivered")
    stays_quiet(lambda: len(_stored(backend_url, namespace, "timed")), "the delivered timer messages", poll_s=0.25)
    stored = _stored(backend_url, namespace, "timed")
    lateness = sorted(m.store_timestamp_ms - dues[m.msg_id] for m in stored if m.msg_id in dues)
    assert len(lateness) == 200 and len({m.msg_id for m in stored}) == 201
    assert lateness[0] >= 0, "delivered before it was due"
    # how late is measured, not asserted here: python -m bench.timers (p50/p99, docs/benchmarks.md)


def test_delay_level_and_clamping(redis_server, namespace: str) -> None:
    url = redis_server.url
    admin_once(url, namespace).create_topic("lvl", read_queues=1, write_queues=1)
    with BrokerService(url, namespace), Producer("p", url, namespace=namespace) as producer:
        sent = time.time() * 1000
        producer.send(Message("lvl", b"level 2", delay_level=2))  # 5 s with the default levels
        producer.send(Message("lvl", b"level 99", delay_level=99))  # clamped to the top level (2 h)
        wait_for(lambda: len(_stored(url, namespace, "lvl")) >= 1, 8, "the level-2 message")
        [m] = _stored(url, namespace, "lvl")
    assert m.body == b"level 2"
    assert 4500 <= m.store_timestamp_ms - sent <= 5500
    store = owned(Store(Connection(url, namespace)))
    [(_, due)] = store.conn.client.zrange(store.queue_keys("lvl", 0).timer, 0, -1, withscores=True)
    assert abs(due - (sent + 2 * 3600 * 1000)) < 2000  # still waiting, due in two hours


def test_messages_due_while_no_service_runs_are_delivered_later_once_by_two_services(redis_server, namespace: str) -> None:
    url = redis_server.url
    admin_once(url, namespace).create_topic("later", read_queues=4, write_queues=4)
    now = int(time.time() * 1000)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(500):
            producer.send(Message("later", b"%d" % i, deliver_time_ms=now + (i % 50) * 10))
    time.sleep(1.0)  # time passes: all fall due while no service runs (nobody may deliver them)
    assert _stored(url, namespace, "later") == []
    with BrokerService(url, namespace), BrokerService(url, namespace):  # two replicas at once
        wait_for(lambda: len(_stored(url, namespace, "later")) >= 500, 10, "delivery after start")
        stays_quiet(lambda: len(_stored(url, namespace, "later")), "the delivered messages", poll_s=0.25)
    stored = _stored(url, namespace, "later")
    assert len(stored) == 500 and len({m.body for m in stored}) == 500


@pytest.mark.fault
@pytest.mark.slow
def test_broker_killed_mid_delivery_loses_and_duplicates_nothing(redis_server, namespace: str) -> None:
    url = redis_server.url
    admin_once(url, namespace).create_topic("bulk", read_queues=8, write_queues=8)

    def broker_proc() -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "mq", "broker", "--url", url, "--namespace", namespace],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
        )

    admin = owned(Admin(url, namespace))
    total = lambda: sum(s.max_offset for s in admin.topic_status("bulk").values())  # noqa: E731
    first = broker_proc()
    try:
        # the broker runs before anything is sent (its start is slow on a loaded machine: it is not
        # in the time budget below)
        wait_for(lambda: bool(admin.broker_beats()), 30, "the first broker to run")
        # due over two seconds starting 8 s from now; the kill comes at the first delivery, while the sends
        # may still run (they take 2-4 s, far longer on a loaded machine): delivery is under way and not
        # over (due all at once, the broker's first pass would move them all before the kill)
        due_from = int(time.time() * 1000) + 8_000
        with Producer("p", url, namespace=namespace) as producer:
            futures = [producer.send_async(Message("bulk", b"%d" % i, deliver_time_ms=due_from + i // 5)) for i in range(10_000)]
            wait_for(lambda: total() > 0, 60, "the first broker to start delivering", poll_s=0.005)
            first.send_signal(signal.SIGKILL)
            first.wait(10)
            assert total() < 10_000, "the kill should land mid-delivery"
            for f in futures:
                f.result(timeout=60)
        second = broker_proc()
        try:
            wait_for(lambda: total() >= 10_000, 30, "the second broker to deliver the rest")
            stays_quiet(total, "the delivered messages", poll_s=0.25)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(10)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait(10)  # reaped: a failed run leaves no process behind for a later test to warn about
    stored = _stored(url, namespace, "bulk")
    assert len(stored) == 10_000 and len({m.body for m in stored}) == 10_000


def _listener(record: list, fail) -> object:  # type: ignore[no-untyped-def]
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            record.extend((m.body, m.reconsume_times, m.topic, m.msg_id) for m in msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if fail(msgs[0]) else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return listener


def test_retry_once_then_success(backend_url: str, namespace: str, broker) -> None:  # type: ignore[no-untyped-def]
    admin_once(backend_url, namespace).create_topic("R", read_queues=4, write_queues=4)
    seen: list = []
    consumer = PushConsumer("gr", backend_url, namespace=namespace)
    consumer.subscribe("R", "*")
    consumer.register_message_listener(_listener(seen, lambda m: m.reconsume_times == 0))
    with consumer, Producer("p", backend_url, namespace=namespace) as producer:
        ids = {producer.send(Message("R", b"%d" % i, tags="t", keys=["k"], properties={"a": "1"})).msg_id for i in range(20)}
        wait_for(lambda: len(seen) >= 40, 15, "each message twice")
        stays_quiet(lambda: len(seen), "the deliveries")
    assert len(seen) == 40
    for msg_id in ids:
        deliveries = [s for s in seen if s[3] == msg_id]
        assert [d[1] for d in deliveries] == [0, 1]  # the second time with reconsume_times == 1
        assert {d[2] for d in deliveries} == {"R"}  # the listener always sees the original topic


def test_ack_index_retries_the_rest_of_a_batch(backend_url: str, namespace: str, broker) -> None:  # type: ignore[no-untyped-def]
    """CONSUME_SUCCESS with ``ctx.ack_index = 1`` on a batch of 4: the first two are done, the last two
    come back through the retry topic [RocketMQ ``ackIndex``]."""
    admin_once(backend_url, namespace).create_topic("AI", read_queues=1, write_queues=1)
    seen: list[tuple[bytes, int]] = []
    batches: list[int] = []
    lock = threading.Lock()

    def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            seen.extend((m.body, m.reconsume_times) for m in msgs)
            batches.append(len(msgs))
        if all(m.reconsume_times == 0 for m in msgs):
            ctx.ack_index = 1
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    with Producer("p", backend_url, namespace=namespace) as producer:
        producer.send_batch([Message("AI", b"%d" % i) for i in range(4)])
        consumer = PushConsumer(
            "gai",
            backend_url,
            namespace=namespace,
            consume_message_batch_max_size=4,
            consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
        )
        consumer.subscribe("AI", "*")
        consumer.register_message_listener(listener)
        with consumer:
            wait_for(lambda: len(seen) >= 6, 15, "the unacknowledged part again")
            stays_quiet(lambda: len(seen), "the deliveries")
    assert batches[0] == 4
    assert sorted(seen) == [(b"0", 0), (b"1", 0), (b"2", 0), (b"2", 1), (b"3", 0), (b"3", 1)]


def test_dead_letter_after_max_reconsume_times_then_resend(backend_url: str, namespace: str, broker) -> None:  # type: ignore[no-untyped-def]
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("D", read_queues=2, write_queues=2)
    seen: list = []
    poison = PushConsumer("gd", backend_url, namespace=namespace, max_reconsume_times=2)
    poison.subscribe("D", "*")
    poison.register_message_listener(_listener(seen, lambda m: True))
    with poison, Producer("p", backend_url, namespace=namespace) as producer:
        r = producer.send(Message("D", b"poison", tags="bad", keys=["order-9"], properties={"x": "y"}))
        wait_for(lambda: len(admin.dlq_messages("gd")) == 1, 15, "the message to reach the DLQ")
        stays_quiet(lambda: len(seen), "the deliveries of the dead letter")
    assert [s[1] for s in seen] == [0, 1, 2]  # delivered exactly 3 times
    [dead] = admin.dlq_messages("gd")
    assert (dead.msg_id, dead.body, dead.tags, list(dead.keys)) == (r.msg_id, b"poison", "bad", ["order-9"])
    assert dead.properties == {"x": "y"}
    assert dead.system_properties["RETRY_TOPIC"] == "D"

    again: list = []  # the group, fixed, consumes the resent letter (resend reaches the letter's group only)
    healthy = PushConsumer("gd", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.LAST_OFFSET)
    healthy.subscribe("D", "*")
    healthy.register_message_listener(_listener(again, lambda m: False))
    with healthy:
        wait_for(lambda: any(q.topic == "%RETRY%gd" for q in healthy.assigned_queues()), 10, "the group's retry queue held")
        assert admin.resend_dlq("gd") == 1
        assert admin.resend_dlq("gd") == 0  # already resent
        wait_for(lambda: len(again) >= 1, 10, "the resent message")
    assert again[0][0] == b"poison" and again[0][2] == "D"


def test_retention_removes_old_messages_and_frees_memory(namespace: str) -> None:
    """Retention trims messages with their id and key index entries, and frees their memory: the
    queues' keys (``MEMORY USAGE``) shrink to a fraction of their peak. (The server's total memory also
    holds the broker's stats history and allocator slack, so it is not the measure.)"""
    with RedisServer() as server:
        url = server.url
        client = server.client()
        admin = owned(Admin(url, namespace))
        admin.create_topic("ret", read_queues=4, write_queues=4)
        store = owned(Store(Connection(url, namespace)))
        queue_keys = [
            k
            for qid in range(4)
            for k in (store.queue_keys("ret", qid).log, store.queue_keys("ret", qid).ids, store.queue_keys("ret", qid).keys)
        ]

        def queues_bytes() -> int:
            return sum(client.memory_usage(k) or 0 for k in queue_keys)

        config = BrokerConfig(file_reserved_time_h=1.5 / 3600, retention_interval_s=0.5)
        with BrokerService(url, namespace, config), Producer("p", url, namespace=namespace) as producer:
            first = producer.send(Message("ret", b"x" * 512, keys=["old-key"]))
            deadline = time.monotonic() + 4
            peak = 0
            while time.monotonic() < deadline:  # a steady load for a few seconds
                for _ in range(100):
                    producer.send_oneway(Message("ret", b"x" * 512, keys=["k%d" % (time.monotonic_ns() % 50)]))
                time.sleep(0.05)  # paces the load
                peak = max(peak, queues_bytes())
            wait_for(lambda: all(s.min_offset == s.max_offset for s in admin.topic_status("ret").values()), 10, "all trimmed")
        assert admin.query_message("ret", first.msg_id) is None
        assert admin.query_messages_by_key("ret", "old-key") == []
        for qid in range(4):
            keys = store.queue_keys("ret", qid)
            assert client.hlen(keys.ids) == 0 and client.zcard(keys.keys) == 0 and client.xlen(keys.log) == 0
        after = queues_bytes()
        client.close()
        store.conn.close()
    assert peak > 1_000_000, "the load should have used memory"
    print(f"queue keys at peak {peak} B, after retention {after} B")
    assert after < peak * 0.05, (peak, after)


def test_broker_check_reports_health(redis_server, namespace: str) -> None:
    url = redis_server.url

    def check() -> int:
        return subprocess.run(
            [sys.executable, "-m", "mq", "broker", "--check", "--url", url, "--namespace", namespace],
            capture_output=True,
            timeout=30,
            cwd=ROOT,
        ).returncode

    assert check() == 1
    with BrokerService(url, namespace) as service:
        assert healthy_brokers(url, namespace) == [service.id]
        assert check() == 0
    assert check() == 1  # a clean shutdown leaves the set at once


def test_delayed_batch_and_bad_levels_are_refused(redis_server, namespace: str) -> None:
    from mq.errors import MQClientError

    with pytest.raises(MQClientError, match="level"):
        BrokerConfig(message_delay_level="1s 5x")
    admin_once(redis_server.url, namespace).create_topic("b", read_queues=1, write_queues=1)
    with Producer("p", redis_server.url, namespace=namespace) as producer, pytest.raises(MQClientError, match="delayed"):
        producer.send_batch([Message("b", b"x", delay_level=1)])


def test_a_stuck_listener_call_is_sent_back_after_consume_timeout(backend_url: str, namespace: str, broker) -> None:  # type: ignore[no-untyped-def]
    admin_once(backend_url, namespace).create_topic("stuck", read_queues=1, write_queues=1)
    calls: list[tuple[int, float]] = []

    def slow_first(msgs, ctx):  # type: ignore[no-untyped-def]
        calls.append((msgs[0].reconsume_times, time.monotonic()))
        if msgs[0].reconsume_times == 0:
            time.sleep(4.0)  # stuck far past the 1.2 s consume timeout
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer("gstuck", backend_url, namespace=namespace, consume_timeout_min=0.02)
    consumer.subscribe("stuck", "*")
    consumer.register_message_listener(slow_first)
    with consumer, Producer("p", backend_url, namespace=namespace) as producer:
        producer.send(Message("stuck", b"slow"))
        wait_for(lambda: len(calls) >= 2, 10, "the copy sent back after the timeout")
        assert calls[1][0] == 1
        assert calls[1][1] - calls[0][1] < 4.0, "redelivered while the stuck call was still running"


def test_dead_clients_are_judged_by_the_redis_clock(redis_server, namespace: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clean-up compares heartbeats with the clock that wrote them (Redis's), not the broker
    host's: a broker host two minutes ahead removes the silent client only, not the live one."""
    url = redis_server.url
    consumer = PushConsumer("gd", url, namespace=namespace)
    consumer.subscribe("T", "*")
    consumer.register_message_listener(lambda msgs, ctx: ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
    keys = owned(Store(Connection(url, namespace))).keys.group("gd")
    raw = redis_server.client()
    with consumer:
        seconds, micros = raw.time()
        raw.zadd(keys.clients, {"silent-client": seconds * 1000 + micros // 1000 - 60_000})
        raw.hset(keys.info, "silent-client", "{}")
        service = BrokerService(url, namespace)
        real_time = time.time
        monkeypatch.setattr(time, "time", lambda: real_time() + 120)  # the broker host's clock is ahead
        try:
            service._remove_dead_clients()
        finally:
            monkeypatch.undo()
            service.shutdown()  # never started: closes its connection
        assert raw.zscore(keys.clients, "silent-client") is None and not raw.hexists(keys.info, "silent-client")
        assert raw.zscore(keys.clients, consumer._core.client_id) is not None
    raw.close()


def test_a_delayed_message_whose_index_write_failed_is_stored_once(
    redis_server, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index write (another slot) fails after the message was stored: the send still succeeds
    (a retry would store a second copy), and the broker's sweep finds and delivers the message."""
    import redis

    url = redis_server.url
    admin_once(url, namespace).create_topic("IX", read_queues=1, write_queues=1)

    def lost(*args: object, **kwargs: object) -> None:
        raise redis.ConnectionError("the index write was lost")

    with Producer("p", url, namespace=namespace) as producer:
        monkeypatch.setattr(producer._store._client, "zadd", lost)
        result = producer.send(Message("IX", b"once", deliver_time_ms=int(time.time() * 1000) + 200))
        monkeypatch.undo()
    assert result.status is SendStatus.SEND_OK and result.queue_offset == -1
    with BrokerService(url, namespace, BrokerConfig(message_delay_level=FAST_LEVELS)):  # sweeps at start
        wait_for(lambda: len(_stored(url, namespace, "IX")) >= 1, 10, "the sweep to deliver it")
        stays_quiet(lambda: len(_stored(url, namespace, "IX")), "the delivered message", poll_s=0.25)
    assert [m.body for m in _stored(url, namespace, "IX")] == [b"once"]
