"""Pulls whose entries are read by a plain ``XRANGE`` after the script (``PullRequest.read_after``)
give what ``pull-messages`` gives: the same messages, the same next and max offsets, nothing for a
member that lost the queue, the byte bound on what is cached; and the consumer uses them for small
messages only, consuming everything once."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import redis

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, Producer, PushConsumer
from mq.consumer.process_queue import ProcessQueue
from mq.consumer.puller import Puller
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.store import Store
from mq.store.connection import Connection
from mq.store.groups import OWNER_GUARD, PullRequest, PullResult
from tests.helpers import admin_once, stays_quiet
from tests.leaks import owned

SCENARIOS = [  # (offset, max_messages): from the start, a middle batch, past the log's end, caught up, beyond
    (0, 2),
    (0, 5),
    (2, 2),
    (3, 10),
    (5, 4),
    (9, 4),
]


def _compared(result: PullResult | Exception) -> Any:
    assert not isinstance(result, Exception), result
    return (
        [(m.msg_id, m.body, m.tags, m.keys, m.properties, m.queue_offset, m.reconsume_times) for m in result.messages],
        result.next_offset,
        result.max_offset,
        result.held,
    )


def _five(url: str, namespace: str) -> Store:
    """A store whose queue ``R``/0 holds five messages (every other one tagged)."""
    with Admin(url, namespace) as admin:
        admin.create_topic("R", read_queues=1, write_queues=1)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(5):
            producer.send(Message("R", b"m%d" % i, tags="a" if i % 2 else None, keys=["k%d" % i], properties={"n": str(i)}))
    return owned(Store(Connection(url, namespace)))


def _consume_until(
    url: str,
    namespace: str,
    topic: str,
    expression: str,
    listener: Any,
    done: threading.Event,
    *,
    spied: tuple[str, Any],
    pull_batch_size: int,
    quiet: Callable[[], object] | None = None,
) -> None:
    """Run a push consumer of group ``g`` from the first offset, with ``Puller.<spied[0]>`` replaced by
    ``spied[1]``, until ``done`` is set (at most 30 s); then, given ``quiet`` (a count of deliveries),
    for the quiet period in which it must not change (no duplicate)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Puller, *spied)
        consumer = PushConsumer(
            "g", url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=pull_batch_size
        )
        consumer.subscribe(topic, expression)
        consumer.register_message_listener(listener)
        with consumer:
            assert done.wait(30)
            if quiet is not None:
                stays_quiet(quiet, "the deliveries")


@pytest.fixture
def store_of_five(backend_url: str, namespace: str) -> Iterator[Store]:
    store = _five(backend_url, namespace)
    yield store
    store.conn.close()


@pytest.mark.parametrize(("offset", "count"), SCENARIOS)
def test_read_after_equals_the_script(store_of_five: Store, offset: int, count: int) -> None:
    script = PullRequest("R", 0, offset, count, 1024)
    native = dataclasses.replace(script, read_after=True)
    both = store_of_five.pull_many([script, native])
    assert _compared(both[1]) == _compared(both[0])


def test_read_after_of_a_lost_queue_reads_and_commits_nothing(backend_url: str, namespace: str, store_of_five: Store) -> None:
    q = MessageQueue("R", DEFAULT_BROKER_NAME, 0)
    assert store_of_five.claim_queues("g", "c1", ["c1"], [q]) == [True]
    mine = PullRequest("R", 0, 0, 4, 1024, group="g", commit=2, guard=OWNER_GUARD, client_id="c1", read_after=True)
    theirs = dataclasses.replace(mine, client_id="c2", commit=4)
    got, lost = store_of_five.pull_many([mine, theirs])
    assert isinstance(got, PullResult) and isinstance(lost, PullResult)
    assert [m.queue_offset for m in got.messages] == [0, 1, 2, 3] and got.held
    assert lost.messages == [] and not lost.held and lost.next_offset == 0
    assert store_of_five.read_offsets("g", [q]) == {q: 2}  # c1's commit, not c2's


