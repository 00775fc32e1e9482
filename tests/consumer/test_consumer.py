"""Push and pull consumers in one process, on standalone Redis and on the cluster."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeHook,
    Message,
    MessageModel,
    MessageQueue,
    MessageSelector,
    Producer,
    PullConsumer,
    PushConsumer,
)
from mq.consumer.retry import SendBackOps
from mq.errors import FilterExpressionError, MQBrokerError, MQClientError
from mq.store import Store
from mq.store.connection import Connection
from tests.helpers import blocked_readers, stays_quiet
from tests.leaks import owned
from tests.procs import wait_for
from tests.servers import RedisServer


class Collector:
    """A listener that records what it got."""

    def __init__(self, status: ConsumeConcurrentlyStatus = ConsumeConcurrentlyStatus.CONSUME_SUCCESS) -> None:
        self.messages: list = []
        self.times: list[float] = []
        self.lock = threading.Lock()
        self.status = status

    def __call__(self, msgs, ctx):  # type: ignore[no-untyped-def]
        with self.lock:
            self.messages.extend(msgs)
            self.times.extend(time.time() for _ in msgs)
        return self.status

    @property
    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.messages]


@pytest.fixture
def env(backend_url: str, namespace: str) -> Iterator[tuple[str, str, Admin, Producer]]:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("T", read_queues=8, write_queues=8)
    with Producer("p", backend_url, namespace=namespace) as producer:
        yield backend_url, namespace, admin, producer
    admin.close()


def _consumer(
    url: str, ns: str, group: str, listener: Collector, expression: str | MessageSelector = "*", **kw: object
) -> PushConsumer:
    c = PushConsumer(group, url, namespace=ns, **kw)  # type: ignore[arg-type]
    c.subscribe("T", expression)
    c.register_message_listener(listener)
    return c


def _of_t(consumer: PushConsumer) -> set[MessageQueue]:
    """The queues of topic T a member holds (a clustering member also holds its group's retry topic)."""
    return {q for q in consumer.assigned_queues() if q.topic == "T"}


def test_push_consumer_gets_everything_once_with_hooks(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, admin, producer = env
    got = Collector()

    class Hook(ConsumeHook):
        def __init__(self) -> None:
            self.statuses: list[str] = []

        def before(self, ctx):  # type: ignore[no-untyped-def]
            raise RuntimeError("a broken hook must not lose messages")

        def after(self, ctx):  # type: ignore[no-untyped-def]
            self.statuses.append(ctx.status)

    hook = Hook()
    with _consumer(url, ns, "g1", got) as consumer:
        consumer.register_consume_hook(hook)
        for i in range(300):
            producer.send(Message("T", b"%d" % i))
        wait_for(lambda: len(got.messages) >= 300, 20, "300 messages")
        stays_quiet(lambda: len(got.messages), "the deliveries")
        assert {q.topic for q in consumer.assigned_queues()} == {"T", "%RETRY%g1"}  # the retry topic comes along
        assert len([q for q in consumer.assigned_queues() if q.topic == "T"]) == 8
    assert sorted(got.bodies, key=int) == [b"%d" % i for i in range(300)]
    assert hook.statuses.count("CONSUME_SUCCESS") == 300
    progress = admin.consumer_progress("g1", "T")
    assert sum(p.lag for p in progress) == 0 and len(progress) == 8


def test_tag_and_sql_filters_end_to_end(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    tags_got, sql_got = Collector(), Collector()
    sql = MessageSelector.by_sql("TAGS = 'a' AND region IN ('HZ','SH')")
    with _consumer(url, ns, "gt", tags_got, "a || c"), _consumer(url, ns, "gs", sql_got, sql):
        sent = []
        for i, (tag, region) in enumerate([("a", "HZ"), ("a", "BJ"), ("b", "SH"), ("a", "SH"), ("c", "HZ")] * 20):
            producer.send(Message("T", b"%d" % i, tags=tag, properties={"region": region}))
            sent.append((b"%d" % i, tag, region))
        want_sql = sorted(b for b, t, r in sent if t == "a" and r in ("HZ", "SH"))
        want_tags = sorted(b for b, t, _ in sent if t in ("a", "c"))
        wait_for(lambda: len(sql_got.messages) >= len(want_sql) and len(tags_got.messages) >= len(want_tags), 20, "filtered")
        stays_quiet(lambda: (len(sql_got.messages), len(tags_got.messages)), "the filtered deliveries")
    assert sorted(sql_got.bodies) == want_sql
    assert sorted(tags_got.bodies) == want_tags


def test_malformed_expression_fails_at_subscribe(redis_server, namespace: str) -> None:
    c = PushConsumer("g", redis_server.url, namespace=namespace)
    with pytest.raises(FilterExpressionError) as info:
        c.subscribe("T", MessageSelector.by_sql("a = 'x' AND"))
    assert info.value.position >= 11
    with pytest.raises(FilterExpressionError):
        c.subscribe("T", "A ||")


def test_consume_from_where(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    old = [producer.send(Message("T", b"old%d" % i)) for i in range(40)]
    time.sleep(0.05)  # the clock moves on: no "old" message is stored in the mark's millisecond
    mark_ms = int(time.time() * 1000)
    time.sleep(0.05)  # nor a "mid" one
    middle = [producer.send(Message("T", b"mid%d" % i)) for i in range(40)]
    assert old and middle
    last, first, stamp = Collector(), Collector(), Collector()
    first_kw = {"consume_from_where": ConsumeFromWhere.FIRST_OFFSET}
    ts_kw = {"consume_from_where": ConsumeFromWhere.TIMESTAMP, "consume_timestamp_ms": mark_ms}
    with (
        _consumer(url, ns, "g-last", last) as c_last,
        _consumer(url, ns, "g-first", first, **first_kw) as c_first,
        _consumer(url, ns, "g-ts", stamp, **ts_kw) as c_ts,
    ):
        wait_for(lambda: all(len(_of_t(c)) == 8 for c in (c_last, c_first, c_ts)), 15, "every queue at each group")
        new = [producer.send(Message("T", b"new%d" % i)) for i in range(40)]
        assert new
        wait_for(lambda: len(last.messages) >= 40 and len(first.messages) >= 120 and len(stamp.messages) >= 80, 20, "all")
        stays_quiet(lambda: (len(last.messages), len(first.messages), len(stamp.messages)), "each group's deliveries")
    assert sorted(last.bodies) == sorted(b"new%d" % i for i in range(40))
    assert len(first.bodies) == 120 and len(set(first.bodies)) == 120
    assert sorted(stamp.bodies) == sorted([b"mid%d" % i for i in range(40)] + [b"new%d" % i for i in range(40)])


def test_failed_message_waits_in_the_retry_topic(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, admin, producer = env
    calls: list[int] = []

    def failing(msgs, ctx):  # type: ignore[no-untyped-def]
        calls.append(msgs[0].reconsume_times)
        raise RuntimeError("always fails")

    c = PushConsumer("g-retry", url, namespace=ns)
    c.subscribe("T")
    c.register_message_listener(failing)
    with c:
        sent = producer.send(Message("T", b"once"))
        wait_for(lambda: bool(calls), 10, "the first attempt")
        store = owned(Store(Connection(url, ns)))
        timer = store.queue_keys("%RETRY%g-retry", 0).timer
        wait_for(lambda: store.conn.client.zcard(timer) == 1, 10, "the copy in the retry topic's timer")
        wait_for(lambda: sum(p.lag for p in admin.consumer_progress("g-retry", "T")) == 0, 10, "offset committed")
        stays_quiet(lambda: len(calls), "the attempts")
    assert calls == [0]  # comes back only when the broker service delivers it (see test_broker_service)
    assert sent.msg_id


def test_message_is_consumed_again_locally_when_sending_back_fails(env, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    attempts: list[int] = []

    def flaky(msgs, ctx):  # type: ignore[no-untyped-def]
        attempts.append(msgs[0].reconsume_times)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if len(attempts) == 1 else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def broken_copy(self, msg, delay_level, reason, *, to_dlq):  # type: ignore[no-untyped-def]
        raise MQBrokerError("the store refused the send-back")

    monkeypatch.setattr(SendBackOps, "_copy", broken_copy)
    monkeypatch.setattr("mq.consumer.push.LOCAL_RECONSUME_DELAY_S", 0.5)
    c = PushConsumer("g-local", url, namespace=ns)
    c.subscribe("T")
    c.register_message_listener(flaky)
    with c:
        producer.send(Message("T", b"once"))
        wait_for(lambda: len(attempts) == 2, 10, "the local second attempt")
        stays_quiet(lambda: len(attempts), "the attempts")
    assert attempts == [0, 1]


def test_progress_reports_lag_before_consumption(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, admin, producer = env
    pc = PullConsumer("g-lag", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=10)
    pc.subscribe("T")
    with pc:
        for i in range(50):
            producer.send(Message("T", b"%d" % i))
        polled: list = []
        wait_for(lambda: bool(polled.extend(pc.poll(0.2)) or len(polled) >= 30), 20, "30 polled")
        pc.commit()
        lag = sum(p.lag for p in admin.consumer_progress("g-lag", "T"))
        assert lag == 50 - len(polled)
        while len(polled) < 50:
            polled.extend(pc.poll(1.0))
        pc.commit()
    assert sum(p.lag for p in admin.consumer_progress("g-lag")) == 0
    assert len({m.msg_id for m in polled}) == 50


def test_pull_consumer_assign_seek_commit(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    q = MessageQueue("T", "broker-a", 3)
    for i in range(20):
        producer.send(Message("T", b"%d" % i), queue=q)
    pc = PullConsumer("g-assign", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, auto_commit=False)
    pc.assign([q])
    with pc:
        first = pc.poll(5)
        assert [m.queue_offset for m in first] == list(range(20))
        assert pc.committed(q) in (-1, 0)
        pc.commit()
        assert pc.committed(q) == 20
        pc.seek(q, 5)
        again = pc.poll(5)
        assert [m.queue_offset for m in again][:3] == [5, 6, 7]
        pc.seek_to_end(q)
        producer.send(Message("T", b"tail"), queue=q)
        tail = pc.poll(5)
        assert [m.body for m in tail] == [b"tail"]
        pc.seek_to_begin(q)
        assert pc.poll(5)[0].queue_offset == 0
    with pytest.raises(MQClientError):
        pc.subscribe("T")


@pytest.mark.parametrize("mode", ["assign", "subscribe"])
def test_pull_consumer_without_auto_commit_keeps_uncommitted_messages(env, mode: str) -> None:  # type: ignore[no-untyped-def]
    """Giving a queue up (shutdown, rebalance) commits only what commit() committed: messages
    polled but not committed are delivered again."""
    url, ns, _, producer = env
    q = MessageQueue("T", "broker-a", 2)
    group = f"g-manual-{mode}"

    def consumer() -> PullConsumer:
        pc = PullConsumer(group, url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, auto_commit=False)
        pc.assign([q]) if mode == "assign" else pc.subscribe("T")
        return pc

    def poll_queue(pc: PullConsumer, n: int) -> list[int]:
        got: list[int] = []
        deadline = time.monotonic() + 10
        while len(got) < n and time.monotonic() < deadline:
            got += [m.queue_offset for m in pc.poll(0.5) if m.queue_id == q.queue_id]
        return got

    for i in range(10):
        producer.send(Message("T", b"%d" % i), queue=q)
    with consumer() as pc:
        assert poll_queue(pc, 10) == list(range(10))
        pc.commit()
        for i in range(5):
            producer.send(Message("T", b"late-%d" % i), queue=q)
        assert poll_queue(pc, 5) == list(range(10, 15))  # polled, never committed
    with consumer() as pc:
        assert pc.committed(q) == 10
        assert poll_queue(pc, 5) == list(range(10, 15))


def test_last_offset_reads_queues_added_to_a_topic_from_their_start(env) -> None:  # type: ignore[no-untyped-def]
    """LAST_OFFSET skips history only when the group first consumes a topic: a queue added later —
    while the group runs or while it is down — is read from its first message."""
    url, ns, admin, producer = env
    admin.create_topic("Grow", read_queues=2, write_queues=2)
    producer.send(Message("Grow", b"history"))  # before the group ever ran: skipped
    got = Collector()

    def member() -> PushConsumer:
        c = PushConsumer("g-grow", url, namespace=ns)
        c.subscribe("Grow", "*")
        c.register_message_listener(got)
        return c

    def send_to_queues(tag: str, queues: range) -> set[bytes]:
        for q in queues:
            producer.send(Message("Grow", f"{tag}-{q}".encode()), queue=MessageQueue("Grow", "broker-a", q))
        return {f"{tag}-{q}".encode() for q in queues}

    with member() as running:
        wait_for(lambda: any(q.topic == "Grow" for q in running.assigned_queues()), 10, "the topic's one queue held")
        admin.update_topic("Grow", read_queues=4, write_queues=4)
        wanted = send_to_queues("running", range(4))
        running._core.rebalance()  # the 20 s backstop would find the new queues too
        wait_for(lambda: wanted <= set(got.bodies), 10, "the new queues' messages")
    admin.update_topic("Grow", read_queues=6, write_queues=6)
    wanted |= send_to_queues("down", range(6))
    with member():
        wait_for(lambda: wanted <= set(got.bodies), 10, "what came while the group was down")
        stays_quiet(lambda: len(got.bodies), "the deliveries")
    assert b"history" not in got.bodies and len(got.bodies) == len(set(got.bodies)) == 10


def test_broadcasting_gets_everything_and_resumes_from_local_offsets(env, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("MQ_OFFSET_DIR", str(tmp_path))
    url, ns, _, producer = env
    a, b = Collector(), Collector()
    kw = {"message_model": MessageModel.BROADCASTING}
    with _consumer(url, ns, "gb", a, client_id="A", **kw) as ca, _consumer(url, ns, "gb", b, client_id="B", **kw) as cb:
        wait_for(lambda: len(_of_t(ca)) == 8 and len(_of_t(cb)) == 8, 15, "every queue at both members")
        for i in range(60):
            producer.send(Message("T", b"%d" % i))
        wait_for(lambda: len(a.messages) >= 60 and len(b.messages) >= 60, 20, "both got all")
        stays_quiet(lambda: (len(a.messages), len(b.messages)), "each member's deliveries")
    assert sorted(a.bodies) == sorted(b.bodies) == sorted(b"%d" % i for i in range(60))
    assert list(tmp_path.rglob("A.json")), "offsets persisted to a local file"
    for i in range(60, 90):
        producer.send(Message("T", b"%d" % i))
    again = Collector()
    with _consumer(url, ns, "gb", again, client_id="A", **kw):
        wait_for(lambda: len(again.messages) >= 30, 20, "the restarted member to catch up")
        stays_quiet(lambda: len(again.messages), "the restarted member's deliveries")
    assert sorted(again.bodies) == sorted(b"%d" % i for i in range(60, 90))
    store = owned(Store(Connection(url, ns)))
    stored = store.read_offsets("gb", [MessageQueue("T", "broker-a", q) for q in range(8)])
    assert stored == {}, "broadcasting offsets live in the local files only, never in the store"


def test_start_needs_listener_and_subscription(redis_server, namespace: str) -> None:
    c = PushConsumer("g", redis_server.url, namespace=namespace)
    with pytest.raises(MQClientError, match="listener"):
        c.start()
    c.register_message_listener(Collector())
    with pytest.raises(MQClientError, match="subscribe"):
        c.start()


def test_idle_consumer_costs_little_and_wakes_on_a_send(namespace: str) -> None:
    """An idle consumer makes a few commands a second, and each send wakes it (its long poll, not a
    pull interval). How fast it wakes is measured, not asserted here: ``python -m bench.consumer``
    (idle wake-up, docs/benchmarks.md)."""
    with RedisServer() as server:  # its own server: commandstats count only this consumer
        url = server.url
        with Admin(url, namespace) as admin:
            admin.create_topic("T", read_queues=4, write_queues=4)
        got = Collector()
        with _consumer(url, namespace, "g-idle", got), Producer("p", url, namespace=namespace) as producer:
            # settled: registered, and every queue's waiter (4, and the retry topic's) blocked in XREAD
            wait_for(lambda: blocked_readers(url) >= 5, 10, "the idle consumer's waiters blocked")
            client = server.client()
            client.config_resetstat()
            time.sleep(5.0)  # the idle span whose commands are counted
            stats = client.info("commandstats")
            client.close()
            # every command counts, also those the heartbeat script runs inside Redis; not the test's own
            calls = sum(v["calls"] for k, v in stats.items() if not k.startswith(("cmdstat_config", "cmdstat_info")))
            assert calls / 5.0 <= 5, f"an idle consumer made {calls} commands in 5 s: {stats}"
            for i in range(20):
                producer.send(Message("T", b"%d" % i))
                wait_for(lambda n=i: len(got.times) > n, 5, f"delivery {i} to the idle consumer")
