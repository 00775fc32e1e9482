"""Key and sharding skew across queues: how evenly each topic's messages and keys spread.

Table ``skew``, one row per queue: ``topic, queue_id, writable, messages, bytes, share`` (of the
topic's messages), ``skew`` (messages ÷ the even share over writable queues: 1.0 is even, 2.0 twice
its share, 0.0 idle), ``distinct_keys``, ``split_keys`` (keys of this queue also found in another
queue of the topic: a sharding key that should stay on one queue, but did not). Empty queues are
rows too. Chart: messages per queue of the busiest topics against the even line.

    python -m spark.jobs.skew --url redis://127.0.0.1:6379/0 --out analytics
"""

from __future__ import annotations

import math
import pathlib
from collections import defaultdict

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from spark import charts
from spark.jobs import runner

#: Topics drawn in the chart (the busiest ones).
CHART_TOPICS = 4


def build(session: SparkSession, args: runner.JobArgs) -> DataFrame:
    """Per-queue spread of messages, bytes and keys, for every queue of the chosen topics.

    One pass over the messages makes per-(topic, queue, key) counts (materialised); a message
    with several keys counts once, under its first key.
    """
    first = F.col("pos").isNull() | (F.col("pos") == 0)
    by_key = (
        args.read(session, columns=("topic", "queue_id", "body", "keys"))
        .select("topic", "queue_id", F.length("body").alias("size"), F.posexplode_outer("keys").alias("pos", "key"))
        .groupBy("topic", "queue_id", "key")
        .agg(F.count(F.when(first, 1)).alias("messages"), F.sum(F.when(first, F.col("size"))).alias("bytes"))
        .localCheckpoint(eager=True)
    )
    split = (
        by_key.where(F.col("key").isNotNull())
        .groupBy("topic", "key")
        .agg(F.countDistinct("queue_id").alias("queues"))
        .where(F.col("queues") > 1)
        .select("topic", "key", F.lit(1).alias("split"))
    )
    per_queue = (
        by_key.join(split, ["topic", "key"], "left")
        .groupBy("topic", "queue_id")
        .agg(
            F.sum("messages").alias("messages"),
            F.sum("bytes").alias("bytes"),
            F.count("key").alias("distinct_keys"),
            F.count("split").alias("split_keys"),
        )
    )
    queues = args.read(session, "topics").select("topic", "queue_id", "writable")
    filled = queues.join(per_queue, ["topic", "queue_id"], "left").fillna(0, ["messages", "bytes", "distinct_keys", "split_keys"])
    totals = filled.groupBy("topic").agg(
        F.sum("messages").alias("total"),
        F.greatest(F.sum(F.col("writable").cast("int")), F.lit(1)).alias("even_over"),
    )
    return (
        filled.join(totals, "topic")
        .select(
            "topic",
            "queue_id",
            "writable",
            F.col("messages").cast("long").alias("messages"),
            F.col("bytes").cast("long").alias("bytes"),
            F.round(F.when(F.col("total") > 0, F.col("messages") / F.col("total")).otherwise(0.0), 4).alias("share"),
            F.round(F.when(F.col("total") > 0, F.col("messages") * F.col("even_over") / F.col("total")).otherwise(0.0), 3).alias(
                "skew"
            ),
            F.col("distinct_keys").cast("long").alias("distinct_keys"),
            F.col("split_keys").cast("long").alias("split_keys"),
        )
        .orderBy("topic", "queue_id")
    )


def draw(rows: list[Row], png: pathlib.Path) -> pathlib.Path:
    """Messages per queue of the busiest topics, with the even share as a dashed line."""
    by_topic: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        by_topic[r.topic].append(r)
    busiest = sorted(by_topic, key=lambda t: -sum(r.messages for r in by_topic[t]))[:CHART_TOPICS]
    if not busiest or not any(r.messages for t in busiest for r in by_topic[t]):
        return charts.message_chart(png, "Queue skew", "no messages stored")
    cols = min(2, len(busiest))
    fig, axes = charts.new_figure(math.ceil(len(busiest) / cols), cols, title="Messages per queue (dashed: even share)")
    for ax, topic in zip(axes, busiest):
        queue_rows = sorted(by_topic[topic], key=lambda r: r.queue_id)
        charts.bars(ax, [str(r.queue_id) for r in queue_rows], {"messages": [r.messages for r in queue_rows]}, ylabel="messages")
        writable = [r for r in queue_rows if r.writable] or queue_rows
        ax.axhline(sum(r.messages for r in queue_rows) / len(writable), linestyle="--", color="black")
        worst = max(queue_rows, key=lambda r: r.skew)
        split = sum(r.split_keys for r in queue_rows)
        ax.set_title(f"{topic}: max skew {worst.skew:.2f} (queue {worst.queue_id}), split keys {split}", fontsize="small")
    for ax in axes[len(busiest) :]:
        ax.axis("off")
    return charts.save(fig, png)


JOB = runner.Job("skew", "Key and sharding skew across queues", build, draw)


def main(argv: list[str] | None = None, session: SparkSession | None = None) -> int:
    """Run the job (see the module docstring); returns the exit code."""
    return runner.main(JOB, argv, session)


if __name__ == "__main__":
    raise SystemExit(main())
