"""Consumer lag per group: the ``offsets`` table, and a chart of each group's lag by topic.

Table ``lag``: ``group, topic, queue_id, broker_offset, consumer_offset`` (-1 = none committed),
``lag``. Chart: total lag per group, stacked by topic.

    python -m spark.jobs.lag --url redis://127.0.0.1:6379/0 --out analytics
"""

from __future__ import annotations

import pathlib

from pyspark.sql import DataFrame, Row, SparkSession

from spark import charts
from spark.jobs import runner


def build(session: SparkSession, args: runner.JobArgs) -> DataFrame:
    """Every group's offsets and lag on every queue of the chosen topics."""
    return args.read(session, "offsets").orderBy("group", "topic", "queue_id")


def draw(rows: list[Row], png: pathlib.Path) -> pathlib.Path:
    """Total lag per group, one colour per topic."""
    if not rows:
        return charts.message_chart(png, "Consumer lag", "no consumer group has committed offsets")
    groups, by_topic = charts.pivot(rows, "group", "topic", "lag")
    fig, (ax,) = charts.new_figure(title="Consumer lag per group (messages not yet consumed)")
    charts.bars(ax, groups, by_topic, ylabel="messages", horizontal=True)
    return charts.save(fig, png)


JOB = runner.Job("lag", "Consumer lag per group", build, draw)


def main(argv: list[str] | None = None, session: SparkSession | None = None) -> int:
    """Run the job (see the module docstring); returns the exit code."""
    return runner.main(JOB, argv, session)


if __name__ == "__main__":
    raise SystemExit(main())
