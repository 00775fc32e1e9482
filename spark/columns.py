"""Stream entries straight into Arrow columns: the ``messages`` table without a Python object per row.

The fields of the entries of one read (see :mod:`mq.store.codec`) are gathered column by column
and converted by Arrow in bulk: numbers are parsed by Arrow casts, keys split by Arrow, and the
property JSON of every entry of the batch is parsed by one ``json.loads`` of the joined texts.
A batch holding an entry this library did not write (a missing field, text that is not a number,
JSON that is not what the codec writes) goes the message-by-message way of
:func:`mq.store.codec.decode_entries` instead, which skips each such entry with one logged error:
the rows, their types and the skipping are the same either way.

A schema of some of the table's columns (a user-given one, see :func:`spark.schema.check_schema`)
converts only the fields those columns need: the property JSON only for ``properties``, the keys
only for ``keys`` (docs/decisions.md, D63).
"""

from __future__ import annotations

import functools
import itertools
import json
import re
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from mq.keys import KEY_SEPARATOR
from mq.model.message import MessageExt
from mq.store import codec
from spark.schema import record_batch

#: An undecoded stream entry: ``(entry id, fields)`` — a list from redis-py's reply, a tuple when built by
#: hand —, fields a flat list ``[name, value, …]`` or a dict.
Entry = Sequence[Any]

#: Epoch ms Spark's timestamp holds (0001-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z); a time
#: outside is null in the timestamp columns (D101), as Spark's own casts make an out-of-range value.
TIME_RANGE_MS = (-62_135_596_800_000, 253_402_300_799_999)
#: What the ``int`` column ``reconsume_times`` holds; a stored count beyond is null (D101).
INT32_RANGE = (-(2**31), 2**31 - 1)
#: An integer text Arrow's cast and ``int()`` read alike.
_DECIMAL = r"^-?[0-9]+$"
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
    """The ``messages`` rows of ``entries`` (one queue's, in offset order) as one record batch of
    ``schema``'s columns (some of the table's, any order), keeping only messages stored within
    ``[min_store_time_ms, max_store_time_ms]`` (epoch ms; None = open).

    Only the fields the columns need are converted. Entries that are not messages this library
    wrote are left out, each with one logged error: with every column, those
    :func:`mq.store.codec.decode_entries` skips; with some, those that lack a field every message
    has (msg id, body, born and store time) or whose fields for those columns do not convert
    (see :func:`_kept_batches`).
    """
    bounds = (min_store_time_ms, max_store_time_ms)
    if set(schema.names) != set(MESSAGE_COLUMNS):
        batches = _kept_batches(topic, queue_id, entries, schema, bounds)
        if len(batches) == 1:
            return batches[0]
        return pa.RecordBatch.from_arrays(
            [pa.concat_arrays([b.column(i) for b in batches] or [pa.array([], f.type)]) for i, f in enumerate(schema)],
            schema=schema,
        )
    try:
        return _batch(_Fields(topic, queue_id, entries), schema, bounds)
    except _FOREIGN:  # a foreign entry somewhere: decode message by message, which logs and skips it
        messages = codec.decode_entries(topic, queue_id, entries)
        return messages_batch([m for m in messages if _in_time(m, min_store_time_ms, max_store_time_ms)], schema)


def _batch(fields: _Fields, schema: pa.Schema, bounds: tuple[int | None, int | None]) -> pa.RecordBatch:
    """The record batch of ``schema``'s columns of ``fields``' entries within the store-time bounds.

    Raises:
        One of ``_FOREIGN``: an entry lacks a field every message has, or a field a column needs
        is not what the codec writes.
    """
    for name in _REQUIRED:  # every message has these, whatever the columns read
        fields.by_name.required(name)
    arrays = [_BUILD[field.name](fields).cast(field.type) for field in schema]
    batch = pa.RecordBatch.from_arrays(arrays, schema=schema)
    keep = _time_mask(fields, *bounds)
    return batch if keep is None else batch.filter(keep)


