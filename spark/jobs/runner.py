"""What every analytics job shares: arguments, the session, reading the source, writing outputs.

A job is a :class:`Job`: ``build`` turns the store into one small DataFrame (the table) and
``draw`` turns its collected rows into a chart. :func:`main` runs it from the command line::

    python -m spark.jobs.<name> --url redis://host:6379/0 --namespace mq --out DIR

and writes ``DIR/<name>.csv`` (or ``.parquet``) and ``DIR/<name>.png``.
"""

from __future__ import annotations

import argparse
import csv
import os
import pathlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from pyspark.errors import PySparkException
from pyspark.sql import Column, DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from mq.errors import MQError
from mq.store.connection import URL_ENV
from spark.schema import schema_of
from spark.source import FORMAT

#: Table formats a job can write.
FORMATS = ("csv", "parquet")


@dataclass(frozen=True)
class JobArgs:
    """Parsed command-line arguments of a job.

    Attributes:
        url: store URL.
        namespace: key namespace.
        out: folder for the table and the chart.
        topic: the source's ``topic`` option ("" = the job's default topics).
        format: ``csv`` or ``parquet``.
        cores: executor cores of the local session (when the job makes one).
        bucket_s: throughput time bucket, seconds (0 = pick one for about 60 buckets).
    """

    url: str
    namespace: str
    out: pathlib.Path
    topic: str = ""
    format: str = "csv"
    cores: int = 2
    bucket_s: int = 0

    def read(
        self, session: SparkSession, table: str = "messages", *, topic: str | None = None, columns: Sequence[str] = ()
    ) -> DataFrame:
        """The ``mq`` source over this store (``topic`` overrides the ``--topic`` argument); with
        ``columns``, only those columns are read (see :func:`spark.schema.schema_of`)."""
        reader = session.read.format(FORMAT).option("url", self.url).option("namespace", self.namespace)
        chosen = self.topic if topic is None else topic
        if chosen:
            reader = reader.option("topic", chosen)
        if columns:
            reader = reader.schema(schema_of(*columns, table=table))
        return reader.option("table", table).load()


@dataclass(frozen=True)
class Job:
    """An analytics job.

    Attributes:
        name: file stem of its outputs and its module name under ``spark.jobs``.
        description: one line for ``--help``.
        build: the table, from the session and the arguments (small: it is collected).
        draw: the chart, from the collected rows, to the given PNG path.
    """

    name: str
    description: str
    build: Callable[[SparkSession, JobArgs], DataFrame]
    draw: Callable[[list[Row], pathlib.Path], object]


def parse_args(job: Job, argv: Sequence[str] | None) -> JobArgs:
    """The job's arguments from ``argv`` (``sys.argv[1:]`` when None)."""
    parser = argparse.ArgumentParser(prog=f"python -m spark.jobs.{job.name}", description=job.description)
    parser.add_argument("--url", default=os.environ.get(URL_ENV), help=f"store URL (default ${URL_ENV})")
    parser.add_argument("--namespace", default="mq", help="key namespace (default mq)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("analytics"), help="output folder (default ./analytics)")
    parser.add_argument("--topic", default="", help="topic, comma list or pattern (default: the job's own choice)")
    parser.add_argument("--format", choices=FORMATS, default="csv", help="table format (default csv)")
    parser.add_argument("--cores", type=int, default=2, help="executor cores of the local Spark session (default 2)")
    parser.add_argument("--bucket-s", type=int, default=0, help="throughput bucket, seconds (default: automatic)")
    ns = parser.parse_args(argv)
    if not ns.url:
        parser.error(f"--url is required when ${URL_ENV} is not set")
    return JobArgs(ns.url, ns.namespace, ns.out, ns.topic, ns.format, ns.cores, ns.bucket_s)


def run(job: Job, args: JobArgs, session: SparkSession) -> tuple[pathlib.Path, pathlib.Path]:
    """Build the job's table, write it and its chart; returns ``(table_path, png_path)``."""
    args.out.mkdir(parents=True, exist_ok=True)
    session.conf.set("spark.sql.session.timeZone", "UTC")
    df = job.build(session, args)
    rows = df.collect()
    table = write_table(rows, df.columns, args.out / f"{job.name}.{args.format}", args.format)
    png = args.out / f"{job.name}.png"
    job.draw(rows, png)
    return table, png


def main(job: Job, argv: Sequence[str] | None = None, session: SparkSession | None = None) -> int:
    """Command-line entry point: run ``job`` on ``session`` (a local one when None).

    Returns the exit code: 0, or 2 after printing a one-line error (bad option, unknown topic,
    store unreachable).
    """
    args = parse_args(job, argv)
    own = session is None
    if session is None:
        from spark.session import local_session

        session = local_session(args.cores, app_name=f"rocketredis-{job.name}")
    try:
        table, png = run(job, args, session)
    except (MQError, PySparkException) as e:
        print(f"{job.name}: {error_text(e)}", file=sys.stderr)
        return 2
    finally:
        if own:
            session.stop()
    print(f"{job.name}: wrote {table} and {png}")
    return 0


def error_text(error: Exception) -> str:
    """The message of ``error``; for a Spark error raised by the source, the ``mq.errors`` line in it."""
    lines = [line for line in str(error).splitlines() if line.startswith("mq.errors.")]
    return lines[-1].removeprefix("mq.errors.") if lines else str(error).splitlines()[0]


def write_table(rows: Sequence[Row], columns: Sequence[str], path: pathlib.Path, fmt: str) -> pathlib.Path:
    """Write rows as one CSV file (with a header) or one Parquet file."""
    records = [row.asDict() for row in rows]
    if fmt == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        pq.write_table(pa.Table.from_pylist(records) if records else pa.table({c: [] for c in columns}), path)
        return path
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns))
        writer.writeheader()
        writer.writerows(records)
    return path


def iso_utc(column: Column) -> Column:
    """A timestamp column as ISO-8601 UTC text (``2026-01-31T12:00:00Z``): tables show times the same
    wherever they are read (:func:`run` sets the session time zone to UTC)."""
    return F.date_format(column, "yyyy-MM-dd'T'HH:mm:ss'Z'")


def parse_iso(text: str) -> datetime:
    """The inverse of :func:`iso_utc`, for charts."""
    return datetime.fromisoformat(text)
