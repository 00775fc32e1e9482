"""The stream-entry form of a message, and back.

Fields of an entry (short names keep entries small; absent fields are omitted):

=====  =====================================================
``i``  msg id
``b``  body bytes
``t``  tags
``k``  keys joined by ``\\x1f``
``p``  user properties, JSON object of str → str
``bt`` born timestamp, epoch ms
``st`` store timestamp, epoch ms (written by the put script)
``r``  reconsume times
``s``  system properties (``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``, ``PRIORITY``, …), JSON object
=====  =====================================================
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import repeat
from operator import itemgetter
from typing import Any, TypeVar

from mq.keys import KEY_SEPARATOR, offset_of
from mq.model.message import Message, MessageExt
from mq.model.properties import PRIORITY
from mq.model.queue import DEFAULT_BROKER_NAME

log = logging.getLogger("mq.store")

T = TypeVar("T")


def encode(
    msg: Message,
    msg_id: str,
    born_timestamp_ms: int | None = None,
    *,
    reconsume_times: int = 0,
    system_properties: dict[str, str] | None = None,
    extra_properties: Mapping[str, str] | None = None,
) -> Sequence[Any]:
    """The put-script arguments of one message: ``[2F, field, value, …]``; ``extra_properties`` (the
    trace context) are stored with the message's own properties."""
    born = born_timestamp_ms if born_timestamp_ms is not None else int(time.time() * 1000)
    body = msg.body
    if body.__class__ is not bytes:
        body = bytes(body)
    if msg.priority:  # kept with the system properties: a copy sent back for retry keeps it (D142)
        system_properties = {**(system_properties or {}), PRIORITY: str(msg.priority)}
    if not (msg.tags or msg.keys or msg.properties or extra_properties or reconsume_times or system_properties or msg.dedup_id):
        # most sends: a tuple of untracked values, which the garbage collector stops tracking at its
        # first pass (thousands are in flight at once; D64)
        return (6, "i", msg_id, "b", body, "bt", born)
    # the item count first, set at the end: one list a message
    fields: list[Any] = [6, "i", msg_id, "b", body, "bt", born]
    if msg.tags:
        fields += ["t", msg.tags]
    if msg.keys:
        fields += ["k", KEY_SEPARATOR.join(msg.keys)]
    properties = {**msg.properties, **extra_properties} if extra_properties else msg.properties
    if properties:
        fields += ["p", json.dumps(properties, separators=(",", ":"), ensure_ascii=False)]
    if reconsume_times:
        fields += ["r", reconsume_times]
    if system_properties:
        fields += ["s", json.dumps(system_properties, separators=(",", ":"), ensure_ascii=False)]
    if msg.dedup_id:
        fields += ["d", msg.dedup_id]  # the put script checks it against the queue's window (D140)
    fields[0] = len(fields) - 1
    return fields


def decode(topic: str, queue_id: int, entry_id: bytes, fields: dict[bytes, bytes]) -> MessageExt:
    """The :class:`MessageExt` stored as stream entry ``entry_id`` of queue ``queue_id``.

    Built field by field (the constructors' checks are for user input; a stored entry was checked when
    it was sent): this runs once per consumed message.
    """
    tags = fields.get(b"t")
    keys = fields.get(b"k")
    props = fields.get(b"p")
    system = fields.get(b"s")
    return _message(
        topic,
        fields[b"b"],
        tags.decode() if tags else None,
        tuple(keys.decode().split(KEY_SEPARATOR)) if keys else (),
        _object(props) if props else {},
        fields[b"i"].decode(),
        queue_id,
        offset_of(entry_id),
        int(fields[b"bt"]),
        int(fields[b"st"]),
        int(fields.get(b"r", 0)),
        _object(system) if system else {},
    )


