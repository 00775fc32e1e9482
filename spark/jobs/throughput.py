"""Throughput per topic and queue over time: messages and bytes stored per time bucket.

Table ``throughput``: ``topic, queue_id, bucket_start`` (ISO UTC), ``bucket_s``, ``messages``,
``bytes``, ``messages_per_s``. Chart: messages/s per topic over time, and messages per queue.

    python -m spark.jobs.throughput --url redis://127.0.0.1:6379/0 --out analytics [--bucket-s 60]
"""

from __future__ import annotations

import pathlib
from collections import defaultdict
from datetime import datetime, timedelta

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from spark import charts
from spark.jobs import runner

#: Bucket widths the automatic choice picks from, seconds.
NICE_BUCKETS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 43200, 86400)
#: The automatic bucket keeps the time axis at about this many buckets or fewer.
TARGET_BUCKETS = 60


def pick_bucket_s(span_ms: int) -> int:
    """The smallest nice bucket (seconds) that cuts ``span_ms`` into at most :data:`TARGET_BUCKETS`."""
    return next((b for b in NICE_BUCKETS_S if span_ms / (b * 1000) <= TARGET_BUCKETS), NICE_BUCKETS_S[-1])


def build(session: SparkSession, args: runner.JobArgs) -> DataFrame:
    """Messages and bytes per (topic, queue, bucket of store time).

    One pass over the messages makes per-second counts (materialised: they are small); the
    bucket width and the buckets come from those.
    """
    per_second = (
        args.read(session, columns=("topic", "queue_id", "store_timestamp", "body"))
        .groupBy("topic", "queue_id", F.floor(F.unix_millis("store_timestamp") / 1000).cast("long").alias("second"))
        .agg(F.count(F.lit(1)).alias("messages"), F.sum(F.length("body")).cast("long").alias("bytes"))
        .localCheckpoint(eager=True)
    )
    bucket_s = args.bucket_s
    if bucket_s <= 0:
        low, high = per_second.agg(F.min("second"), F.max("second")).first() or (None, None)
        bucket_s = pick_bucket_s(1000 * (high - low) if low is not None and high is not None else 0)
    start = (F.floor(F.col("second") / bucket_s) * bucket_s).cast("long")
    return (
        per_second.groupBy("topic", "queue_id", start.alias("start_s"))
        .agg(F.sum("messages").alias("messages"), F.sum("bytes").alias("bytes"))
        .select(
            "topic",
            "queue_id",
            runner.iso_utc(F.timestamp_seconds("start_s")).alias("bucket_start"),
            F.lit(bucket_s).alias("bucket_s"),
            "messages",
            "bytes",
            F.round(F.col("messages") / bucket_s, 3).alias("messages_per_s"),
        )
        .orderBy("topic", "bucket_start", "queue_id")
    )


def draw(rows: list[Row], png: pathlib.Path) -> pathlib.Path:
    """Messages/s per topic over time (top) and messages per queue of each topic (bottom)."""
    if not rows:
        return charts.message_chart(png, "Throughput", "no messages stored")
    rate: dict[str, dict[datetime, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        rate[r.topic][runner.parse_iso(r.bucket_start)] += r.messages_per_s
    step = timedelta(seconds=rows[0].bucket_s)
    first, last = min(min(v) for v in rate.values()), max(max(v) for v in rate.values())
    axis = [first + step * i for i in range(int((last - first) / step) + 1)]  # idle buckets are 0, not skipped
    series = {t: (axis, [v.get(b, 0.0) for b in axis]) for t, v in sorted(rate.items())}
    queues, per_queue = charts.pivot(rows, "queue_id", "topic", "messages")
    fig, (top, bottom) = charts.new_figure(2, 1, title=f"Throughput (buckets of {rows[0].bucket_s} s, UTC)")
    charts.lines(top, series, ylabel="messages/s")
    charts.bars(bottom, [f"queue {q}" for q in queues], per_queue, ylabel="messages")
    return charts.save(fig, png)


JOB = runner.Job("throughput", "Throughput per topic and queue over time", build, draw)


def main(argv: list[str] | None = None, session: SparkSession | None = None) -> int:
    """Run the job (see the module docstring); returns the exit code."""
    return runner.main(JOB, argv, session)


if __name__ == "__main__":
    raise SystemExit(main())
