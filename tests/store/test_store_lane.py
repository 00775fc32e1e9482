"""The sync client's kept connection for script calls (``mq.store.lane``, D53): used when it can be,
replaced when it breaks, never shared between threads or with a forked child."""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

import pytest
import redis

from mq import Admin, Message, Producer, SendStatus, aio
from mq.errors import MQBrokerError, MQClientError
from mq.store import lane
from mq.store.connection import Connection
from tests.helpers import admin_once, blocked_readers, raw_client, redis_py_observability_on, wait_for_async
from tests.leaks import owned
from tests.servers import RedisServer


def _evalsha_connections(client: Any) -> int:
    """How many connections of the server last ran ``EVALSHA``."""
    return sum(1 for c in client.client_list() if c["cmd"] == "evalsha")


def _stored(url: str, namespace: str, topic: str) -> int:
    with Admin(url, namespace) as admin:
        return sum(s.max_offset for s in admin.topic_status(topic).values())


def test_sync_script_calls_go_over_one_kept_connection(redis_server: RedisServer, namespace: str) -> None:
    client = raw_client(redis_server.url)
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("lane", read_queues=4, write_queues=4)
        for i in range(20):
            producer.send(Message("lane", b"m%d" % i))
        kept = lane.lane_of(producer._conn.client)
        assert kept is not None and kept._conn is not None
        assert kept._conn in producer._conn.client.connection_pool._in_use_connections  # taken once, kept
        assert _evalsha_connections(client) == 1
    client.close()
    assert _stored(redis_server.url, namespace, "lane") == 20


def test_no_lane_for_a_cluster_or_the_embedded_store(redis_cluster: Any) -> None:
    cluster = owned(Connection(redis_cluster.url, "lane"))
    memory = owned(Connection("memory://lane-test", "lane"))
    try:
        assert lane.lane_of(cluster.client) is None
        assert lane.lane_of(memory.client) is None
    finally:
        cluster.close()
        memory.close()


def test_a_killed_kept_connection_is_replaced_and_nothing_is_stored_twice(redis_server: RedisServer, namespace: str) -> None:
    client = raw_client(redis_server.url)
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("killed", read_queues=1, write_queues=1)
        assert producer.send(Message("killed", b"before")).queue_offset == 0
        assert client.client_kill_filter(_type="normal", skipme=True) >= 1  # the producer's kept connection among them
        assert producer.send(Message("killed", b"after")).queue_offset == 1  # one quick reconnect, as redis-py's own
        assert producer.send(Message("killed", b"again")).queue_offset == 2
    client.close()
    assert _stored(redis_server.url, namespace, "killed") == 3


def test_a_closed_connection_reconnects_on_the_next_call(redis_server: RedisServer, namespace: str) -> None:
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("closed", read_queues=1, write_queues=1)
        producer.send(Message("closed", b"1"))
        producer._conn.client.connection_pool.disconnect()  # what Connection.close does to every connection
        assert producer.send(Message("closed", b"2")).queue_offset == 1


def test_threads_sending_at_once_share_the_client_safely(redis_server: RedisServer, namespace: str) -> None:
    threads, each = 8, 100
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("threads", read_queues=1, write_queues=1)
        offsets: list[int] = []
        lock = threading.Lock()

        def work(t: int) -> None:
            for i in range(each):
                offset = producer.send(Message("threads", b"%d-%d" % (t, i))).queue_offset
                with lock:
                    offsets.append(offset)

        workers = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(timeout=60)
    assert sorted(offsets) == list(range(threads * each))  # every reply went to its own caller


def test_a_forked_child_sends_on_a_connection_of_its_own(redis_server: RedisServer, namespace: str) -> None:
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("fork", read_queues=1, write_queues=1)
        producer.send(Message("fork", b"parent 1"))
        parent_conn = lane.lane_of(producer._conn.client)._conn  # type: ignore[union-attr]
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 1
            try:
                producer.send(Message("fork", b"child"))
                code = 0 if lane.lane_of(producer._conn.client)._conn is not parent_conn else 2  # type: ignore[union-attr]
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert producer.send(Message("fork", b"parent 2")).queue_offset == 2  # the parent's connection still works
        assert lane.lane_of(producer._conn.client)._conn is parent_conn  # type: ignore[union-attr]


