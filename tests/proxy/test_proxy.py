"""``mq proxy`` in process, driven with our own generated stubs: status codes for bad input (the
store unchanged), the settings reply, routes, authentication, metrics, the fifo receive script and
the command line. The official clients' tests are tests/proxy/test_proxy_python.py and test_proxy_node.py."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import grpc
import pytest
from prometheus_client import CollectorRegistry

from mq import Admin, Message
from mq.consumer.types import ConsumeFromWhere
from mq.model.queue import MessageQueue
from mq.proxy import auth
from mq.proxy.metrics import ProxyMetrics
from mq.proxy.pb import definition, grpc_service, service
from mq.proxy.server import ProxyConfig, ProxyServer
from mq.proxy.tracing import Receipt
from mq.store import Store, codec
from mq.store.connection import Connection
from tests.cli.test_cli import leaves
from tests.helpers import snapshot
from tests.leaks import owned
from tests.servers import RedisServer

pytestmark = pytest.mark.anyio
Code = definition.Code
MiB = 1024 * 1024


class Running:
    def __init__(self, server: ProxyServer, stub: Any, url: str, namespace: str) -> None:
        self.server, self.stub, self.url, self.namespace = server, stub, url, namespace

    def unchanged(self) -> dict[bytes, bytes]:
        """The namespace's keys and values (the endpoint's client-settings copies left out)."""
        return {k: v for k, v in snapshot(self.url, self.namespace).items() if b":proxy:client:" not in k}


@contextlib.asynccontextmanager
async def running(url: str, namespace: str, **options: Any) -> AsyncIterator[Running]:
    metrics = options.pop("metrics", None)
    server = ProxyServer(ProxyConfig(url=url, namespace=namespace, port=0, **options), metrics)
    await server.start()
    channel = grpc.aio.insecure_channel(
        f"127.0.0.1:{server.port}", options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    )
    try:
        yield Running(server, grpc_service.MessagingServiceStub(channel), url, namespace)
    finally:
        await channel.close()
        await server.stop(0)


def _message(topic: str, body: bytes = b"hello", **system: Any) -> Any:
    m = definition.Message(body=body)
    m.topic.name = topic
    m.system_properties.message_id = system.pop("message_id", uuid.uuid4().hex.upper())
    m.system_properties.message_type = system.pop("message_type", definition.NORMAL)
    for name, value in system.items():
        if name == "delivery_ms":
            m.system_properties.delivery_timestamp.FromMilliseconds(value)
        elif name == "properties":
            m.user_properties.update(value)
        elif name == "keys":
            m.system_properties.keys.extend(value)
        else:
            setattr(m.system_properties, name, value)
    return m


def _receive_request(group: str, topic: str, **kw: Any) -> Any:
    req = service.ReceiveMessageRequest(batch_size=kw.pop("batch_size", 4))
    req.group.name = group
    req.message_queue.topic.name = topic
    req.invisible_duration.FromSeconds(kw.pop("invisible_s", 30))
    req.long_polling_timeout.FromSeconds(kw.pop("poll_s", 1))
    if "sql" in kw:
        req.filter_expression.type = definition.SQL
        req.filter_expression.expression = kw.pop("sql")
    return req


async def _receive(stub: Any, group: str, topic: str, **kw: Any) -> tuple[Any, list[Any]]:
    replies = [r async for r in stub.ReceiveMessage(_receive_request(group, topic, **kw))]
    statuses = [r.status for r in replies if r.HasField("status")]
    return statuses[0], [r.message for r in replies if r.HasField("message")]


@pytest.fixture
def topic_env(redis_server: RedisServer) -> Any:
    namespace = f"pt{uuid.uuid4().hex[:8]}"
    with contextlib.closing(Admin(redis_server.url, namespace)) as admin:
        admin.create_topic("T", read_queues=2, write_queues=2)
        admin.create_group("G", consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        admin.create_group("F", consume_from_where=ConsumeFromWhere.FIRST_OFFSET, fifo=True, retry_max_times=3)
        yield redis_server.url, namespace


async def test_routes_advertise_every_message_type_and_the_clients_endpoints(topic_env: Any) -> None:
    async with running(*topic_env) as r:
        req = service.QueryRouteRequest()
        req.topic.name = "T"
        req.endpoints.addresses.add(host="mq.example", port=8081)
        res = await r.stub.QueryRoute(req)
        assert res.status.code == Code.Value("OK")
        assert [q.id for q in res.message_queues] == [0, 1]
        for q in res.message_queues:
            assert set(q.accept_message_types) == {definition.NORMAL, definition.FIFO, definition.DELAY, definition.TRANSACTION}
            assert q.broker.endpoints.addresses[0].host == "mq.example" and q.permission == definition.READ_WRITE
        req.topic.name = "missing"
        assert (await r.stub.QueryRoute(req)).status.code == Code.Value("TOPIC_NOT_FOUND")


async def test_settings_reply_is_complete_tolerates_unknown_fields_and_is_kept_in_redis(topic_env: Any) -> None:
    url, namespace = topic_env
    async with running(url, namespace) as r:
        producer = definition.Settings(client_type=definition.PRODUCER)
        producer.publishing.topics.add(name="T")
        consumer = definition.Settings(client_type=definition.SIMPLE_CONSUMER)
        consumer.subscription.group.name = "F"
        consumer.subscription.subscriptions.add().topic.name = "T"
        # field 9 (client_properties, newer than our definitions) arrives as an unknown field
        unknown = b"\x4a\x08\x0a\x01k\x12\x03val"
        commands = [
            service.TelemetryCommand.FromString(service.TelemetryCommand(settings=s).SerializeToString())
            for s in (producer, consumer)
        ]
        commands[1] = service.TelemetryCommand.FromString(
            b"\x12" + bytes([len(consumer.SerializeToString() + unknown)]) + consumer.SerializeToString() + unknown
        )

        async def send() -> AsyncIterator[Any]:
            for c in commands:
                yield c

        call = r.stub.Telemetry(send(), metadata=(("x-mq-client-id", "client-1"),))
        replies = [await call.read(), await call.read()]
        await asyncio.sleep(2.5)  # the open stream keeps the consumer live in its group's registry
        with contextlib.closing(Admin(url, namespace)) as admin:
            [live] = admin.consumer_connections("F")
        assert (live.client_id, live.subscriptions, live.status["via"]) == ("client-1", {"T": "*"}, "rocketmq-proxy")
        call.cancel()
    pub, sub = (x.settings for x in replies)
    assert all(x.status.code == Code.Value("OK") for x in replies)
    assert pub.publishing.max_body_size == 4 * MiB and pub.publishing.topics[0].name == "T"
    for s in (pub, sub):
        assert s.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
        assert s.backoff_policy.exponential_backoff.initial.ToMilliseconds() > 0 and s.backoff_policy.max_attempts > 0
        assert s.HasField("metric") and not s.metric.on and s.request_timeout.ToSeconds() > 0
    assert sub.subscription.fifo is True and sub.backoff_policy.max_attempts == 4  # the group's config: retry_max_times 3
    assert sub.subscription.long_polling_timeout.ToSeconds() > 0 and sub.subscription.receive_batch_size > 0
    with contextlib.closing(Connection(url, namespace)) as conn:
        stored = Store(conn).proxy_client("client-1")
    assert stored is not None and definition.Settings.FromString(stored).subscription.group.name == "F"


async def test_send_receive_change_ack_and_fifo_group_receipts(topic_env: Any) -> None:
    url, namespace = topic_env
    async with running(url, namespace) as r:
        sent = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T", b"one", tag="a", keys=["k"])]))
        assert sent.status.code == Code.Value("OK") and sent.entries[0].offset == 0
        status, [got] = await _receive(r.stub, "G", "T")
        assert status.code == Code.Value("OK")
        sp = got.system_properties
        assert (got.body, sp.tag, list(sp.keys), sp.message_id) == (b"one", "a", ["k"], sent.entries[0].message_id)
        assert (sp.body_digest.type, sp.body_digest.checksum) == (definition.MD5, hashlib.md5(b"one").hexdigest().upper())
        assert sp.body_encoding == definition.IDENTITY and sp.message_type == definition.NORMAL
        assert sp.delivery_attempt == 1 and sp.receipt_handle and sp.HasField("queue_offset")
        change = service.ChangeInvisibleDurationRequest(receipt_handle=sp.receipt_handle, message_id=sp.message_id)
        change.group.name, change.topic.name = "G", "T"
        change.invisible_duration.FromSeconds(20)
        changed = await r.stub.ChangeInvisibleDuration(change)
        assert changed.status.code == Code.Value("OK") and changed.receipt_handle != sp.receipt_handle
        ack = service.AckMessageRequest(
            entries=[service.AckMessageEntry(message_id=sp.message_id, receipt_handle=sp.receipt_handle)]
        )
        ack.group.name, ack.topic.name = "G", "T"
        before = r.unchanged()
        assert (await r.stub.AckMessage(ack)).status.code == Code.Value("INVALID_RECEIPT_HANDLE")  # the old handle expired
        assert r.unchanged() == before
        ack.entries[0].receipt_handle = changed.receipt_handle
        assert (await r.stub.AckMessage(ack)).status.code == Code.Value("OK")
        status, none = await _receive(r.stub, "G", "T", poll_s=0)
        assert status.code == Code.Value("MESSAGE_NOT_FOUND") and none == []


async def test_a_fifo_message_group_goes_to_the_queue_rocketmqs_proxy_picks(topic_env: Any) -> None:
    """RocketMQ 5's proxy puts a message group on ``Hashing.consistentHash(group.hashCode(), queues)``
    (Guava); the expected queues below are Guava 31.1's answers for 16 writable queues."""
    url, namespace = topic_env
    with contextlib.closing(Admin(url, namespace)) as admin:
        admin.create_topic("Q16", read_queues=16, write_queues=16)
    expected = {"order-2": 11, "customer:42": 1, "a-much-longer-message-group-name-for-fifo": 9}
    async with running(url, namespace) as r:
        for group, queue_id in expected.items():
            msg = _message("Q16", b"f", message_group=group, message_type=definition.FIFO)
            sent = await r.stub.SendMessage(service.SendMessageRequest(messages=[msg]))
            assert sent.status.code == Code.Value("OK")
            with contextlib.closing(Admin(url, namespace)) as admin:
                stored = admin.query_message("Q16", sent.entries[0].message_id)
            assert stored is not None and stored.queue_id == queue_id, group


