"""The Spark source reads through ``redis+sentinel://`` (local SparkSession, real sentinels)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pip install 'rocketredis[spark]'")

from pyspark.sql import SparkSession

from tests.servers import SentinelProcs
from tests.spark_data import fill

pytestmark = [pytest.mark.spark, pytest.mark.ha, pytest.mark.slow]


def test_spark_reads_through_sentinel(spark_session: SparkSession, sentinel: SentinelProcs, namespace: str) -> None:
    # The worker's shared session: a session of its own would be that one (Spark keeps one per process,
    # and local_session reuses it), and stopping it stopped the session every later Spark test of the
    # worker was handed ("jsc is null", or the format missing once it was started again).
    data = fill(sentinel.url, namespace, "Orders", 500, 3)
    df = spark_session.read.format("mq").options(**data.options()).load()
    assert df.count() == 500
    assert {r.queue_id: r["count"] for r in df.groupBy("queue_id").count().collect()} == data.queue_counts()
    assert sorted(r.msg_id for r in df.select("msg_id").collect()) == sorted(data.sent)