def decode_entries(topic: str, queue_id: int, entries: Iterable[Sequence[Any]]) -> list[MessageExt]:
    """Decode stream entries ``(entry_id, fields)`` (fields a dict or a flat list); an entry that is not
    a message (written by something else, or corrupted) is skipped with one logged error — it never
    stops the messages around it.

    Decoded column by column (see :class:`FieldColumns`): each field of every entry is converted in
    one pass and every property text in one ``json.loads`` (see :func:`json_objects`), which is what
    a consumer pays per message. When any entry is not what :func:`encode` writes, the entries go
    through :func:`decode` one by one instead, which skips and logs the foreign ones: the messages,
    their values and the skipping are the same either way. So do replies of fewer than
    ``COLUMNS_FROM`` entries (a long-poll wake's one message), cheaper one by one (D55).
    """
    rows = entries if isinstance(entries, list) else list(entries)
    if not rows:
        return []
    if len(rows) >= COLUMNS_FROM:
        try:
            return _decode_columns(topic, queue_id, rows)
        except _FOREIGN:
            pass
    out = []
    for entry_id, fields in rows:
        try:
            out.append(decode(topic, queue_id, entry_id, fields if isinstance(fields, dict) else _pairs(fields)))
        except _FOREIGN as e:  # JSONDecodeError is a ValueError
            log.error(
                "skipping entry %s of %r queue %d: it is not a message this library wrote (%s: %s); consumers pass it by",
                _text(entry_id),
                topic,
                queue_id,
                type(e).__name__,
                e,
            )
    return out


#: Entries from which decoding by columns is faster than one by one (D55; the figures are in
#: docs/benchmarks.md, "Figures that were in code comments").
COLUMNS_FROM = 3

#: What a field of an entry this library did not write raises while it is decoded.
_FOREIGN = (KeyError, ValueError, TypeError, UnicodeDecodeError, AttributeError)


def _decode_columns(topic: str, queue_id: int, rows: Sequence[Sequence[Any]]) -> list[MessageExt]:
    """:func:`decode` of every entry, field by field over all entries; raises one of ``_FOREIGN``
    when an entry is not one this library wrote.

    Each column is converted in one pass (an absent optional field costs nothing per message), then
    :func:`_message` builds each message from its values.
    """
    field = FieldColumns(rows)
    ids, bodies, born, stored = (field.required(name) for name in (b"i", b"b", b"bt", b"st"))
    properties, system = json_objects(field(b"p")), json_objects(field(b"s"))
    return list(
        map(
            _message,
            repeat(topic),
            bodies,
            _column(field(b"t"), _tags, None),
            _column(field(b"k"), _keys, _NO_KEYS),
            properties,
            map(bytes.decode, ids),
            repeat(queue_id),
            [int(entry_id.partition(b"-")[2]) - 1 for entry_id, _ in rows],
            map(int, born),
            map(int, stored),
            _column(field(b"r"), int, 0),
            system,
        )
    )


def _message(
    topic: str,
    body: bytes,
    tags: str | None,
    keys: tuple[str, ...],
    properties: dict[str, str] | None,
    msg_id: str,
    queue_id: int,
    queue_offset: int,
    born_timestamp_ms: int,
    store_timestamp_ms: int,
    reconsume_times: int,
    system_properties: dict[str, str] | None,
) -> MessageExt:
    """A decoded :class:`MessageExt` (None properties: none). Its attributes are set one by one in the
    order its constructors set them, so the instance keeps them in CPython's shared-key inline values:
    no separate ``__dict__`` object per message (half the time, and one object fewer for the cyclic
    garbage collector to track and scan, than assigning a dict)."""
    msg = _new(MessageExt)
    msg.topic = topic
    msg.body = body
    msg.tags = tags
    msg.keys = keys
    msg.properties = {} if properties is None else properties
    msg.delay_level = 0
    msg.deliver_time_ms = None
    msg.priority = int(system_properties.get(PRIORITY, 0)) if system_properties else 0
    msg.msg_id = msg_id
    msg.queue_id = queue_id
    msg.queue_offset = queue_offset
    msg.born_timestamp_ms = born_timestamp_ms
    msg.store_timestamp_ms = store_timestamp_ms
    msg.reconsume_times = reconsume_times
    msg.broker_name = DEFAULT_BROKER_NAME
    msg.system_properties = {} if system_properties is None else system_properties
    return msg


_new = MessageExt.__new__


def message_of(
    topic: str,
    queue_id: int,
    *,
    offset: int,
    msg_id: str,
    tags: str | None,
    keys: tuple[str, ...],
    properties: dict[str, str] | None,
    body: bytes,
    born_timestamp_ms: int,
    store_timestamp_ms: int,
    reconsume_times: int,
    system_properties: dict[str, str] | None,
) -> MessageExt:
    """A stored message read from somewhere other than its stream entry (a tier segment), built as
    :func:`decode` builds one (None properties: none)."""
    return _message(
        topic,
        body,
        tags,
        keys,
        properties,
        msg_id,
        queue_id,
        offset,
        born_timestamp_ms,
        store_timestamp_ms,
        reconsume_times,
        system_properties,
    )