def test_read_after_cuts_at_the_byte_bound(backend_url: str, namespace: str) -> None:
    admin_once(backend_url, namespace).create_topic("B", read_queues=1, write_queues=1)
    with Producer("p", backend_url, namespace=namespace) as producer:
        for size in (100, 100, 300, 100):
            producer.send(Message("B", b"x" * size))
    store = owned(Store(Connection(backend_url, namespace)))
    result = store.pull_many([PullRequest("B", 0, 0, 32, 1024, max_bytes=250, read_after=True)])[0]
    assert isinstance(result, PullResult)
    # the entry whose body reaches the bound is the last one cached; the next pull starts after it
    assert [len(m.body) for m in result.messages] == [100, 100, 300] and result.next_offset == 3
    rest = store.pull_many([PullRequest("B", 0, 3, 32, 1024, max_bytes=250, read_after=True)])[0]
    assert isinstance(rest, PullResult) and [len(m.body) for m in rest.messages] == [100] and rest.next_offset == 4


def test_read_after_skips_foreign_entries_like_the_script(redis_server: Any, namespace: str) -> None:
    admin_once(redis_server.url, namespace).create_topic("F", read_queues=1, write_queues=1)
    with Producer("p", redis_server.url, namespace=namespace) as producer:
        producer.send(Message("F", b"a"))
        log = owned(Connection(redis_server.url, namespace)).keys.queue("F", 0).log
        raw = redis.Redis.from_url(redis_server.url)
        raw.xadd(log, {"junk": "1"}, id="0-2")
        raw.hincrby(owned(Connection(redis_server.url, namespace)).keys.queue("F", 0).meta, "seq", 1)
        raw.close()
        producer.send(Message("F", b"c"))
    store = owned(Store(Connection(redis_server.url, namespace)))
    script = PullRequest("F", 0, 0, 32, 1024)
    both = store.pull_many([script, dataclasses.replace(script, read_after=True)])
    assert _compared(both[1]) == _compared(both[0])
    assert [m.body for m in both[1].messages] == [b"a", b"c"]  # type: ignore[union-attr]


def test_consumer_reads_small_messages_natively_and_large_through_the_script(redis_server: Any, namespace: str) -> None:
    """A drain of small then large (200 KiB) messages in batches of 8: every message consumed once;
    pulls of the small ones ask for ``read_after``, a queue's first pull does not."""
    url = redis_server.url
    admin_once(url, namespace).create_topic("S", read_queues=2, write_queues=2)
    small, large = 300, 6
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(small):
            producer.send(Message("S", b"s%d" % i))
        for i in range(large):
            producer.send(Message("S", b"L%d-" % i + b"x" * (200 * 1024)))
    seen: list[bytes] = []
    lock, done = threading.Lock(), threading.Event()
    asked: list[tuple[bool, int]] = []
    original = Puller._request

    def spying(self: Puller, pq: ProcessQueue) -> PullRequest:
        request = original(self, pq)
        if request.topic.endswith("S"):
            asked.append((request.read_after, request.offset))
        return request

    def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        with lock:
            seen.extend(m.body[:8] for m in msgs)
            if len(seen) >= small + large:
                done.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    _consume_until(
        url, namespace, "S", "*", listener, done, spied=("_request", spying), pull_batch_size=8, quiet=lambda: len(seen)
    )
    assert len(seen) == small + large and len(set(seen)) == small + large
    assert any(read_after for read_after, _ in asked)  # small messages: read natively
    assert not asked[0][0]  # a queue's first pull goes through the script (sizes unknown)


def test_read_after_on_the_embedded_store(namespace: str) -> None:
    url = f"memory://{namespace}"
    admin_once(url, namespace).create_topic("R", read_queues=2, write_queues=2)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(6):
            producer.send(Message("R", b"m%d" % i, tags="a" if i % 2 else None))
    store = owned(Store(Connection(url, namespace)))
    scripted = [PullRequest("R", q, 0, 2, 1024) for q in (0, 1)]
    both = store.pull_many([*scripted, *(dataclasses.replace(p, read_after=True) for p in scripted)])
    assert [_compared(r) for r in both[2:]] == [_compared(r) for r in both[:2]]


