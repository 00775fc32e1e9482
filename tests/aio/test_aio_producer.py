"""``mq.aio.Producer`` and ``mq.aio.TransactionProducer`` on real Redis (standalone and cluster):
the sync producer's behaviour from ``await``, pipelines shared by concurrent sends, no thread."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from mq import Admin, LocalTransactionState, Message, MessageQueue, SelectMessageQueueByHash, SendStatus, aio
from mq.errors import MQClientError, TopicNotFoundError
from mq.producer.pipeline import MAX_PIPELINE
from scheduler import BrokerConfig, BrokerService
from tests.helpers import admin_once, snapshot, stays_quiet_async, wait_for_async
from tests.leaks import owned

pytestmark = pytest.mark.anyio

COMMIT, ROLLBACK, UNKNOW = (
    LocalTransactionState.COMMIT_MESSAGE,
    LocalTransactionState.ROLLBACK_MESSAGE,
    LocalTransactionState.UNKNOW,
)


@pytest.fixture
def admin(backend_url: str, namespace: str) -> Iterator[Admin]:
    with Admin(backend_url, namespace) as a:
        a.create_topic("T", read_queues=4, write_queues=4)
        yield a


async def test_send_and_query_every_field_intact(admin: Admin, backend_url: str, namespace: str) -> None:
    body = bytes(range(256)) * 4
    props = {"region": "HZ", "名前": "値 with spaces"}
    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        r = await producer.send(Message("T", body, tags="TagA", keys=["order-1", "客户-7"], properties=props))
    assert r.status is SendStatus.SEND_OK
    for found in (admin.query_message("T", r.msg_id), *admin.query_messages_by_key("T", "客户-7")):
        assert found is not None
        assert (found.body, found.tags, list(found.keys), found.properties) == (body, "TagA", ["order-1", "客户-7"], props)
        assert (found.msg_id, found.message_queue, found.queue_offset, found.reconsume_times) == (
            r.msg_id,
            r.message_queue,
            r.queue_offset,
            0,
        )
        assert 0 < found.born_timestamp_ms <= found.store_timestamp_ms + 1000


async def test_batch_oneway_explicit_queue_and_selectors(admin: Admin, backend_url: str, namespace: str) -> None:
    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        queues = await producer.fetch_publish_queues("T")
        assert [q.queue_id for q in queues] == [0, 1, 2, 3]
        batch = await producer.send_batch([Message("T", b"b%d" % i) for i in range(5)], queue=queues[2])
        assert batch.message_queue == queues[2] and len(batch.msg_ids) == 5
        assert [m.body for m in admin.messages("T", 2, batch.queue_offset)][:5] == [b"b%d" % i for i in range(5)]
        by_hash = [await producer.send(Message("T", b"h"), selector=SelectMessageQueueByHash(), arg="order-42") for _ in range(6)]
        assert len({r.message_queue for r in by_hash}) == 1
        assert by_hash[0].message_queue == SelectMessageQueueByHash().select(queues, Message("T", b"h"), "order-42")
        plain = await producer.send(Message("T", b"f"), selector=lambda mqs, msg, arg: mqs[arg], arg=3)
        assert plain.message_queue.queue_id == 3
        await producer.send_oneway(Message("T", b"oneway", keys="ow"))
        with pytest.raises(MQClientError, match="not a writable queue"):
            await producer.send(Message("T", b"x"), selector=lambda mqs, msg, arg: MessageQueue("T", "b", 9))
        with pytest.raises(MQClientError, match="does not belong"):
            await producer.send(Message("T", b"x"), queue=MessageQueue("other", "b", 0))
    assert [m.body for m in admin.query_messages_by_key("T", "ow")] == [b"oneway"]  # shutdown sent it


async def test_delayed_send_waits_in_the_timer(admin: Admin, backend_url: str, namespace: str) -> None:
    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        r = await producer.send(Message("T", b"later", delay_level=3))
    assert r.queue_offset == -1 and r.status is SendStatus.SEND_OK
    assert admin.query_message("T", r.msg_id) is None  # not delivered yet: no broker service runs


async def test_concurrent_sends_share_pipelines(admin: Admin, backend_url: str, namespace: str) -> None:
    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        await producer.send(Message("T", b"warm"))  # the route and the connections
        sender = producer._sender
        assert sender is not None
        before = sender.rounds  # pipelines: put_many calls, or rounds on the sender's own connection
        results = await asyncio.gather(*(producer.send(Message("T", b"c%d" % i)) for i in range(1000)))
        rounds = sender.rounds - before
    assert 1 <= rounds <= 1000 // MAX_PIPELINE + 2, rounds  # ~8 pipelines, not 1000 round trips
    per_queue: dict[int, list[int]] = {}
    for r in results:
        per_queue.setdefault(r.message_queue.queue_id, []).append(r.queue_offset)
    for offsets in per_queue.values():  # every send got its own offset, densely after the warm-up
        assert len(set(offsets)) == len(offsets)
    assert sum(s.max_offset for s in admin.topic_status("T").values()) == 1001


async def test_a_bad_send_fails_alone_in_its_round(admin: Admin, backend_url: str, namespace: str) -> None:
    """Concurrent sends are checked and placed by the round that sends them: a selector that raises or
    a bad argument fails that send only; the others in the same pipeline are stored."""

    def broken(mqs: Any, msg: Message, arg: Any) -> MessageQueue:
        raise ValueError("selector broke")

    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        await producer.send(Message("T", b"warm"))  # the route: every send below goes in one round
        rounds = producer._sender.rounds if producer._sender else 0
        sends = [
            producer.send(Message("T", b"bad"), selector=broken)
            if i == 2
            else producer.send(Message("T", b"bad"), timeout_s=0)
            if i == 4
            else producer.send(Message("T", b"ok%d" % i))
            for i in range(6)
        ]
        results = await asyncio.gather(*sends, return_exceptions=True)
        assert producer._sender is not None and producer._sender.rounds == rounds + 1
    assert isinstance(results[2], ValueError) and isinstance(results[4], MQClientError)
    stored = [r for i, r in enumerate(results) if i not in (2, 4)]
    assert [admin.query_message("T", r.msg_id).body for r in stored] == [b"ok0", b"ok1", b"ok3", b"ok5"]  # type: ignore[union-attr]


async def test_sends_whose_route_is_not_cached_are_handed_back_and_sent(admin: Admin, backend_url: str, namespace: str) -> None:
    """A round hands a send it cannot prepare without the store (its route dropped from the cache, a
    delay level) back to its caller, which reads the route once for all of them and sends it."""
    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        await producer.send(Message("T", b"warm"))
        producer._core.routes.invalidate("T")
        reads: list[str] = []
        real = producer._core.route

        async def counting(topic: str) -> Any:
            reads.append(topic)
            return await real(topic)

        producer._core.route = counting  # type: ignore[method-assign]
        sends = [producer.send(Message("T", b"r%d" % i, delay_level=2 if i == 3 else 0)) for i in range(50)]
        results = await asyncio.gather(*sends)
    assert reads == ["T"]
    assert results[3].queue_offset == -1  # delayed: in the timer
    stored = [r for i, r in enumerate(results) if i != 3]
    assert len({(r.message_queue, r.queue_offset) for r in stored}) == 49
    assert all(admin.query_message("T", r.msg_id) is not None for r in stored)


async def test_bad_input_raises_before_anything_is_written(admin: Admin, backend_url: str, namespace: str) -> None:
    producer = aio.Producer("pg", backend_url, namespace=namespace)
    with pytest.raises(MQClientError, match="not started"):
        await producer.send(Message("T", b"x"))
    async with producer:
        before = snapshot(backend_url, namespace)
        with pytest.raises(TopicNotFoundError):
            await producer.send(Message("nosuch", b"x"))
        with pytest.raises(TopicNotFoundError):
            await producer.send_oneway(Message("nosuch", b"x"))
        with pytest.raises(MQClientError, match="timeout_s"):
            await producer.send(Message("T", b"x"), timeout_s=0)
        with pytest.raises(MQClientError):
            await producer.send_batch([Message("T", b"x"), Message("U", b"y")])
        with pytest.raises(MQClientError, match="size"):
            await producer.send(Message("T", b"x" * (4 * 1024 * 1024 + 1)))
        assert snapshot(backend_url, namespace) == before
    with pytest.raises(MQClientError, match="retry_times"):
        aio.Producer("pg", backend_url, namespace=namespace, retry_times_when_send_failed=-1)


async def test_sync_replicas_not_confirmed_is_flush_slave_timeout(admin: Admin, backend_url: str, namespace: str) -> None:
    """No replica runs: every send is stored on the master and reported FLUSH_SLAVE_TIMEOUT, pipelined or not."""
    async with aio.Producer("pg", backend_url, namespace=namespace, sync_replicas=1, sync_replicas_timeout_ms=20) as producer:
        results = await asyncio.gather(*(producer.send(Message("T", b"r%d" % i)) for i in range(5)))
        batch = await producer.send_batch([Message("T", b"b")])
    assert {r.status for r in [*results, batch]} == {SendStatus.FLUSH_SLAVE_TIMEOUT}
    assert all(admin.query_message("T", r.msg_id) is not None for r in results)


async def test_message_trace_records_sends(admin: Admin, backend_url: str, namespace: str) -> None:
    async with aio.Producer("pg", backend_url, namespace=namespace, trace=True) as producer:
        r = await producer.send(Message("T", b"traced"))
    [event] = admin.message_trace("T", r.msg_id)
    assert (event.kind, event.group, event.status, event.queue_id, event.offset) == (
        "send",
        "pg",
        "SEND_OK",
        r.message_queue.queue_id,
        r.queue_offset,
    )


@pytest.mark.cluster
async def test_latency_fault_tolerance_avoids_an_isolated_node(redis_cluster: Any, namespace: str) -> None:
    admin_once(redis_cluster.url, namespace).create_topic("ft", read_queues=16, write_queues=16)
    async with aio.Producer("pg", redis_cluster.url, namespace=namespace, send_latency_fault_enable=True) as producer:
        route = await producer._core.route("ft")
        victim = sorted(set(route.nodes.values()))[0]
        producer._fault.update(victim, 0, isolation=True)  # as after a failed send to it
        results = [await producer.send(Message("ft", b"x")) for _ in range(32)]
    assert all(route.nodes[r.message_queue] != victim for r in results)
    assert len({r.message_queue for r in results}) > 1


async def test_cancelled_sends_leave_whole_messages_and_the_producer_working(
    admin: Admin, backend_url: str, namespace: str
) -> None:
    async with aio.Producer("pg", backend_url, namespace=namespace) as producer:
        await producer.send(Message("T", b"warm"))
        tasks = [asyncio.create_task(producer.send(Message("T", b"c%03d" % i, keys="cancelled"))) for i in range(50)]
        await asyncio.sleep(0)  # handed to the pipeline
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        assert all(t.cancelled() for t in tasks)
        after = await producer.send(Message("T", b"after"))
    stored = admin.query_messages_by_key("T", "cancelled")
    assert all(len(m.body) == 4 and m.body.startswith(b"c") for m in stored)  # none half-written
    assert admin.query_message("T", after.msg_id) is not None


async def test_a_send_is_a_future_gather_takes_as_it_is_and_task_apis_accept(
    admin: Admin, backend_url: str, namespace: str
) -> None:
    """``send()`` returns a future that is also a coroutine object (D59): ``gather`` makes no task a send;
    ``create_task``, ``TaskGroup``, ``wait_for`` and a plain ``await`` take it; cancelling it before its
    round took it withdraws the send; a send not awaited still goes out."""
    async with aio.Producer("pg", backend_url, namespace=namespace, trace=False) as producer:
        await producer.send(Message("T", b"warm"))  # the route cached: sends go the round's way
        tasks_before = len(asyncio.all_tasks())
        gathered = asyncio.gather(*(producer.send(Message("T", b"g%03d" % i, keys="gathered")) for i in range(200)))
        assert len(asyncio.all_tasks()) == tasks_before  # no task a send (a coroutine each made 200)
        results = await gathered
        assert len({(r.message_queue, r.queue_offset) for r in results}) == 200
        assert asyncio.iscoroutine(producer.send(Message("T", b"co", keys="api"))) is True
        async with asyncio.TaskGroup() as tg:
            in_group = tg.create_task(producer.send(Message("T", b"tg", keys="api")))
        created = await asyncio.create_task(producer.send(Message("T", b"ct", keys="api")))
        waited = await asyncio.wait_for(producer.send(Message("T", b"wf", keys="api")), 10)
        withdrawn = producer.send(Message("T", b"withdrawn", keys="withdrawn"))
        withdrawn.cancel()  # before any round took it
        producer.send(Message("T", b"unawaited", keys="unawaited"))
        last = await producer.send(Message("T", b"last"))
    assert admin.query_message("T", in_group.result().msg_id) is not None
    assert {m.body for m in admin.query_messages_by_key("T", "api")} == {b"co", b"tg", b"ct", b"wf"}
    assert created.queue_offset >= 0 and waited.queue_offset >= 0 and last.queue_offset >= 0
    assert admin.query_messages_by_key("T", "withdrawn") == []
    assert [m.body for m in admin.query_messages_by_key("T", "unawaited")] == [b"unawaited"]
    for r in results[::40]:
        found = admin.query_message("T", r.msg_id)
        assert found is not None and found.body == b"g%03d" % results.index(r)


async def test_no_thread_is_started(admin: Admin, backend_url: str, namespace: str) -> None:
    before = set(threading.enumerate())
    async with aio.Producer("pg", backend_url, namespace=namespace, trace=True) as producer:
        await asyncio.gather(*(producer.send(Message("T", b"t%d" % i)) for i in range(20)))
        await producer.send_batch([Message("T", b"b")])
        await producer.send_oneway(Message("T", b"o"))
        started = set(threading.enumerate()) - before
    async with aio.TransactionProducer("txg", backend_url, namespace=namespace, checker=lambda m: COMMIT) as tp:
        await tp.send_message_in_transaction(Message("T", b"tx"), lambda m, a: COMMIT)
        await asyncio.sleep(0.2)  # the check-back task runs meanwhile: a thread it started would be seen
        started |= set(threading.enumerate()) - before
    assert started == set(), started


async def test_transactions_commit_rollback_and_async_check_back(admin: Admin, backend_url: str, namespace: str) -> None:
    checked: list[bytes] = []

    async def checker(msg: Any) -> LocalTransactionState:
        await asyncio.sleep(0)
        checked.append(msg.body)
        return COMMIT if msg.body == b"check commits" else ROLLBACK

    async def commit(msg: Message, arg: Any) -> LocalTransactionState:
        await asyncio.sleep(0)
        return COMMIT

    def raises(msg: Message, arg: Any) -> LocalTransactionState:
        raise RuntimeError("local transaction failed")

    config = BrokerConfig(transaction_timeout_s=1.0, transaction_check_interval_s=1.0, transaction_check_max=3)
    async with aio.TransactionProducer("txg", backend_url, namespace=namespace, checker=checker) as tp:
        ok = await tp.send_message_in_transaction(Message("T", b"committed"), commit)
        assert ok.local_transaction_state is COMMIT and ok.queue_offset >= 0
        gone = await tp.send_message_in_transaction(Message("T", b"rolled back"), lambda m, a: ROLLBACK)
        assert gone.local_transaction_state is ROLLBACK and gone.queue_offset == -1
        unknown = await tp.send_message_in_transaction(Message("T", b"check commits"), raises)
        assert unknown.local_transaction_state is UNKNOW
        await tp.send_message_in_transaction(Message("T", b"check rolls back"), lambda m, a: UNKNOW)
        with pytest.raises(MQClientError, match="delayed"):
            await tp.send_message_in_transaction(Message("T", b"x", delay_level=1), commit)
        before = set(threading.enumerate())
        with BrokerService(backend_url, namespace, config):
            await wait_for_async(lambda: len(checked) >= 2, 15, "both checked back")
            await stays_quiet_async(lambda: len(checked), "the checks")  # two check intervals: no further check
        assert not {t for t in threading.enumerate() if t.name.startswith("mq-tx-check")} - before  # a task, not a thread
    assert sorted(checked) == [b"check commits", b"check rolls back"]
    assert admin.query_message("T", ok.msg_id) is not None
    assert admin.query_message("T", gone.msg_id) is None
    assert admin.query_message("T", unknown.msg_id) is not None  # committed by the check-back
    with pytest.raises(MQClientError, match="checker"):
        aio.TransactionProducer("txg", backend_url, namespace=namespace, checker=None)  # type: ignore[arg-type]


async def test_a_sync_and_an_async_producer_fill_one_queue_densely(admin: Admin, backend_url: str, namespace: str) -> None:
    from mq import Producer

    q = MessageQueue("T", "broker-a", 1)
    with Producer("sync", backend_url, namespace=namespace) as sync_producer:
        async with aio.Producer("async", backend_url, namespace=namespace) as producer:
            offsets = [sync_producer.send(Message("T", b"s"), queue=q).queue_offset]
            offsets += [(await producer.send(Message("T", b"a"), queue=q)).queue_offset]
            offsets += [sync_producer.send_async(Message("T", b"s2"), queue=q).result(timeout=10).queue_offset]
    assert offsets == [0, 1, 2]


async def test_many_tasks_at_once_wait_for_a_connection(redis_server: Any, namespace: str) -> None:
    """redis.asyncio's default pool fails the 101st concurrent call ("Too many connections"); 1 000
    concurrent sends that each read a stale setting (the trace switch, delay levels) did that. (A
    standalone server's pool: redis-py's asyncio cluster client has no such limit, but many first
    commands at once on a fresh one sometimes fail inside redis-py — see D45.)"""
    from mq.store.aio import AsyncStore
    from mq.store.connection import Connection

    store = AsyncStore(Connection(redis_server.url, namespace))
    try:
        assert await asyncio.gather(*(store.namespace_setting("absent") for _ in range(300))) == [None] * 300
    finally:
        await store.conn.aclose()


async def test_async_commands_are_packed_as_redis_asyncio_packs_them(redis_server: Any, namespace: str) -> None:
    """The standalone asyncio client packs with hiredis (as the sync client does): the same bytes."""
    import redis.asyncio

    from mq.store.connection import Connection
    from mq.store.redispy import HiredisPackingConnection

    for args in [
        ("EVALSHA", "abc", 2, "{k}:a", "{k}:b", b"\x00\xff body", "名前", 12, -7, 3.5),
        ("SCRIPT LOAD", "return 1"),  # two words: split, as redis-py does
        ("SET", bytearray(b"k"), memoryview(b"v")),
        (b"GET", "k"),
    ]:
        ours = b"".join(HiredisPackingConnection().pack_command(*args))
        assert ours == b"".join(redis.asyncio.Connection().pack_command(*args)), args
    with pytest.raises(redis.exceptions.DataError):
        HiredisPackingConnection().pack_command("SET", "k", None)
    conn = owned(Connection(redis_server.url, namespace))
    try:
        assert conn.async_client.connection_pool.connection_class is HiredisPackingConnection
    finally:
        await conn.aclose()


async def test_async_writes_make_no_task_and_keep_their_timeout(redis_server: Any, namespace: str) -> None:
    """A write of the asyncio client (one with a socket timeout, as every client of ours) goes out in the
    caller's task: redis-py's ``asyncio.wait_for`` made a task, a timer and a loop turn of each. A write
    that does not finish in ``socket_timeout`` still fails with redis-py's TimeoutError and drops the
    connection."""
    import redis.asyncio
    import redis.exceptions

    from mq.store.connection import Connection
    from mq.store.redispy import HiredisPackingConnection

    conn = owned(Connection(redis_server.url, namespace))
    client = conn.async_client
    loop = asyncio.get_running_loop()
    made: list[Any] = []

    def counting(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
        made.append(coro)
        return asyncio.Task(coro, loop=loop, **kwargs)

    try:
        await client.ping()
        assert client.connection_pool.connection_kwargs["socket_timeout"] > 0
        loop.set_task_factory(counting)
        try:
            await client.set("k", "v")
            pipe = client.pipeline(transaction=False)
            pipe.get("k")
            pipe.get("k")
            assert await pipe.execute() == [b"v", b"v"]
        finally:
            loop.set_task_factory(None)
        names = [getattr(c, "__qualname__", "?") for c in made]
        assert not [n for n in names if "send_packed_command" in n], names  # (redis-py shields its release)
    finally:
        await conn.aclose()

    class StuckWriter:
        def writelines(self, data: Any) -> None:
            pass

        async def drain(self) -> None:
            await asyncio.sleep(10)

        def close(self) -> None:
            pass

    stuck = HiredisPackingConnection(socket_timeout=0.05)
    stuck._writer, stuck._reader = StuckWriter(), asyncio.StreamReader()  # type: ignore[assignment]
    with pytest.raises(redis.exceptions.TimeoutError, match="writing"):
        await stuck.send_packed_command([b"PING\r\n"], check_health=False)
    assert not stuck.is_connected


async def test_opentelemetry_send_spans_carry_their_context_in_the_message(
    admin: Admin, backend_url: str, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(trace, "get_tracer_provider", lambda: provider)  # this test's provider only
    monkeypatch.setattr(trace, "get_tracer", lambda name, *a, **k: provider.get_tracer(name))
    async with aio.Producer("op", backend_url, namespace=namespace) as producer:
        sent = await asyncio.gather(*(producer.send(Message("T", b"%d" % i, tags="paid")) for i in range(3)))
    monkeypatch.undo()
    spans = {s.attributes["messaging.message.id"]: s for s in exporter.get_finished_spans() if s.name == "send T"}
    assert set(spans) == {r.msg_id for r in sent}  # one span per send, each with its own message id
    for r in sent:
        stored = admin.query_message("T", r.msg_id)
        assert stored is not None
        span = spans[r.msg_id]
        assert span.kind.name == "PRODUCER" and span.attributes["messaging.rocketmq.message.tag"] == "paid"
        assert f"{span.context.trace_id:032x}-{span.context.span_id:016x}" in stored.properties["traceparent"]


async def test_shutdown_sends_what_is_pending_then_refuses(admin: Admin, backend_url: str, namespace: str) -> None:
    producer = await aio.Producer("pg", backend_url, namespace=namespace).start()
    await producer.send(Message("T", b"warm"))
    tasks = [asyncio.create_task(producer.send(Message("T", b"p%d" % i, keys="pending"))) for i in range(300)]
    await asyncio.sleep(0)  # each is checked and handed to the pipeline
    await producer.shutdown(timeout_s=30)
    results = await asyncio.gather(*tasks)
    assert all(r.status is SendStatus.SEND_OK for r in results)
    assert len(admin.query_messages_by_key("T", "pending", max_num=64)) == 64  # the query's most; the count below
    assert sum(s.max_offset for s in admin.topic_status("T").values()) == 301
    with pytest.raises(MQClientError, match="not started"):
        await producer.send(Message("T", b"late"))


async def test_shutdown_with_sends_in_flight_fails_them_with_mq_client_error_never_cancelled_error(
    admin: Admin, backend_url: str, namespace: str
) -> None:
    # A fresh producer has not read the namespace's trace setting yet, so its first sends each run as
    # a task of their own (the setting is read in it); a shutdown that ends them must fail their
    # callers' awaits with the documented MQClientError (or let them complete), never a
    # CancelledError: a web handler awaiting a send is not being cancelled.
    producer = await aio.Producer("pg", backend_url, namespace=namespace).start()
    outcomes: list[object] = []

    async def caller(i: int) -> None:
        try:
            outcomes.append(await producer.send(Message("T", b"s%d" % i, keys="inflight")))
        except BaseException as e:  # what the caller sees is the point of the test
            outcomes.append(e)

    tasks = [asyncio.create_task(caller(i)) for i in range(500)]
    while not outcomes:  # the first send is stored: the others are under way, in the store or behind it
        await asyncio.sleep(0)
    await producer.shutdown(timeout_s=0)
    await asyncio.wait_for(asyncio.gather(*tasks), 30)  # none is left waiting
    assert len(outcomes) == 500
    cancelled = [o for o in outcomes if isinstance(o, asyncio.CancelledError)]
    assert cancelled == []
    failed = [o for o in outcomes if isinstance(o, BaseException)]
    assert all(isinstance(e, MQClientError) for e in failed), {repr(e) for e in failed}
    assert failed, "the shutdown cut no send: the test did not exercise it"
    ok = [o for o in outcomes if not isinstance(o, BaseException)]
    assert all(r.status is SendStatus.SEND_OK for r in ok)  # type: ignore[attr-defined]
    stored = sum(s.max_offset for s in admin.topic_status("T").values())
    assert len(ok) <= stored <= 500  # what was acknowledged is stored; what failed may have been
    assert not tasks[0].cancelled()
