"""What a producer refuses before it writes (sizes, counts, surrogates, reserved names), how it splits a
big batch into bounded script calls, and a sender thread that survives any error."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from mq import Message, Producer
from mq.errors import MessageTooLargeError, MQBrokerError, MQClientError
from mq.model.validation import MAX_DELAY_MS, MAX_KEYS, MAX_PROPERTIES, MAX_USER_PROPERTY_SIZE
from mq.producer import request as send_request
from mq.producer.request import SendRequest
from mq.store import Store, scripts
from mq.store.ops import operation
from mq.store.store import StoreOps
from tests.helpers import snapshot
from tests.servers import RedisServer
from tests.written_around import close_opened, open_store  # noqa: F401 - close_opened: autouse


def test_a_lone_surrogate_is_refused_by_every_send_path(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    open_store(url, namespace)
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
    open_store(url, namespace)
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


def _refused(producer: Producer, msg: Message, match: str, error: type[Exception] = MQClientError) -> None:
    with pytest.raises(error, match=match):
        producer.send(msg)


def test_message_limits(redis_server: RedisServer, namespace: str) -> None:
    url = redis_server.url
    open_store(url, namespace)
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
    store = open_store(url, namespace)
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
    store = open_store(url, namespace)
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


def test_a_big_batch_that_fails_half_way_says_how_much_was_stored(
    redis_server: RedisServer, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = redis_server.url
    store = open_store(url, namespace)
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