def test_redis_py_observability_on_takes_redis_py_own_path(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    redis_py_observability_on(monkeypatch)
    calls: list[tuple[Any, ...]] = []
    real: Any = redis.Redis.execute_command

    def counted(self: Any, *args: Any, **options: Any) -> Any:
        calls.append(args)
        return real(self, *args, **options)

    monkeypatch.setattr(redis.Redis, "execute_command", counted)
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("observed", read_queues=1, write_queues=1)
        producer.send(Message("observed", b"x"))
    assert any(args[0] == "EVALSHA" for args in calls)


def test_arguments_hiredis_cannot_pack_go_through_redis_py_packer(redis_server: RedisServer) -> None:
    client = redis.Redis.from_url(redis_server.url)
    try:
        script = "return ARGV[1] .. ARGV[2] .. ARGV[3]"
        assert lane.execute(client, "EVAL", script, 0, "a", bytearray(b"b"), memoryview(b"c")) == b"abc"
        assert lane.execute(client, "EVAL", script, 0, "a", 2, 3.5) == b"a23.5"
        assert lane.lane_of(client) is not None
    finally:
        client.close()


def test_an_interrupted_call_never_leaves_a_reply_for_the_next_one(redis_server: RedisServer) -> None:
    """A read that fails without disconnecting (a Sentinel connection does so) must not leave its reply
    on the kept connection for the next call to read."""

    class Interrupted(BaseException):
        pass

    client = redis.Redis.from_url(redis_server.url)
    try:
        assert lane.execute(client, "EVAL", "return ARGV[1]", 0, "warm") == b"warm"
        kept = lane.lane_of(client)._conn  # type: ignore[union-attr]

        def interrupted(*args: Any, **kwargs: Any) -> Any:
            del kept.read_response  # once
            raise Interrupted

        kept.read_response = interrupted
        with pytest.raises(Interrupted):
            lane.execute(client, "EVAL", "return ARGV[1]", 0, "first")
        assert lane.execute(client, "EVAL", "return ARGV[1]", 0, "second") == b"second"
    finally:
        client.close()


def test_a_pipe_lane_reads_each_round_its_own_replies(redis_server: RedisServer, namespace: str) -> None:
    client = redis.Redis.from_url(redis_server.url)
    pipe = lane.pipe_lane_of(client)
    assert pipe is not None
    key = f"{namespace}:pipe"
    first = pipe.send([("SET", key, "1"), ("INCR", key)])
    second = pipe.send([("SET", key, "x"), ("INCR", key), ("GET", key)])
    assert pipe.read(first, 2) == [b"OK", 2]
    replies = pipe.read(second, 3)
    assert replies[0] == b"OK" and isinstance(replies[1], redis.ResponseError) and replies[2] == b"x"
    assert pipe.read(pipe.send([("PING",)]), 1) == [b"PONG"]
    pipe.close()
    client.close()


def test_a_lost_pipe_lane_connection_fails_every_unread_round(redis_server: RedisServer, namespace: str) -> None:
    client = redis.Redis.from_url(redis_server.url)
    killer = raw_client(redis_server.url)
    pipe = lane.pipe_lane_of(client)
    assert pipe is not None
    key = f"{namespace}:lost"
    pipe.read(pipe.send([("CLIENT", "SETNAME", "pipe-lane")]), 1)
    killer.client_kill_filter(_type="normal", skipme=True)  # every connection but the killer's
    with pytest.raises(redis.ConnectionError):
        pipe.read(pipe.send([("INCR", key)]), 1)  # the write or the read finds the connection gone
    # a round sent before the connection was lost is lost with it, even when a later one is read first
    first = pipe.send([("INCR", key)])
    pipe._drop()
    with pytest.raises(redis.ConnectionError):
        pipe.read(first, 1)
    assert pipe.read(pipe.send([("INCR", key)]), 1) == [2]  # reconnected; the lost round's INCR had run
    pipe.close()
    client.close()
    killer.close()


def test_async_sends_survive_a_killed_pipeline_connection(redis_server: RedisServer, namespace: str) -> None:
    killer = raw_client(redis_server.url)
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("pipelined", read_queues=4, write_queues=4)
        for f in [producer.send_async(Message("pipelined", b"a%d" % i)) for i in range(300)]:
            f.result(timeout=10)
        killer.client_kill_filter(_type="normal", skipme=True)
        results = [f.result(timeout=10) for f in [producer.send_async(Message("pipelined", b"b%d" % i)) for i in range(300)]]
        assert len({(r.message_queue.queue_id, r.queue_offset) for r in results}) == 300
    killer.close()
    assert _stored(redis_server.url, namespace, "pipelined") == 600


def test_pipelined_async_sends_load_a_flushed_script_again(redis_server: RedisServer, namespace: str) -> None:
    client = raw_client(redis_server.url)
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("flushed", read_queues=2, write_queues=2)
        producer.send_async(Message("flushed", b"first")).result(timeout=10)
        client.script_flush()  # the next round's EVALSHA gets NOSCRIPT (nothing stored): run again after loading
        results = [f.result(timeout=10) for f in [producer.send_async(Message("flushed", b"m%d" % i)) for i in range(50)]]
        assert len({(r.message_queue.queue_id, r.queue_offset) for r in results}) == 50
    client.close()
    assert _stored(redis_server.url, namespace, "flushed") == 51


def test_async_sends_go_one_round_at_a_time_when_the_pipeline_cannot_be_made(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mq.store import Store

    def broken(self: Store) -> None:
        raise RuntimeError("no pipeline")

    monkeypatch.setattr(Store, "put_pipeline", broken)
    with Admin(redis_server.url, namespace) as admin, Producer("pg", redis_server.url, namespace=namespace) as producer:
        admin.create_topic("fallback", read_queues=2, write_queues=2)
        results = [f.result(timeout=10) for f in [producer.send_async(Message("fallback", b"m%d" % i)) for i in range(100)]]
        assert len({(r.message_queue.queue_id, r.queue_offset) for r in results}) == 100
    assert _stored(redis_server.url, namespace, "fallback") == 100


# -- the asyncio sender's kept connection (AioPipeLane) ---------------------------------------------


@pytest.mark.anyio
async def test_an_aio_pipe_lane_reads_each_round_its_own_replies(redis_server: RedisServer, namespace: str) -> None:
    conn = owned(Connection(redis_server.url, namespace))
    pipe = lane.pipe_lane_of(conn.async_client)
    assert isinstance(pipe, lane.AioPipeLane)
    key = f"{namespace}:aiopipe"
    first = await pipe.send([("SET", key, "1"), ("INCR", key)])
    second = await pipe.send([("SET", key, "x"), ("INCR", key), ("GET", key)])  # two rounds unread
    assert await pipe.read(first, 2) == [b"OK", 2]
    replies = await pipe.read(second, 3)
    assert replies[0] == b"OK" and isinstance(replies[1], redis.ResponseError) and replies[2] == b"x"
    many = await pipe.send([("INCR", f"{key}:n")] * 2000)  # more than one socket read of replies
    assert await pipe.read(many, 2000) == list(range(1, 2001))
    assert await pipe.read(await pipe.send([("PING",)]), 1) == [b"PONG"]
    await pipe.close()
    await conn.aclose()


@pytest.mark.anyio
async def test_a_lost_aio_pipe_lane_connection_fails_every_unread_round(redis_server: RedisServer, namespace: str) -> None:
    conn = owned(Connection(redis_server.url, namespace))
    killer = raw_client(redis_server.url)
    pipe = lane.pipe_lane_of(conn.async_client)
    assert isinstance(pipe, lane.AioPipeLane)
    key = f"{namespace}:aiolost"
    await pipe.read(await pipe.send([("CLIENT", "SETNAME", "aio-pipe-lane")]), 1)
    killer.client_kill_filter(_type="normal", skipme=True)  # every connection but the killer's
    with pytest.raises(redis.ConnectionError):
        await pipe.read(await pipe.send([("INCR", key)]), 1)  # the write or the read finds the connection gone
    first = await pipe.send([("INCR", key)])
    second = await pipe.send([("INCR", key)])
    await pipe._drop()
    for ticket in (first, second):  # both rounds were lost with the connection
        with pytest.raises(redis.ConnectionError):
            await pipe.read(ticket, 1)
    assert await pipe.read(await pipe.send([("INCR", key)]), 1) == [3]  # reconnected; the lost rounds had run
    await pipe.close()
    await conn.aclose()
    killer.close()


@pytest.mark.anyio
async def test_cancelling_an_aio_pipe_lane_read_drops_its_connection(redis_server: RedisServer, namespace: str) -> None:
    conn = owned(Connection(redis_server.url, namespace))
    client = conn.async_client
    pipe = lane.pipe_lane_of(client)
    assert isinstance(pipe, lane.AioPipeLane)
    key = f"{namespace}:blocked"
    ticket = await pipe.send([("BLPOP", key, 2)])
    reading = asyncio.get_running_loop().create_task(pipe.read(ticket, 1))
    await asyncio.sleep(0.1)  # the task runs to its wait for the reply (the BLPOP blocks for 2 s: any yield is early enough)
    reading.cancel()
    with pytest.raises(asyncio.CancelledError):
        await reading
    kept = pipe._conn
    assert kept is not None and not kept.is_connected  # dropped, never used again with a reply unread
    await pipe.close()
    await client.rpush(key, "late")  # had the connection come back with the BLPOP unread, a command would read its reply
    for _ in range(5):
        assert await client.lrange(key, 0, -1) == [b"late"]
    await conn.aclose()


@pytest.mark.anyio
async def test_aio_sends_survive_a_killed_pipeline_connection(redis_server: RedisServer, namespace: str) -> None:
    killer = raw_client(redis_server.url)
    admin_once(redis_server.url, namespace).create_topic("aiopiped", read_queues=4, write_queues=4)
    async with aio.Producer("pg", redis_server.url, namespace=namespace) as producer:
        await asyncio.gather(*(producer.send(Message("aiopiped", b"a%d" % i)) for i in range(300)))
        killer.client_kill_filter(_type="normal", skipme=True)
        results = await asyncio.gather(*(producer.send(Message("aiopiped", b"b%d" % i)) for i in range(300)))
        assert len({(r.message_queue.queue_id, r.queue_offset) for r in results}) == 300
    killer.close()
    assert _stored(redis_server.url, namespace, "aiopiped") == 600  # retried, nothing stored twice


@pytest.mark.anyio
async def test_aio_pipelined_sends_load_a_flushed_script_again(redis_server: RedisServer, namespace: str) -> None:
    client = raw_client(redis_server.url)
    admin_once(redis_server.url, namespace).create_topic("aioflushed", read_queues=2, write_queues=2)
    async with aio.Producer("pg", redis_server.url, namespace=namespace) as producer:
        await producer.send(Message("aioflushed", b"first"))
        client.script_flush()  # the next round's EVALSHA gets NOSCRIPT (nothing stored): run again after loading
        results = await asyncio.gather(*(producer.send(Message("aioflushed", b"m%d" % i)) for i in range(50)))
        assert len({(r.message_queue.queue_id, r.queue_offset) for r in results}) == 50
    client.close()
    assert _stored(redis_server.url, namespace, "aioflushed") == 51


@pytest.mark.anyio
async def test_shutdown_cancelling_the_aio_sender_mid_read_drops_the_connection(
    redis_server: RedisServer, namespace: str
) -> None:
    client = raw_client(redis_server.url)
    admin_once(redis_server.url, namespace).create_topic("aiopaused", read_queues=1, write_queues=1)
    producer = aio.Producer("pg", redis_server.url, namespace=namespace)
    await producer.start()
    await producer.send(Message("aiopaused", b"first"))
    sender = producer._sender
    assert sender is not None
    client.execute_command("CLIENT", "PAUSE", 1500, "WRITE")  # the next round's script waits in Redis
    try:
        sending = asyncio.ensure_future(producer.send(Message("aiopaused", b"paused")))
        # written: its script waits in Redis (a paused client shows blocked), its reply is being waited for
        await wait_for_async(lambda: blocked_readers(redis_server.url, "evalsha") == 1, 5, "the send paused in Redis")
        pool = producer._conn.async_client.connection_pool
        kept = list(pool._in_use_connections)  # the sender's own connection, nothing else is running
        assert len(kept) == 1 and kept[0].is_connected
        await sender.stop(0.1)  # waits 0.1 s, then cancels the sender task during its read
        with pytest.raises(MQClientError, match="shut down"):
            await sending
        # the connection went back to the pool dropped: no other command can read the unread reply
        assert kept[0] in pool._available_connections and not kept[0].is_connected
    finally:
        client.execute_command("CLIENT", "UNPAUSE")
        client.close()
        await producer.shutdown()


@pytest.mark.anyio
async def test_no_aio_pipe_lane_for_a_cluster_the_embedded_store_or_replicas(
    redis_cluster: Any, redis_server: RedisServer
) -> None:
    from mq.store.aio import AsyncStore
    from mq.store.replication import SyncReplicas

    cluster = owned(Connection(redis_cluster.url, "lane"))
    memory = owned(Connection("memory://lane-test", "lane"))
    plain = owned(Connection(redis_server.url, "lane"))
    try:
        assert lane.pipe_lane_of(cluster.async_client) is None
        assert lane.pipe_lane_of(memory.async_client) is None
        assert AsyncStore(cluster).put_pipeline() is None and AsyncStore(memory).put_pipeline() is None
        assert AsyncStore(plain, sync=SyncReplicas(replicas=1)).put_pipeline() is None  # WAIT needs the pool's path
        assert AsyncStore(plain).put_pipeline() is not None
        async with aio.Producer("pg", redis_cluster.url, namespace="lane") as producer:  # the rounds of put_many
            admin_once(redis_cluster.url, "lane").create_topic("fallback", read_queues=4, write_queues=4)
            results = await asyncio.gather(*(producer.send(Message("fallback", b"m%d" % i)) for i in range(100)))
            assert len({(r.message_queue.queue_id, r.queue_offset) for r in results}) == 100
    finally:
        await cluster.aclose()
        await memory.aclose()
        await plain.aclose()


@pytest.mark.anyio
async def test_aio_pipelined_sends_follow_a_sentinel_failover(sentinel: Any, namespace: str) -> None:
    url = sentinel.url
    admin_once(url, namespace).create_topic("aiofailover", read_queues=2, write_queues=2)
    async with aio.Producer("pg", url, namespace=namespace) as producer:
        await asyncio.gather(*(producer.send(Message("aiofailover", b"a%d" % i)) for i in range(20)))
        old = sentinel.master.port
        sentinel.kill_master()
        await asyncio.to_thread(sentinel.wait_failover, old)
        results: list[Any] = []
        for _ in range(100):  # the first sends after the failover may fail (their budget): then they go through
            try:
                results = await asyncio.gather(*(producer.send(Message("aiofailover", b"b%d" % i)) for i in range(20)))
                break
            except MQBrokerError:
                await asyncio.sleep(0.2)  # paces the retries of this bounded loop
        assert len(results) == 20 and all(r.status is SendStatus.SEND_OK for r in results)
        await asyncio.gather(*(producer.send(Message("aiofailover", b"c%d" % i)) for i in range(20)))
        assert producer._sender is not None and producer._sender.pipeline is not None
        kept = producer._sender.pipeline._pipe._conn  # the sender's own connection went to the new master
        assert kept is not None and kept.is_connected and kept.port == sentinel.master.port != old
