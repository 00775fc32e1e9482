"""The Spark source reads through ``redis+sentinel://`` (local SparkSession, real sentinels)."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark", reason="pip install 'rocketredis[spark]'")

from spark import local_session
from tests.servers import SentinelProcs
from tests.spark_data import fill

pytestmark = [pytest.mark.spark, pytest.mark.ha, pytest.mark.slow]


def test_spark_reads_through_sentinel(sentinel: SentinelProcs, namespace: str) -> None:
    data = fill(sentinel.url, namespace, "Orders", 500, 3)
    session = local_session(1, app_name="rocketredis-ha-tests", shuffle_partitions=1)
    try:
        df = session.read.format("mq").options(**data.options()).load()
        assert df.count() == 500
        assert {r.queue_id: r["count"] for r in df.groupBy("queue_id").count().collect()} == data.queue_counts()
        assert sorted(r.msg_id for r in df.select("msg_id").collect()) == sorted(data.sent)
    finally:
        session.stop()
