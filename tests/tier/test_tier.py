"""Tiered storage on a local folder, against a real redis-server: segments and their commit, hot
retention that never trims what the tier does not hold, and pulls that read below Redis's first
offset from the tier (PullConsumer, push consumer, filters, FIRST_OFFSET and seek)."""

from __future__ import annotations

import logging
import pathlib
import threading
import time
from typing import Any

import pytest

from mq import (
    Admin,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyStatus,
    MessageSelector,
    PullConsumer,
    PushConsumer,
)
from mq.model.message import MessageExt
from mq.model.queue import MessageQueue
from mq.store import Store
from mq.store.connection import Connection
from mq.store.tier import SegmentRefused
from mq.tier.location import open_tier
from mq.tier.reader import TierReader, matcher
from mq.tier.segment import Segment
from mq.tier.writer import write_segment
from scheduler import BrokerService
from tests.helpers import QUIET_PERIOD_S, stays_quiet
from tests.leaks import owned
from tests.procs import wait_for
from tests.tier_helpers import body_number, send_numbered, tier_config

TOPIC = "tiered"


@pytest.fixture
def tier_url(tmp_path: pathlib.Path) -> str:
    return f"file://{tmp_path}/tier"


@pytest.fixture
def topic(redis_server, namespace):  # type: ignore[no-untyped-def]
    with Admin(redis_server.url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    return MessageQueue(TOPIC, "broker-a", 0)


def _store(url: str, namespace: str) -> Store:
    return owned(Store(Connection(url, namespace)))


def _tiered(url: str, namespace: str, tier_url: str, numbers: range, **config: object) -> BrokerService:
    """Send ``numbers`` to the queue and run one upload pass of a (not started) broker service."""
    send_numbered(url, namespace, TOPIC, 0, numbers)
    service = BrokerService(url, namespace, tier_config(tier_url, **config))
    assert service.tier is not None
    service._store.publish_settings({"tier_url": tier_url})
    service.tier.run()
    return service


def _poll_all(consumer: PullConsumer, want: int, timeout_s: float = 30) -> list[MessageExt]:
    got: list[MessageExt] = []
    deadline = time.monotonic() + timeout_s
    while len(got) < want and time.monotonic() < deadline:
        got += consumer.poll(timeout_s=0.5)
    got += consumer.poll(timeout_s=0.3)  # anything beyond what was expected shows up here
    return got


def _pushing(url: str, namespace: str, group: str, *, orderly: bool = False) -> tuple[PushConsumer, list[int]]:
    """A push consumer (not started) of a new group from FIRST_OFFSET, and the offsets its listener saw."""
    seen: list[int] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt], ctx: object) -> Any:
        with lock:  # an orderly consumer calls it from one thread per queue: in order
            seen.extend(m.queue_offset for m in msgs)
        return ConsumeOrderlyStatus.SUCCESS if orderly else ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    consumer = PushConsumer(group, url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    consumer.subscribe(TOPIC)
    if orderly:
        consumer.register_orderly_listener(listener)
    else:
        consumer.register_message_listener(listener)
    return consumer, seen


def _wait_for(seen: list[int], count: int, timeout_s: float = 30) -> None:
    """Until ``seen`` holds ``count`` offsets, then the quiet period (a duplicate would arrive in it)."""
    wait_for(lambda: len(seen) >= count, timeout_s, f"{count} deliveries")
    stays_quiet(lambda: len(seen), "the deliveries")


def test_a_segment_file_gives_back_every_field(tmp_path: pathlib.Path) -> None:
    location = open_tier(f"file://{tmp_path}")
    msgs = []
    for n in range(10):
        m = MessageExt(
            "t",
            f"body{n}".encode(),
            tags="A" if n % 2 else None,
            keys=[f"k{n}", "x"] if n % 3 else None,
            properties={"n": str(n), "é": "ü"} if n % 4 else None,
            msg_id=f"id{n}",
            queue_id=3,
            queue_offset=100 + n,
            born_timestamp_ms=1000 + n,
            store_timestamp_ms=2000 + n,
            reconsume_times=n % 2,
            system_properties={"RETRY_TOPIC": "x"} if n == 5 else None,
        )
        msgs.append(m)
    seg = write_segment(location, "ns", "t", 3, [msgs[:4], msgs[4:]], "tok")
    assert seg is not None and (seg.start, seg.end, seg.min_store_ms, seg.max_store_ms) == (100, 110, 2000, 2009)
    read = TierReader(location, "ns").read("t", 3, [seg], 103, 100, 100, matcher("", ""))
    assert read.next_offset == 110
    for a, b in zip(read.messages, msgs[3:], strict=True):
        assert vars(a) == vars(b)
    assert not list((tmp_path / "ns" / "t" / "3" / "_tmp").iterdir())  # the temporary name is gone


def test_upload_records_contiguous_segments_then_trims_below_their_end(redis_server, namespace, topic, tier_url) -> None:  # type: ignore[no-untyped-def]
    service = _tiered(redis_server.url, namespace, tier_url, range(100), hot_retention_s=0.001)
    store = _store(redis_server.url, namespace)
    segments = store.segments(TOPIC, 0)
    assert [(s.start, s.end) for s in segments] == [(0, 40), (40, 80), (80, 100)]
    assert store.hot_queue(TOPIC, 0).first == 100  # all tiered, all past hot retention: gone from Redis
    stats = store.queue_stats(TOPIC, [0])[0]
    assert (stats.min_offset, stats.max_offset) == (0, 100)  # min_offset: the first of either tier
    assert service.tier is not None and service.tier.counters.segments == 3
    store.conn.close()
    service.shutdown()


def test_record_segment_refuses_gaps_overlaps_and_a_lost_lease(redis_server, namespace, topic) -> None:  # type: ignore[no-untyped-def]
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(10))
    store = _store(redis_server.url, namespace)
    assert store.take_tier_lease(TOPIC, 0, "me", 10_000)
    assert store.record_segment(TOPIC, 0, Segment(0, 4, "a", 1, 0, 0), "me") == 4
    for bad in (Segment(5, 8, "gap", 1, 0, 0), Segment(2, 8, "overlap", 1, 0, 0), Segment(4, 11, "past-seq", 1, 0, 0)):
        with pytest.raises(SegmentRefused):
            store.record_segment(TOPIC, 0, bad, "me")
    with pytest.raises(SegmentRefused, match="lease"):
        store.record_segment(TOPIC, 0, Segment(4, 8, "b", 1, 0, 0), "someone else")
    assert not store.take_tier_lease(TOPIC, 0, "other", 10_000)  # one uploader per queue
    assert store.release_tier_lease(TOPIC, 0, "me") and store.take_tier_lease(TOPIC, 0, "other", 10_000)
    assert [s.name for s in store.segments(TOPIC, 0)] == ["a"]
    store.conn.close()


