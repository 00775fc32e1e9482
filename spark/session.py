"""A local SparkSession set up for the ``mq`` source (jobs, tests, benchmark, notebooks)."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

from spark.source import register

#: Default executor cores of a local session (``local[N]``).
DEFAULT_CORES = 2
#: Default ``spark.sql.shuffle.partitions``: the analytics tables are small, Spark's 200 is waste.
DEFAULT_SHUFFLE_PARTITIONS = 4


def local_session(
    cores: int = DEFAULT_CORES,
    *,
    app_name: str = "rocketredis",
    shuffle_partitions: int = DEFAULT_SHUFFLE_PARTITIONS,
    log_level: str = "ERROR",
) -> SparkSession:
    """A ``local[cores]`` SparkSession with the ``mq`` format registered.

    Python workers run this interpreter (``PYSPARK_PYTHON`` unless already set), so they import
    the same ``mq`` and ``spark`` packages; Spark binds to loopback. Timestamps show in UTC; the web UI is off. If a session
    is already running in this process it is reused (Spark allows one per process), with ``mq``
    registered on it.

    Args:
        cores: executor threads of the local master.
        app_name: the application name.
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        log_level: Spark's log level (``ERROR``, ``WARN``, ``INFO``).
    """
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local session needs no other interface
    session = (
        SparkSession.builder.master(f"local[{int(cores)}]")
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(int(shuffle_partitions)))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel(log_level)
    register(session)
    return session