def _kept_batches(
    topic: str, queue_id: int, entries: Sequence[Entry], schema: pa.Schema, bounds: tuple[int | None, int | None]
) -> list[pa.RecordBatch]:
    """Record batches of the entries that convert, in order, halving ``entries`` until each entry
    that does not is alone (then logged and left out): an entry is kept exactly when it converts
    alone, wherever it stands, in about 2 log2(n) conversions a foreign entry."""
    try:
        return [_batch(_Fields(topic, queue_id, entries), schema, bounds)]
    except _FOREIGN as e:
        if len(entries) == 1:
            codec.log.error(
                "skipping entry %s of %r queue %d: it is not a message this library wrote (%s: %s); consumers pass it by",
                entries[0][0].decode(errors="replace") if isinstance(entries[0][0], bytes) else entries[0][0],
                topic,
                queue_id,
                type(e).__name__,
                e,
            )
            return []
    half = len(entries) // 2
    return _kept_batches(topic, queue_id, entries[:half], schema, bounds) + _kept_batches(
        topic, queue_id, entries[half:], schema, bounds
    )


class _Fields:
    """The entries of one read and their fields by name (see :class:`mq.store.codec.FieldColumns`),
    with what more than one column needs computed once."""

    def __init__(self, topic: str, queue_id: int, entries: Sequence[Entry]) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.entries = entries
        self.by_name = codec.FieldColumns(entries)

    @functools.cached_property
    def store_ms(self) -> pa.Array:
        """Store times, epoch ms (int64; null where Spark's timestamp cannot hold it, see :data:`TIME_RANGE_MS`)."""
        return _integers(self.by_name.required(b"st"), pa.int64(), *TIME_RANGE_MS)

    def maps(self, name: bytes) -> pa.Array:
        """``map<string,string>`` of the JSON objects of field ``name`` (see :func:`_json_maps`).

        Raises:
            ValueError: a text is not exactly what the codec writes.
        """
        maps = _json_maps(self.by_name(name))
        if maps is None:
            raise ValueError(f"field {name.decode()!r} holds text that is not a JSON object of strings")
        return maps


def _offsets(f: _Fields) -> pa.Array:
    """Queue offsets from the entry ids (``0-(offset+1)``)."""
    ids = pa.array(list(map(itemgetter(0), f.entries)), pa.string())
    return pc.subtract(pc.list_element(pc.split_pattern(ids, "-", max_splits=1), 1).cast(pa.int64()), 1)


#: How each column of the ``messages`` table is built from the fields (timestamps in µs; the cast
#: to the schema's type follows).
_BUILD: dict[str, Callable[[_Fields], pa.Array]] = {
    "topic": lambda f: pa.array([f.topic] * len(f.entries), pa.string()),
    "queue_id": lambda f: pa.array([f.queue_id] * len(f.entries), pa.int32()),
    "queue_offset": _offsets,
    "msg_id": lambda f: pa.array(f.by_name.required(b"i"), pa.string()),
    "tags": lambda f: pa.array(_empty_as_none(f.by_name(b"t")), pa.string()),  # as decode has it
    "keys": lambda f: _keys(_empty_as_none(f.by_name(b"k"))),
    "properties": lambda f: f.maps(b"p"),
    "body": lambda f: pa.array(f.by_name.required(b"b"), pa.binary()),
    "born_timestamp": lambda f: _timestamps(_integers(f.by_name.required(b"bt"), pa.int64(), *TIME_RANGE_MS)),
    "store_timestamp": lambda f: _timestamps(f.store_ms),
    "reconsume_times": lambda f: _reconsume_times(f.by_name(b"r")),
    "system_properties": lambda f: f.maps(b"s"),
}

#: The ``messages`` table's columns.
MESSAGE_COLUMNS = tuple(_BUILD)


def _integers(values: Sequence[bytes], kind: pa.DataType, low: int, high: int) -> pa.Array:
    """The integers of ``values`` (texts) as ``kind``, null where one lies outside ``[low, high]``.

    Parsed by an Arrow cast when every text is plain decimal digits (Arrow also takes ``0x10``,
    which ``int()`` does not); otherwise value by value with ``int()``, as the codec parses them,
    so exactly the texts the codec takes are taken (``+5``, `` 5``, ``1_0`` too; D101).

    Raises:
        ValueError: a text is not an integer (the entry is not one this library wrote).
    """
    try:
        texts = pa.array(values, pa.string())
        if not pc.all(pc.match_substring_regex(texts, _DECIMAL)).as_py():
            raise pa.ArrowInvalid("not plain decimal digits")
        parsed = texts.cast(kind)
    except pa.ArrowInvalid:  # not UTF-8, not plain digits, or beyond ``kind``
        numbers = [int(v) for v in values]
        return pa.array([n if low <= n <= high else None for n in numbers], kind)
    lowest, highest = pc.min_max(parsed).values()
    if lowest.is_valid and (lowest.as_py() < low or highest.as_py() > high):
        inside = pc.and_(pc.greater_equal(parsed, low), pc.less_equal(parsed, high))
        return pc.if_else(inside, parsed, pa.scalar(None, kind))
    return parsed


