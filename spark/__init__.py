"""Spark over the store: the ``mq`` data source (batch and streaming) and analytics jobs.

Install with ``pip install 'rocketredis[spark]'``, then::

    from spark import local_session, register

    session = local_session()          # or your own SparkSession, then register(session)
    df = session.read.format("mq").option("url", url).option("topic", "orders").load()
    bodies = session.read.format("mq").schema("body binary, store_timestamp timestamp").option("url", url).load()

See docs/spark.md for the options, tables and jobs.
"""

try:
    import pyarrow  # noqa: F401
    import pyspark  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"the spark package needs pyspark 4 and pyarrow ({e.name} is missing): pip install 'rocketredis[spark]'"
    ) from e

from spark.options import ReadOptions, parse_options
from spark.schema import schema_of
from spark.session import local_session
from spark.source import MQDataSource, register

__all__ = ["MQDataSource", "ReadOptions", "local_session", "parse_options", "register", "schema_of"]
