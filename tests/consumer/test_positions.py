"""Positions that cannot skip (D70), proven with a real lossy failover.

Two real redis-servers, a master and its replica, behind a TCP switch the clients connect to (what a
virtual IP or a Sentinel-following client does: the same address leads to the new master). The
replica stops replicating (``REPLICAOF NO ONE``), the master takes and hands out a tail the replica
never sees, then the switch points every client at the replica and drops their connections: the
promoted replica gives the lost offsets to new messages. Every message the new master holds must
reach the group (none skipped), no committed offset may be above a queue's end, and a rewind is
reported with a WARNING and the ``rocketredis_offset_rewinds_total`` counter.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    Message,
    Producer,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
    aio,
)
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.observe import metrics
from mq.store import Store
from mq.store.connection import Connection
from tests.servers import RedisServer

TOPIC, NS = "T", "pos"
QUEUE = MessageQueue(TOPIC, DEFAULT_BROKER_NAME, 0)


class Switch:
    """A TCP forwarder on 127.0.0.1 to one server's port; :meth:`point` moves it to another and drops
    every connection open through it (the clients reconnect, and reach the new server)."""

    def __init__(self, port: int) -> None:
        self.target = port
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def point(self, port: int) -> None:
        """Lead new connections to ``port``; drop the open ones."""
        self.target = port
        with self._lock:
            dropped, self._open = self._open, []
        for s in dropped:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self._server.close()
        self.point(self.target)


@pytest.fixture
def pair() -> Iterator[tuple[RedisServer, RedisServer, Switch]]:
    """A master, its replica (in sync), and a switch leading to the master."""
    with RedisServer() as master, RedisServer(extra_args=["--replicaof", "127.0.0.1", str(master.port)]) as replica:
        with master.client() as c:
            deadline = time.monotonic() + 10
            while int(c.info("replication").get("connected_slaves", 0)) < 1:
                assert time.monotonic() < deadline, "the replica did not connect"
                time.sleep(0.05)
        switch = Switch(master.port)
        try:
            yield master, replica, switch
        finally:
            switch.close()


def _send(url: str, prefix: str, n: int) -> None:
    """Send ``n`` messages ``prefix0…`` (retrying a send the failover refused: SEND_OK for each)."""
    with Producer(f"p{prefix}", url, namespace=NS) as producer:
        for i in range(n):
            deadline = time.monotonic() + 10
            while True:
                try:
                    producer.send(Message(TOPIC, b"%s%d" % (prefix.encode(), i)))
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)


def _wait(what: str, check: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


class Delivered:
    """Bodies delivered to the group under test (thread-safe)."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self._lock = threading.Lock()

    def add(self, bodies: list[bytes]) -> None:
        with self._lock:
            self.bodies += bodies

    def has(self, wanted: set[bytes]) -> bool:
        with self._lock:
            return wanted <= set(self.bodies)