def _reconsume_times(values: Sequence[bytes | None]) -> pa.Array:
    """Reconsume times (int32), 0 where an entry has none (as the codec has it), null beyond int32."""
    absent = values.count(None)
    if absent == len(values):  # most messages: never reconsumed
        return pa.array(np.zeros(len(values), np.int32))
    present: Sequence[bytes] = [b"0" if v is None else v for v in values] if absent else values  # type: ignore[assignment]
    return _integers(present, pa.int32(), *INT32_RANGE)


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
    texts (:func:`mq.store.codec.json_objects`), else text by text as the codec decodes one; values
    that are not strings become text (:func:`spark_text`, D101). None when a text is not a JSON
    object, i.e. the codec does not take it."""
    try:
        fast = _compact_maps(pa.array(texts, pa.string()))
    except pa.ArrowInvalid:  # not UTF-8: json.loads still takes UTF-16 and UTF-32 text, as the codec does
        fast = None
    if fast is not None:
        return fast
    try:
        parsed = codec.json_objects(texts)
    except (ValueError, UnicodeDecodeError):  # one text spoils the joined parse: each alone, the codec's way
        try:
            parsed = [_json_object(t) if t else None for t in texts]
        except (ValueError, UnicodeDecodeError):
            return None
    maps = [p for p in parsed if p is not None]
    counts = [0 if p is None else len(p) for p in parsed]
    offsets = pa.array(list(itertools.accumulate(counts, initial=0)), pa.int32())
    keys = _texts(list(itertools.chain.from_iterable(maps)))
    values = _texts(list(itertools.chain.from_iterable(map(dict.values, maps))))
    return pa.MapArray.from_arrays(offsets, keys, values)


def _json_object(text: bytes) -> dict[str, Any]:
    """One property text decoded as the codec decodes an entry's (``json.loads`` of the bytes, which
    also takes UTF-16 and UTF-32; an object or a ``ValueError``)."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"properties are {type(value).__name__}, not an object")
    return value


def _texts(values: list[Any]) -> pa.Array:
    """A string array of JSON values: strings as they are, unless a value is not one Arrow takes
    (another JSON type, a lone surrogate), then every value through :func:`spark_text`."""
    try:
        return pa.array(values, pa.string())
    except (TypeError, ValueError, pa.ArrowException):  # ArrowTypeError, UnicodeEncodeError
        return pa.array([spark_text(v) for v in values], pa.string())


#: Lone surrogates: a JSON escape (``"\ud800"``) makes one, UTF-8 cannot carry it.
_SURROGATE = re.compile("[\ud800-\udfff]")


def spark_text(value: Any) -> str | None:
    """A property value as the string column holds it (D101): a string as it is, JSON ``null`` as
    null, any other JSON value (number, boolean, object, list) as its compact JSON text; a lone
    surrogate (which UTF-8 cannot carry) becomes U+FFFD."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return _SURROGATE.sub("\ufffd", text)


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


def _time_mask(fields: _Fields, low_ms: int | None, high_ms: int | None) -> pa.Array | None:
    """Which rows lie within the inclusive store-time bounds; None when there are no bounds."""
    masks = []
    if low_ms is not None:
        masks.append(pc.greater_equal(fields.store_ms, low_ms))
    if high_ms is not None:
        masks.append(pc.less_equal(fields.store_ms, high_ms))
    return None if not masks else masks[0] if len(masks) == 1 else pc.and_(masks[0], masks[1])


def _in_time(msg: MessageExt, low_ms: int | None, high_ms: int | None) -> bool:
    """Whether ``msg`` lies within the store-time bounds; with a bound, a store time Spark's
    timestamp cannot hold (null in the column) is not, as in :func:`_time_mask`."""
    st = msg.store_timestamp_ms
    if low_ms is None and high_ms is None:
        return True
    return _ms_or_none(st) is not None and (low_ms is None or st >= low_ms) and (high_ms is None or st <= high_ms)


def _ms_or_none(ms: int) -> int | None:
    """``ms`` when Spark's timestamp can hold it (:data:`TIME_RANGE_MS`), else None."""
    return ms if TIME_RANGE_MS[0] <= ms <= TIME_RANGE_MS[1] else None


