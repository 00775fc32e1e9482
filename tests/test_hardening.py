"""Hardening (issue 13): limits checked before any write, scripts that never half-apply, movers that
never store a message twice, a sender thread that never dies silently, secrets never printed."""

from __future__ import annotations

import logging
import math
import subprocess
import sys
import time
from typing import Any

import pytest
import redis

from mq import Admin, Message, Producer
from mq.connection import Connection, mask_url
from mq.errors import MessageTooLargeError, MQBrokerError, MQClientError
from mq.keys import timer_member
from mq.producer import request as send_request
from mq.producer.request import SendRequest
from mq.queue import MessageQueue
from mq.store import Store, codec, scripts
from mq.store.ops import operation
from mq.store.store import StoreOps
from mq.validation import MAX_DELAY_MS, MAX_KEYS, MAX_PROPERTIES, MAX_USER_PROPERTY_SIZE
from tests.helpers import raw_client, snapshot
from tests.leaks import owned
from tests.procs import ROOT, wait_for
from tests.servers import RedisServer

_OPENED: list[Any] = []


@pytest.fixture(autouse=True)
def _close_opened() -> Any:
    """Close every store and raw client a test opened (the suite turns unclosed sockets into errors)."""
    yield
    while _OPENED:
        _OPENED.pop().close()


def _store(url: str, ns: str, topic: str = "h", queues: int = 1) -> Store:
    with Admin(url, ns) as admin:
        admin.create_topic(topic, read_queues=queues, write_queues=queues)
    store = owned(Store(Connection(url, ns)))
    _OPENED.append(store.conn)
    return store


def _raw(url: str) -> Any:
    client = raw_client(url)
    _OPENED.append(client)
    return client


def _encoded(body: bytes = b"x", **fields: Any) -> list[Any]:
    """A put-script message, bypassing the producer's checks (a careless or hostile client)."""
    return codec.encode(Message("h", body), fields.pop("msg_id", "id-" + body.decode(errors="replace")), 1)


def _with_keys(n: int) -> list[Any]:
    items = ["i", f"id-{n}", "b", b"x", "bt", 1, "k", "\x1f".join(f"key{i}" for i in range(n))]
    return [len(items), *items]


# -- finding 1: a send that fails is stored three times -----------------------------------------


def test_a_message_with_too_many_keys_is_refused_before_any_write(backend_url: str, namespace: str) -> None:
    _store(backend_url, namespace)
    before = snapshot(backend_url, namespace)
    with Producer("p", backend_url, namespace=namespace) as producer, pytest.raises(MQClientError, match="keys"):
        producer.send(Message("h", b"x", keys=[f"k{i}" for i in range(5000)]))
    assert snapshot(backend_url, namespace) == before


def test_put_script_refusing_a_message_leaves_the_queue_unchanged(backend_url: str, namespace: str) -> None:
    store = _store(backend_url, namespace)
    store.put("h", 0, [_encoded(b"ok")])
    before = snapshot(backend_url, namespace)
    for bad in ([_with_keys(5000)], [_encoded(b"a"), _with_keys(MAX_KEYS + 1)], [[3, "i", "x", "b"]], [["st", 1]]):
        with pytest.raises(MQBrokerError, match="malformed"):
            store.put("h", 0, bad)
        assert snapshot(backend_url, namespace) == before, bad
    assert store.put("h", 0, [_with_keys(MAX_KEYS)])[0] == 1  # at the limit: stored, next offset


def test_a_corrupt_queue_is_refused_before_any_write(redis_server: RedisServer, namespace: str) -> None:
    """The log holds entries beyond the queue's seq (e.g. seq rewritten by hand): the old script bumped
    seq, then failed in XADD; now it refuses with every key as it was."""
    url = redis_server.url
    store = _store(url, namespace)
    store.put("h", 0, [_encoded(b"a"), _encoded(b"b")])
    _raw(url).hset(store.queue_keys("h", 0).meta, "seq", 0)
    before = snapshot(url, namespace)
    with pytest.raises(MQBrokerError, match="corrupt queue"):
        store.put("h", 0, [_encoded(b"c")])
    assert snapshot(url, namespace) == before


