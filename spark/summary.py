"""A short Spark summary of a namespace: what ``mq demo`` prints at its end when pyspark is there.

python -m spark.summary --url redis://127.0.0.1:6379/0 [--namespace mq]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mq.store.connection import URL_ENV
from spark.schema import schema_of
from spark.source import FORMAT


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def summary_lines(session: SparkSession, url: str, namespace: str) -> list[str]:
    """One line per user topic (messages, bytes, queues used, tags) and per group with offsets (lag)."""

    def read(table: str, *columns: str) -> DataFrame:
        reader = session.read.format(FORMAT).option("url", url).option("namespace", namespace).option("table", table)
        return (reader.schema(schema_of(*columns, table=table)) if columns else reader).load()

    lines = []
    per_topic = (
        read("messages", "topic", "body", "queue_id", "tags")  # only the columns the summary uses
        .groupBy("topic")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.sum(F.length("body")).alias("bytes"),
            F.countDistinct("queue_id").alias("queues"),
            F.array_sort(F.collect_set("tags")).alias("tags"),
        )
        .orderBy("topic")
        .collect()
    )
    for r in per_topic:
        tags = ", ".join(r.tags) or "none"
        size = f"{_count(r.n, 'message')}, {_count(r.bytes, 'byte')} on {_count(r.queues, 'queue')}"
        lines.append(f"topic {r.topic}: {size}, tags {tags}")
    lags = read("offsets").groupBy("group").agg(F.sum("lag").alias("lag")).orderBy("group").collect()
    lines += [f"group {r.group}: lag {r.lag}" for r in lags]
    return lines or ["no messages and no consumer offsets"]


def main(argv: Sequence[str] | None = None) -> int:
    """Print the summary of a namespace; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m spark.summary", description="Spark summary of a namespace")
    parser.add_argument("--url", default=os.environ.get(URL_ENV), help=f"store URL (default ${URL_ENV})")
    parser.add_argument("--namespace", default="mq")
    args = parser.parse_args(argv)
    if not args.url:
        parser.error(f"--url is required when ${URL_ENV} is not set")
    from spark.session import local_session

    session = local_session(app_name="rocketredis-summary")
    try:
        for line in summary_lines(session, args.url, args.namespace):
            print(line)
    finally:
        session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