def _int32_or_none(number: int) -> int | None:
    return number if INT32_RANGE[0] <= number <= INT32_RANGE[1] else None


def _pairs_of(mapping: dict[str, Any]) -> list[tuple[str, str | None]]:
    """A decoded property object as map entries (see :func:`spark_text`); keys are strings already."""
    if all(type(v) is str for v in mapping.values()) and not any(
        map(_SURROGATE.search, itertools.chain(mapping, mapping.values()))
    ):
        return list(mapping.items())
    return [(_SURROGATE.sub("\ufffd", k), spark_text(v)) for k, v in mapping.items()]


def messages_batch(messages: Sequence[MessageExt], schema: pa.Schema) -> pa.RecordBatch:
    """The ``messages`` table rows of decoded ``messages`` as one Arrow record batch: whatever the codec
    decoded fits (D101) — values Spark's columns cannot hold are null or text, never an error."""
    columns: dict[str, list[Any]] = {
        "topic": [m.topic for m in messages],
        "queue_id": [m.queue_id for m in messages],
        "queue_offset": [m.queue_offset for m in messages],
        "msg_id": [m.msg_id for m in messages],
        "tags": [m.tags for m in messages],
        "keys": [list(m.keys) for m in messages],
        "properties": [_pairs_of(m.properties) for m in messages],
        "body": [bytes(m.body) for m in messages],
        "born_timestamp": [_ms_or_none(m.born_timestamp_ms) for m in messages],
        "store_timestamp": [_ms_or_none(m.store_timestamp_ms) for m in messages],
        "reconsume_times": [_int32_or_none(m.reconsume_times) for m in messages],
        "system_properties": [_pairs_of(m.system_properties) for m in messages],
    }
    return record_batch(columns, schema)


#: The segment column (mq.tier.format) each ``messages`` column comes from.
_TIER_COLUMNS = {
    "queue_offset": "queue_offset",
    "msg_id": "msg_id",
    "tags": "tags",
    "keys": "keys",
    "properties": "properties",
    "body": "body",
    "born_timestamp": "born_timestamp_ms",
    "store_timestamp": "store_timestamp_ms",
    "reconsume_times": "reconsume_times",
    "system_properties": "system_properties",
}


def tier_columns(schema: pa.Schema) -> list[str]:
    """The segment columns a ``messages`` batch of ``schema`` needs (the store time always: the time options)."""
    return sorted({_TIER_COLUMNS[f.name] for f in schema if f.name in _TIER_COLUMNS} | {"store_timestamp_ms"})


def tier_batch(
    topic: str, queue_id: int, table: pa.Table, schema: pa.Schema, *, min_store_time_ms: int | None, max_store_time_ms: int | None
) -> pa.RecordBatch:
    """The ``messages`` rows of a segment's Arrow table (see :mod:`mq.tier.format`), column by column:
    timestamps from epoch ms, the topic and queue id filled in, nothing decoded into messages."""
    mask = _time_mask_ms(table.column("store_timestamp_ms"), min_store_time_ms, max_store_time_ms)
    if mask is not None:
        table = table.filter(mask)
    n = table.num_rows
    arrays = []
    for field in schema:
        if field.name == "topic":
            arrays.append(pa.array([topic] * n, field.type))
        elif field.name == "queue_id":
            arrays.append(pa.array([queue_id] * n, field.type))
        elif pa.types.is_timestamp(field.type):
            micros = pc.multiply(table.column(_TIER_COLUMNS[field.name]).combine_chunks(), 1000)
            arrays.append(micros.cast(pa.int64()).view(field.type) if n else pa.array([], field.type))
        else:
            arrays.append(table.column(_TIER_COLUMNS[field.name]).combine_chunks().cast(field.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _time_mask_ms(store_ms: pa.ChunkedArray, low_ms: int | None, high_ms: int | None) -> pa.ChunkedArray | None:
    masks = []
    if low_ms is not None:
        masks.append(pc.greater_equal(store_ms, low_ms))
    if high_ms is not None:
        masks.append(pc.less_equal(store_ms, high_ms))
    return None if not masks else masks[0] if len(masks) == 1 else pc.and_(masks[0], masks[1])
