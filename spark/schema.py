"""The tables the ``mq`` source serves, the user schemas it accepts (some of a table's columns, any
order, the table's types: :func:`check_schema`, :func:`schema_of`), and their Arrow form.

Timestamps travel as epoch milliseconds (the store's unit) until :func:`record_batch` turns them
into Arrow microseconds at the boundary.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from mq.errors import MQClientError


def _struct(*fields: tuple[str, Any]) -> StructType:
    return StructType([StructField(name, kind, nullable=True) for name, kind in fields])


_STRING_MAP = MapType(StringType(), StringType(), valueContainsNull=True)

#: One row per stored message. ``system_properties`` holds what the system set (``RETRY_TOPIC``,
#: ``ORIGIN_MESSAGE_ID`` on retried and dead-lettered messages); empty on ordinary messages.
MESSAGES = _struct(
    ("topic", StringType()),
    ("queue_id", IntegerType()),
    ("queue_offset", LongType()),
    ("msg_id", StringType()),
    ("tags", StringType()),
    ("keys", ArrayType(StringType(), containsNull=True)),
    ("properties", _STRING_MAP),
    ("body", BinaryType()),
    ("born_timestamp", TimestampType()),
    ("store_timestamp", TimestampType()),
    ("reconsume_times", IntegerType()),
    ("system_properties", _STRING_MAP),
)

#: One row per (group, topic, queue): the queue's max offset, the group's committed offset
#: (-1 when it has none on that queue) and the lag (as ``Admin.consumer_progress`` computes it).
OFFSETS = _struct(
    ("group", StringType()),
    ("topic", StringType()),
    ("queue_id", IntegerType()),
    ("broker_offset", LongType()),
    ("consumer_offset", LongType()),
    ("lag", LongType()),
)

#: One row per queue of each topic: offsets, stored count, newest store time and permissions.
TOPICS = _struct(
    ("topic", StringType()),
    ("queue_id", IntegerType()),
    ("min_offset", LongType()),
    ("max_offset", LongType()),
    ("messages", LongType()),
    ("last_store_timestamp", TimestampType()),
    ("readable", BooleanType()),
    ("writable", BooleanType()),
)

#: Schema of each table.
SCHEMAS: dict[str, StructType] = {"messages": MESSAGES, "offsets": OFFSETS, "topics": TOPICS}


def check_schema(table: str, given: StructType) -> None:
    """Refuse a user-given schema unless it names some of ``table``'s columns, each once and with
    the column's own type (any order: rows carry the given columns in the given order).

    Raises:
        MQClientError: no column, an unknown or repeated column, or a column with another type;
            the message quotes the offending column and lists every column with its type.
    """
    columns = {f.name: f.dataType for f in SCHEMAS[table].fields}
    fault = _schema_fault(columns, given)
    if fault is not None:
        allowed = ", ".join(f"{name} {kind.simpleString()}" for name, kind in columns.items())
        raise MQClientError(
            f"format 'mq' table {table!r} {fault}: give a schema of some of its columns, any order, "
            f"with these types: {allowed} (got {given.simpleString()})"
        )


def _schema_fault(columns: Mapping[str, DataType], given: StructType) -> str | None:
    """What is wrong with ``given`` as a schema of some of ``columns`` (by name), or None."""
    if not given.fields:
        return "names no column"
    seen: set[str] = set()
    for f in given.fields:
        if f.name not in columns:
            return f"has no column {f.name!r}"
        if f.name in seen:
            return f"names {f.name!r} twice"
        if f.dataType != columns[f.name]:
            return f"has {f.name!r} as {columns[f.name].simpleString()}, not {f.dataType.simpleString()}"
        seen.add(f.name)
    return None


def schema_of(*columns: str, table: str = "messages") -> StructType:
    """The schema of some of ``table``'s columns, in the order given, for ``.schema(...)`` of a read
    that converts only those (``schema_of("topic", "body")``; DDL text such as ``"topic string,
    body binary"`` works too).

    Raises:
        MQClientError: an unknown table or column, or a column named twice.
    """
    if table not in SCHEMAS:
        raise MQClientError(f"unknown table {table!r}: use one of {', '.join(SCHEMAS)}")
    by_name = {f.name: f for f in SCHEMAS[table].fields}
    chosen = StructType([by_name.get(name, StructField(name, StringType())) for name in columns])
    check_schema(table, chosen)
    return chosen


def arrow_schema(schema: StructType) -> pa.Schema:
    """The Arrow schema Spark expects for ``schema`` (UTC timestamps in microseconds)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    try:
        return to_arrow_schema(schema, timezone="UTC")
    except TypeError:  # pyspark releases before the ``timezone`` keyword use UTC already
        return to_arrow_schema(schema)


def record_batch(columns: Mapping[str, Sequence[Any]], schema: pa.Schema) -> pa.RecordBatch:
    """An Arrow record batch from Python columns named as ``schema``'s fields.

    Timestamp columns hold epoch milliseconds (or None); everything else the Python value.
    """
    arrays = []
    for field in schema:
        values = columns[field.name]
        if pa.types.is_timestamp(field.type):
            values = [None if v is None else v * 1000 for v in values]
        arrays.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def rows_batch(rows: Sequence[Sequence[Any]], schema: pa.Schema) -> pa.RecordBatch:
    """An Arrow record batch from row tuples in field order (timestamps as epoch ms)."""
    columns = list(zip(*rows)) if rows else [() for _ in schema]
    return record_batch({f.name: list(col) for f, col in zip(schema, columns)}, schema)