def test_an_index_key_of_the_wrong_type_is_refused_before_any_write(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    store = _store(url, namespace)
    store.put("h", 0, [_encoded(b"a")])
    _raw(url).set(store.queue_keys("h", 0).keys, "not a zset")  # the old script stored the entry, then failed
    before = snapshot(url, namespace)
    with pytest.raises(MQBrokerError, match="not a zset"):
        store.put("h", 0, [_with_keys(2)])
    assert snapshot(url, namespace) == before


# -- finding 2: a delayed message is copied every second, forever -------------------------------


def test_a_delayed_message_the_log_would_refuse_is_refused_when_sent(backend_url: str, namespace: str) -> None:
    store = _store(backend_url, namespace)
    before = snapshot(backend_url, namespace)
    with pytest.raises(MQBrokerError, match="malformed"):
        store.put_delayed("h", 0, _with_keys(5000), int(time.time() * 1000))
    assert snapshot(backend_url, namespace) == before


def test_the_timer_moves_each_message_once_and_dead_letters_what_it_cannot_store(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    from scheduler.timers import TimerDelivery

    url = redis_server.url
    store = _store(url, namespace)
    keys = store.queue_keys("h", 0)
    now = int(time.time() * 1000)
    store.put_delayed("h", 0, _encoded(b"good-1"), now - 10)
    client = _raw(url)  # written around the library (the client role has XADD): 5 000 keys
    bad_id = client.xadd(keys.delayed, {"i": "bad", "b": b"x", "bt": 1, "k": "\x1f".join(f"k{i}" for i in range(5000))})
    client.zadd(keys.timer, {bad_id: now - 5})
    store.put_delayed("h", 0, _encoded(b"good-2"), now - 1)
    client.zadd(store.keys.timers, {timer_member("h", 0): now - 10})
    import threading

    delivery = TimerDelivery(store, poll_ms=50, batch=100, stop=threading.Event())
    with caplog.at_level(logging.ERROR, logger="scheduler.timers"):
        for _ in range(3):
            delivery.deliver_once()
    assert [m.body for m in store.read("h", 0, 0, 10)] == [b"good-1", b"good-2"]  # each once, in due order
    dead = store.timer_dead_letters("h", 0)
    assert len(dead) == 1 and dead[0][0] == bad_id.decode() and "keys" in dead[0][1]
    assert client.zcard(keys.timer) == 0 and client.xlen(keys.delayed) == 0
    assert "could not be delivered" in caplog.text


def test_a_half_message_that_cannot_be_committed_is_discarded_once(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    store = _store(url, namespace)
    keys = store.queue_keys("h", 0)
    client = _raw(url)
    half = client.xadd(keys.half, {"i": "tx", "b": b"x", "bt": 1, "st": 5})  # "st" is the store's own field
    client.zadd(keys.halfidx, {half: 1})
    assert store.end_transaction("h", 0, half.decode(), True) == (True, -1)
    assert store.end_transaction("h", 0, half.decode(), True) == (False, -1)
    assert store.read("h", 0, 0, 10) == []
    with Admin(url, namespace) as admin:
        discarded = admin.discarded_transactions("h")
    reasons = [m.system_properties["DISCARD_REASON"] for m in discarded]
    assert reasons == ["malformed: field st is the store time, set by the store"]


SCRIPT_FAILURES = {
    # script name -> (keys builder, argv) that make it fail; read-only scripts are included too
    "put-messages": (lambda k, s: k.put(), [2, 4, "i", "a", "b", "x"]),
    "put-pending": (lambda k, s: [k.meta, k.delayed, k.timer], ["soon", "i", "a", "b", "x"]),
    "deliver-due": (lambda k, s: k.deliver(), [10**15, 10]),
    "end-transaction": (lambda k, s: k.end_transaction(), ["commit", "HALF"]),
    "check-halves": (lambda k, s: k.check_halves(), [1, "x", 1, 1, 10]),
    "trim-queue": (lambda k, s: k.trim(), [10**15, "many"]),
    "search-offset": (lambda k, s: k.read(), ["nan"]),
    "queue-stats": (lambda k, s: [k.meta, s.keys.topics], []),
    "remove-dead-clients": (lambda k, s: [s.keys.group("g").clients, s.keys.group("g").info], ["soon"]),
}


@pytest.mark.parametrize("name", sorted(SCRIPT_FAILURES))
def test_every_script_that_fails_leaves_the_store_as_it_was(redis_server: RedisServer, namespace: str, name: str) -> None:
    url = redis_server.url
    store = _store(url, namespace)
    store.put("h", 0, [_encoded(b"a"), _encoded(b"b")])
    keys = store.queue_keys("h", 0)
    client = _raw(url)
    half = client.xadd(keys.half, {"i": "tx", "b": b"x"})
    client.zadd(keys.halfidx, {half: 1})
    store.put_delayed("h", 0, _encoded(b"d"), 1)
    client.zadd(store.keys.group("g").clients, {"c1": 1})
    client.hset(store.keys.group("g").info, "c1", "{}")
    if name in ("deliver-due", "end-transaction"):
        client.hset(keys.meta, "seq", 0)  # the log is ahead of seq: moving a message in must fail
    build, argv = SCRIPT_FAILURES[name]
    argv = [half.decode() if a == "HALF" else a for a in argv]
    if name == "queue-stats":
        client.set(keys.meta, "not a hash")
    before = snapshot(url, namespace)
    with pytest.raises(redis.exceptions.ResponseError):
        scripts.run(store.conn.client, name, build(keys, store), argv)
    assert snapshot(url, namespace) == before


# -- finding 4: a lone surrogate kills the async sender -------------------------------------------


def test_a_lone_surrogate_is_refused_by_every_send_path(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    _store(url, namespace)
    before = snapshot(url, namespace)
    bad = Message("h", b"x", properties={"p": "\ud800"})
    with Producer("p", url, namespace=namespace) as producer:
        with pytest.raises(MQClientError, match="UTF-8"):
            producer.send(bad)
        with pytest.raises(MQClientError, match="UTF-8"):
            producer.send_async(bad)
        with pytest.raises(MQClientError, match="UTF-8"):
            producer.send(Message("h", b"x", tags="\udfff"))
        assert snapshot(url, namespace) == before
        assert producer.send_async(Message("h", b"after")).result(timeout=10).queue_offset == 0


def test_the_async_sender_survives_any_error_and_fails_only_the_sends_it_affects(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    url = redis_server.url
    _store(url, namespace)
    with Producer("p", url, namespace=namespace) as producer, caplog.at_level(logging.ERROR, logger="mq.producer"):
        sender = producer._sender
        assert sender is not None
        # a request that got past every check (a bug): its encoding fails inside the sender thread
        poisoned = SendRequest("h", [4, "i", "x", "b", "\ud800"], "x", time.monotonic() + 5)
        future = poisoned.future  # made before the sender thread sees the request (as send_async does)
        sender.submit(poisoned)
        with pytest.raises(UnicodeEncodeError):
            future.result(timeout=10)
        assert "async sender" in caplog.text and "x" in caplog.text
        assert producer.send_async(Message("h", b"later")).result(timeout=10).queue_offset == 0


# -- finding 7: passwords with reserved characters -------------------------------------------------


@pytest.mark.parametrize("password", ["pa/ss", "pa#ss", "pa?ss", "a/b#c?d"])
def test_a_password_with_reserved_characters_is_masked_and_refused(password: str, redis_server: RedisServer) -> None:
    url = f"redis://user:{password}@127.0.0.1:{redis_server.port}/0"
    assert password not in mask_url(url) and "pa" not in mask_url(url).partition("@")[0].partition(":")[2]
    with pytest.raises(MQClientError, match="percent-encode") as info:
        Admin(url).close()
    assert password not in str(info.value)
    r = subprocess.run(
        [sys.executable, "-m", "mq", "topic", "list", "--url", url], capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert r.returncode == 1 and "percent-encode" in r.stderr and password not in r.stdout + r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    "query", ["socket_timeout=abc", "socket_timeout=-1", "socket_connect_timeout=nan", "health_check_interval=zz"]
)
def test_bad_url_parameters_raise_mq_client_error(query: str, redis_server: RedisServer) -> None:
    with pytest.raises(MQClientError):
        Admin(f"redis://:s3cret@127.0.0.1:{redis_server.port}/0?{query}").close()
    with pytest.raises(MQClientError):
        Admin("redis://127.0.0.1:notaport/0").close()


# -- finding 11 ---------------------------------------------------------------------------------------


def _refused(producer: Producer, msg: Message, match: str, error: type[Exception] = MQClientError) -> None:
    with pytest.raises(error, match=match):
        producer.send(msg)


def test_message_limits(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    _store(url, namespace)
    before = snapshot(url, namespace)
    now = int(time.time() * 1000)
    with Producer("p", url, namespace=namespace, max_message_size=1024) as p:
        _refused(p, Message("h", b"x" * 1000, tags="t" * 30), "1030 bytes", MessageTooLargeError)  # whole message
        _refused(p, Message("h", b"x", properties={"a": "v" * 2000}), "limit is 1024", MessageTooLargeError)
    with Producer("p", url, namespace=namespace) as p:
        _refused(p, Message("h", b"x", tags="t" * (40 << 20)), str(MAX_USER_PROPERTY_SIZE), MessageTooLargeError)
        _refused(p, Message("h", b"x", properties={"a": "v" * MAX_USER_PROPERTY_SIZE}), "limit", MessageTooLargeError)
        _refused(p, Message("h", b"x", properties={f"p{i}": "v" for i in range(MAX_PROPERTIES + 1)}), "properties")
        _refused(p, Message("h", b"x", keys=[f"k{i}" for i in range(MAX_KEYS + 1)]), "keys")
        _refused(p, Message("h", b"x", delay_level=True), "delay_level")  # type: ignore[arg-type]
        _refused(p, Message("h", b"x", deliver_time_ms=True), "deliver_time_ms")  # type: ignore[arg-type]
        _refused(p, Message("h", b"x", deliver_time_ms=10**30), "MAX_DELAY_MS")
        _refused(p, Message("h", b"x", deliver_time_ms=now + MAX_DELAY_MS + 60_000), "MAX_DELAY_MS")
        _refused(p, Message("h", b"x", tags="a || b"), "'\\|'")
        _refused(p, Message("h", b"x", tags="a b"), "whitespace")
        _refused(p, Message("h", b"x", keys=5), "key")  # type: ignore[arg-type]
        _refused(p, Message("h", b"x", keys=[b"bytes-key"]), "key")  # type: ignore[list-item]
        _refused(p, Message("h", b"x", properties=[("a", "b")]), "properties")  # type: ignore[arg-type]
        _refused(p, Message("h", b"x", properties={"a": 1}), "value")  # type: ignore[dict-item]
        for name in ("keys", "Keys", "tags", "Delay"):
            _refused(p, Message("h", b"x", properties={name: "v"}), "reserved")
        with pytest.raises(MQClientError, match="batch is"):
            p.send_batch([Message("h", b"x" * 1000, properties={"a": "b" * 4000}) for _ in range(1100)])
        assert snapshot(url, namespace) == before
        assert p.send(Message("h", b"x", deliver_time_ms=now + MAX_DELAY_MS - 60_000)).queue_offset == -1
        assert p.send(Message("h", b"x", keys=[f"k{i}" for i in range(MAX_KEYS)])).queue_offset == 0


def test_admin_input_checks(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    _store(url, namespace)
    with Admin(url, namespace) as admin:
        for bad in (math.nan, math.inf, True, "1"):
            with pytest.raises(MQClientError, match="timestamp_ms"):
                admin.reset_offset_by_time("g", "h", bad)  # type: ignore[arg-type]
        with pytest.raises(MQClientError, match="timestamp_ms"):
            admin.search_offset(MessageQueue("h", "broker-a", 0), math.nan)  # type: ignore[arg-type]
        with pytest.raises(MQClientError, match="msg_ids"):
            admin.resend_dlq("g", msg_ids="one-id")


def test_resend_dlq_resends_each_letter_once_and_skips_letters_whose_topic_is_gone(
    redis_server: RedisServer, namespace: str
) -> None:
    from mq.consumer.retry import SendBack

    url = redis_server.url
    store = _store(url, namespace, "live")
    with Admin(url, namespace) as admin:
        admin.create_topic("gone", read_queues=1, write_queues=1)
    with Producer("p", url, namespace=namespace) as producer:
        ids = {t: producer.send(Message(t, t.encode())).msg_id for t in ("live", "gone")}
    back = SendBack(store, "g", max_reconsume_times=0)
    for topic in ("gone", "live"):
        back.dead_letter(store.read(topic, 0, 0, 1)[0], "test")
    with Admin(url, namespace) as admin:
        admin.delete_topic("gone")
        assert admin.resend_dlq("g", msg_ids=[ids["live"]]) == 1
        assert admin.resend_dlq("g", msg_ids=[ids["live"]]) == 0  # once, even when named again
        assert admin.resend_dlq("g") == 0  # the letter of "gone" is skipped, every time, without failing
        assert len(admin.last_resend_skipped) == 1 and ids["gone"] in admin.last_resend_skipped[0]
        assert [m.body for m in store.read("live", 0, 0, 10)] == [b"live"]  # resent to the group, not the topic
        assert [m.body for m in store.read("%RETRY%g", 0, 0, 10)] == [b"live"]
        admin.create_topic("gone", read_queues=1, write_queues=1)
        assert admin.resend_dlq("g") == 1  # skipped letters stay unmarked: resent once the topic is back


def _put_call_counts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The message count of each put script call made from now on in this test."""
    counts: list[int] = []

    class Spy(scripts.Eval):
        def __init__(self, name: str, keys: Any, argv: Any) -> None:
            if name == "put-messages":
                counts.append(int(argv[0]))
            super().__init__(name, keys, argv)

    monkeypatch.setattr(scripts, "Eval", Spy)
    return counts


def test_a_big_batch_goes_out_in_bounded_script_calls(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = redis_server.url
    store = _store(url, namespace)
    sizes = _put_call_counts(monkeypatch)
    n = 100_000
    with Producer("p", url, namespace=namespace) as producer:
        result = producer.send_batch([Message("h", b"%d" % i) for i in range(n)])
    assert sum(sizes) == n and max(sizes) <= send_request.PUT_CALL_MAX_MESSAGES and len(sizes) >= n // 512
    assert result.queue_offset == 0 and len(result.msg_ids) == n
    stored = store.read("h", 0, n - 3, 5)
    assert [m.body for m in stored] == [b"%d" % i for i in range(n - 3, n)]


@pytest.mark.parametrize(
    ("count", "body_size", "keys", "bound"),
    [
        (12, 100 * 1024, 0, "bytes"),  # 1.2 MiB: over one call's 1 MiB, within the batch's 4 MiB
        (40, 8, 64, "keys"),  # 2 560 keys: over one call's 2 048
    ],
)
def test_a_batch_over_one_calls_bytes_or_keys_goes_out_in_bounded_calls(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch, count: int, body_size: int, keys: int, bound: str
) -> None:
    """docs/security.md: one put script call stores at most 512 messages, 1 MiB and 2 048 keys; a batch
    over the bytes or the keys (not the count) is split too, every message stored once, in order."""
    url = redis_server.url
    store = _store(url, namespace)
    calls = _put_call_counts(monkeypatch)
    batch = [Message("h", b"%08d" % i + b"x" * (body_size - 8), keys=[f"k{i}-{k}" for k in range(keys)]) for i in range(count)]
    with Producer("p", url, namespace=namespace) as producer:
        result = producer.send_batch(batch)
    assert sum(calls) == count and len(calls) >= 2, calls
    if bound == "bytes":
        assert max(calls) * body_size <= send_request.PUT_CALL_MAX_BYTES, calls
    else:
        assert max(calls) * keys <= send_request.PUT_CALL_MAX_KEYS, calls
    assert result.queue_offset == 0 and len(result.msg_ids) == count
    assert [m.body[:8] for m in store.read("h", 0, 0, count)] == [b"%08d" % i for i in range(count)]


@pytest.mark.parametrize(("count", "body_size", "keys", "most"), [(5, 300 * 1024, 0, 3), (40, 8, 64, 32)])
def test_a_timer_move_stops_at_one_calls_bytes_or_keys(
    redis_server: RedisServer, namespace: str, count: int, body_size: int, keys: int, most: int
) -> None:
    """docs/security.md: one ``deliver-due`` call moves at most 1 MiB and 2 048 keys (then the next call
    moves the rest): five 300 KiB messages due at once go 3 then 2, forty of 64 keys go 32 then 8."""
    store = _store(redis_server.url, namespace)
    due = int(time.time() * 1000) + 60_000
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        for i in range(count):
            body = b"%08d" % i + b"x" * (body_size - 8)
            producer.send(Message("h", body, keys=[f"k{i}-{k}" for k in range(keys)], deliver_time_ms=due))
    [first] = store.deliver_due([("h", 0)], due, 1000)
    [second] = store.deliver_due([("h", 0)], due, 1000)
    assert (first.moved, second.moved) == (most, count - most), (first, second)
    assert [m.body[:8] for m in store.read("h", 0, 0, count)] == [b"%08d" % i for i in range(count)]


def test_a_full_store_still_lets_the_retry_topic_step_pass_and_names_oom_to_producers(
    namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Creating a group's retry topic (a write, done when a consumer starts) is tolerated on a full
    store; producers get an MQBrokerError naming OOM, at once (no futile retries)."""
    from mq.consumer.retry import SendBack

    with RedisServer(extra_args=["--maxmemory", "4mb", "--maxmemory-policy", "noeviction"]) as server:
        url = server.url
        store = _store(url, namespace)
        client = server.client()
        with pytest.raises(Exception, match="maxmemory"):
            for i in range(10_000):
                client.set(f"filler:{i}", b"x" * 65536)
        with caplog.at_level(logging.WARNING, logger="mq.consumer"):
            assert SendBack(store, "g", max_reconsume_times=1).ensure_retry_topic() == "%RETRY%g"
        assert "OOM" in caplog.text and store.topic("%RETRY%g") is None
        with Producer("p", url, namespace=namespace) as producer, pytest.raises(MQBrokerError, match="OOM") as info:
            producer.send(Message("h", b"x"))
        assert "maxmemory" in str(info.value) and "after 1 attempt(s)" in str(info.value)
        client.close()


# -- finding 3: one filter expression freezes Redis --------------------------------------------------


def test_filter_expressions_are_bounded_when_the_selector_is_built() -> None:
    from mq.errors import FilterExpressionError
    from mq.filter import MessageSelector, limits

    reproduced = [
        "a IN (" + ",".join(f"'{i}'" for i in range(20_000)) + ")",  # 2.5 s per pull before
        " OR ".join(f"a = {i}" for i in range(20_000)),  # 11 s
        "big CONTAINS '" + "x" * 20_000 + "'",  # 73 s against 200 KB property values
        "a IN (" + ",".join(f"'{i}'" for i in range(limits.MAX_IN_ITEMS + 1)) + ")"[: limits.MAX_EXPRESSION_LENGTH],
        " OR ".join(f"a = {i}" for i in range(100)),  # short, but over MAX_NODES
        "NOT " * 1000 + "a = 1",  # deeper than the parser could follow
        "big = '" + "x" * (limits.MAX_LITERAL_LENGTH + 1) + "'",
        "big CONTAINS '" + "x" * 100 + "' OR big ENDSWITH '" + "y" * (limits.MAX_PATTERN_CHARS - 99) + "'",
        " OR ".join(f"big CONTAINS 'ab{i}'" for i in range(limits.MAX_TEXT_TESTS + 1)),
    ]
    for expression in reproduced:
        with pytest.raises(FilterExpressionError):
            MessageSelector.by_sql(expression)
    with pytest.raises(FilterExpressionError):
        MessageSelector.by_tag(" || ".join(f"t{i}" for i in range(limits.MAX_IN_ITEMS + 1)))
    at_limits = [
        "a IN (" + ",".join(f"'{i}'" for i in range(limits.MAX_IN_ITEMS)) + ")",
        " OR ".join(f"a = {i}" for i in range(40)),
        "big CONTAINS '" + "x" * limits.MAX_PATTERN_CHARS + "'",
        " OR ".join(f"big CONTAINS 'ab{i}'" for i in range(limits.MAX_TEXT_TESTS)),
        "big = '" + "x" * limits.MAX_LITERAL_LENGTH + "'",
    ]
    for expression in at_limits:
        assert len(expression) <= limits.MAX_EXPRESSION_LENGTH
        MessageSelector.by_sql(expression)


def _over_one_filter_bound() -> list[tuple[str, str, str]]:
    """``(kind, expression, message)``: each expression over exactly one bound of mq/filter/limits.py
    (the cases above cross several, so one bound removed would still be refused by another)."""
    from mq.filter import limits

    return [
        ("sql", "a = 1" + " " * limits.MAX_EXPRESSION_LENGTH, "characters; the limit is"),
        ("sql", " OR ".join(f"a = {i}" for i in range(limits.MAX_NODES // 3 + 1)), "terms; the limit is"),
        ("sql", "NOT " * limits.MAX_DEPTH + "a = 1", "nested deeper than"),
        ("sql", "a IN (" + ",".join(f"'{i}'" for i in range(limits.MAX_IN_ITEMS + 1)) + ")", "an IN list of"),
        ("sql", "big = '" + "x" * (limits.MAX_LITERAL_LENGTH + 1) + "'", "a string literal of"),
        ("sql", " OR ".join(f"big CONTAINS 'ab{i}'" for i in range(limits.MAX_TEXT_TESTS + 1)), "STARTSWITH/ENDSWITH tests"),
        ("sql", "big CONTAINS '" + "x" * 100 + "' OR big ENDSWITH '" + "y" * (limits.MAX_PATTERN_CHARS - 99) + "'", "together"),
        ("tag", " || ".join(f"t{i}" for i in range(limits.MAX_IN_ITEMS + 1)), "tags; the limit is"),
        ("tag", "x" * (limits.MAX_LITERAL_LENGTH + 1), "a tag of"),
    ]


@pytest.mark.parametrize(("kind", "expression", "message"), _over_one_filter_bound(), ids=lambda v: str(v)[:24])
def test_each_filter_bound_is_enforced_on_its_own(kind: str, expression: str, message: str) -> None:
    from mq.errors import FilterExpressionError
    from mq.filter import MessageSelector

    with pytest.raises(FilterExpressionError, match=message):
        (MessageSelector.by_sql if kind == "sql" else MessageSelector.by_tag)(expression)


def test_the_scripts_and_the_producer_agree_on_the_bounds() -> None:
    import re

    source = (ROOT / "mq" / "store" / "lua" / "includes" / "message.lua").read_text()
    lua = {name: int(value) for name, value in re.findall(r"local (\w+) = (\d+)", source)}
    assert lua["APPEND_MAX_KEYS"] == MAX_KEYS
    assert lua["CALL_MAX_MESSAGES"] == send_request.PUT_CALL_MAX_MESSAGES
    assert lua["CALL_MAX_BYTES"] == send_request.PUT_CALL_MAX_BYTES
    assert lua["CALL_MAX_KEYS"] == send_request.PUT_CALL_MAX_KEYS


def test_a_put_call_over_the_per_call_bounds_is_refused_unchanged(redis_server: RedisServer, namespace: str) -> None:
    """A client calling the script directly cannot make one call do unbounded work."""
    url = redis_server.url
    store = _store(url, namespace)
    before = snapshot(url, namespace)
    too_many = [_encoded(b"%d" % i) for i in range(send_request.PUT_CALL_MAX_MESSAGES + 1)]
    too_keyed = [_with_keys(MAX_KEYS) for _ in range(send_request.PUT_CALL_MAX_KEYS // MAX_KEYS + 1)]
    for calls in (too_many, too_keyed):
        with pytest.raises(MQBrokerError, match="split the batch"):
            store.put("h", 0, calls)
        assert snapshot(url, namespace) == before
    assert store.put("h", 0, too_many[:-1])[0] == 0  # at the bound: one call


# -- background threads survive what one round throws at them ------------------------------------------


def test_the_check_back_thread_survives_a_malformed_request(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A request written around the library (the client role has XADD) used to end the thread with a
    KeyError: every later check-back of the group went unanswered."""
    from mq import LocalTransactionState, TransactionProducer

    url = redis_server.url
    store = _store(url, namespace)
    txcheck = store.keys.group("tx").txcheck
    producer = TransactionProducer("tx", url, namespace=namespace, checker=lambda msg: LocalTransactionState.COMMIT_MESSAGE)
    with producer, caplog.at_level(logging.ERROR, logger="mq.producer"):
        sent = producer.send_message_in_transaction(Message("h", b"tx"), lambda msg, arg: LocalTransactionState.UNKNOW)
        topic, qid, half_id = sent.transaction_id.split(":")
        client = _raw(url)
        client.xadd(txcheck, {"nonsense": "x"})
        client.xadd(txcheck, {"topic": topic, "queue_id": qid, "half_id": half_id, "checks": 1})
        wait_for(lambda: [m.body for m in store.read("h", 0, 0, 5)] == [b"tx"], 10, "the check-back after a bad request")
    assert "could not be answered" in caplog.text


def test_the_timer_thread_survives_an_unexpected_error(
    redis_server: RedisServer, namespace: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    from scheduler.timers import TimerDelivery

    store = _store(redis_server.url, namespace)
    stop = threading.Event()
    delivery = TimerDelivery(store, poll_ms=20, batch=100, stop=stop)
    real = delivery.deliver_once
    calls: list[int] = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("a bug in one round")
        return real()

    monkeypatch.setattr(delivery, "deliver_once", flaky)
    with caplog.at_level(logging.ERROR, logger="scheduler.timers"):
        delivery.ensure_running()
        wait_for(lambda: len(calls) >= 3, 10, "rounds after the failing one")
        stop.set()
        delivery.join()
    assert "timer delivery round failed unexpectedly" in caplog.text


def test_a_big_batch_that_fails_half_way_says_how_much_was_stored(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = redis_server.url
    store = _store(url, namespace)
    calls: list[int] = []
    real_put = StoreOps.put.op

    def failing_second_call(self: Store, topic: str, queue_id: int, encoded: Any) -> Any:  # the operation, for both APIs
        calls.append(len(encoded))
        if len(calls) >= 2:
            raise MQBrokerError("the store went away")
        return (yield from real_put(self, topic, queue_id, encoded))

    monkeypatch.setattr(StoreOps, "put", operation(failing_second_call))
    n = send_request.PUT_CALL_MAX_MESSAGES + 10
    with Producer("p", url, namespace=namespace) as producer, pytest.raises(MQBrokerError, match="partly stored") as info:
        producer.send_batch([Message("h", b"%d" % i) for i in range(n)])
    assert f"the first {send_request.PUT_CALL_MAX_MESSAGES} of {n} messages" in str(info.value)
    assert len(store.read("h", 0, 0, n)) == send_request.PUT_CALL_MAX_MESSAGES  # the second call retried on the same queue only
    assert calls[0] == send_request.PUT_CALL_MAX_MESSAGES and set(calls[1:]) == {10}
