"""Reading one partition on an executor: pipelined ``XRANGE`` pages to Arrow record batches.

Offsets the tier holds (below the queue's manifest end, read when the part starts) come from its
Parquet segments; the rest from Redis. Offsets map to entry ids by arithmetic (``0-(offset+1)``),
so the pages of a range are known before anything is read and several go out in one pipeline (one
round trip). Every key of a queue shares one hash slot, so on a cluster the pipeline goes to one
node. Entries trimmed by retention are simply absent from ``XRANGE``'s answer: they are skipped,
never an error.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Generator, Iterator, Mapping, Sequence

import pyarrow as pa
from pyspark.sql.datasource import InputPartition
from pyspark.sql.types import StructType

from mq.store import Store
from mq.store.connection import Connection
from spark import plan
from spark.columns import entries_batch, tier_batch, tier_columns
from spark.options import ReadOptions
from spark.plan import QueueRange, ReadPartition
from spark.schema import arrow_schema
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
        return list(
            plan.plan(
                ranges,
                min_partitions=self.options.min_partitions,
                max_partition_messages=self.options.max_partition_messages,
                pack_queues=self.options.pack_queues,
            )
        )

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The messages of one planned partition, as Arrow record batches."""
        freeze_imports_in_spark_worker()
        if not isinstance(partition, ReadPartition):  # Spark's placeholder when nothing was planned
            return iter(())
        return read_ranges(self.options, partition.ranges, arrow_schema(self.schema))


def read_ranges(opts: ReadOptions, parts: Sequence[QueueRange], schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """Record batches of the messages stored at offsets ``[part.start, part.end)`` of each part's
    queue, one part after the other.

    Opens its own connection (tasks run in other processes) and closes it when done. Messages
    outside the store-time options are left out.

    Raises:
        MQBrokerError: the store failed.
    """
    conn = Connection(opts.url, opts.namespace)
    try:
        store = Store(conn)
        step = opts.page_size * PAGES_PER_ROUND_TRIP
        for part in parts:
            tiered_end = yield from _tiered_part(store, opts, part, schema)
            for low in range(max(part.start, tiered_end), part.end, step):
                high = min(low + step, part.end)
                pages = [(first, min(first + opts.page_size, high) - 1) for first in range(low, high, opts.page_size)]
                with no_cyclic_gc():  # the reply's ~17 objects an entry are freed before it ends
                    batch = entries_batch(
                        part.topic,
                        part.queue_id,
                        store.read_page_entries(part.topic, part.queue_id, pages),
                        schema,
                        min_store_time_ms=opts.min_store_time_ms,
                        max_store_time_ms=opts.max_store_time_ms,
                    )
                if batch.num_rows:
                    yield batch
    finally:
        conn.close()


def _tiered_part(store: Store, opts: ReadOptions, part: QueueRange, schema: pa.Schema) -> Generator[pa.RecordBatch, None, int]:
    """Record batches of the part's offsets the tier holds (below the queue's manifest end, read now:
    Redis holds everything from there on, so the rest of the part is read from Redis with no gap or
    duplicate); returns where the tier ends (``part.start`` when it holds none of the part)."""
    segments = store.segments(part.topic, part.queue_id)
    end = min(part.end, segments[-1].end) if segments else part.start
    if end <= part.start:
        return part.start
    reader = store.tier_reader()
    if reader is None:  # segments without a published tier: nothing to read them with
        return part.start
    columns = tier_columns(schema)
    for seg in segments:
        low, high = max(part.start, seg.start), min(end, seg.end)
        if low >= high:
            continue
        for table in reader.tables(part.topic, part.queue_id, seg, low, high, columns):
            batch = tier_batch(
                part.topic,
                part.queue_id,
                table,
                schema,
                min_store_time_ms=opts.min_store_time_ms,
                max_store_time_ms=opts.max_store_time_ms,
            )
            if batch.num_rows:
                yield batch
    return end


_frozen = False


def freeze_imports_in_spark_worker() -> None:
    """In a Python worker forked by PySpark's daemon, move every object alive now (the imported
    modules, mostly) out of the cyclic collector's sight, once per process (``gc.freeze``).

    The daemon runs a full ``gc.collect()`` after every task a reused worker serves (planning
    workers included); with pyspark, pyarrow, redis and this package imported that is ~77 000
    objects, measured 17–33 ms of CPU each time, in each of the 3–4 workers an action uses.
    Frozen objects are still freed by reference counting; only cycles among them are never
    collected (module-level objects, which live as long as the process anyway). Elsewhere
    (a driver, a test, a script) this does nothing.
    """
    global _frozen
    if _frozen:
        return
    main_spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if getattr(main_spec, "name", None) != "pyspark.daemon":
        return
    _frozen = True
    gc.freeze()


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector paused for one round trip's read and decode (then as it was).

    A 4 000-entry ``XRANGE`` reply holds ~8 000 lists the collector tracks (an entry and its field
    list each), all alive until the record batch is built: with the collector on, its youngest
    generation is scanned every 700 of them and the older ones, holding the reply's survivors, every
    10 and 100 of those — measured, 0.9 µs of the reader's 3.2 µs of client CPU an entry. None of
    these objects is in a cycle and all are freed by reference counting before the block ends, so
    the collector's counts are back where they were (measured: +7 a round trip).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
