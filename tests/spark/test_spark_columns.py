"""A schema naming some of a table's columns: ``spark.read.format("mq").schema("topic string, body binary")``.

Real redis-server processes and the suite's local[2] SparkSession (``spark_session`` in conftest.py).
"""

from __future__ import annotations

import logging
import pathlib
import uuid
from typing import Any

import pytest

pytest.importorskip("pyspark", reason="pip install 'rocketredis[spark]'")

import pyarrow as pa
from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql.types import StructType

from mq import Message, MessageQueue, MQClientError, Producer
from mq.model.msgid import new_msg_id
from mq.store import Store, codec
from mq.store.connection import Connection
from spark import MQDataSource, schema_of
from spark.schema import MESSAGES, arrow_schema
from tests.helpers import admin_once, raw_client
from tests.leaks import owned
from tests.spark.test_spark import _varied_messages, load
from tests.spark_data import Filled, fill

pytestmark = [pytest.mark.spark]

#: Subsets read in the equality tests: one column each, a few usual pairs, and every column in
#: the table's reverse order.
SUBSETS = [
    *([name] for name in MESSAGES.names),
    ["body", "store_timestamp"],
    ["store_timestamp", "body"],
    ["tags", "keys", "topic"],
    ["properties", "queue_offset", "msg_id"],
    list(reversed(MESSAGES.names)),
]


def ddl(names: list[str]) -> str:
    """DDL text of the named ``messages`` columns, e.g. ``"topic string, body binary"``."""
    return ", ".join(f"{name} {MESSAGES[name].dataType.simpleString()}" for name in names)


def plain(rows: list[Row]) -> list[tuple[Any, ...]]:
    """Rows as comparable tuples (maps as sorted pairs, bytearrays as bytes)."""

    def value(v: Any) -> Any:
        if isinstance(v, dict):
            return tuple(sorted(v.items()))
        if isinstance(v, bytearray | bytes):
            return bytes(v)
        if isinstance(v, list):
            return tuple(v)
        return v

    return [tuple(map(value, r)) for r in rows]


def put_varied(url: str, namespace: str, topic: str) -> int:
    """Store messages with every field in every form (see ``_varied_messages``), and keys holding
    separators of other systems; returns how many."""
    admin_once(url, namespace).create_topic(topic, read_queues=1, write_queues=1)
    store = owned(Store(Connection(url, namespace)))
    sent = [
        *_varied_messages(topic),
        (Message(topic, "ünï €".encode(), keys=["a b", "c,d", "e;f|g"], properties={"k": "v w"}), 0, None),
    ]
    for msg, reconsume, system in sent:
        store.put(topic, 0, [codec.encode(msg, new_msg_id(), reconsume_times=reconsume, system_properties=system)])
    return len(sent)


@pytest.fixture(scope="module")
def mixed(redis_server: Any) -> Filled:
    """2 000 messages on 2 queues of ``Orders`` and every field form on ``Mixed``, own namespace."""
    data = fill(redis_server.url, "c" + uuid.uuid4().hex[:8], "Orders", 2000, 2)
    put_varied(data.url, data.namespace, "Mixed")
    return data


def test_subset_schemas_read_the_same_values_as_the_full_read(spark_session: SparkSession, mixed: Filled) -> None:
    options = mixed.options(topic="Orders,Mixed", page_size="25")  # 100 entries a round trip: 10 batches a queue
    full = load(spark_session, options)
    assert full.count() == 2000 + len(_varied_messages("Mixed")) + 1
    for names in SUBSETS:
        subset = spark_session.read.format("mq").schema(ddl(names)).options(**options).load()
        assert subset.columns == names
        assert plain(subset.collect()) == plain(full.select(*names).collect()), names  # same plan: same row order
    bodies = spark_session.read.format("mq").schema(schema_of("body", "msg_id")).options(**options).load()
    assert {r.msg_id: bytes(r.body) for r in bodies.collect() if r.msg_id in mixed.sent} == {
        mid: body for mid, (_, _, body, _) in mixed.sent.items()
    }


