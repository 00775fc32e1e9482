"""``python -m spark.jobs NAME|all [job arguments]``: one or every analytics job on one Spark session.

``mq analytics`` calls it too (see docs/spark.md).
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

from pyspark.sql import SparkSession

from spark.jobs import runner

#: The jobs, by name (module ``spark.jobs.<name>`` defines ``JOB``).
JOBS = ("throughput", "lag", "dlq", "skew")


def job(name: str) -> runner.Job:
    """The job called ``name``."""
    module = importlib.import_module(f"spark.jobs.{name}")
    found: runner.Job = module.JOB
    return found


def main(argv: Sequence[str] | None = None, session: SparkSession | None = None) -> int:
    """Run the job named by the first argument (``all``: every job) with the remaining arguments.

    Returns the exit code: 0 when every job succeeded, else the first failure's.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in (*JOBS, "all"):
        print(f"usage: python -m spark.jobs {{{','.join(JOBS)},all}} --url URL [--namespace NS] [--out DIR] ...", file=sys.stderr)
        return 2
    names = JOBS if args[0] == "all" else (args[0],)
    if session is not None or len(names) == 1:
        return _run_all(names, args[1:], session)
    from spark.session import local_session

    parsed = runner.parse_args(job(names[0]), args[1:])
    own = local_session(parsed.cores, app_name="rocketredis-analytics")
    try:
        return _run_all(names, args[1:], own)
    finally:
        own.stop()


def _run_all(names: Sequence[str], argv: Sequence[str], session: SparkSession | None) -> int:
    codes = [runner.main(job(name), argv, session) for name in names]
    return next((c for c in codes if c), 0)
