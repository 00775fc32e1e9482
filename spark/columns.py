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
        fast = _columns(topic, queue_id, entries)
    except _FOREIGN:
        fast = None
    if fast is None:  # a foreign entry somewhere: decode message by message, which logs and skips it
        messages = codec.decode_entries(topic, queue_id, entries)
        return messages_batch([m for m in messages if _in_time(m, min_store_time_ms, max_store_time_ms)], schema)
    columns, store_ms = fast
    batch = pa.RecordBatch.from_arrays([columns[field.name].cast(field.type) for field in schema], schema=schema)
    keep = _time_mask(store_ms, min_store_time_ms, max_store_time_ms)
    return batch if keep is None else batch.filter(keep)


def _columns(topic: str, queue_id: int, entries: Sequence[Entry]) -> tuple[dict[str, pa.Array], pa.Array] | None:
    """Arrow columns of ``entries`` named as the ``messages`` table (timestamps in µs), and the store
    times (epoch ms); None when an entry is not one this library wrote."""
    n = len(entries)
    field = codec.FieldColumns(entries)
    msg_ids, bodies, born, stored = (field.required(name) for name in _REQUIRED)  # KeyError: one lacks it
    properties, system = _json_maps(field(b"p")), _json_maps(field(b"s"))
    if properties is None or system is None:
        return None
    ids = pa.array(list(map(itemgetter(0), entries)), pa.string())
    store_ms = pa.array(stored, pa.string()).cast(pa.int64())
    columns = {
        "topic": pa.array([topic] * n, pa.string()),
        "queue_id": pa.array([queue_id] * n, pa.int32()),
        "queue_offset": pc.subtract(pc.list_element(pc.split_pattern(ids, "-", max_splits=1), 1).cast(pa.int64()), 1),
        "msg_id": pa.array(msg_ids, pa.string()),
        "tags": pa.array(_empty_as_none(field(b"t")), pa.string()),  # as decode has it
        "keys": _keys(_empty_as_none(field(b"k"))),
        "properties": properties,
        "body": pa.array(bodies, pa.binary()),
        "born_timestamp": _timestamps(pa.array(born, pa.string()).cast(pa.int64())),
        "store_timestamp": _timestamps(store_ms),
        "reconsume_times": pc.fill_null(pa.array(field(b"r"), pa.string()).cast(pa.int32()), 0),
        "system_properties": system,
    }
    return columns, store_ms


def _empty_as_none(values: Sequence[bytes | None]) -> Sequence[bytes | None]:
    """``values`` with empty ones as None (an empty field counts as absent)."""
    return [v or None for v in values] if b"" in values else values


def _keys(joined: Sequence[bytes | None]) -> pa.Array:
    """``list<string>`` of keys joined by the key separator; an empty list where there are none."""
    split = pc.split_pattern(pa.array(joined, pa.string()), KEY_SEPARATOR)
    return pa.ListArray.from_arrays(split.offsets, split.values)  # offsets alone: a null row becomes []


def _json_maps(texts: Sequence[bytes | None]) -> pa.Array | None:
    """``map<string,string>`` of JSON objects (empty where absent), parsed by Arrow when every text
    is in the codec's compact form (:func:`_compact_maps`), else by one ``json.loads`` of all the
    texts (:func:`mq.store.codec.json_objects`); None when a text is not exactly what the codec writes."""
    fast = _compact_maps(pa.array(texts, pa.string()))  # ArrowInvalid (a foreign entry) unless UTF-8
    if fast is not None:
        return fast
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