def test_read_after_of_several_queues_some_without_news(backend_url: str, namespace: str) -> None:
    """Several queues read together (one ``XREAD`` on one server): an empty queue and a caught-up
    one get what the script gives them."""
    admin_once(backend_url, namespace).create_topic("M", read_queues=3, write_queues=3)
    with Producer("p", backend_url, namespace=namespace) as producer:
        for i in range(4):
            producer.send(Message("M", b"m%d" % i), queue=MessageQueue("M", DEFAULT_BROKER_NAME, i % 2))
    store = owned(Store(Connection(backend_url, namespace)))
    scripted = [PullRequest("M", 0, 0, 32, 1024), PullRequest("M", 1, 2, 32, 1024), PullRequest("M", 2, 0, 32, 1024)]
    native = store.pull_many([dataclasses.replace(p, read_after=True) for p in scripted])
    assert [_compared(r) for r in native] == [_compared(r) for r in store.pull_many(scripted)]
    assert [len(r.messages) for r in native] == [2, 0, 0]  # type: ignore[union-attr]


def test_read_after_after_the_server_lost_its_scripts(redis_server: Any, namespace: str) -> None:
    """``NOSCRIPT`` (a restarted or flushed server): the script is loaded and the whole pipeline,
    reads included, is sent again (on the standalone server, whose scripts the test flushes)."""
    store_of_five = _five(redis_server.url, namespace)
    request = PullRequest("R", 0, 1, 3, 1024, read_after=True)
    raw = redis.Redis.from_url(redis_server.url)
    raw.script_flush()
    raw.close()
    result = store_of_five.pull_many([request])[0]
    assert isinstance(result, PullResult) and [m.queue_offset for m in result.messages] == [1, 2, 3]
    assert result.next_offset == 4


def test_a_filtered_pull_scans_at_most_its_byte_budget(redis_server: Any, namespace: str) -> None:
    """CHANGELOG 0.2 and docs/security.md: "filtered pulls scan at most 1 MiB of entries" (a filter
    may read every byte of what it scans); unfiltered pulls have 4 MiB. Sixteen 256 KiB entries the
    filter skips: each pull of the consumer scans at most 1 MiB of them (4, and the one that crosses
    the bound), not 16."""
    from mq.consumer.puller import PULL_MAX_BYTES, PULL_MAX_BYTES_FILTERED

    url, size = redis_server.url, 256 * 1024
    admin_once(url, namespace).create_topic("FB", read_queues=1, write_queues=1)
    with Producer("p", url, namespace=namespace) as producer:
        for _ in range(16):
            producer.send(Message("FB", b"x" * size, tags="skip"))
        producer.send(Message("FB", b"wanted", tags="want"))
    scanned: list[int] = []  # entries each pull of FB went past
    original = Puller._apply

    def spying(self: Puller, pq: ProcessQueue, request: PullRequest, result: Any) -> None:
        if request.topic == "FB" and isinstance(result, PullResult):
            scanned.append(result.next_offset - request.offset)
        original(self, pq, request, result)

    got = threading.Event()

    def listener(msgs: list[Any], ctx: Any) -> ConsumeConcurrentlyStatus:
        if any(m.body == b"wanted" for m in msgs):
            got.set()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    _consume_until(url, namespace, "FB", "want", listener, got, spied=("_apply", spying), pull_batch_size=32)
    assert PULL_MAX_BYTES_FILTERED < PULL_MAX_BYTES
    most = PULL_MAX_BYTES_FILTERED // size + 1  # the entry that crosses the bound is read, then the pull stops
    assert scanned and sum(scanned) == 17, scanned
    assert max(scanned) <= most, f"a filtered pull scanned {max(scanned)} entries of {size} bytes: {scanned}"