def test_hot_retention_never_trims_what_the_tier_does_not_hold(redis_server, namespace, topic, tmp_path, caplog) -> None:  # type: ignore[no-untyped-def]
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the tier's folder should be: every upload fails")
    with caplog.at_level(logging.WARNING, logger="scheduler.tier"):
        service = _tiered(redis_server.url, namespace, f"file://{blocked}/tier", range(50), hot_retention_s=0.001)
    store = _store(redis_server.url, namespace)
    assert store.hot_queue(TOPIC, 0).first == 0 and store.segments(TOPIC, 0) == []  # nothing lost
    assert service.tier is not None and service.tier.counters.errors >= 1
    assert service.tier.counters.stalled == {(TOPIC, 0): 50}
    assert any("waits: 50 messages" in r.getMessage() for r in caplog.records)
    blocked.unlink()
    blocked.mkdir()  # the tier is back
    service.tier.run()
    assert [(s.start, s.end) for s in store.segments(TOPIC, 0)] == [(0, 40), (40, 50)]
    assert store.hot_queue(TOPIC, 0).first == 50 and service.tier.counters.stalled == {}
    store.conn.close()
    service.shutdown()


def test_a_pull_consumer_reads_from_offset_0_across_both_tiers(redis_server, namespace, topic, tier_url) -> None:  # type: ignore[no-untyped-def]
    service = _tiered(redis_server.url, namespace, tier_url, range(100), hot_retention_s=0.001)
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(100, 130))  # these stay in Redis
    pc = PullConsumer("reader", redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pc.subscribe(TOPIC)
    with pc:
        got = _poll_all(pc, 130)
        assert [m.queue_offset for m in got] == list(range(130))
        assert [body_number(m.body) for m in got] == list(range(130))
        assert [m.keys for m in got[:3]] == [("k0",), ("k1",), ("k2",)] and got[7].properties == {"n": "7"}
        pc.seek(topic, 35)  # seek into the tier, then on into Redis
        again = _poll_all(pc, 95)
        assert [m.queue_offset for m in again] == list(range(35, 130))
    service.shutdown()


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        (MessageSelector.by_tag("even"), [n for n in range(130) if n % 2 == 0]),
        (MessageSelector.by_sql("n > 37 AND n < 112 AND TAGS = 'odd'"), [n for n in range(38, 112) if n % 2]),
    ],
)
def test_the_groups_filter_applies_to_tiered_messages(redis_server, namespace, topic, tier_url, selector, expected) -> None:  # type: ignore[no-untyped-def]
    service = _tiered(redis_server.url, namespace, tier_url, range(100), hot_retention_s=0.001)
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(100, 130))
    pc = PullConsumer("filtered", redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pc.subscribe(TOPIC, selector)
    with pc:
        got = _poll_all(pc, len(expected))
    assert [body_number(m.body) for m in got] == expected
    service.shutdown()


def test_a_new_push_group_from_first_offset_reads_every_message_once(redis_server, namespace, topic, tier_url) -> None:  # type: ignore[no-untyped-def]
    service = _tiered(redis_server.url, namespace, tier_url, range(100), hot_retention_s=0.001)
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(100, 130))
    consumer, seen = _pushing(redis_server.url, namespace, "pushed")
    with consumer:
        _wait_for(seen, 130)
    assert sorted(seen) == list(range(130))
    service.shutdown()


