"""Reading messages back from tier segments: the rows at and after an offset, through the pull's
filter evaluated in Python (the same semantics as the store's Lua filter, :mod:`mq.filter`).

A reader keeps the last few decoded row groups, so a consumer catching up through a segment fetches
each row group once, not once per pull.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from mq.filter import sql92
from mq.filter.sql92_nodes import Condition, from_json
from mq.model.message import MessageExt
from mq.tier import format as fmt
from mq.tier.location import TierLocation
from mq.tier.segment import Segment, covering

#: Decoded row groups a reader keeps (4 MiB of 1 KiB messages each).
CACHED_ROW_GROUPS = 8
#: Segment footers (row-group statistics) a reader keeps.
CACHED_FOOTERS = 256

Matcher = Callable[[MessageExt], bool]


def matcher(filter_type: str, filter_data: str) -> Matcher:
    """The pull filter ``(filter_type, filter_data)`` (as :class:`mq.store.groups.PullRequest` carries
    it for pull-messages-4.lua) as a Python predicate over messages.

    Raises:
        ValueError: an unknown filter type or a malformed SQL92 tree.
    """
    if not filter_type:
        return lambda m: True
    if filter_type == "TAG":
        tags = frozenset(filter_data.split("\x1f"))
        if "*" in tags:
            return lambda m: True
        return lambda m: bool(m.tags) and m.tags in tags
    if filter_type == "SQL92":
        node = from_json(json.loads(filter_data))
        condition: Condition = node  # type: ignore[assignment]  # a top-level tree is a condition
        return lambda m: sql92.evaluate(condition, m.properties, m.tags) is True
    raise ValueError(f"unknown filter type {filter_type!r}")


@dataclass(frozen=True)
class TierRead:
    """What a read of the tier found: matching messages and where the next read starts (one past the
    last row scanned, matched or not)."""

    messages: list[MessageExt]
    next_offset: int


class TierReader:
    """Reads one namespace's segments from a tier (thread-safe; one per store). Segment files are
    immutable, so their footers and decoded row groups are cached by file name."""

    def __init__(self, location: TierLocation, namespace: str) -> None:
        self.location = location
        self.namespace = namespace
        self._groups: OrderedDict[tuple[str, int, str, int], list[MessageExt]] = OrderedDict()
        self._footers: OrderedDict[str, Any] = OrderedDict()
        self._lock = threading.Lock()

    def read(
        self,
        topic: str,
        queue_id: int,
        segments: Sequence[Segment],
        offset: int,
        max_messages: int,
        max_scan: int,
        matches: Matcher,
    ) -> TierRead:
        """Up to ``max_messages`` matching messages from ``offset`` on, scanning at most ``max_scan``
        rows and never past the segment holding ``offset`` (the next read continues from where this
        one stopped: the next segment, or Redis at the manifest's end).

        Raises:
            OSError: the tier could not be read (the caller reports the pull as failed; nothing moves).
        """
        seg = covering(segments, offset)
        if seg is None:
            return TierRead([], offset)
        found: list[MessageExt] = []
        scanned, limit = 0, max(1, max_scan)
        path = self.location.path(self.namespace, topic, queue_id, seg.name)
        for index in fmt.row_groups_from(self._footer(path), offset):
            group = self._row_group(topic, queue_id, path, index)
            # offsets are dense within a segment: the row of ``offset`` is found by arithmetic
            skip = max(0, offset - group[0].queue_offset) if group else 0
            for m in itertools.islice(group, skip, None):
                scanned += 1
                if matches(m):
                    found.append(m)
                if len(found) >= max_messages or scanned >= limit:
                    return TierRead(found, m.queue_offset + 1)
        return TierRead(found, seg.end)

    def _footer(self, path: str) -> Any:
        """The Parquet metadata of a segment file (row groups and their statistics)."""
        with self._lock:
            if path in self._footers:
                self._footers.move_to_end(path)
                return self._footers[path]
        import pyarrow.parquet as pq

        with self.location.fs.open_input_file(path) as f:
            metadata = pq.ParquetFile(f).metadata
        with self._lock:
            self._footers[path] = metadata
            while len(self._footers) > CACHED_FOOTERS:
                self._footers.popitem(last=False)
        return metadata

    def _row_group(self, topic: str, queue_id: int, path: str, index: int) -> list[MessageExt]:
        """The messages of one row group of a segment file, decoded (cached)."""
        key = (topic, queue_id, path, index)
        with self._lock:
            if key in self._groups:
                self._groups.move_to_end(key)
                return self._groups[key]
        import pyarrow.parquet as pq

        with self.location.fs.open_input_file(path) as f:
            table = pq.ParquetFile(f).read_row_group(index)
        messages = fmt.from_table(topic, queue_id, table)
        with self._lock:
            self._groups[key] = messages
            while len(self._groups) > CACHED_ROW_GROUPS:
                self._groups.popitem(last=False)
        return messages

    def first_stored_at(self, topic: str, queue_id: int, seg: Segment, timestamp_ms: int) -> int:
        """The offset of the first message of ``seg`` stored at or after ``timestamp_ms`` (its end when
        none is): only the offset and store-time columns of the row groups that can hold it are read."""
        import pyarrow.parquet as pq

        path = self.location.path(self.namespace, topic, queue_id, seg.name)
        metadata = self._footer(path)
        column = metadata.schema.names.index("store_timestamp_ms")
        with self.location.fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            for i in range(metadata.num_row_groups):
                stats = metadata.row_group(i).column(column).statistics
                if stats is not None and stats.has_min_max and stats.max < timestamp_ms:
                    continue
                table = parquet.read_row_group(i, columns=["queue_offset", "store_timestamp_ms"])
                for offset, stored in zip(table.column(0).to_pylist(), table.column(1).to_pylist()):
                    if stored >= timestamp_ms:
                        return int(offset)
        return seg.end

    def find(
        self, topic: str, queue_id: int, seg: Segment, column: str, wanted: str, limit: int, begin_ms: int | None = None
    ) -> list[MessageExt]:
        """Messages of ``seg`` whose ``column`` (``msg_id``, or ``keys``: any key) equals ``wanted``, oldest
        first, at most ``limit``: only that column, the offsets and store times of the row groups whose
        store times reach ``begin_ms`` are read, then the matching rows' row groups."""
        import pyarrow.parquet as pq

        path = self.location.path(self.namespace, topic, queue_id, seg.name)
        metadata = self._footer(path)
        stored_at = metadata.schema.names.index("store_timestamp_ms")
        out: list[MessageExt] = []
        with self.location.fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            for i in range(metadata.num_row_groups):
                stats = metadata.row_group(i).column(stored_at).statistics
                if begin_ms is not None and stats is not None and stats.has_min_max and stats.max < begin_ms:
                    continue
                table = parquet.read_row_group(i, columns=["queue_offset", column])
                values = table.column(1).to_pylist()
                hits = [
                    offset
                    for offset, value in zip(table.column(0).to_pylist(), values)
                    if (wanted in value if isinstance(value, list) else value == wanted)
                ]
                if hits:
                    group = self._row_group(topic, queue_id, path, i)
                    first = group[0].queue_offset
                    out += [group[offset - first] for offset in hits]
                if len(out) >= limit:
                    return out[:limit]
        return out

    def tables(self, topic: str, queue_id: int, seg: Segment, start: int, end: int, columns: Sequence[str]) -> Iterator[Any]:
        """The rows of ``seg`` at offsets ``[start, end)`` as Arrow tables of ``columns`` (plus
        ``queue_offset``), one a row group, read straight from the file (no message objects: for
        column readers such as the Spark source)."""
        import pyarrow.parquet as pq

        path = self.location.path(self.namespace, topic, queue_id, seg.name)
        metadata = self._footer(path)
        wanted = ["queue_offset", *(c for c in columns if c != "queue_offset")]
        with self.location.fs.open_input_file(path) as f:
            parquet = pq.ParquetFile(f)
            for i in fmt.row_groups_from(metadata, start):
                table = parquet.read_row_group(i, columns=wanted)
                first = table.column(0)[0].as_py() if table.num_rows else start
                if first >= end:
                    return
                yield table.slice(max(0, start - first), max(0, end - max(start, first)))
