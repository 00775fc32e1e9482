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
``s``  system properties (``RETRY_TOPIC``, ``ORIGIN_MESSAGE_ID``, …), JSON object
=====  =====================================================
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from mq.keys import KEY_SEPARATOR, offset_of
from mq.message import Message, MessageExt
from mq.queue import DEFAULT_BROKER_NAME

log = logging.getLogger("mq.store")


def encode(
    msg: Message,
    msg_id: str,
    born_timestamp_ms: int | None = None,
    *,
    reconsume_times: int = 0,
    system_properties: dict[str, str] | None = None,
    extra_properties: Mapping[str, str] | None = None,
) -> list[Any]:
    """The put-script arguments of one message: ``[2F, field, value, …]``; ``extra_properties`` (the
    trace context) are stored with the message's own properties."""
    born = born_timestamp_ms if born_timestamp_ms is not None else int(time.time() * 1000)
    fields: list[Any] = ["i", msg_id, "b", bytes(msg.body), "bt", born]
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
    return [len(fields), *fields]


def decode(topic: str, queue_id: int, entry_id: bytes, fields: dict[bytes, bytes]) -> MessageExt:
    """The :class:`MessageExt` stored as stream entry ``entry_id`` of queue ``queue_id``.

    Built field by field (the constructors' checks are for user input; a stored entry was checked when
    it was sent): this runs once per consumed message.
    """
    tags = fields.get(b"t")
    keys = fields.get(b"k")
    props = fields.get(b"p")
    system = fields.get(b"s")
    msg = MessageExt.__new__(MessageExt)
    msg.__dict__.update(
        topic=topic,
        body=fields[b"b"],
        tags=tags.decode() if tags else None,
        keys=tuple(keys.decode().split(KEY_SEPARATOR)) if keys else (),
        properties=_object(props) if props else {},
        delay_level=0,
        deliver_time_ms=None,
        msg_id=fields[b"i"].decode(),
        queue_id=queue_id,
        queue_offset=offset_of(entry_id),
        born_timestamp_ms=int(fields[b"bt"]),
        store_timestamp_ms=int(fields[b"st"]),
        reconsume_times=int(fields.get(b"r", 0)),
        broker_name=DEFAULT_BROKER_NAME,
        system_properties=_object(system) if system else {},
    )
    return msg


def decode_entries(topic: str, queue_id: int, entries: Iterable[tuple[bytes, Any]]) -> list[MessageExt]:
    """Decode stream entries ``(entry_id, fields)`` (fields a dict or a flat list); an entry that is not
    a message (written by something else, or corrupted) is skipped with one logged error — it never
    stops the messages around it."""
    out = []
    for entry_id, fields in entries:
        try:
            out.append(decode(topic, queue_id, entry_id, fields if isinstance(fields, dict) else _pairs(fields)))
        except (KeyError, ValueError, TypeError, UnicodeDecodeError) as e:  # JSONDecodeError is a ValueError
            log.error(
                "skipping entry %s of %r queue %d: it is not a message this library wrote (%s: %s); consumers pass it by",
                _text(entry_id),
                topic,
                queue_id,
                type(e).__name__,
                e,
            )
    return out


def _object(raw: bytes) -> dict[str, str]:
    """A stored JSON object of str → str (anything else is not an entry this library wrote)."""
    value = json.loads(raw)
    if not isinstance(value, dict):
        raise ValueError(f"properties are {type(value).__name__}, not an object")
    return value


def _pairs(flat: list[bytes]) -> dict[bytes, bytes]:
    return dict(zip(flat[::2], flat[1::2]))


def _text(raw: bytes | str) -> str:
    return raw.decode(errors="replace") if isinstance(raw, bytes) else raw
