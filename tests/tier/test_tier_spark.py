"""The Spark source over a topic half tiered, half hot: counts, per-queue counts and a sum of a
property equal what ``topic_status`` and the producer say, with no duplicate or gap at the boundary."""

from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("pyspark", reason="pip install 'rocketredis[spark]'")

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from mq import Admin
from scheduler import BrokerService
from spark import register
from tests.tier_helpers import send_numbered, tier_config

# A Spark job over a half-tiered topic took 225 s once at load 17 on 2 cores (the default 120 s is per test)
pytestmark = [pytest.mark.spark, pytest.mark.timeout(300)]

TOPIC = "halfhot"


def test_spark_reads_a_half_tiered_topic_once(
    spark_session: SparkSession, redis_server, namespace, tmp_path: pathlib.Path
) -> None:  # type: ignore[no-untyped-def]
    url, tier_url = redis_server.url, f"file://{tmp_path}/tier"
    # Again on the shared session (idempotent): once a module stopped the worker's session and the
    # session started after it had no format (test_ha_spark did; fixed). A missing format fails the read.
    register(spark_session)
    with Admin(url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=2, write_queues=2)
        ids = send_numbered(url, namespace, TOPIC, 0, range(0, 130))
        send_numbered(url, namespace, TOPIC, 1, range(1000, 1090))
        service = BrokerService(url, namespace, tier_config(tier_url, hot_retention_s=0.001))
        assert service.tier is not None
        service._store.publish_settings({"tier_url": tier_url})
        service.tier.run()  # 0..119 and 0..79 tiered and trimmed (segments of 40), the rest too young to cut
        send_numbered(url, namespace, TOPIC, 0, range(130, 150))
        status = admin.topic_status(TOPIC)
        tiers = admin.tier_status(TOPIC)
        tiered = admin.query_message(TOPIC, ids[5])  # read back from the tier
    hot_first = [service._store.hot_queue(TOPIC, q).first for q in (0, 1)]
    assert all(t.tiered_end_offset >= 80 for t in tiers.values()) and min(hot_first) >= 80  # the older half: tier only
    df = spark_session.read.format("mq").option("url", url).option("namespace", namespace).option("topic", TOPIC).load()
    rows = df.select("queue_id", "queue_offset", F.col("properties")["n"].cast("long").alias("n")).collect()
    by_queue = {q: sorted(r.queue_offset for r in rows if r.queue_id == q) for q in (0, 1)}
    assert by_queue == {mq.queue_id: list(range(s.min_offset, s.max_offset)) for mq, s in status.items()}
    assert len(rows) == sum(s.stored for s in status.values()) == 150 + 90
    assert sum(r.n for r in rows) == sum(range(150)) + sum(range(1000, 1090))
    row = df.where("queue_id = 0 AND queue_offset = 5").first()  # a tiered row, every column
    assert tiered is not None and row is not None
    assert (row.topic, row.msg_id, row.tags, row.keys, row.properties, row.body, row.reconsume_times) == (
        TOPIC, ids[5], "odd", ["k5"], {"n": "5"}, tiered.body, 0
    )  # fmt: skip
    assert int(row.store_timestamp.timestamp() * 1000) == tiered.store_timestamp_ms
    assert int(row.born_timestamp.timestamp() * 1000) == tiered.born_timestamp_ms
    narrow = (
        spark_session.read.format("mq").schema("body binary, queue_offset long").option("url", url)
        .option("namespace", namespace).option("topic", TOPIC).load()
    )  # fmt: skip
    assert narrow.where("queue_offset = 5").count() == 2 and narrow.count() == 240  # a schema naming two columns
    service.shutdown()