def test_reset_offset_by_time_to_a_time_only_the_tier_holds(redis_server, namespace, topic, tier_url) -> None:  # type: ignore[no-untyped-def]
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(50))
    time.sleep(0.05)  # the clock moves on: no message is stored in the reset time's millisecond
    at_ms = int(time.time() * 1000)
    time.sleep(0.05)
    service = _tiered(redis_server.url, namespace, tier_url, range(50, 100), hot_retention_s=0.001)
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(100, 120))
    store = _store(redis_server.url, namespace)
    assert store.hot_queue(TOPIC, 0).first == 100  # the time lies in the tier only
    consumer, seen = _pushing(redis_server.url, namespace, "rewinding")
    with Admin(redis_server.url, namespace=namespace) as admin, consumer:
        assert admin.search_offset(topic, at_ms) == 50
        _wait_for(seen, 120)
        assert sorted(seen) == list(range(120))
        assert admin.reset_offset_by_time("rewinding", TOPIC, at_ms) == {topic: 50}
        _wait_for(seen, 190)
    assert sorted(seen[120:]) == list(range(50, 120))  # the running group read again from there, once
    store.conn.close()
    service.shutdown()


@pytest.mark.anyio
async def test_an_asyncio_pull_consumer_reads_across_both_tiers(redis_server, namespace, topic, tier_url) -> None:  # type: ignore[no-untyped-def]
    from mq import aio

    service = _tiered(redis_server.url, namespace, tier_url, range(100), hot_retention_s=0.001)
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(100, 110))
    pc = aio.PullConsumer("aio-reader", redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pc.subscribe(TOPIC)
    got: list[MessageExt] = []
    async with pc:
        deadline = time.monotonic() + 30
        while len(got) < 110 and time.monotonic() < deadline:
            got += await pc.poll(timeout_s=0.5)
        got += await pc.poll(timeout_s=QUIET_PERIOD_S)  # returns at once with a duplicate, else stays quiet
    assert [m.queue_offset for m in got] == list(range(110))
    service.shutdown()


def test_an_orderly_push_consumer_reads_across_both_tiers_in_order(redis_server, namespace, topic, tier_url) -> None:  # type: ignore[no-untyped-def]
    service = _tiered(redis_server.url, namespace, tier_url, range(100), hot_retention_s=0.001)
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(100, 130))
    consumer, seen = _pushing(redis_server.url, namespace, "in-order", orderly=True)
    with consumer:
        _wait_for(seen, 130)
    assert seen == list(range(130))
    service.shutdown()


def test_queries_by_id_and_key_find_tiered_messages(redis_server, namespace, topic, tier_url) -> None:  # type: ignore[no-untyped-def]
    ids = send_numbered(redis_server.url, namespace, TOPIC, 0, range(100))
    service = _tiered(redis_server.url, namespace, tier_url, range(0), hot_retention_s=0.001)
    more = send_numbered(redis_server.url, namespace, TOPIC, 0, range(100, 110))
    with Admin(redis_server.url, namespace=namespace) as admin:
        assert _store(redis_server.url, namespace).hot_queue(TOPIC, 0).first == 100
        found = admin.query_message(TOPIC, ids[57])
        assert found is not None and (found.queue_offset, body_number(found.body)) == (57, 57)
        assert admin.query_message(TOPIC, more[3]).queue_offset == 103  # type: ignore[union-attr]  # Redis
        assert admin.query_message(TOPIC, "0" * 32) is None
        assert [m.queue_offset for m in admin.query_messages_by_key(TOPIC, "k42")] == [42]
        assert [m.queue_offset for m in admin.query_messages_by_key(TOPIC, "k105")] == [105]
        stored = found.store_timestamp_ms
        assert admin.query_messages_by_key(TOPIC, "k57", begin_ms=stored + 1) == []  # outside the bounds
    service.shutdown()


def test_mq_msg_finds_a_tiered_message_by_id_in_every_topic(redis_server, namespace, topic, tier_url, capsys) -> None:  # type: ignore[no-untyped-def]
    from mq.cli import main

    ids = send_numbered(redis_server.url, namespace, TOPIC, 0, range(60))
    service = _tiered(redis_server.url, namespace, tier_url, range(0), hot_retention_s=0.001)
    with Admin(redis_server.url, namespace=namespace) as admin:
        assert [(m.topic, m.queue_offset) for m in admin.find_message(ids[44])] == [(TOPIC, 44)]
        assert [(m.topic, m.queue_offset) for m in admin.find_message(ids[44], TOPIC)] == [(TOPIC, 44)]
    assert main(["msg", "--id", ids[44], "--url", redis_server.url, "--namespace", namespace]) == 0
    assert ids[44] in capsys.readouterr().out
    service.shutdown()
