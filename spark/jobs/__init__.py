"""Analytics jobs over the store, each writing a table and a PNG chart (see docs/spark.md).

Run one with ``python -m spark.jobs.<name> --url URL --out DIR``, or several on one Spark session
with ``python -m spark.jobs <name>|all --url URL --out DIR``.
"""

from spark.jobs.cli import JOBS, main

__all__ = ["JOBS", "main"]
