"""Stream entries straight into Arrow columns: the ``messages`` table without a Python object per row.

The fields of the entries of one read (see :mod:`mq.store.codec`) are gathered column by column
and converted by Arrow in bulk: numbers are parsed by Arrow casts, keys split by Arrow, and the
property JSON of every entry of the batch is parsed by one ``json.loads`` of the joined texts.
A batch holding an entry this library did not write (a missing field, text that is not a number,
JSON that is not what the codec writes) goes the message-by-message way of
:func:`mq.store.codec.decode_entries` instead, which skips each such entry with one logged error:
the rows, their types and the skipping are the same either way.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mq.keys import KEY_SEPARATOR
from mq.message import MessageExt
from mq.store import codec
from mq.store.columnar import EntryColumns
from spark.schema import record_batch

#: An undecoded stream entry: ``(entry id, fields)``, fields a flat list ``[name, value, …]`` or a dict.
Entry = tuple[bytes, Any]

#: Fields every message has (msg id, body, born and store time).
_REQUIRED = (b"i", b"b", b"bt", b"st")
#: What the fast path gives up on (anything else is a bug, not a foreign entry).
_FOREIGN = (KeyError, ValueError, TypeError, UnicodeDecodeError, pa.ArrowException)
#: A JSON string holding no backslash (escape) and no control character.
_PLAIN_STRING = r'"[^"\\\x00-\x1f]*"'
#: A property text in the codec's compact form (``separators=(",", ":")``) with plain strings only.
_COMPACT_OBJECT = rf"^\{{({_PLAIN_STRING}:{_PLAIN_STRING}(,{_PLAIN_STRING}:{_PLAIN_STRING})*)?\}}$"


def entries_batch(
    topic: str,
    queue_id: int,
    entries: Sequence[Entry],
    schema: pa.Schema,
    *,
    min_store_time_ms: int | None = None,
    max_store_time_ms: int | None = None,
) -> pa.RecordBatch:
    """The ``messages`` rows of ``entries`` (one queue's, in offset order) as one record batch, keeping
    only messages stored within ``[min_store_time_ms, max_store_time_ms]`` (epoch ms; None = open).

    Entries that are not messages this library wrote are left out, each with one logged error
    (as :func:`mq.store.codec.decode_entries` does).
    """
    try:
        fast = _columns(topic, queue_id, pa.array(list(map(itemgetter(0), entries)), pa.binary()), _ListFields(entries))
    except _FOREIGN:
        fast = None
    if fast is None:  # a foreign entry somewhere: decode message by message, which logs and skips it
        messages = codec.decode_entries(topic, queue_id, entries)
        return messages_batch([m for m in messages if _in_time(m, min_store_time_ms, max_store_time_ms)], schema)
    return _batch(fast, schema, min_store_time_ms, max_store_time_ms)


def reply_batch(
    topic: str,
    queue_id: int,
    entries: EntryColumns,
    schema: pa.Schema,
    *,
    min_store_time_ms: int | None = None,
    max_store_time_ms: int | None = None,
) -> pa.RecordBatch | None:
    """:func:`entries_batch` of entries already in columns (:func:`mq.store.columnar.entry_columns`:
    no Python object per entry); None when an entry is not one this library wrote — then decode the
    entries with :func:`entries_batch`, which skips and logs it."""
    try:
        fast = _columns(topic, queue_id, entries.ids, _ReplyFields(entries))
    except _FOREIGN:
        return None
    return None if fast is None else _batch(fast, schema, min_store_time_ms, max_store_time_ms)


def _batch(
    fast: tuple[dict[str, pa.Array], pa.Array], schema: pa.Schema, low_ms: int | None, high_ms: int | None
) -> pa.RecordBatch:
    columns, store_ms = fast
    batch = pa.RecordBatch.from_arrays([columns[field.name].cast(field.type) for field in schema], schema=schema)
    keep = _time_mask(store_ms, low_ms, high_ms)
    return batch if keep is None else batch.filter(keep)


class _ListFields:
    """Each field of parsed entries as an Arrow binary column (see :class:`mq.store.codec.FieldColumns`)."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self._field = codec.FieldColumns(entries)

    def __call__(self, name: bytes) -> pa.Array:
        """The values of ``name``, null where an entry lacks it."""
        return pa.array(self._field(name), pa.binary())

    def required(self, name: bytes) -> pa.Array:
        """The values of ``name``. Raises KeyError when an entry lacks it."""
        return pa.array(self._field.required(name), pa.binary())


class _ReplyFields:
    """Each field of :class:`EntryColumns` (every entry has the same fields)."""

    def __init__(self, entries: EntryColumns) -> None:
        self._entries = entries

    def __call__(self, name: bytes) -> pa.Array:
        """The values of ``name``, all null when the entries lack it."""
        found = self._entries.fields.get(name)
        return pa.nulls(len(self._entries), pa.binary()) if found is None else found

    def required(self, name: bytes) -> pa.Array:
        """The values of ``name``. Raises KeyError when the entries lack it."""
        return self._entries.fields[name]


def _columns(
    topic: str, queue_id: int, ids: pa.Array, field: _ListFields | _ReplyFields
) -> tuple[dict[str, pa.Array], pa.Array] | None:
    """Arrow columns of entries (``ids`` their entry ids, ``field`` their field values, binary) named
    as the ``messages`` table (timestamps in µs), and the store times (epoch ms); None when an entry
    is not one this library wrote."""
    n = len(ids)
    msg_ids, bodies, born, stored = (field.required(name) for name in _REQUIRED)  # KeyError: one lacks it
    properties, system = _json_maps(field(b"p")), _json_maps(field(b"s"))
    if properties is None or system is None:
        return None
    store_ms = stored.cast(pa.string()).cast(pa.int64())
    columns = {
        "topic": pa.array([topic] * n, pa.string()),
        "queue_id": pa.array([queue_id] * n, pa.int32()),
        "queue_offset": pc.subtract(
            pc.list_element(pc.split_pattern(ids.cast(pa.string()), "-", max_splits=1), 1).cast(pa.int64()), 1
        ),
        "msg_id": msg_ids.cast(pa.string()),
        "tags": _empty_as_null(field(b"t").cast(pa.string())),  # as decode has it
        "keys": _keys(_empty_as_null(field(b"k").cast(pa.string()))),
        "properties": properties,
        "body": bodies,
        "born_timestamp": _timestamps(born.cast(pa.string()).cast(pa.int64())),
        "store_timestamp": _timestamps(store_ms),
        "reconsume_times": pc.fill_null(field(b"r").cast(pa.string()).cast(pa.int32()), 0),
        "system_properties": system,
    }
    return columns, store_ms


def _empty_as_null(values: pa.Array) -> pa.Array:
    """``values`` with empty ones as null (an empty field counts as absent)."""
    empty = pc.equal(values, "")
    return pc.if_else(empty, pa.scalar(None, values.type), values) if pc.any(empty).as_py() else values


def _keys(joined: pa.Array) -> pa.Array:
    """``list<string>`` of keys joined by the key separator; an empty list where there are none."""
    split = pc.split_pattern(joined, KEY_SEPARATOR)
    return pa.ListArray.from_arrays(split.offsets, split.values)  # offsets alone: a null row becomes []


def _json_maps(texts: Sequence[bytes | None] | pa.Array) -> pa.Array | None:
    """``map<string,string>`` of JSON objects (empty where absent), parsed by Arrow when every text
    is in the codec's compact form (:func:`_compact_maps`), else by one ``json.loads`` of all the
    texts (:func:`mq.store.codec.json_objects`); None when a text is not exactly what the codec writes."""
    fast = _compact_maps(texts.cast(pa.string()) if isinstance(texts, pa.Array) else pa.array(texts, pa.string()))
    if fast is not None:  # (ArrowInvalid above, a foreign entry, unless UTF-8)
        return fast
    if isinstance(texts, pa.Array):
        texts = texts.cast(pa.binary()).to_pylist()
    try:
        parsed = codec.json_objects(texts)
    except (ValueError, UnicodeDecodeError):
        return None
    maps = [p for p in parsed if p is not None]
    counts = [0 if p is None else len(p) for p in parsed]
    offsets = pa.array(list(itertools.accumulate(counts, initial=0)), pa.int32())
    keys = pa.array(list(itertools.chain.from_iterable(maps)), pa.string())  # ArrowTypeError unless str
    values = pa.array(list(itertools.chain.from_iterable(map(dict.values, maps))), pa.string())
    return pa.MapArray.from_arrays(offsets, keys, values)


def _compact_maps(texts: pa.StringArray) -> pa.MapArray | None:
    """``map<string,string>`` of ``texts`` split by Arrow, with no Python object per row; None unless
    every present text matches :data:`_COMPACT_OBJECT` and no object repeats a key.

    Such a text is a JSON object of strings whose strings hold no backslash and no control
    character, so every ``"`` in it delimits a string: split on ``"``, an object of *k* pairs is the
    4k+1 tokens ``{``, key, ``:``, value, ``,`` … ``}``, and keys and values are taken by position.
    That is exactly what ``json.loads`` returns for it (a repeated key, where ``json.loads`` keeps the
    last value, is left to it). Empty or absent texts are empty maps.
    """
    present = pc.fill_null(pc.not_equal(texts, ""), False)
    if not pc.all(pc.or_kleene(pc.invert(present), pc.match_substring_regex(texts, _COMPACT_OBJECT))).as_py():
        return None
    tokens = pc.split_pattern(texts, '"')  # a present "{}", an empty text and a null give one token or none
    counts = (pc.fill_null(pc.list_value_length(tokens), 1).to_numpy() - 1) // 4
    offsets = np.zeros(len(texts) + 1, np.int32)
    np.cumsum(counts, out=offsets[1:])
    rows = np.repeat(np.arange(len(texts)), counts)
    nth = np.arange(offsets[-1]) - offsets[:-1][rows]  # which pair of its object each pair is
    key_at = tokens.offsets.to_numpy()[:-1][rows] + 4 * nth + 1
    flat = tokens.values  # what the offsets point into
    keys = flat.take(pa.array(key_at))
    if counts.max(initial=0) > 1 and _repeats_a_key(rows, keys):
        return None
    return pa.MapArray.from_arrays(pa.array(offsets), keys, flat.take(pa.array(key_at + 2)))


def _repeats_a_key(rows: np.ndarray[Any, Any], keys: pa.Array) -> bool:
    """Whether a row's keys (``keys[i]`` belongs to row ``rows[i]``) name one key twice."""
    codes = keys.dictionary_encode().indices.to_numpy().astype(np.int64)
    pairs = rows.astype(np.int64) * (int(codes.max()) + 1) + codes
    return len(np.unique(pairs)) != len(pairs)


def _timestamps(ms: pa.Array) -> pa.Array:
    """Epoch ms as Arrow microseconds (the cast to the schema's timestamp type follows)."""
    return pc.multiply(ms, 1000)


def _time_mask(store_ms: pa.Array, low_ms: int | None, high_ms: int | None) -> pa.Array | None:
    """Which rows lie within the inclusive store-time bounds; None when there are no bounds."""
    masks = []
    if low_ms is not None:
        masks.append(pc.greater_equal(store_ms, low_ms))
    if high_ms is not None:
        masks.append(pc.less_equal(store_ms, high_ms))
    return None if not masks else masks[0] if len(masks) == 1 else pc.and_(masks[0], masks[1])


def _in_time(msg: MessageExt, low_ms: int | None, high_ms: int | None) -> bool:
    st = msg.store_timestamp_ms
    return (low_ms is None or st >= low_ms) and (high_ms is None or st <= high_ms)


def messages_batch(messages: Sequence[MessageExt], schema: pa.Schema) -> pa.RecordBatch:
    """The ``messages`` table rows of decoded ``messages`` as one Arrow record batch."""
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
