"""Dead-letter report: what ended in ``%DLQ%<group>`` topics, by group, original topic and reason.

Table ``dlq``: ``group, topic`` (the original topic, from the ``RETRY_TOPIC`` system property;
``(unknown)`` when absent), ``reason``, ``messages``, ``first_stored``, ``last_stored`` (ISO UTC).
The reason is the ``DLQ_REASON`` system property when the broker sets one, else
``reconsumed N times``. Chart: dead letters per group, stacked by reason, or a chart saying there
are none. ``--topic`` defaults to ``%DLQ%*``.

    python -m spark.jobs.dlq --url redis://127.0.0.1:6379/0 --out analytics
"""

from __future__ import annotations

import pathlib

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from mq.model.validation import DLQ_PREFIX
from spark import charts
from spark.jobs import runner

#: System property naming the original topic of a retried or dead-lettered message [RocketMQ].
ORIGINAL_TOPIC_PROPERTY = "RETRY_TOPIC"
#: System property with why a message was dead-lettered, when the broker records one.
REASON_PROPERTY = "DLQ_REASON"
#: Topic shown when a dead letter does not say where it came from.
UNKNOWN_TOPIC = "(unknown)"


def build(session: SparkSession, args: runner.JobArgs) -> DataFrame:
    """Dead letters counted by group, original topic and reason."""
    system = F.col("system_properties")
    reason = F.coalesce(system[REASON_PROPERTY], F.format_string("reconsumed %d times", F.col("reconsume_times")))
    return (
        args.read(
            session,
            topic=args.topic or f"{DLQ_PREFIX}*",
            columns=("topic", "system_properties", "reconsume_times", "store_timestamp"),
        )
        .select(
            F.expr(f"substring(topic, {len(DLQ_PREFIX) + 1})").alias("group"),
            F.coalesce(system[ORIGINAL_TOPIC_PROPERTY], F.lit(UNKNOWN_TOPIC)).alias("topic"),
            reason.alias("reason"),
            "store_timestamp",
        )
        .groupBy("group", "topic", "reason")
        .agg(F.count(F.lit(1)).alias("messages"), F.min("store_timestamp").alias("first"), F.max("store_timestamp").alias("last"))
        .select(
            "group",
            "topic",
            "reason",
            "messages",
            runner.iso_utc(F.col("first")).alias("first_stored"),
            runner.iso_utc(F.col("last")).alias("last_stored"),
        )
        .orderBy("group", "topic", "reason")
    )


def draw(rows: list[Row], png: pathlib.Path) -> pathlib.Path:
    """Dead letters per group, one colour per reason."""
    if not rows:
        return charts.message_chart(png, "Dead letters", "no dead letters")
    groups, by_reason = charts.pivot(rows, "group", "reason", "messages")
    fig, (ax,) = charts.new_figure(title=f"Dead letters per group ({sum(r.messages for r in rows)} in all)")
    charts.bars(ax, groups, by_reason, ylabel="messages", horizontal=True)
    return charts.save(fig, png)


JOB = runner.Job("dlq", "Dead letters by group, original topic and reason", build, draw)


def main(argv: list[str] | None = None, session: SparkSession | None = None) -> int:
    """Run the job (see the module docstring); returns the exit code."""
    return runner.main(JOB, argv, session)


if __name__ == "__main__":
    raise SystemExit(main())
