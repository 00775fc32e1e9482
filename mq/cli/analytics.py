"""``mq analytics``: the Spark jobs (needs the ``spark`` extra)."""

from __future__ import annotations

import argparse
import sys

from mq.cli.common import Commands, add_leaf
from mq.store.connection import resolve_url

JOBS = ("throughput", "lag", "dlq", "skew", "all")


def register(commands: Commands, common: argparse.ArgumentParser) -> None:
    """Add ``mq analytics``."""
    an = add_leaf(commands, "analytics", _analytics, "Spark analytics jobs: throughput, lag, dlq, skew (needs .[spark])", common)
    an.add_argument("job", choices=JOBS, help="the job to run; all runs every job")
    an.add_argument("--out", default="analytics-out", help="folder for the tables and PNG charts (default: %(default)s)")
    an.add_argument("job_args", nargs=argparse.REMAINDER, help="more options of the job (see docs/spark.md)")


def _analytics(args: argparse.Namespace) -> int:
    try:
        from spark.jobs import cli as jobs
    except ImportError:
        print("mq: error: Spark analytics need the extra: pip install 'rocketredis[spark]' (and Java 17)", file=sys.stderr)
        return 1
    url = resolve_url(args.url)
    return jobs.main([args.job, "--url", url, "--namespace", args.namespace, "--out", args.out, *args.job_args])