def _push(url: str, delivered: Delivered, stop: threading.Event, ready: threading.Event, *, orderly: bool = False) -> None:
    consumer = PushConsumer("g", url, namespace=NS, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(TOPIC)

    def listener(msgs: Any, ctx: Any) -> Any:
        delivered.add([m.body for m in msgs])
        return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    if orderly:
        consumer.register_orderly_listener(listener)
    else:
        consumer.register_message_listener(listener)
    consumer.start()
    ready.set()
    stop.wait()
    consumer.shutdown()


def _pull(url: str, delivered: Delivered, stop: threading.Event, ready: threading.Event) -> None:
    consumer = PullConsumer("g", url, namespace=NS, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(TOPIC)
    consumer.start()
    ready.set()
    while not stop.is_set():
        with contextlib.suppress(Exception):  # a poll or commit during the failover
            delivered.add([m.body for m in consumer.poll(timeout_s=0.2)])
    consumer.shutdown()


def _simple(url: str, delivered: Delivered, stop: threading.Event, ready: threading.Event) -> None:
    consumer = SimpleConsumer("g", url, namespace=NS, subscriptions={TOPIC: "*"}, await_duration_s=0.2)
    consumer.start()
    ready.set()
    while not stop.is_set():
        with contextlib.suppress(Exception):  # a receive or an ack during the failover
            for view in consumer.receive(max_messages=16, invisible_duration_s=30):
                delivered.add([view.body])
                consumer.ack(view)
    consumer.shutdown()


def _aio_push(url: str, delivered: Delivered, stop: threading.Event, ready: threading.Event) -> None:
    async def run() -> None:
        consumer = aio.PushConsumer("g", url, namespace=NS, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        consumer.subscribe(TOPIC)

        async def listener(msgs: Any, ctx: Any) -> ConsumeConcurrentlyStatus:
            delivered.add([m.body for m in msgs])
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer.register_message_listener(listener)
        async with consumer:
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)

    asyncio.run(run())


def _endpoint(url: str, delivered: Delivered, stop: threading.Event, ready: threading.Event) -> None:
    """The RocketMQ 5 endpoint (``mq proxy``) in process on the switched URL; its receives and acks
    over gRPC, as a RocketMQ 5 SimpleConsumer makes them."""
    import grpc

    from mq.proxy.pb import grpc_service, service
    from mq.proxy.server import ProxyConfig, ProxyServer

    async def run() -> None:
        with Admin(url, NS) as admin:
            admin.create_group("g", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        server = ProxyServer(ProxyConfig(url=url, namespace=NS, port=0), None)
        await server.start()
        channel = grpc.aio.insecure_channel(f"127.0.0.1:{server.port}")
        stub = grpc_service.MessagingServiceStub(channel)
        try:
            ready.set()
            while not stop.is_set():
                request = service.ReceiveMessageRequest(batch_size=16)
                request.group.name, request.message_queue.topic.name = "g", TOPIC
                request.invisible_duration.FromSeconds(30)
                request.long_polling_timeout.FromSeconds(1)
                try:
                    got = [r.message async for r in stub.ReceiveMessage(request) if r.HasField("message")]
                    if not got:
                        continue
                    delivered.add([m.body for m in got])
                    ack = service.AckMessageRequest(
                        entries=[
                            service.AckMessageEntry(
                                message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle
                            )
                            for m in got
                        ]
                    )
                    ack.group.name, ack.topic.name = "g", TOPIC
                    await stub.AckMessage(ack)
                except grpc.aio.AioRpcError:  # a receive or an ack during the failover
                    await asyncio.sleep(0.1)
        finally:
            await channel.close()
            await server.stop(0)

    asyncio.run(run())


CONSUMERS = {
    "push": _push,
    "orderly": functools.partial(_push, orderly=True),
    "pull": _pull,
    "simple": _simple,
    "aio-push": _aio_push,
    "endpoint": _endpoint,
}
#: The consumers that keep a position in memory (a simple consumer's, and the endpoint's, lives in the
#: store, in the same script that hands the messages out: the replica has both or neither, so it
#: cannot skip).
IN_MEMORY = {"push", "orderly", "pull", "aio-push"}


def _bodies(prefix: str, n: int) -> set[bytes]:
    return {b"%s%d" % (prefix.encode(), i) for i in range(n)}


@pytest.mark.parametrize("kind", sorted(CONSUMERS))
def test_a_lossy_failover_skips_no_stored_message(
    pair: tuple[RedisServer, RedisServer, Switch], kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    master, replica, switch = pair
    url = f"redis://127.0.0.1:{switch.port}/0"
    registry_metrics = metrics.enable_client_metrics(registry=CollectorRegistry())
    rewinds_before = _rewinds(registry_metrics)
    with Admin(url, NS) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    delivered, stop, ready = Delivered(), threading.Event(), threading.Event()
    consumer = threading.Thread(target=CONSUMERS[kind], args=(url, delivered, stop, ready), daemon=True)
    caplog.set_level(logging.WARNING, logger="mq.consumer")
    consumer.start()
    try:
        assert ready.wait(20), f"the {kind} consumer did not start"
        _send(url, "a", 10)  # offsets 0-9, on both servers
        assert _wait("a", lambda: delivered.has(_bodies("a", 10)), 20)
        with master.client() as c:
            assert int(c.execute_command("WAIT", 1, 5000)) == 1
        with replica.client() as c:
            c.execute_command("REPLICAOF", "NO", "ONE")  # from here the replica misses the master's tail
        _send(url, "b", 10)  # offsets 10-19 on the old master only, delivered to the group
        assert _wait("b", lambda: delivered.has(_bodies("b", 10)), 20)
        time.sleep(0.5)  # the group's position (and a commit) moves past them
        switch.point(replica.port)  # the failover: the replica is the master, the tail is gone
        _send(url, "c", 10)  # offsets 10-19 again, on the new master: another history
        _send(url, "d", 10)  # offsets 20-29
        stored = _bodies("a", 10) | _bodies("c", 10) | _bodies("d", 10)
        _wait("every stored message", lambda: delivered.has(stored), 30)
        time.sleep(1.0)  # commits settle
    finally:
        stop.set()
        consumer.join(30)
    missing = sorted(stored - set(delivered.bodies))
    assert missing == [], f"{kind}: stored messages never delivered: {missing}"
    conn = Connection(f"redis://127.0.0.1:{replica.port}/0", NS)
    try:
        store = Store(conn)
        end = store.queue_stats(TOPIC, [0])[0].max_offset
        committed = store.read_offsets("g", [QUEUE]).get(QUEUE, -1)
    finally:
        conn.close()
    assert end == 30
    assert committed <= end, f"{kind}: committed offset {committed} is above the queue's end {end}"
    if kind in IN_MEMORY:
        warnings = [r.getMessage() for r in caplog.records if "read again" in r.getMessage()]
        assert warnings, f"{kind}: no rewind was reported"
        assert all(w.startswith("group g: position ") and str(QUEUE) in w for w in warnings), warnings
        assert _rewinds(registry_metrics) > rewinds_before


def _rewinds(m: metrics.ClientMetrics) -> float:
    """The sum of ``rocketredis_offset_rewinds_total`` over its series."""
    return sum(s.value for family in m.offset_rewinds.collect() for s in family.samples if s.name.endswith("_total"))


@pytest.mark.timeout(300)  # two streaming runs, and the JVM's start when it is the session's first Spark test
def test_a_streaming_checkpoint_beyond_a_queues_end_reads_every_new_message(
    spark_session: Any, redis_server: RedisServer, namespace: str, tmp_path: Any, request: pytest.FixtureRequest
) -> None:
    """The store is recreated under a streaming query's checkpoint (offset 100 of a queue that now
    holds 60 new messages): the restarted query reads the 60, then 10 more, and says so.

    The reader runs in Spark's Python workers, whose stderr is the one the JVM inherited when the
    session started: pytest's session-wide capture, read here (run without ``-s``)."""
    capture = request.config.pluginmanager.getplugin("capturemanager")
    assert capture is not None and capture.is_globally_capturing(), "run with pytest's output capture (no -s)"
    capture.read_global_capture()  # what came before this test
    from tests.spark_data import fill

    url = redis_server.url
    seen: list[str] = []
    lock = threading.Lock()

    def sink(batch: Any, batch_id: int) -> None:
        ids = [r.msg_id for r in batch.select("msg_id").collect()]
        with lock:
            seen.extend(ids)

    def start() -> Any:
        stream = (
            spark_session.readStream.format("mq")
            .options(url=url, namespace=namespace, topic="Gone", starting_offsets="earliest")
            .load()
        )
        return (
            stream.writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(tmp_path / "ck"))
            .trigger(processingTime="200 milliseconds")
            .start()
        )

    old = fill(url, namespace, "Gone", 100, 1)
    query = start()
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted(seen) == sorted(old.sent)
    with Admin(url, namespace) as admin:
        admin.delete_topic("Gone")
    new = fill(url, namespace, "Gone", 60, 1)  # offsets 0-59: the checkpoint's 100 is beyond the end
    query = start()
    try:
        query.processAllAvailable()
        more = fill(url, namespace, "Gone", 10, 1, create=False, start=60)
        query.processAllAvailable()
    finally:
        query.stop()
    missing = (set(new.sent) | set(more.sent)) - set(seen)
    assert not missing, f"{len(missing)} new messages never reached the sink"
    assert len(seen) == 170  # each message once: the recreated queue was read from its start
    _, err = capture.read_global_capture()
    assert "streaming offset 100 of Gone queue 0 is beyond the queue's end (60: a gap of 40 offsets;" in err, err[-2000:]


def _entries(prefix: str, offsets: range) -> list[Any]:
    """Messages at ``offsets`` of queue ``T``/0 with msg ids ``prefix<offset>`` (as a pull decodes them)."""
    from mq.store import codec

    rows = [(b"0-%d" % (o + 1), {b"i": b"%s%d" % (prefix.encode(), o), b"b": b"x", b"bt": b"1", b"st": b"2"}) for o in offsets]
    return codec.decode_entries(TOPIC, 0, rows)


def test_a_message_consumed_after_its_queue_was_rewound_leaves_the_new_one_at_its_offset() -> None:
    """A listener that finishes an old message after the rewind must not take the new message at the
    same offset out of the cache (it would never be consumed, and the commit would pass it)."""
    from mq.consumer.process_queue import ProcessQueue

    pq = ProcessQueue(QUEUE, 10)
    old = _entries("old", range(10, 13))
    pq.add(old, 13)
    pq.reset(10)  # the store rewound the queue: a failover gave offsets 10-12 to new messages
    new = _entries("new", range(10, 13))
    pq.add(new, 13)
    assert pq.remove(old) == 10  # the old ones' listener calls end: nothing of the new history goes
    assert pq.count == 3
    assert pq.remove(new[:2]) == 12
    assert pq.remove(new[2:]) == 13 and pq.count == 0
    assert pq.position() == (13, "2:new12")
