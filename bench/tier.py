"""Tiered storage: how fast a PullConsumer catching up reads messages from the tier compared with
reading the same messages from Redis, and what uploading them costs (``python -m bench.tier``).

One queue holds N 1 KiB messages (random bytes: zstd does not flatter the tier's size); the same
PullConsumer reading loop drains them once while they are in Redis, then (after the uploader moved
them into Parquet segments on a local folder and hot retention emptied Redis) once from the tier.
Results go to stdout and ``bench/results/tier.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import tempfile
import time

from mq import Admin, ConsumeFromWhere, Message, MessageQueue, Producer, PullConsumer
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerConfig, BrokerService
from tests.servers import RedisServer

TOPIC = "bench-tier"


def drain(url: str, ns: str, n: int) -> float:
    """Messages per second a PullConsumer reads from offset 0 to ``n``."""
    pc = PullConsumer(
        f"g{time.monotonic_ns()}", url, namespace=ns, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, pull_batch_size=256
    )
    pc.assign([MessageQueue(TOPIC, "broker-a", 0)])
    got = 0
    with pc:
        started = time.perf_counter()
        while got < n:
            got += len(pc.poll(timeout_s=5))
        return n / (time.perf_counter() - started)


def lookup_times(url: str, ns: str, ids: list[str], n: int) -> dict[str, float]:
    """Milliseconds of a tiered ``query_message`` (an id from the middle) and ``query_messages_by_key``
    (with and without time bounds), each the median of 5 (the reader's caches are fresh each time)."""
    out: dict[str, float] = {}
    probes = {
        "query_message_ms": lambda a: a.query_message(TOPIC, ids[n // 2]),
        "query_by_key_ms": lambda a: a.query_messages_by_key(TOPIC, f"k{n // 2}"),
    }
    for name, probe in probes.items():
        times = []
        for _ in range(5):
            with Admin(url, ns) as admin:  # a new store: nothing cached
                started = time.perf_counter()
                assert probe(admin), name
                times.append((time.perf_counter() - started) * 1000)
        out[name] = round(sorted(times)[2], 1)
    return out


def spark_rows_per_s(url: str, ns: str) -> float:
    """Rows per second of a Spark ``local[2]`` count and body-bytes sum over the topic (after a warm-up
    action, the median of 3)."""
    from pyspark.sql import functions as F

    from spark.session import local_session

    session = local_session(2)
    df = session.read.format("mq").option("url", url).option("namespace", ns).option("topic", TOPIC).load()
    action = df.agg(F.count("*"), F.sum(F.length("body")))
    rows = action.collect()[0][0]  # warm-up
    times = []
    for _ in range(3):
        started = time.perf_counter()
        action.collect()
        times.append(time.perf_counter() - started)
    return rows / sorted(times)[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("-n", type=int, default=100_000, help="messages (default: %(default)s)")
    parser.add_argument("--spark", action="store_true", help="also Spark local[2] rows/s, Redis vs tier (default: no)")
    args = parser.parse_args()
    spark_rates: dict[str, float] = {}
    with RedisServer() as server, tempfile.TemporaryDirectory() as folder:
        url, ns = server.url, "benchtier"
        Admin(url, ns).create_topic(TOPIC, read_queues=1, write_queues=1)
        ids: list[str] = []
        with Producer("bench", url, namespace=ns) as producer:
            mq = MessageQueue(TOPIC, "broker-a", 0)
            for i in range(0, args.n, 256):
                batch = [Message(TOPIC, os.urandom(1024), keys=f"k{j}") for j in range(i, min(i + 256, args.n))]
                ids += producer.send_batch(batch, queue=mq).msg_id.split(",")
        redis_rate = drain(url, ns, args.n)
        if args.spark:
            spark_rates["spark_redis_rows_per_s"] = round(spark_rows_per_s(url, ns))
        config = BrokerConfig(
            tier_url=f"file://{folder}", hot_retention_s=0.001, tier_segment_messages=50_000, tier_segment_age_s=0.001
        )
        service = BrokerService(url, ns, config)
        assert service.tier is not None
        service._store.publish_settings({"tier_url": config.tier_url})
        started = time.perf_counter()
        while Store(Connection(url, ns)).hot_queue(TOPIC, 0).first < args.n:
            service.tier.run()
        upload_s = time.perf_counter() - started
        tier_rate = drain(url, ns, args.n)
        lookups = lookup_times(url, ns, ids, args.n)
        if args.spark:
            spark_rates["spark_tier_rows_per_s"] = round(spark_rows_per_s(url, ns))
        size = service.tier.counters.bytes
        service.shutdown()
    result = {
        "messages": args.n,
        "redis_read_msgs_per_s": round(redis_rate),
        "tier_read_msgs_per_s": round(tier_rate),
        "upload_msgs_per_s": round(args.n / upload_s),
        "tier_bytes": size,
        "tier_bytes_per_message": round(size / args.n, 1),
        **lookups,
        **spark_rates,
    }
    print(json.dumps(result, indent=2))
    out = pathlib.Path(__file__).parent / "results" / "tier.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
