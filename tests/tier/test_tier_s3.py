"""Tiered storage on a real S3 HTTP endpoint (moto's server, through the same ``pyarrow.fs`` code users
run against AWS S3 or MinIO): segments, reads across both tiers, and an outage of the S3 server that
loses nothing, shows the stall and resumes."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from mq import Admin
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerService
from tests.leaks import owned
from tests.s3_server import MotoServer
from tests.tier_helpers import body_number, read_from_first, send_numbered, tier_config

pytestmark = [pytest.mark.slow]

TOPIC = "s3tiered"
BUCKET = "tier-bucket"


@pytest.fixture
def s3(monkeypatch: pytest.MonkeyPatch) -> Iterator[MotoServer]:
    server = MotoServer().start()
    try:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        server.create_bucket(BUCKET)
        yield server
    finally:
        server.stop()


def test_segments_on_s3_are_read_back_across_both_tiers(backend_url, namespace, s3) -> None:  # type: ignore[no-untyped-def]
    with Admin(backend_url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    send_numbered(backend_url, namespace, TOPIC, 0, range(100))
    service = BrokerService(backend_url, namespace, tier_config(f"s3://{BUCKET}/prefix", hot_retention_s=0.001))
    assert service.tier is not None
    service.start()  # publishes the tier's URL for the consumers
    service.tier.run()
    send_numbered(backend_url, namespace, TOPIC, 0, range(100, 120))
    store = owned(Store(Connection(backend_url, namespace)))
    assert [(s.start, s.end) for s in store.segments(TOPIC, 0)] == [(0, 40), (40, 80), (80, 100)]
    assert store.hot_queue(TOPIC, 0).first == 100
    got = read_from_first(backend_url, namespace, "s3-reader", TOPIC, 120)
    assert [m.queue_offset for m in got] == list(range(120)) and [body_number(m.body) for m in got] == list(range(120))
    store.conn.close()
    service.shutdown()


def test_an_s3_outage_loses_nothing_shows_the_stall_and_uploads_resume(redis_server, namespace, s3, caplog) -> None:  # type: ignore[no-untyped-def]
    url = redis_server.url
    with Admin(url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    send_numbered(url, namespace, TOPIC, 0, range(60))
    service = BrokerService(url, namespace, tier_config(f"s3://{BUCKET}/prefix", hot_retention_s=0.001))
    assert service.tier is not None
    store = owned(Store(Connection(url, namespace)))
    s3.stop()  # the tier server goes away
    with caplog.at_level(logging.WARNING, logger="scheduler.tier"):
        service.tier.run()
    assert store.segments(TOPIC, 0) == [] and store.hot_queue(TOPIC, 0).first == 0  # Redis keeps all 60
    assert service.tier.counters.errors >= 1 and service.tier.counters.stalled == {(TOPIC, 0): 60}
    assert any("failed" in r.getMessage() for r in caplog.records) and any("waits: 60" in r.getMessage() for r in caplog.records)
    s3.start()  # back (moto starts empty: the bucket is made again)
    s3.create_bucket(BUCKET)
    service.tier.run()
    assert [(s.start, s.end) for s in store.segments(TOPIC, 0)] == [(0, 40), (40, 60)]
    assert store.hot_queue(TOPIC, 0).first == 60 and service.tier.counters.stalled == {}
    service._store.publish_settings({"tier_url": f"s3://{BUCKET}/prefix"})
    got = read_from_first(url, namespace, "s3-reader", TOPIC, 60)
    assert [m.queue_offset for m in got] == list(range(60))
    store.conn.close()
    service.shutdown()


def test_deleting_a_topic_deletes_its_objects_on_s3(redis_server, namespace, s3) -> None:  # type: ignore[no-untyped-def]
    from pyarrow import fs as pafs

    from mq.tier.location import open_tier

    url, tier_url = redis_server.url, f"s3://{BUCKET}/prefix"
    with Admin(url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
        send_numbered(url, namespace, TOPIC, 0, range(100))
        service = BrokerService(url, namespace, tier_config(tier_url, hot_retention_s=0.001))
        assert service.tier is not None
        service.tier.run()
        service._store.publish_settings({"tier_url": tier_url})
        location = open_tier(tier_url)

        def objects() -> list[str]:
            selector = pafs.FileSelector(location.topic_dir(namespace, TOPIC), recursive=True, allow_not_found=True)
            return [i.path for i in location.fs.get_file_info(selector) if i.type == pafs.FileType.File]

        assert len(objects()) == 3
        admin.delete_topic(TOPIC)
        assert objects() == []
    service.shutdown()
