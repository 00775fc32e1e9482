"""Recall handles of delayed and timer messages [RocketMQ 5.3.2 ``recallHandle``].

A handle names the scheduled entry a send stored: the namespace, the topic, the queue, the entry's
id in the queue's ``delayed`` stream and the message id the entry carries. It is the text
``r1.`` followed by that tuple in URL-safe base64 without padding, so it can travel in a URL, a
header or a shell argument as it is. It is opaque to users: only :func:`parse_handle` reads it.

What a handle cannot do (D127): remove anything but the message it was made for. The recall script
removes an entry only when it carries the handle's message id, so a handle naming another entry
(forged, altered, or made up) recalls nothing; one from another namespace is refused before any
command is sent. Sans I/O: the store operation is :meth:`mq.store.Store.recall`.
"""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass

from mq.errors import MQClientError
from mq.model.validation import check_topic

#: What every handle starts with (the format's version: a later format gets another prefix).
PREFIX = "r1."
#: The longest handle accepted, characters (a namespace, a system-length topic and a 128-character
#: message id fit with room to spare).
MAX_HANDLE_LENGTH = 1024
#: Highest queue id a handle may name (topics have at most this many queues, far fewer in practice).
MAX_QUEUE_ID = 65_535
_BASE64URL = re.compile(r"[A-Za-z0-9_-]+")
_ENTRY_ID = re.compile(r"(0|[1-9][0-9]{0,19})-(0|[1-9][0-9]{0,19})")
_QUEUE_ID = re.compile(r"0|[1-9][0-9]{0,4}")
#: Message ids as the library makes them (hex) and as the endpoint takes them from official clients.
_MESSAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
_U64 = 2**64


@dataclass(frozen=True)
class RecallTarget:
    """The scheduled entry a recall handle names."""

    namespace: str
    topic: str
    queue_id: int
    entry_id: str
    msg_id: str


def make_handle(namespace: str, topic: str, queue_id: int, entry_id: str, msg_id: str) -> str:
    """The recall handle of the entry ``entry_id`` of ``topic`` queue ``queue_id`` (message ``msg_id``).

    Namespaces and topics have no ``:`` (their names forbid it), so the fields join on it and the
    message id, which may hold one, goes last.
    """
    raw = f"{namespace}:{topic}:{queue_id}:{entry_id}:{msg_id}".encode()
    return PREFIX + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def parse_handle(handle: object, namespace: str) -> RecallTarget:
    """The entry ``handle`` names, checked before anything is written.

    Raises:
        MQClientError: ``handle`` is not a recall handle this library made (wrong type, too long,
            not ``r1.`` and canonical URL-safe base64, a field out of its form), or it was made in
            another namespace than ``namespace`` (recall it through a producer of that namespace).
    """
    if not isinstance(handle, str):
        raise MQClientError(f"a recall handle is a str (SendResult.recall_handle), not {type(handle).__name__}")
    if len(handle) > MAX_HANDLE_LENGTH or not handle.startswith(PREFIX):
        raise MQClientError(_bad(handle, f"it must start with {PREFIX!r} and be at most {MAX_HANDLE_LENGTH} characters"))
    body = handle[len(PREFIX) :]
    if not _BASE64URL.fullmatch(body):
        raise MQClientError(_bad(handle, "it is not URL-safe base64"))
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
        text = raw.decode("utf-8")
    except (binascii.Error, ValueError):
        raise MQClientError(_bad(handle, "it does not decode")) from None
    # one spelling per handle: a re-encoded handle must be the one given (no padding bits, no aliases)
    if base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii") != body:
        raise MQClientError(_bad(handle, "it is not in canonical form"))
    parts = text.split(":", 4)
    if len(parts) != 5:
        raise MQClientError(_bad(handle, "it does not name a queue entry"))
    ns, topic, qid, entry_id, msg_id = parts
    if not _QUEUE_ID.fullmatch(qid) or int(qid) > MAX_QUEUE_ID:
        raise MQClientError(_bad(handle, "its queue id is not a queue id"))
    m = _ENTRY_ID.fullmatch(entry_id)
    if not m or int(m.group(1)) >= _U64 or int(m.group(2)) >= _U64:
        raise MQClientError(_bad(handle, "its entry id is not a stream id"))
    if not _MESSAGE_ID.fullmatch(msg_id):
        raise MQClientError(_bad(handle, "its message id is not a message id"))
    try:
        check_topic(topic)
    except MQClientError:
        raise MQClientError(_bad(handle, "its topic is not a topic name")) from None
    if ns != namespace:
        raise MQClientError(
            f"recall handle of namespace {ns!r} given to a producer of namespace {namespace!r}: "
            "recall it through a producer of the namespace it was sent in"
        )
    return RecallTarget(ns, topic, int(qid), entry_id, msg_id)


def _bad(handle: str, why: str) -> str:
    shown = handle if len(handle) <= 80 else handle[:80] + "…"
    return f"not a recall handle ({why}): {shown!r}; pass SendResult.recall_handle of a delayed or timer message"