async def test_a_clients_retry_of_a_send_stores_nothing_twice(topic_env: Any) -> None:
    """An official client retries SendMessage with the same message ids when a reply is lost (D140):
    the endpoint puts them on the queue of the first id, where a stored id is not stored again."""
    url, namespace = topic_env
    with contextlib.closing(Admin(url, namespace)) as admin:
        admin.create_topic("R8", read_queues=8, write_queues=8)
    async with running(url, namespace) as r:
        for n in range(6):  # several requests: the queue follows each request's ids, not a turn
            request = service.SendMessageRequest(messages=[_message("R8", b"%d-a" % n), _message("R8", b"%d-b" % n)])
            first = await r.stub.SendMessage(request)
            again = await r.stub.SendMessage(request)  # the client's retry: its first reply was lost
            assert first.status.code == again.status.code == Code.Value("OK")
            assert [(e.message_id, e.offset) for e in again.entries] == [(e.message_id, e.offset) for e in first.entries]
    store = owned(Store(Connection(url, namespace)))
    bodies = sorted(m.body for q in range(8) for m in store.read("R8", q, 0, 100))
    assert bodies == sorted(b"%d-%s" % (n, x) for n in range(6) for x in (b"a", b"b"))  # each once


async def test_invisibility_is_on_the_stores_clock_not_the_endpoints_host(
    topic_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An endpoint host an hour behind hands out receipts visible 30 s after the store's now, not
    an hour early (which would redeliver at once)."""
    url, namespace = topic_env
    real_time = time.time
    monkeypatch.setattr(time, "time", lambda: real_time() - 3600)
    async with running(url, namespace) as r:
        sent = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T", b"one")]))
        assert sent.status.code == Code.Value("OK")
        _, [got] = await _receive(r.stub, "G", "T", invisible_s=30)
        status, again = await _receive(r.stub, "G", "T", poll_s=0)
        assert again == [] and status.code == Code.Value("MESSAGE_NOT_FOUND")  # still invisible
    monkeypatch.undo()
    conn = owned(Connection(url, namespace))
    server_ms = Store(conn).server_time_ms()
    conn.close()
    visible_at = Receipt.parse(got.system_properties.receipt_handle).visible_at_ms
    assert abs(visible_at - (server_ms + 30_000)) < 2_000, visible_at - server_ms


async def test_unauthorized_without_the_right_signature(topic_env: Any) -> None:
    url, namespace = topic_env
    async with running(url, namespace, credentials=auth.Credentials("ak", "sk")) as r:
        req = service.SendMessageRequest(messages=[_message("T")])
        now = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())

        def headers(secret: str) -> tuple[tuple[str, str], ...]:
            sig = auth.sign(secret, now)
            value = f"MQv2-HMAC-SHA1 Credential=ak, SignedHeaders=x-mq-date-time, Signature={sig}"
            return (("x-mq-date-time", now), ("authorization", value))

        before = r.unchanged()
        for metadata in ((), headers("wrong")):
            assert (await r.stub.SendMessage(req, metadata=metadata)).status.code == Code.Value("UNAUTHORIZED")
        assert r.unchanged() == before
        assert (await r.stub.SendMessage(req, metadata=headers("sk"))).status.code == Code.Value("OK")
    assert "sk" not in repr(auth.Credentials("ak", "sk"))


def _bad_sends() -> list[tuple[str, Any]]:
    far = int(time.time() * 1000) + 25 * 3_600_000
    return [
        ("TOPIC_NOT_FOUND", _message("Missing")),
        ("ILLEGAL_TOPIC", _message("bad topic!")),
        ("MESSAGE_BODY_TOO_LARGE", _message("T", b"x" * (4 * MiB + 1))),
        ("MESSAGE_BODY_EMPTY", _message("T", b"")),
        ("ILLEGAL_DELIVERY_TIME", _message("T", message_type=definition.DELAY, delivery_ms=far)),
        ("ILLEGAL_MESSAGE_ID", _message("T", message_id="")),
        ("ILLEGAL_MESSAGE_PROPERTY_KEY", _message("T", properties={"KEYS": "x"})),
        ("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", _message("T", message_type=definition.FIFO)),
    ]


@pytest.mark.parametrize("case", range(len(_bad_sends())))
async def test_bad_send_gets_its_status_code_and_stores_nothing(topic_env: Any, case: int) -> None:
    expected, message = _bad_sends()[case]
    async with running(*topic_env) as r:
        before = r.unchanged()
        good = _message("T", b"fine")
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=[good, message]))  # one bad: none stored
        assert res.status.code == Code.Value(expected), res.status.message
        assert r.unchanged() == before


async def test_bad_consumer_requests_get_their_status_codes_and_change_nothing(topic_env: Any) -> None:
    async with running(*topic_env) as r:
        await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T")]))
        before = r.unchanged()
        for handle in ("garbage", "0:0:1:T", "0:x:1:T", ""):
            ack = service.AckMessageRequest(entries=[service.AckMessageEntry(message_id="m", receipt_handle=handle)])
            ack.group.name, ack.topic.name = "G", "T"
            assert (await r.stub.AckMessage(ack)).status.code == Code.Value("INVALID_RECEIPT_HANDLE")
            change = service.ChangeInvisibleDurationRequest(receipt_handle=handle)
            change.group.name, change.topic.name = "G", "T"
            change.invisible_duration.FromSeconds(20)
            assert (await r.stub.ChangeInvisibleDuration(change)).status.code == Code.Value("INVALID_RECEIPT_HANDLE")
        for kw, code in (({"sql": "a >"}, "ILLEGAL_FILTER_EXPRESSION"), ({"invisible_s": 1}, "ILLEGAL_INVISIBLE_TIME")):
            status, msgs = await _receive(r.stub, "G", "T", **kw)
            assert status.code == Code.Value(code) and msgs == []
        status, _ = await _receive(r.stub, "bad group!", "T")
        assert status.code == Code.Value("ILLEGAL_CONSUMER_GROUP")
        for tid in ("nope", "T:x:1-0", "Missing:0:1-0"):
            end = service.EndTransactionRequest(transaction_id=tid, resolution=definition.COMMIT)
            assert (await r.stub.EndTransaction(end)).status.code == Code.Value("INVALID_TRANSACTION_ID"), tid
        assert r.unchanged() == before


async def test_sql92_filter_and_dead_letter_forwarding(topic_env: Any) -> None:
    url, namespace = topic_env
    async with running(url, namespace) as r:
        msgs = [_message("T", b"red", properties={"color": "red"}), _message("T", b"blue", properties={"color": "blue"})]
        await r.stub.SendMessage(service.SendMessageRequest(messages=msgs))
        status, got = await _receive(r.stub, "G", "T", sql="color = 'blue'")
        assert status.code == Code.Value("OK")
        assert [m.body for m in got] == [b"blue"]
        fwd = service.ForwardMessageToDeadLetterQueueRequest(
            receipt_handle=got[0].system_properties.receipt_handle,
            message_id=got[0].system_properties.message_id,
            delivery_attempt=1,
        )
        fwd.group.name, fwd.topic.name = "G", "T"
        assert (await r.stub.ForwardMessageToDeadLetterQueue(fwd)).status.code == Code.Value("OK")
    with contextlib.closing(Admin(url, namespace)) as admin:
        [dead] = admin.dlq_messages("G")
    assert dead.body == b"blue" and dead.msg_id == got[0].system_properties.message_id


async def test_a_resent_dead_letter_reaches_the_endpoints_consumers_again(topic_env: Any) -> None:
    """``Admin.resend_dlq`` puts a dead letter in the group's retry topic; a RocketMQ 5 client receiving
    from the original topic gets it again (its topic shown, unfiltered: it passed the filter when first
    read), changes its invisibility and acks it naming the original topic — as the simple consumers do."""
    url, namespace = topic_env
    async with running(url, namespace) as r:
        sent = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T", b"again", tag="a")]))
        msg_id = sent.entries[0].message_id
        _, [got] = await _receive(r.stub, "G", "T")
        fwd = service.ForwardMessageToDeadLetterQueueRequest(
            receipt_handle=got.system_properties.receipt_handle, message_id=msg_id, delivery_attempt=1
        )
        fwd.group.name, fwd.topic.name = "G", "T"
        assert (await r.stub.ForwardMessageToDeadLetterQueue(fwd)).status.code == Code.Value("OK")
        with contextlib.closing(Admin(url, namespace)) as admin:
            assert admin.resend_dlq("G") == 1
        status, [again] = await _receive(r.stub, "G", "T", sql="color = 'none'", poll_s=5)
        assert status.code == Code.Value("OK")
        assert (again.body, again.topic.name, again.system_properties.tag) == (b"again", "T", "a")
        change = service.ChangeInvisibleDurationRequest(receipt_handle=again.system_properties.receipt_handle, message_id=msg_id)
        change.group.name, change.topic.name = "G", "T"
        change.invisible_duration.FromSeconds(20)
        changed = await r.stub.ChangeInvisibleDuration(change)
        assert changed.status.code == Code.Value("OK")
        ack = service.AckMessageRequest(
            entries=[service.AckMessageEntry(message_id=msg_id, receipt_handle=changed.receipt_handle)]
        )
        ack.group.name, ack.topic.name = "G", "T"
        assert (await r.stub.AckMessage(ack)).status.code == Code.Value("OK")
        status, none = await _receive(r.stub, "G", "T", poll_s=0)
        assert status.code == Code.Value("MESSAGE_NOT_FOUND") and none == []
        ack.group.name = "F"  # a receipt of G's retry topic is not one of another group's
        assert (await r.stub.AckMessage(ack)).status.code == Code.Value("INVALID_RECEIPT_HANDLE")


async def test_metrics_count_requests_and_errors_per_rpc(topic_env: Any) -> None:
    registry = CollectorRegistry()
    async with running(*topic_env, metrics=ProxyMetrics(registry)) as r:
        req = service.QueryRouteRequest()
        req.topic.name = "T"
        await r.stub.QueryRoute(req)
        req.topic.name = "missing"
        await r.stub.QueryRoute(req)
    assert registry.get_sample_value("mq_proxy_requests_total", {"rpc": "QueryRoute"}) == 2
    assert registry.get_sample_value("mq_proxy_errors_total", {"rpc": "QueryRoute", "code": "TOPIC_NOT_FOUND"}) == 1


def test_fifo_receive_hands_out_a_message_group_only_after_its_previous_message_is_acked(redis_server: RedisServer) -> None:
    namespace = f"pf{uuid.uuid4().hex[:8]}"
    with contextlib.closing(Admin(redis_server.url, namespace)) as admin:
        admin.create_topic("T", read_queues=1, write_queues=1)
    conn = owned(Connection(redis_server.url, namespace))
    store = Store(conn)
    for i, group in enumerate(["a", "a", "b", "a", "b"]):
        store.put("T", 0, [codec.encode(Message("T", b"%d" % i), f"id{i}", system_properties={"__SHARDINGKEY": group})])
    queue = MessageQueue("T", "broker-a", 0)
    store.seed_offsets("F", {queue: 0})

    def receive(now_ms: int) -> list[tuple[int, int]]:
        got = store.receive_simple(
            "F",
            queue,
            now_ms=now_ms,
            invisible_ms=10_000,
            max_messages=8,
            max_attempts=5,
            filter_type="",
            filter_data="",
            max_scan=64,
            fifo=True,
        )
        return [(d.offset, d.attempt) for d in got]

    now = int(time.time() * 1000)
    assert receive(now) == [(0, 1)]  # stops at the second "a": one message per group per batch
    assert receive(now) == []  # the queue waits while a message is in flight
    assert receive(now + 11_000) == [(0, 2)]  # not acked in time: the same message again, first
    assert store.ack_simple("F", queue, 0, now + 11_000 + 10_000, None)
    assert receive(now + 12_000) == [(1, 1), (2, 1)]  # the next "a" and the first "b"
    assert store.ack_simple("F", queue, 1, now + 22_000, None) and store.ack_simple("F", queue, 2, now + 22_000, None)
    assert receive(now + 13_000) == [(3, 1), (4, 1)]
    conn.close()


def test_mq_proxy_command_has_its_options_with_help() -> None:
    from mq.cli.main import build_parser

    commands = dict(leaves(build_parser()))
    options = {s for a in commands["mq proxy"]._actions for s in a.option_strings}
    assert {"--url", "--namespace", "--port", "--host", "--tls-port", "--access-key", "--secret-key"} <= options


async def test_transaction_commit_and_rollback(topic_env: Any) -> None:
    url, namespace = topic_env
    async with running(url, namespace) as r:
        halves = [
            _message("T", b"commit me", message_type=definition.TRANSACTION),
            _message("T", b"roll me back", message_type=definition.TRANSACTION),
        ]
        sent = await r.stub.SendMessage(service.SendMessageRequest(messages=halves))
        assert sent.status.code == Code.Value("OK") and all(e.transaction_id for e in sent.entries)
        status, none = await _receive(r.stub, "G", "T", poll_s=0)
        assert none == []
        assert status.code == Code.Value("MESSAGE_NOT_FOUND")  # half messages are invisible
        for entry, resolution in zip(sent.entries, (definition.COMMIT, definition.ROLLBACK)):
            end = service.EndTransactionRequest(
                transaction_id=entry.transaction_id, message_id=entry.message_id, resolution=resolution
            )
            assert (await r.stub.EndTransaction(end)).status.code == Code.Value("OK")
        again = service.EndTransactionRequest(transaction_id=sent.entries[0].transaction_id, resolution=definition.COMMIT)
        assert (await r.stub.EndTransaction(again)).status.code == Code.Value("INVALID_TRANSACTION_ID")  # resolved already
        status, got = await _receive(r.stub, "G", "T")
        assert [m.body for m in got] == [b"commit me"] and got[0].system_properties.message_id == sent.entries[0].message_id


async def test_heartbeat_after_a_restart_uses_the_settings_kept_in_redis(topic_env: Any) -> None:
    url, namespace = topic_env
    consumer = definition.Settings(client_type=definition.SIMPLE_CONSUMER)
    consumer.subscription.group.name = "G"
    consumer.subscription.subscriptions.add().topic.name = "T"
    metadata = (("x-mq-client-id", "client-2"),)
    async with running(url, namespace) as first:

        async def send() -> AsyncIterator[Any]:
            yield service.TelemetryCommand(settings=consumer)

        call = first.stub.Telemetry(send(), metadata=metadata)
        assert (await call.read()).status.code == Code.Value("OK")
        call.cancel()
    async with running(url, namespace) as second:  # a new endpoint process knows nothing of client-2
        beat = service.HeartbeatRequest(client_type=definition.SIMPLE_CONSUMER)
        beat.group.name = "G"
        assert (await second.stub.Heartbeat(beat, metadata=metadata)).status.code == Code.Value("OK")
    with contextlib.closing(Admin(url, namespace)) as admin:
        [live] = admin.consumer_connections("G")
    assert (live.client_id, live.subscriptions) == ("client-2", {"T": "*"})


async def test_tls_port_serves_with_the_given_certificate(topic_env: Any, tmp_path: Any) -> None:
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    async with running(*topic_env, tls_port=0, tls_cert=cert, tls_key=key) as r:
        assert r.server.tls_port
        creds = grpc.ssl_channel_credentials(root_certificates=cert.read_bytes())
        async with grpc.aio.secure_channel(f"localhost:{r.server.tls_port}", creds) as channel:
            req = service.QueryRouteRequest()
            req.topic.name = "T"
            res = await grpc_service.MessagingServiceStub(channel).QueryRoute(req)
        assert res.status.code == Code.Value("OK") and len(res.message_queues) == 2


async def test_a_4_mib_body_with_properties_fits_through_grpc(topic_env: Any) -> None:
    url, namespace = topic_env
    body = bytes(range(256)) * (4 * MiB // 256)  # exactly the limit: over gRPC's default 4 MiB with its headers
    async with running(url, namespace) as r:
        message = _message("T", body, properties={"p": "x" * 1000}, keys=["k"])
        res = await r.stub.SendMessage(service.SendMessageRequest(messages=[message]))
        assert res.status.code == Code.Value("OK"), res.status.message
        status, [got] = await _receive(r.stub, "G", "T", batch_size=1)
        assert status.code == Code.Value("OK") and got.body == body and got.user_properties["p"] == "x" * 1000


def _ack(group: str, topic: str, *messages: Any) -> Any:
    ack = service.AckMessageRequest(
        entries=[
            service.AckMessageEntry(message_id=m.system_properties.message_id, receipt_handle=m.system_properties.receipt_handle)
            for m in messages
        ]
    )
    ack.group.name, ack.topic.name = group, topic
    return ack


async def _trace_scenario(r: Running, monkeypatch: pytest.MonkeyPatch) -> tuple[dict[bytes, str], list[int]]:
    """Through the endpoint: send ``acked``, ``late``, ``dead``; group G receives all three (invisible
    1 s), changes ``acked``'s invisibility then acks it, forwards ``dead`` to the DLQ, leaves ``late``
    unacked, receives it again and acks it (both acks in one AckMessage with an old receipt's failure
    left out); group D (one delivery) receives all three and lets them run out into its DLQ. Returns
    each body's msg id and the entries of every ``read_each`` the store ran."""
    import mq.proxy.service as proxy_service
    from mq.store.aio import AsyncStore

    monkeypatch.setattr(proxy_service, "MIN_INVISIBLE_S", 0.5)
    reads: list[int] = []
    real_read_each = getattr(AsyncStore, "read_each", None)

    def read_each(self: Any, locations: Any) -> Any:
        reads.append(len(locations))
        assert real_read_each is not None
        return real_read_each(self, locations)

    monkeypatch.setattr(AsyncStore, "read_each", read_each, raising=False)  # (the old code has none)
    with contextlib.closing(Admin(r.url, r.namespace)) as admin:
        admin.create_group("D", consume_from_where=ConsumeFromWhere.FIRST_OFFSET, retry_max_times=0)
    sent = await r.stub.SendMessage(
        service.SendMessageRequest(messages=[_message("T", body) for body in (b"acked", b"late", b"dead")])
    )
    ids = {body: e.message_id for body, e in zip((b"acked", b"late", b"dead"), sent.entries)}
    _, got = await _receive(r.stub, "G", "T", invisible_s=1)
    first = {m.body: m for m in got}
    assert set(first) == {b"acked", b"late", b"dead"}
    _, dying = await _receive(r.stub, "D", "T", invisible_s=1)
    assert len(dying) == 3
    change = service.ChangeInvisibleDurationRequest(
        receipt_handle=first[b"acked"].system_properties.receipt_handle, message_id=ids[b"acked"]
    )
    change.group.name, change.topic.name = "G", "T"
    change.invisible_duration.FromSeconds(20)
    changed = await r.stub.ChangeInvisibleDuration(change)
    assert changed.status.code == Code.Value("OK")
    fwd = service.ForwardMessageToDeadLetterQueueRequest(
        receipt_handle=first[b"dead"].system_properties.receipt_handle, message_id=ids[b"dead"], delivery_attempt=1
    )
    fwd.group.name, fwd.topic.name = "G", "T"
    assert (await r.stub.ForwardMessageToDeadLetterQueue(fwd)).status.code == Code.Value("OK")
    await asyncio.sleep(1.3)  # time passes: ``late`` is visible again to G, ``dying`` to D (1 s invisible)
    _, [again] = await _receive(r.stub, "G", "T", invisible_s=1)
    assert (again.body, again.system_properties.delivery_attempt) == (b"late", 2)
    status, none = await _receive(r.stub, "D", "T", invisible_s=1, poll_s=0)
    assert none == [] and status.code == Code.Value("MESSAGE_NOT_FOUND")  # past D's one delivery: dead
    first[b"acked"].system_properties.receipt_handle = changed.receipt_handle
    res = await r.stub.AckMessage(_ack("G", "T", first[b"acked"], again, first[b"late"]))  # the last one expired
    assert [e.status.code for e in res.entries] == [Code.Value("OK"), Code.Value("OK"), Code.Value("INVALID_RECEIPT_HANDLE")]
    return ids, reads


async def test_receives_acks_timeouts_and_dead_letters_through_the_endpoint_are_traced(
    topic_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the simple consumers trace (D52), with the namespace's tracing on: an ack is a ``consume``
    event ``ACK`` (cost from hand-out to ack, through a change of invisibility), a delivery not acked
    in time ``INVISIBLE_TIMEOUT`` (seen when handed out again), a forward to the DLQ and a delivery
    past the group's attempts ``dlq`` — each with the attempt it ended; one read for both acks."""
    url, namespace = topic_env
    with contextlib.closing(Admin(url, namespace)) as admin:
        admin.set_trace(True)
    async with running(url, namespace) as r:
        ids, reads = await _trace_scenario(r, monkeypatch)
    with contextlib.closing(Admin(url, namespace)) as admin:
        acked = admin.message_trace("T", ids[b"acked"])
        late = admin.message_trace("T", ids[b"late"])
        dead = admin.message_trace("T", ids[b"dead"])
        assert sorted(m.msg_id for m in admin.dlq_messages("D")) == sorted(ids.values())

    def by_group(events: list[Any]) -> list[tuple[str, str, str, int]]:  # each group's tracer writes its own events
        return sorted(((e.kind, e.group, e.status, e.attempt) for e in events), key=lambda e: e[1])

    assert by_group(acked) == [("dlq", "D", "%DLQ%D", 1), ("consume", "G", "ACK", 1)]
    [ack] = (e for e in acked if e.group == "G")
    assert 1_000 <= ack.cost_ms < 10_000 and ack.topic == "T" and ack.client_id and ack.host  # handed out before the sleep
    assert by_group(late) == [
        ("dlq", "D", "%DLQ%D", 1),
        ("consume", "G", "INVISIBLE_TIMEOUT", 1),
        ("consume", "G", "ACK", 2),
    ]
    timeout, ack2 = (e for e in late if e.group == "G")
    assert ack2.time_ms == timeout.time_ms and 0 <= ack2.cost_ms < 1_000  # the second hand-out, acked at once
    assert by_group(dead) == [("dlq", "D", "%DLQ%D", 1), ("dlq", "G", "%DLQ%G", 1)]
    assert reads == [2]  # the two acked entries' messages, one round trip


async def test_nothing_is_traced_through_the_endpoint_when_tracing_is_off(
    topic_env: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The namespace's tracing is off by default: the same receives, acks and dead letters write no
    trace key, and an ack reads no message."""
    url, namespace = topic_env
    async with running(url, namespace) as r:
        ids, reads = await _trace_scenario(r, monkeypatch)
    assert reads == []
    assert not [k for k in snapshot(url, namespace) if k.endswith(b":trace")]
    with contextlib.closing(Admin(url, namespace)) as admin:
        assert all(admin.message_trace("T", msg_id) == [] for msg_id in ids.values())
