"""Reading one partition on an executor: pipelined ``XRANGE`` pages to Arrow record batches.

Offsets map to entry ids by arithmetic (``0-(offset+1)``), so the pages of a range are known
before anything is read and several go out in one pipeline (one round trip). Every key of a queue
shares one hash slot, so on a cluster the pipeline goes to one node. Entries trimmed by retention
are simply absent from ``XRANGE``'s answer: they are skipped, never an error.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from mq.connection import Connection
from mq.message import MessageExt
from mq.store import Store
from spark import plan
from spark.options import ReadOptions
from spark.plan import QueueRange
from spark.schema import arrow_schema, record_batch
from spark.snapshot import QueueId

#: ``XRANGE`` pages sent in one pipeline (one round trip, one record batch).
PAGES_PER_ROUND_TRIP = 4


class RangeReader:
    """What the batch and the streaming message readers share: they hold only the options and the
    schema (Spark pickles them to the tasks), plan ranges the same way and read them the same way."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def plan_ranges(self, ranges: Mapping[QueueId, tuple[int, int]]) -> list[InputPartition]:
        """Balanced partitions over per-queue ``[start, end)`` ranges (see :func:`spark.plan.plan`)."""
        return list(plan.plan(ranges, min_partitions=self.options.min_partitions,
                              max_partition_messages=self.options.max_partition_messages))  # fmt: skip

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The messages of one planned range, as Arrow record batches."""
        if not isinstance(partition, QueueRange):  # Spark's placeholder when nothing was planned
            return iter(())
        return read_range(self.options, partition, arrow_schema(self.schema))


def read_range(opts: ReadOptions, part: QueueRange, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Record batches of the messages stored at offsets ``[part.start, part.end)`` of one queue.

    Opens its own connection (tasks run in other processes) and closes it when done. Messages
    outside the store-time options are left out.

    Raises:
        MQBrokerError: the store failed.
    """
    conn = Connection(opts.url, opts.namespace)
    try:
        store = Store(conn)
        step = opts.page_size * PAGES_PER_ROUND_TRIP
        for low in range(part.start, part.end, step):
            high = min(low + step, part.end)
            pages = [(first, min(first + opts.page_size, high) - 1) for first in range(low, high, opts.page_size)]
            messages = [m for m in store.read_pages(part.topic, part.queue_id, pages) if _in_time(m, opts)]
            if messages:
                yield messages_batch(messages, schema)
    finally:
        conn.close()


def _in_time(msg: MessageExt, opts: ReadOptions) -> bool:
    st = msg.store_timestamp_ms
    return (opts.min_store_time_ms is None or st >= opts.min_store_time_ms) and (
        opts.max_store_time_ms is None or st <= opts.max_store_time_ms
    )


def messages_batch(messages: Sequence[MessageExt], schema: pa.Schema) -> pa.RecordBatch:
    """The ``messages`` table rows of ``messages`` as one Arrow record batch."""
    columns: dict[str, list[Any]] = {
        "topic": [m.topic for m in messages],
        "queue_id": [m.queue_id for m in messages],
        "queue_offset": [m.queue_offset for m in messages],
        "msg_id": [m.msg_id for m in messages],
        "tags": [m.tags for m in messages],
        "keys": [list(m.keys) for m in messages],
        "properties": [list(m.properties.items()) for m in messages],
        "body": [bytes(m.body) for m in messages],
        "born_timestamp": [m.born_timestamp_ms for m in messages],
        "store_timestamp": [m.store_timestamp_ms for m in messages],
        "reconsume_times": [m.reconsume_times for m in messages],
        "system_properties": [list(m.system_properties.items()) for m in messages],
    }
    return record_batch(columns, schema)
