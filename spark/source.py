"""The ``mq`` data source: ``spark.read.format("mq")`` and ``spark.readStream.format("mq")``.

``partitions()`` runs once on the driver: it reads every covered queue's min/max offset (the
snapshot) and plans :class:`~spark.plan.ReadPartition` partitions; ``read()`` runs in the tasks and
opens its own connection. The small ``offsets`` and ``topics`` tables are computed whole at
planning and travel in their single partition.
"""

from __future__ import annotations

from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from mq.errors import MQClientError
from spark import plan, snapshot
from spark.options import ReadOptions, is_pattern, parse_options
from spark.reader import RangeReader, freeze_imports_in_spark_worker
from spark.schema import SCHEMAS, arrow_schema, check_schema, rows_batch
from spark.stream import MessagesStreamReader

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession

#: The format name: ``spark.read.format(FORMAT)``.
FORMAT = "mq"


class MQDataSource(DataSource):
    """The ``mq`` format. Options are checked when the DataFrame is defined (see :mod:`spark.options`).

    Raises:
        MQClientError: bad options, or ``TopicNotFoundError`` for a named topic that does not
            exist (both at ``load()``).
    """

    def __init__(self, options: MutableMapping[str, str]) -> None:
        super().__init__(options)
        freeze_imports_in_spark_worker()  # runs in the worker that creates the source
        self.read_options: ReadOptions = parse_options(options)

    @classmethod
    def name(cls) -> str:
        """The format name, ``mq``."""
        return FORMAT

    def schema(self) -> StructType:
        """The schema of the chosen table (see :mod:`spark.schema`).

        Also checks that the topics the ``topic`` option names exist, so a typo fails at
        ``load()`` rather than at the first action.

        Raises:
            TopicNotFoundError: a named topic does not exist.
        """
        if any(not is_pattern(t) for t in self.read_options.topics):
            with snapshot.open_store(self.read_options) as store:
                snapshot.resolve_topics(store.conn, self.read_options.topics)
        return SCHEMAS[self.read_options.table]

    def reader(self, schema: StructType) -> DataSourceReader:
        """A batch reader of the chosen table.

        Raises:
            MQClientError: a user schema that is not some of the table's columns, or a streaming-only option.
        """
        freeze_imports_in_spark_worker()  # the planning worker's
        check_schema(self.read_options.table, schema)
        if self.read_options.max_messages_per_trigger is not None:  # would be ignored: a batch reads everything asked
            raise MQClientError(
                "option 'max_messages_per_trigger' caps a streaming read's micro-batches: a batch read takes "
                "ending_offsets, min_store_time/max_store_time or a Spark limit() instead"
            )
        if self.read_options.table == "messages":
            return MessagesReader(self.read_options, schema)
        return SnapshotReader(self.read_options, schema)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A streaming reader of the ``messages`` table (see :mod:`spark.stream`)."""
        freeze_imports_in_spark_worker()
        if self.read_options.table != "messages":
            raise MQClientError(f"only the 'messages' table can be read as a stream, not {self.read_options.table!r}")
        check_schema("messages", schema)
        return MessagesStreamReader(self.read_options, schema)


class MessagesReader(RangeReader, DataSourceReader):
    """Batch reader of the ``messages`` table; pickled to the tasks, so it holds only options."""

    def partitions(self) -> list[InputPartition]:
        """Read every queue's offsets once (the snapshot) and plan the ranges to read.

        Raises:
            TopicNotFoundError: a ``topic`` entry names a topic that does not exist.
            MQBrokerError: the store failed.
        """
        with snapshot.open_store(self.options) as store:
            topics = snapshot.resolve_topics(store.conn, self.options.topics)
            ranges = plan.batch_ranges(store, snapshot.queue_stats(store, topics), self.options)
        return self.plan_ranges(ranges)


class SnapshotReader(DataSourceReader):
    """Batch reader of the ``offsets`` and ``topics`` tables: computed at planning, one partition."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        """Compute the table's rows on the driver.

        Raises:
            TopicNotFoundError: a ``topic`` entry names a topic that does not exist.
            MQBrokerError: the store failed.
        """
        with snapshot.open_store(self.options) as store:
            topics = snapshot.resolve_topics(store.conn, self.options.topics)
            rows = snapshot.offset_rows(store, topics) if self.options.table == "offsets" else snapshot.topic_rows(store, topics)
        return [plan.RowsPartition(tuple(rows))]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The rows computed at planning."""
        if isinstance(partition, plan.RowsPartition) and partition.rows:
            table = SCHEMAS[self.options.table].names
            picked = [table.index(name) for name in self.schema.names]  # the given columns, in the given order
            rows = [tuple(row[i] for i in picked) for row in partition.rows]
            yield rows_batch(rows, arrow_schema(self.schema))


def register(session: SparkSession) -> None:
    """Register the ``mq`` format with ``session`` (once per session; again is harmless)."""
    session.dataSource.register(MQDataSource)
