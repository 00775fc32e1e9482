"""Consumer lag per group: the ``offsets`` table, and a chart of each group's lag by topic.

Table ``lag``: ``group, topic, queue_id, broker_offset, consumer_offset`` (-1 = none committed),
``lag``. Chart: total lag per group, stacked by topic — the 25 groups with the most lag, and how
many more there are.

    python -m spark.jobs.lag --url redis://127.0.0.1:6379/0 --out analytics
"""

from __future__ import annotations

import pathlib
from collections import defaultdict

from matplotlib.figure import Figure
from pyspark.sql import DataFrame, Row, SparkSession

from spark import charts
from spark.jobs import runner


def build(session: SparkSession, args: runner.JobArgs) -> DataFrame:
    """Every group's offsets and lag on every queue of the chosen topics."""
    return args.read(session, "offsets").orderBy("group", "topic", "queue_id")


#: Groups the chart draws at most: the ones with the most lag (5 000 bars are one unreadable block).
TOP_GROUPS = 25


def top_groups(rows: list[Row], limit: int = TOP_GROUPS) -> tuple[list[Row], int]:
    """The rows of the ``limit`` groups with the most total lag (ties by name), and how many groups
    were left out."""
    totals: dict[str, int] = defaultdict(int)
    for r in rows:
        totals[r.group] += r.lag
    kept = set(sorted(totals, key=lambda g: (-totals[g], g))[:limit])
    return [r for r in rows if r.group in kept], len(totals) - len(kept)


def figure(rows: list[Row], limit: int = TOP_GROUPS) -> Figure:
    """The chart of :func:`draw`: total lag of the ``limit`` groups with the most, one colour per
    topic, and a line saying how many groups it leaves out."""
    shown, left_out = top_groups(rows, limit)
    groups, by_topic = charts.pivot(shown, "group", "topic", "lag")
    title = "Consumer lag per group (messages not yet consumed)"
    if left_out:
        title += f"\nthe {len(groups)} groups with the most lag; {left_out} more groups not shown (see the table)"
    fig, (ax,) = charts.new_figure(title=title)
    charts.bars(ax, groups, by_topic, ylabel="messages", horizontal=True)
    return fig


def draw(rows: list[Row], png: pathlib.Path) -> pathlib.Path:
    """Total lag per group (the :data:`TOP_GROUPS` with the most), one colour per topic."""
    if not rows:
        return charts.message_chart(png, "Consumer lag", "no consumer group has committed offsets")
    return charts.save(figure(rows), png)


JOB = runner.Job("lag", "Consumer lag per group", build, draw)


def main(argv: list[str] | None = None, session: SparkSession | None = None) -> int:
    """Run the job (see the module docstring); returns the exit code."""
    return runner.main(JOB, argv, session)


if __name__ == "__main__":
    raise SystemExit(main())
