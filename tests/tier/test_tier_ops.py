"""Tiered storage for operators: Admin.tier_status and ``mq tier status``, the Prometheus series,
``mq doctor``'s tier line, per-topic hot retention and hot retention by bytes."""

from __future__ import annotations

import pathlib
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families

from mq import Admin, ConsumeFromWhere, PullConsumer, TierStats
from mq.cli import main
from mq.model.queue import MessageQueue
from mq.operator.doctor import FAIL, OK, check
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerService
from scheduler.metrics import serve_metrics
from tests.leaks import owned
from tests.servers import free_port
from tests.tier_helpers import body_number, send_numbered, tier_config

TOPIC = "ops"


@pytest.fixture
def tier_url(tmp_path: pathlib.Path) -> str:
    return f"file://{tmp_path}/tier"


@pytest.fixture
def admin(redis_server, namespace):  # type: ignore[no-untyped-def]
    with Admin(redis_server.url, namespace=namespace) as a:
        a.create_topic(TOPIC, read_queues=2, write_queues=2)
        yield a


def _service(url: str, namespace: str, tier_url: str, **config: object) -> BrokerService:
    service = BrokerService(url, namespace, tier_config(tier_url, **config))
    assert service.tier is not None
    service._store.publish_settings({"tier_url": tier_url})  # what start() publishes
    return service


def test_tier_status_in_admin_and_the_command(redis_server, namespace, admin, tier_url, capsys) -> None:  # type: ignore[no-untyped-def]
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(100))
    service = _service(redis_server.url, namespace, tier_url, hot_retention_s=0.001)
    service.tier.run()  # type: ignore[union-attr]
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(100, 120))
    status = admin.tier_status(TOPIC)
    q0, q1 = MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)
    size = sum(s.size_bytes for s in owned(Store(Connection(redis_server.url, namespace))).segments(TOPIC, 0))
    assert status[q0] == TierStats(0, 100, 3, size) and size > 0
    assert status[q1] == TierStats(0, 0, 0, 0)  # nothing there: an empty range
    assert admin.topic_status(TOPIC)[q0].min_offset == 0 and admin.tier_url() == tier_url
    assert main(["tier", "status", TOPIC, "--url", redis_server.url, "--namespace", namespace]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"tier: {tier_url}"
    assert out[2].split() == [TOPIC, "0", "0", "100", "3", str(size), "100", "120", "20"]
    service.shutdown()


def test_prometheus_series_of_the_tier(redis_server, namespace, admin, tmp_path) -> None:  # type: ignore[no-untyped-def]
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder: uploads fail")
    send_numbered(redis_server.url, namespace, TOPIC, 1, range(50))
    service = _service(redis_server.url, namespace, f"file://{blocked}", hot_retention_s=0.001)
    assert service.tier is not None
    service.tier.run()  # fails: stalled
    blocked.unlink()
    blocked.mkdir()
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(45))
    service.tier.run()  # both queues uploaded now
    send_numbered(redis_server.url, namespace, TOPIC, 1, range(50, 57))  # not tiered yet
    port = free_port()
    with serve_metrics(port, redis_server.url, namespace, tier=service.tier):
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    m = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in text_string_to_metric_families(text) for s in f.samples}
    assert m[("rocketredis_tier_lag_messages", (("queue", "1"), ("topic", TOPIC)))] == 7
    assert m[("rocketredis_tier_lag_messages", (("queue", "0"), ("topic", TOPIC)))] == 0
    assert m[("rocketredis_tier_segments", (("topic", TOPIC),))] == 4  # 40 + 5 and 40 + 10
    assert m[("rocketredis_tier_upload_errors_total", ())] == 1
    assert m[("rocketredis_tier_uploaded_segments_total", ())] == 4
    assert m[("rocketredis_tier_uploaded_bytes_total", ())] == m[("rocketredis_tier_bytes", (("topic", TOPIC),))] > 0
    assert not any(name == "rocketredis_tier_stalled_messages" for name, _ in m)  # the stall is over
    service.shutdown()


def test_doctor_checks_the_tier_is_writable(redis_server, namespace, tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = owned(Store(Connection(redis_server.url, namespace)))
    assert not [f for f in check(redis_server.url, namespace) if f.check == "tier"]  # no tier, no line
    store.publish_settings({"tier_url": f"file://{tmp_path}/ok"})
    assert [(f.level, f.check) for f in check(redis_server.url, namespace) if f.check == "tier"] == [(OK, "tier")]
    (tmp_path / "file").write_text("x")
    store.publish_settings({"tier_url": f"file://{tmp_path}/file/tier"})
    found = [f for f in check(redis_server.url, namespace) if f.check == "tier"]
    assert [f.level for f in found] == [FAIL] and "not writable" in found[0].text
    store.conn.close()


def test_a_topics_hot_retention_overrides_the_namespaces(redis_server, namespace, admin, tier_url) -> None:  # type: ignore[no-untyped-def]
    send_numbered(redis_server.url, namespace, TOPIC, 0, range(60))
    service = _service(redis_server.url, namespace, tier_url, hot_retention_s=3600.0)
    store = owned(Store(Connection(redis_server.url, namespace)))
    service.tier.run()  # type: ignore[union-attr]
    assert store.hot_queue(TOPIC, 0).first == 0 and len(store.segments(TOPIC, 0)) == 2  # tiered, kept an hour
    assert admin.update_topic(TOPIC, hot_retention_s=0.001).hot_retention_s == 0.001
    service.tier.run()  # type: ignore[union-attr]
    assert store.hot_queue(TOPIC, 0).first == 60
    store.conn.close()
    service.shutdown()


def test_hot_retention_bytes_bounds_the_log_and_every_message_reads_back(redis_server, namespace, admin, tier_url) -> None:  # type: ignore[no-untyped-def]
    bound = 200 * 1024
    service = _service(redis_server.url, namespace, tier_url, hot_retention_bytes=bound, tier_segment_messages=100)
    store = owned(Store(Connection(redis_server.url, namespace)))
    peak = 0
    for part in range(10):  # 1 000 messages of 1 KiB: about 5x the bound
        send_numbered(redis_server.url, namespace, TOPIC, 0, range(part * 100, part * 100 + 100), size=1024)
        service.tier.run()  # type: ignore[union-attr]
        peak = max(peak, store.hot_queue(TOPIC, 0).memory_bytes)
    hot = store.hot_queue(TOPIC, 0)
    assert hot.memory_bytes <= bound and 0 < hot.first < 1000 and hot.seq == 1000
    pc = PullConsumer("all", redis_server.url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
    pc.assign([MessageQueue(TOPIC, "broker-a", 0)])
    got = []
    with pc:
        while len(got) < 1000:
            batch = pc.poll(timeout_s=2)
            assert batch, f"stopped at {len(got)}"
            got += batch
    assert [body_number(m.body) for m in got] == list(range(1000))
    print(f"log memory after each run peaked at {peak} bytes, bound {bound}")
    store.conn.close()
    service.shutdown()
