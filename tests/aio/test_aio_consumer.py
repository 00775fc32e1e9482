"""The asyncio push and pull consumers (``mq.aio``) on real Redis, standalone and cluster: the same
behaviour as the sync ones, members of mixed groups, shutdown and cancellation, no threads."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    Message,
    MessageModel,
    MessageQueue,
    MessageSelector,
    Producer,
    SelectMessageQueueByHash,
)
from mq import PushConsumer as SyncPushConsumer
from mq.aio import PullConsumer, PushConsumer
from mq.aio.core import PULL_LANES
from mq.errors import MQClientError
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService
from tests.helpers import QUIET_PERIOD_S, stays_quiet_async
from tests.leaks import owned

pytestmark = pytest.mark.anyio

#: Short delay levels so retries come back in a fraction of a second.
FAST_LEVELS = "100ms 200ms 300ms 400ms 500ms 600ms"


async def until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Await ``predicate()`` becoming true (checked every 20 ms), failing after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(0.02)


class Got:
    """An async listener recording what it got (and which member got it)."""

    def __init__(self, status: ConsumeConcurrentlyStatus = ConsumeConcurrentlyStatus.CONSUME_SUCCESS) -> None:
        self.messages: list[Any] = []
        self.status = status

    async def __call__(self, msgs, ctx):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0)
        self.messages.extend(msgs)
        return self.status

    @property
    def bodies(self) -> list[bytes]:
        return [m.body for m in self.messages]


@pytest.fixture
def env(backend_url: str, namespace: str) -> Iterator[tuple[str, str, Admin, Producer]]:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("T", read_queues=8, write_queues=8)
    with Producer("p", backend_url, namespace=namespace) as producer:
        yield backend_url, namespace, admin, producer
    admin.close()


def _push(url: str, ns: str, group: str, listener: Any, expression: str | MessageSelector = "*", **kw: Any) -> PushConsumer:
    c = PushConsumer(group, url, namespace=ns, **kw)
    c.subscribe("T", expression)
    c.register_message_listener(listener)
    return c


def _of_t(consumer: Any) -> set[MessageQueue]:
    """The queues of topic T a member holds (a clustering push member also shares its retry topic)."""
    return {q for q in consumer.assigned_queues() if q.topic == "T"}


def _committed(url: str, ns: str, group: str, topic: str, queues: int) -> dict[int, int]:
    store = owned(Store(Connection(url, ns)))
    try:
        stored = store.read_offsets(group, [MessageQueue(topic, "broker-a", q) for q in range(queues)])
    finally:
        store.conn.close()
    return {mq.queue_id: o for mq, o in stored.items()}


async def test_clustering_splits_the_queues_and_consumes_each_message_once(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    a, b = Got(), Got()
    async with _push(url, ns, "g", a) as ca, _push(url, ns, "g", b) as cb:
        await until(lambda: len(_of_t(ca)) == 4 and len(_of_t(cb)) == 4, 15, "an even split")
        assert not ca.assigned_queues() & cb.assigned_queues()
        sent = {producer.send(Message("T", b"%d" % i)).msg_id for i in range(200)}
        await until(lambda: len(a.messages) + len(b.messages) >= 200, 20, "every message")
        await stays_quiet_async(lambda: len(a.messages) + len(b.messages), "the deliveries")
    ids = [m.msg_id for m in a.messages + b.messages]
    assert sorted(ids) == sorted(sent)  # each once
    assert a.messages and b.messages


async def test_the_puller_tasks_share_the_queues_and_drain_a_backlog(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    for i in range(8 * 100):  # several pulls' worth on every queue (32 a pull)
        producer.send(Message("T", b"%d" % i))
    got = Got()
    async with _push(url, ns, "gl", got, consume_from_where=ConsumeFromWhere.FIRST_OFFSET) as c:
        await until(lambda: len(got.messages) >= 800, 20, "the backlog")
        await stays_quiet_async(lambda: len(got.messages), "the deliveries")
        core = c._core
        assert core is not None
        held = list(core.process_queues.values())  # topic T's 8 queues and the group's retry queue
        shares = [core._lane_share(held, lane) for lane in range(PULL_LANES)]
    # every held queue is pulled by exactly one puller task, and each task has its part
    assert sorted(id(pq) for share in shares for pq in share) == sorted(id(pq) for pq in held)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1
    assert sorted(m.body for m in got.messages) == sorted(b"%d" % i for i in range(800))  # each once
    assert sum(_committed(url, ns, "gl", "T", 8).values()) == 800  # all of it committed at shutdown


async def test_a_sync_and_an_async_member_share_one_group(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    got_async = Got()
    got_sync: list[Any] = []
    lock = threading.Lock()

    def sync_listener(msgs, ctx):  # type: ignore[no-untyped-def]
        with lock:
            got_sync.extend(msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    member = SyncPushConsumer("mixed", url, namespace=ns)
    member.subscribe("T")
    member.register_message_listener(sync_listener)
    with member:
        async with _push(url, ns, "mixed", got_async) as aio_member:
            await until(lambda: len(_of_t(aio_member)) == 4 and len(_of_t(member)) == 4, 15, "the split")
            assert not aio_member.assigned_queues() & member.assigned_queues()
            sent = {producer.send(Message("T", b"%d" % i)).msg_id for i in range(200)}
            await until(lambda: len(got_async.messages) + len(got_sync) >= 200, 20, "every message")
            await stays_quiet_async(lambda: len(got_async.messages) + len(got_sync), "the deliveries")
    ids = [m.msg_id for m in got_async.messages + got_sync]
    assert sorted(ids) == sorted(sent)
    assert got_async.messages and got_sync


async def test_broadcasting_gives_every_member_everything(env, tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    monkeypatch.setenv("MQ_OFFSET_DIR", str(tmp_path))
    a, b = Got(), Got()
    kw = {"message_model": MessageModel.BROADCASTING}
    async with _push(url, ns, "gb", a, **kw) as ca, _push(url, ns, "gb", b, **kw) as cb:
        await until(lambda: len(_of_t(ca)) == 8 and len(_of_t(cb)) == 8, 15, "every queue at both members")
        for i in range(50):
            producer.send(Message("T", b"%d" % i))
        await until(lambda: len(a.messages) >= 50 and len(b.messages) >= 50, 20, "everything twice")
        await stays_quiet_async(lambda: (len(a.messages), len(b.messages)), "each member's deliveries")
    want = sorted(b"%d" % i for i in range(50))
    assert sorted(a.bodies) == want and sorted(b.bodies) == want


async def test_tag_and_sql_filters(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    tags_got, sql_got = Got(), Got()
    sql = MessageSelector.by_sql("TAGS = 'a' AND region IN ('HZ','SH')")
    async with _push(url, ns, "gt", tags_got, "a || c") as ct, _push(url, ns, "gs", sql_got, sql) as cs:
        await until(lambda: len(_of_t(ct)) == 8 and len(_of_t(cs)) == 8, 15, "every queue at both groups")
        sent = []
        for i, (tag, region) in enumerate([("a", "HZ"), ("a", "BJ"), ("b", "SH"), ("a", "SH"), ("c", "HZ")] * 20):
            producer.send(Message("T", b"%d" % i, tags=tag, properties={"region": region}))
            sent.append((b"%d" % i, tag, region))
        want_sql = sorted(b for b, t, r in sent if t == "a" and r in ("HZ", "SH"))
        want_tags = sorted(b for b, t, _ in sent if t in ("a", "c"))
        await until(lambda: len(sql_got.messages) >= len(want_sql) and len(tags_got.messages) >= len(want_tags), 20, "filtered")
        await stays_quiet_async(lambda: (len(sql_got.messages), len(tags_got.messages)), "the filtered deliveries")
    assert sorted(sql_got.bodies) == want_sql
    assert sorted(tags_got.bodies) == want_tags


async def test_orderly_listener_gets_each_key_in_order(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    seen: list[tuple[str, int]] = []
    running: set[int] = set()
    overlapped: list[int] = []

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        qid = ctx.message_queue.queue_id
        if qid in running:
            overlapped.append(qid)
        running.add(qid)
        await asyncio.sleep(0.001)  # other queues' tasks run meanwhile, this queue's never
        running.discard(qid)
        for m in msgs:
            key, seq = m.body.decode().split(":")
            seen.append((key, int(seq)))
        return ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer("go", url, namespace=ns, consume_message_batch_max_size=3)
    c.subscribe("T")
    c.register_orderly_listener(listener)
    selector = SelectMessageQueueByHash()
    async with c:
        await until(lambda: len([q for q in c.assigned_queues() if q.topic == "T"]) == 8, 15, "the locks")
        for seq in range(30):
            for key in ("k1", "k2", "k3", "k4", "k5"):
                producer.send(Message("T", f"{key}:{seq}".encode()), selector=selector, arg=key)
        await until(lambda: len(seen) >= 150, 20, "every message")
    assert not overlapped
    for key in ("k1", "k2", "k3", "k4", "k5"):
        assert [s for k, s in seen if k == key] == list(range(30))


async def test_failures_are_retried_then_dead_lettered(backend_url: str, namespace: str) -> None:
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("D", read_queues=2, write_queues=2)
    tries: list[int] = []

    def poison(msgs, ctx):  # type: ignore[no-untyped-def]  # a plain function is accepted too
        tries.extend(m.reconsume_times for m in msgs)
        raise RuntimeError("always fails")

    consumer = PushConsumer("gd", backend_url, namespace=namespace, max_reconsume_times=2)
    consumer.subscribe("D")
    consumer.register_message_listener(poison)
    with (
        BrokerService(backend_url, namespace, BrokerConfig(message_delay_level=FAST_LEVELS)),
        Producer("p", backend_url, namespace=namespace) as producer,
    ):
        async with consumer:
            sent = producer.send(Message("D", b"poison", tags="bad", keys=["k9"]))
            await until(lambda: len(admin.dlq_messages("gd")) == 1, 20, "the message in the DLQ")
            await stays_quiet_async(lambda: len(tries), "the deliveries of the dead letter")
    assert tries == [0, 1, 2]  # delivered 3 times
    [dead] = admin.dlq_messages("gd")
    assert (dead.msg_id, dead.body, dead.system_properties["RETRY_TOPIC"]) == (sent.msg_id, b"poison", "D")
    admin.close()


async def test_shutdown_with_messages_in_flight_commits_only_finished_ones(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, admin, producer = env
    admin.create_topic("S", read_queues=1, write_queues=1)
    for i in range(20):
        producer.send(Message("S", b"%d" % i))
    finished: list[int] = []

    async def slow(msgs, ctx):  # type: ignore[no-untyped-def]
        await asyncio.sleep(0.2 if len(finished) < 4 else 30)  # the calls in progress at shutdown outlast its bound
        finished.extend(m.queue_offset for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer("gs", url, namespace=ns, consume_thread_max=2, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    c.subscribe("S")
    c.register_message_listener(slow)
    await c.start()
    await until(lambda: len(finished) >= 4, 10, "a few finished")
    clean = await c.shutdown(timeout_s=0.3)
    assert clean is False  # the calls in progress were cancelled at the bound
    assert len(finished) < 20
    committed = _committed(url, ns, "gs", "S", 1)[0]
    # the committed offset is the first unfinished one: everything below it finished, nothing above it counted
    first_unfinished = next(o for o in range(21) if o not in finished)
    assert committed == first_unfinished
    assert all(o in finished for o in range(committed))

    again = Got()  # what was not committed is delivered again
    c2 = PushConsumer("gs", url, namespace=ns)
    c2.subscribe("S")
    c2.register_message_listener(again)
    async with c2:
        await until(lambda: {m.queue_offset for m in again.messages} >= set(range(committed, 20)), 15, "the rest")
    assert min(m.queue_offset for m in again.messages) == committed


async def test_shutdown_waits_for_the_running_orderly_batch_then_commits_it(env) -> None:  # type: ignore[no-untyped-def]
    """A queue is given up at shutdown only between two orderly batches: the release waits for the
    batch in progress, is woken when it ends, and commits it (clean: nothing is delivered again)."""
    url, ns, admin, producer = env
    admin.create_topic("O", read_queues=1, write_queues=1)
    entered, gate = asyncio.Event(), asyncio.Event()

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        entered.set()
        await gate.wait()
        return ConsumeOrderlyStatus.SUCCESS

    c = PushConsumer("gw", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    c.subscribe("O")
    c.register_orderly_listener(listener)
    await c.start()
    producer.send(Message("O", b"x"))
    await asyncio.wait_for(entered.wait(), 20)
    core = c._core
    assert core is not None
    shutdown = asyncio.create_task(c.shutdown())
    # stopped, and the core's lock taken by the releases: the one of queue O waits for the batch
    await until(lambda: core.stopped and core._lock.locked(), 10, "the release waiting for the batch")
    assert not shutdown.done()
    gate.set()
    assert await asyncio.wait_for(shutdown, 20) is True
    assert _committed(url, ns, "gw", "O", 1) == {0: 1}


async def test_pull_consumer_polls_iterates_seeks_and_commits(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    q = MessageQueue("T", "broker-a", 3)
    for i in range(10):
        producer.send(Message("T", b"%d" % i), queue=q)
    consumer = PullConsumer("gp", url, namespace=ns, auto_commit=False, pull_batch_size=4)
    consumer.assign([q])
    async with consumer:
        consumer.seek(q, 0)
        first = await consumer.poll(timeout_s=5)
        assert [m.body for m in first] == [b"0", b"1", b"2", b"3"]
        rest = []
        async for msg in consumer:
            rest.append(msg.body)
            if len(rest) == 6:
                break
        assert rest == [b"%d" % i for i in range(4, 10)]
        assert await consumer.committed(q) == -1  # nothing is committed without commit()
        await consumer.commit()
        assert await consumer.committed(q) == 10
        consumer.seek(q, 2)
        assert [m.body for m in await consumer.poll(timeout_s=5)] == [b"2", b"3", b"4", b"5"]
    with pytest.raises(MQClientError):
        await consumer.poll()


async def test_cancelling_a_poll_loses_nothing(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    consumer = PullConsumer("gc", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe("T")
    got: list[bytes] = []
    async with consumer:
        await until(lambda: len(consumer.assigned_queues()) == 8, 10, "the queues")
        for round_ in range(20):
            waiting = asyncio.ensure_future(consumer.poll(timeout_s=5))
            await asyncio.sleep(0.005 * (round_ % 4))
            producer.send(Message("T", b"%d" % round_))
            await asyncio.sleep(0.001 * (round_ % 3))
            waiting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                got.extend(m.body for m in await waiting)  # finished before the cancel: its messages count
        while len(got) < 20:
            batch = await consumer.poll(timeout_s=3)
            if not batch:
                break
            got.extend(m.body for m in batch)
    assert sorted(got) == sorted(b"%d" % i for i in range(20))


async def test_the_async_consumers_start_no_thread(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, _, producer = env
    for i in range(20):
        producer.send(Message("T", b"%d" % i))
    before = set(threading.enumerate())
    got = Got()
    async with _push(url, ns, "gn", got, consume_from_where=ConsumeFromWhere.FIRST_OFFSET):
        await until(lambda: len(got.messages) >= 20, 15, "the messages")
        during = set(threading.enumerate())
    pull = PullConsumer("gn2", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pull.subscribe("T")
    async with pull:
        polled = await pull.poll(timeout_s=5)
        during |= set(threading.enumerate())
    assert polled
    assert during - before == set(), [t.name for t in during - before]


async def test_bad_settings_fail_before_start(redis_server) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(MQClientError):
        PushConsumer("g", redis_server.url, consume_thread_max=0)
    with pytest.raises(MQClientError):
        PushConsumer("g", redis_server.url, trace=True)
    c = PushConsumer("g", redis_server.url)
    with pytest.raises(MQClientError):
        await c.start()  # no listener, no subscription
    with pytest.raises(MQClientError):
        PullConsumer("g", redis_server.url, auto_commit="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
async def test_a_listeners_own_cancelled_error_is_a_failure_and_the_message_is_tried_again(
    backend_url: str, namespace: str, orderly: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # The listener awaits a future something else cancels: the CancelledError is the listener's, not the
    # consumer's (its task is not being cancelled). It must count as a failure: the message is tried
    # again, the rest of the queue goes on, the committed offset reaches the end, and it is logged.
    admin = owned(Admin(backend_url, namespace))
    admin.create_topic("C", read_queues=1, write_queues=1)
    tries: dict[bytes, list[int]] = {}

    async def listener(msgs, ctx):  # type: ignore[no-untyped-def]
        for m in msgs:
            tries.setdefault(m.body, []).append(m.reconsume_times)
        if msgs[0].body == b"3" and len(tries[b"3"]) == 1:
            other = asyncio.get_running_loop().create_future()
            asyncio.get_running_loop().call_soon(other.cancel)  # something else cancels what it awaits
            await other
        return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(
        "gx", backend_url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, suspend_current_queue_time_ms=10
    )
    consumer.subscribe("C")
    if orderly:
        consumer.register_orderly_listener(listener)
    else:
        consumer.register_message_listener(listener)
    with (
        caplog.at_level("WARNING", logger="mq.consumer"),
        BrokerService(backend_url, namespace, BrokerConfig(message_delay_level=FAST_LEVELS)),
        Producer("p", backend_url, namespace=namespace) as producer,
    ):
        for i in range(10):
            producer.send(Message("C", b"%d" % i))
        async with consumer:
            await until(lambda: len(tries) == 10 and len(tries[b"3"]) >= 2, 20, "every message, and message 3 again")
            await consumer._core.persist_offsets()  # type: ignore[union-attr]
            await until(lambda: _committed(backend_url, namespace, "gx", "C", 1)[0] == 10, 10, "the offset committed past it")
            delivered = sum(len(t) for t in tries.values())
            quiet_until = time.monotonic() + QUIET_PERIOD_S  # nothing more arrives: no duplicate, no late redelivery
            while time.monotonic() < quiet_until:
                assert sum(len(t) for t in tries.values()) == delivered, tries
                await asyncio.sleep(0.05)
    assert tries[b"3"][:2] == [0, 1]  # tried again, as for any raised exception
    assert all(t == [0] for body, t in tries.items() if body != b"3")
    assert any("CancelledError" in r.getMessage() and r.levelname == "ERROR" for r in caplog.records)
    admin.close()


async def test_shutdown_finishes_only_the_calls_in_progress_and_leaves_the_cache_uncommitted(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, admin, producer = env
    admin.create_topic("S2", read_queues=1, write_queues=1)
    for i in range(100):
        producer.send(Message("S2", b"%d" % i))
    started: list[int] = []
    finished: list[int] = []
    shutting_down = asyncio.Event()
    started_after_shutdown: list[int] = []

    async def slow(msgs, ctx):  # type: ignore[no-untyped-def]
        if shutting_down.is_set():
            started_after_shutdown.extend(m.queue_offset for m in msgs)
        started.extend(m.queue_offset for m in msgs)
        await asyncio.sleep(0.05)
        finished.extend(m.queue_offset for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer("gs2", url, namespace=ns, consume_thread_max=2, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    c.subscribe("S2")
    c.register_message_listener(slow)
    await c.start()
    await until(lambda: len(finished) >= 4, 10, "a few finished")
    await until(lambda: c._core.process_queues and sum(pq.count for pq in c._core.process_queues.values()) > 20, 10, "a cache")  # type: ignore[union-attr]
    shutting_down.set()
    in_progress = set(started) - set(finished)
    clean = await c.shutdown(timeout_s=30)
    assert clean is True  # the calls in progress finished well within the bound
    assert started_after_shutdown == []  # no cached message was started by the shutdown
    assert set(finished) == set(started) and in_progress <= set(finished)
    committed = _committed(url, ns, "gs2", "S2", 1)[0]
    # the committed offset is the first unfinished one: everything below it finished, nothing above it counted
    assert committed == next(o for o in range(101) if o not in finished)
    assert len(finished) < 100

    again = Got()  # what was cached and not started is delivered again
    c2 = PushConsumer("gs2", url, namespace=ns)
    c2.subscribe("S2")
    c2.register_message_listener(again)
    async with c2:
        await until(lambda: {m.queue_offset for m in again.messages} >= set(range(committed, 100)), 15, "the rest")
    assert min(m.queue_offset for m in again.messages) == committed


async def test_cancelling_the_task_in_async_with_does_not_start_the_cache(env) -> None:  # type: ignore[no-untyped-def]
    url, ns, admin, producer = env
    admin.create_topic("S3", read_queues=1, write_queues=1)
    for i in range(100):
        producer.send(Message("S3", b"%d" % i))
    calls = 0
    cancelled_at: list[int] = []

    async def slow(msgs, ctx):  # type: ignore[no-untyped-def]
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.05)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    c = PushConsumer("gs3", url, namespace=ns, consume_thread_max=1, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    c.subscribe("S3")
    c.register_message_listener(slow)

    async def run() -> None:
        async with c:
            await asyncio.Event().wait()  # until cancelled

    task = asyncio.create_task(run())
    await until(
        lambda: calls >= 3 and c._core is not None and sum(pq.count for pq in c._core.process_queues.values()) > 20, 10, "a cache"
    )
    task.cancel()
    cancelled_at.append(calls)
    with contextlib.suppress(asyncio.CancelledError):
        await task
    # the call in progress when cancelled finishes; at most one more may start before the cancelled task
    # runs its __aexit__ (the loop runs other tasks first); none of the cache's ~100 messages is started
    assert calls <= cancelled_at[0] + 1
    assert _committed(url, ns, "gs3", "S3", 1)[0] < 100


async def test_a_plain_listener_that_blocks_the_loop_is_reported_once_per_interval(
    redis_server: Any, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    with Admin(redis_server.url, namespace) as admin:
        admin.create_topic("B", read_queues=1, write_queues=1)
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        for i in range(3):
            producer.send(Message("B", b"%d" % i))
    got: list[bytes] = []

    def blocking(msgs, ctx):  # type: ignore[no-untyped-def]  # a plain listener doing blocking I/O
        time.sleep(0.3)
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def awaiting(msgs, ctx):  # type: ignore[no-untyped-def]  # as long, but the loop runs meanwhile
        await asyncio.sleep(0.3)
        got.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def blocked_warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if "blocked the event loop" in r.getMessage() and r.levelname == "WARNING"]

    with caplog.at_level("WARNING", logger="mq.consumer"):
        for group, listener in (("gb-await", awaiting), ("gb-block", blocking)):
            got.clear()
            c = PushConsumer(group, redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
            c.subscribe("B")
            c.register_message_listener(listener)
            async with c:
                await until(lambda: len(got) == 3, 15, "the messages")
            if group == "gb-await":
                assert blocked_warnings() == [] and c._slow is not None and c._slow.slow_calls == 0
    [warning] = blocked_warnings()  # three slow calls, one warning: rate-limited
    assert "gb-block" in warning and "1 call(s) longer than 0.100 s" in warning
    assert c._slow is not None and c._slow.slow_calls == 3

    quiet = PushConsumer("gb", redis_server.url, namespace=namespace, slow_listener_warn_s=None)
    assert quiet._slow is None
    for bad in (0, -1, float("nan"), float("inf"), "0.1", True):
        with pytest.raises(MQClientError, match="slow_listener_warn_s"):
            PushConsumer("gb", redis_server.url, namespace=namespace, slow_listener_warn_s=bad)  # type: ignore[arg-type]
