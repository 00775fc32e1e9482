"""The Parquet form of a segment: one row per message with every field of
:class:`~mq.model.message.MessageExt`, in offset order.

Columns: ``queue_offset`` (int64), ``msg_id``, ``tags`` (null when untagged), ``keys``
(list<string>), ``properties`` and ``system_properties`` (map<string, string>), ``body`` (binary),
``born_timestamp_ms`` and ``store_timestamp_ms`` (int64, epoch ms), ``reconsume_times`` (int32).
The file's key-value metadata names the topic, queue and offset range. Row groups of
:data:`ROW_GROUP_ROWS` messages carry min/max statistics of ``queue_offset`` and
``store_timestamp_ms``, so a read at an offset or a time opens only the row groups that hold it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from mq.model.message import MessageExt
from mq.store.codec import message_of

#: Messages per row group: about 4 MiB of 1 KiB messages, the unit a read at an offset fetches.
ROW_GROUP_ROWS = 4096


def _pa() -> Any:
    import pyarrow as pa

    return pa


def schema() -> Any:
    """The Arrow schema of a segment file."""
    pa = _pa()
    text_map = pa.map_(pa.string(), pa.string())
    return pa.schema(
        [
            pa.field("queue_offset", pa.int64(), nullable=False),
            pa.field("msg_id", pa.string(), nullable=False),
            pa.field("tags", pa.string()),
            pa.field("keys", pa.list_(pa.string())),
            pa.field("properties", text_map),
            pa.field("system_properties", text_map),
            pa.field("body", pa.binary(), nullable=False),
            pa.field("born_timestamp_ms", pa.int64(), nullable=False),
            pa.field("store_timestamp_ms", pa.int64(), nullable=False),
            pa.field("reconsume_times", pa.int32(), nullable=False),
        ]
    )


def to_batch(messages: Sequence[MessageExt]) -> Any:
    """The messages as one Arrow record batch of :func:`schema`."""
    pa = _pa()
    return pa.record_batch(
        [
            pa.array([m.queue_offset for m in messages], pa.int64()),
            pa.array([m.msg_id for m in messages], pa.string()),
            pa.array([m.tags or None for m in messages], pa.string()),
            pa.array([list(m.keys) for m in messages], pa.list_(pa.string())),
            pa.array([list(m.properties.items()) for m in messages], pa.map_(pa.string(), pa.string())),
            pa.array([list(m.system_properties.items()) for m in messages], pa.map_(pa.string(), pa.string())),
            pa.array([m.body for m in messages], pa.binary()),
            pa.array([m.born_timestamp_ms for m in messages], pa.int64()),
            pa.array([m.store_timestamp_ms for m in messages], pa.int64()),
            pa.array([m.reconsume_times for m in messages], pa.int32()),
        ],
        schema=schema(),
    )


def file_metadata(topic: str, queue_id: int, start: int, end: int) -> dict[bytes, bytes]:
    """The key-value metadata written into a segment file (for humans and tools reading it alone)."""
    return {
        b"rocketredis.topic": topic.encode(),
        b"rocketredis.queue_id": str(queue_id).encode(),
        b"rocketredis.start": str(start).encode(),
        b"rocketredis.end": str(end).encode(),
    }


def from_table(topic: str, queue_id: int, table: Any) -> list[MessageExt]:
    """The messages of a table (or record batch) of :func:`schema`, in its row order."""
    cols = {name: table.column(name).to_pylist() for name in table.schema.names}
    return [
        message_of(
            topic,
            queue_id,
            offset=offset,
            msg_id=msg_id,
            tags=tags,
            keys=tuple(keys or ()),
            properties=dict(props) if props else None,
            body=body,
            born_timestamp_ms=born,
            store_timestamp_ms=stored,
            reconsume_times=reconsume,
            system_properties=dict(system) if system else None,
        )
        for offset, msg_id, tags, keys, props, system, body, born, stored, reconsume in zip(
            cols["queue_offset"],
            cols["msg_id"],
            cols["tags"],
            cols["keys"],
            cols["properties"],
            cols["system_properties"],
            cols["body"],
            cols["born_timestamp_ms"],
            cols["store_timestamp_ms"],
            cols["reconsume_times"],
        )
    ]


def row_groups_from(metadata: Any, offset: int) -> Iterable[int]:
    """Indexes of the row groups holding offsets at or past ``offset``, by their statistics."""
    column = metadata.schema.names.index("queue_offset")
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max or stats.max >= offset:
            yield i
