"""The store's scripts check before they write: a message, a call or a queue they refuse leaves every key
as it was, and a script that fails half-way never half-applies. Messages written around the producer."""

from __future__ import annotations

import re
import time

import pytest
import redis

from mq import Message, Producer
from mq.errors import MQBrokerError, MQClientError
from mq.model.validation import MAX_KEYS
from mq.producer import request as send_request
from mq.store import scripts
from tests.helpers import snapshot
from tests.procs import ROOT
from tests.servers import RedisServer
from tests.written_around import close_opened, encoded, open_store, raw, with_keys  # noqa: F401 - close_opened: autouse


def test_a_message_with_too_many_keys_is_refused_before_any_write(backend_url: str, namespace: str) -> None:
    open_store(backend_url, namespace)
    before = snapshot(backend_url, namespace)
    with Producer("p", backend_url, namespace=namespace) as producer, pytest.raises(MQClientError, match="keys"):
        producer.send(Message("h", b"x", keys=[f"k{i}" for i in range(5000)]))
    assert snapshot(backend_url, namespace) == before


def test_put_script_refusing_a_message_leaves_the_queue_unchanged(backend_url: str, namespace: str) -> None:
    store = open_store(backend_url, namespace)
    store.put("h", 0, [encoded(b"ok")])
    before = snapshot(backend_url, namespace)
    for bad in ([with_keys(5000)], [encoded(b"a"), with_keys(MAX_KEYS + 1)], [[3, "i", "x", "b"]], [["st", 1]]):
        with pytest.raises(MQBrokerError, match="malformed"):
            store.put("h", 0, bad)
        assert snapshot(backend_url, namespace) == before, bad
    assert store.put("h", 0, [with_keys(MAX_KEYS)])[0] == 1  # at the limit: stored, next offset


def test_a_corrupt_queue_is_refused_before_any_write(redis_server: RedisServer, namespace: str) -> None:
    """The log holds entries beyond the queue's seq (e.g. seq rewritten by hand): the old script bumped
    seq, then failed in XADD; now it refuses with every key as it was."""
    url = redis_server.url
    store = open_store(url, namespace)
    store.put("h", 0, [encoded(b"a"), encoded(b"b")])
    raw(url).hset(store.queue_keys("h", 0).meta, "seq", 0)
    before = snapshot(url, namespace)
    with pytest.raises(MQBrokerError, match="corrupt queue"):
        store.put("h", 0, [encoded(b"c")])
    assert snapshot(url, namespace) == before


def test_an_index_key_of_the_wrong_type_is_refused_before_any_write(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    store = open_store(url, namespace)
    store.put("h", 0, [encoded(b"a")])
    raw(url).set(store.queue_keys("h", 0).keys, "not a zset")  # the old script stored the entry, then failed
    before = snapshot(url, namespace)
    with pytest.raises(MQBrokerError, match="not a zset"):
        store.put("h", 0, [with_keys(2)])
    assert snapshot(url, namespace) == before


def test_a_delayed_message_the_log_would_refuse_is_refused_when_sent(backend_url: str, namespace: str) -> None:
    store = open_store(backend_url, namespace)
    before = snapshot(backend_url, namespace)
    with pytest.raises(MQBrokerError, match="malformed"):
        store.put_delayed("h", 0, with_keys(5000), int(time.time() * 1000))
    assert snapshot(backend_url, namespace) == before


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
    store = open_store(url, namespace)
    store.put("h", 0, [encoded(b"a"), encoded(b"b")])
    keys = store.queue_keys("h", 0)
    client = raw(url)
    half = client.xadd(keys.half, {"i": "tx", "b": b"x"})
    client.zadd(keys.halfidx, {half: 1})
    store.put_delayed("h", 0, encoded(b"d"), 1)
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


def test_the_scripts_and_the_producer_agree_on_the_bounds() -> None:

    source = (ROOT / "mq" / "store" / "lua" / "includes" / "message.lua").read_text()
    lua = {name: int(value) for name, value in re.findall(r"local (\w+) = (\d+)", source)}
    assert lua["APPEND_MAX_KEYS"] == MAX_KEYS
    assert lua["CALL_MAX_MESSAGES"] == send_request.PUT_CALL_MAX_MESSAGES
    assert lua["CALL_MAX_BYTES"] == send_request.PUT_CALL_MAX_BYTES
    assert lua["CALL_MAX_KEYS"] == send_request.PUT_CALL_MAX_KEYS


def test_a_put_call_over_the_per_call_bounds_is_refused_unchanged(redis_server: RedisServer, namespace: str) -> None:
    """A client calling the script directly cannot make one call do unbounded work."""
    url = redis_server.url
    store = open_store(url, namespace)
    before = snapshot(url, namespace)
    too_many = [encoded(b"%d" % i) for i in range(send_request.PUT_CALL_MAX_MESSAGES + 1)]
    too_keyed = [with_keys(MAX_KEYS) for _ in range(send_request.PUT_CALL_MAX_KEYS // MAX_KEYS + 1)]
    for calls in (too_many, too_keyed):
        with pytest.raises(MQBrokerError, match="split the batch"):
            store.put("h", 0, calls)
        assert snapshot(url, namespace) == before
    assert store.put("h", 0, too_many[:-1])[0] == 0  # at the bound: one call