def _column(values: Sequence[bytes | None], convert: Callable[[bytes], T], absent: T) -> Iterable[T]:
    """``convert`` of each value of an optional field's column, ``absent`` where an entry lacks it; a
    column no entry has costs nothing per entry."""
    if values.count(None) == len(values):
        return repeat(absent)
    return [absent if v is None else convert(v) for v in values]


def _tags(raw: bytes) -> str | None:
    return raw.decode() or None


_NO_KEYS: tuple[str, ...] = ()


def _keys(raw: bytes) -> tuple[str, ...]:
    return tuple(raw.decode().split(KEY_SEPARATOR)) if raw else ()


class FieldColumns:
    """The values of each field over a list of entries, by field name.

    When every entry lists the same fields in the same order (messages sent alike), the flat field
    lists are transposed at once; so are dicts with the same fields (redis-py's reading of ``XRANGE``);
    otherwise each entry becomes a dict first.
    """

    def __init__(self, entries: Sequence[Sequence[Any]]) -> None:
        flats = [fields for _, fields in entries]
        self._n = len(flats)
        self._by_name: dict[bytes, Sequence[bytes]] | None = None
        self._dicts: list[dict[bytes, bytes]] = []
        kinds = set(map(type, flats))
        if kinds == {list} and len(set(map(len, flats))) == 1:
            transposed = list(zip(*flats))
            names = transposed[0::2]
            if all(column.count(column[0]) == len(column) for column in names):
                self._by_name = dict(zip((column[0] for column in names), transposed[1::2]))
                return
        elif kinds == {dict} and len(set(map(len, flats))) == 1 and len(flats[0]) > 1:
            # as many fields each, and each has every field of the first: the same fields
            fields = tuple(flats[0])
            try:
                self._by_name = dict(zip(fields, zip(*map(itemgetter(*fields), flats))))
                return
            except KeyError:
                pass
        self._dicts = [f if isinstance(f, dict) else _pairs(f) for f in flats]

    def __call__(self, name: bytes) -> Sequence[bytes | None]:
        """The values of field ``name``, None where an entry lacks it."""
        if self._by_name is not None:
            return self._by_name.get(name, (None,) * self._n)
        return [d.get(name) for d in self._dicts]

    def required(self, name: bytes) -> Sequence[bytes]:
        """The values of field ``name``.

        Raises:
            KeyError: an entry lacks it.
        """
        if self._by_name is not None:
            return self._by_name[name]
        return [d[name] for d in self._dicts]


def json_objects(texts: Sequence[bytes | None]) -> list[dict[str, str] | None]:
    """The JSON objects of ``texts`` (None where a text is absent or empty), every text parsed in one
    ``json.loads``.

    Raises:
        ValueError: a text is not one JSON object (a ``JSONDecodeError`` is a ``ValueError``).
        UnicodeDecodeError: a text is not UTF-8.
    """
    present = [t for t in texts if t]
    if not present:
        return [None] * len(texts)
    # Each text goes in a one-element list, and the lists are separated by "]", a newline, ",", "[": a
    # newline cannot stand inside a JSON string and the objects hold no lists, so in a parse that passes
    # the checks below every bracket is one of these, and list i holds exactly text i (a plain "," join
    # would let two foreign texts parse as one object and shift the rest).
    wrapped = json.loads(b"[[" + b"]\n,[".join(present) + b"]]")
    if len(wrapped) != len(present) or set(map(type, wrapped)) != {list} or set(map(len, wrapped)) != {1}:
        raise ValueError("properties are not one JSON object per entry")
    parsed: list[dict[str, str] | None] = list(map(itemgetter(0), wrapped))
    if set(map(type, parsed)) != {dict}:
        raise ValueError("properties are not one JSON object per entry")
    if len(present) == len(texts):
        return parsed
    objects = iter(parsed)
    return [next(objects) if t else None for t in texts]


def _object(raw: bytes) -> dict[str, str]:
    """A stored JSON object of str → str (anything else is not an entry this library wrote)."""
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"properties are {type(value).__name__}, not an object")
    return value


def _pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    names_and_values = iter(flat)
    return dict(zip(names_and_values, names_and_values))


def _text(raw: bytes | str) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