def test_subset_with_store_time_options_and_filters(spark_session: SparkSession, mixed: Filled) -> None:
    from pyspark.sql import functions as F

    stored = sorted(r[0] for r in load(spark_session, mixed.options()).select(F.unix_millis("store_timestamp")).collect())
    low, high = stored[len(stored) // 3], stored[2 * len(stored) // 3]
    bounded = mixed.options(min_store_time=str(low), max_store_time=str(high), page_size="50")
    expected = sum(1 for t in stored if low <= t <= high)
    assert spark_session.read.format("mq").schema("body binary").options(**bounded).load().count() == expected
    subset = spark_session.read.format("mq").schema("queue_id int, body binary").options(**mixed.options()).load()
    assert subset.where("queue_id = 1").count() == mixed.queue_counts()[1]  # Spark filters the rows it got
    with pytest.raises(AnalysisException, match="UNRESOLVED_COLUMN"):  # a column the schema left out cannot be named
        subset.where("queue_offset = 0")


def test_snapshot_tables_take_a_subset_too(spark_session: SparkSession, mixed: Filled) -> None:
    topics = spark_session.read.format("mq").schema("messages long, queue_id int").options(**mixed.options(table="topics"))
    assert {r.queue_id: r.messages for r in topics.load().collect()} == mixed.queue_counts()


def test_streaming_takes_a_subset(spark_session: SparkSession, mixed: Filled, tmp_path: pathlib.Path) -> None:
    seen: list[tuple[str, bytes]] = []

    def sink(batch: DataFrame, batch_id: int) -> None:
        assert batch.columns == ["msg_id", "body"]
        seen.extend((r.msg_id, bytes(r.body)) for r in batch.collect())

    query = (
        spark_session.readStream.format("mq")
        .schema("msg_id string, body binary")
        .options(**mixed.options(starting_offsets="earliest", max_messages_per_trigger="800"))
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert dict(seen) == {mid: body for mid, (_, _, body, _) in mixed.sent.items()} and len(seen) == len(mixed.sent)


@pytest.mark.parametrize(
    ("schema", "fault"),
    [
        ("topic string, nope int", "has no column 'nope'"),
        ("topic string, queue_id long", "has 'queue_id' as int, not bigint"),
        ("body string", "has 'body' as binary, not string"),
        ("keys string", "has 'keys' as array<string>, not string"),
        ("topic string, topic string", "names 'topic' twice"),
        ("Topic string", "has no column 'Topic'"),
    ],
)
def test_a_bad_schema_is_refused_before_anything_is_read(
    spark_session: SparkSession, redis_server: Any, schema: str, fault: str
) -> None:
    options = {"url": redis_server.url, "namespace": "none" + uuid.uuid4().hex[:6]}
    allowed = "topic string, queue_id int, queue_offset bigint, msg_id string, tags string, keys array<string>"
    source = MQDataSource(options)
    given = StructType.fromDDL(schema)
    with pytest.raises(MQClientError, match=fault) as refused:
        source.reader(given)
    assert allowed in str(refused.value) and "system_properties map<string,string>" in str(refused.value)
    df = spark_session.read.format("mq").schema(schema).options(**options).load()  # Spark asks the source at planning
    with pytest.raises(AnalysisException, match=f"MQClientError: format 'mq' table 'messages' {fault}"):
        df.count()
    with pytest.raises(MQClientError, match="names no column"):
        source.reader(StructType([]))
    with pytest.raises(MQClientError, match=fault):
        source.streamReader(given)
    with pytest.raises(MQClientError, match="table 'offsets' has no column 'body'"):
        MQDataSource({**options, "table": "offsets"}).reader(StructType.fromDDL("body binary"))
    with pytest.raises(MQClientError, match="has no column 'nope'"):
        schema_of("topic", "nope")


def test_foreign_entries_in_a_subset_read(redis_server: Any, namespace: str, caplog: pytest.LogCaptureFixture) -> None:
    """Only the fields a subset reads are decoded: an entry is left out (one logged error) when it
    lacks a field every message has, or when a field the subset reads does not convert; an entry
    whose only fault is in a field the subset does not read is a row."""
    from spark import columns

    url = redis_server.url
    admin_once(url, namespace).create_topic("F", read_queues=1, write_queues=1)
    with Producer("p", url, namespace=namespace) as producer:
        producer.send_batch(
            [Message("F", b"%d" % i, tags="t", properties={"n": str(i)}) for i in range(40)],
            queue=MessageQueue("F", "broker-a", 0),
        )
    message = {"i": "x", "b": "y", "bt": "1", "st": "1"}
    foreign = {  # offset: fields
        40: {**message, "p": "{"},  # broken properties
        41: {"junk": "1"},  # not a message at all
        42: {**message, "t": b"\xff\xfe"},  # tags that are not UTF-8
        43: {**message, "bt": "12a"},  # a born time that is not a number
    }
    client = raw_client(url)
    keys = owned(Connection(url, namespace)).keys.queue("F", 0)
    for offset, fields in foreign.items():
        client.xadd(keys.log, fields, id=f"0-{offset + 1}")
    client.hset(keys.meta, "seq", 44)
    client.close()
    with Producer("p", url, namespace=namespace) as producer:
        producer.send_batch([Message("F", b"late")] * 5, queue=MessageQueue("F", "broker-a", 0))
    entries = owned(Store(Connection(url, namespace))).read_page_entries("F", 0, [(0, 48)])
    cases = {  # columns: the foreign offsets that are rows
        ("queue_offset", "body"): {40, 42, 43},
        ("queue_offset", "properties"): {42, 43},
        ("queue_offset", "tags"): {40, 43},
        ("queue_offset", "born_timestamp", "body"): {40, 42},
        ("queue_offset",): {40, 42, 43},
    }
    for names, kept in cases.items():
        caplog.clear()
        schema = arrow_schema(StructType([MESSAGES[n] for n in names]))
        with caplog.at_level(logging.ERROR, logger="mq.store"):
            batch = columns.entries_batch("F", 0, entries, schema)
        assert batch.schema == schema
        assert batch.column("queue_offset").to_pylist() == [*range(40), *sorted(kept), *range(44, 49)], names
        skipped = [r for r in caplog.records if "not a message this library wrote" in r.getMessage()]
        assert len(skipped) == 4 - len(kept), names
    assert tuple(MESSAGES.names) == columns.MESSAGE_COLUMNS
    full = columns.entries_batch("F", 0, entries, arrow_schema(MESSAGES))  # every column: as before, all four skipped
    assert full.column("queue_offset").to_pylist() == [*range(40), *range(44, 49)]
    only_foreign = columns.entries_batch("F", 0, entries[41:42], arrow_schema(StructType([MESSAGES["body"]])))
    assert only_foreign.num_rows == 0 and only_foreign.schema == pa.schema([pa.field("body", pa.binary())])


@pytest.mark.cluster
def test_cluster_subset_equals_full_read(spark_session: SparkSession, redis_cluster: Any, namespace: str) -> None:
    data = fill(redis_cluster.url, namespace, "Orders", 3000, 6)
    put_varied(data.url, namespace, "Mixed")
    options = data.options(topic="Orders,Mixed", page_size="100")
    full = load(spark_session, options)
    for names in (["body", "store_timestamp"], ["system_properties", "keys", "queue_id", "tags"], list(reversed(MESSAGES.names))):
        subset = spark_session.read.format("mq").schema(ddl(names)).options(**options).load()
        assert plain(subset.collect()) == plain(full.select(*names).collect()), names
