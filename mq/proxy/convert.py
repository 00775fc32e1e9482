"""RocketMQ 5 messages ↔ rocketredis messages.

A RocketMQ 5 message keeps everything it has in rocketredis: body, tag, keys and user properties
as they are, the client's message id as the msg id, and what has no field of its own as system
properties — the message group as ``__SHARDINGKEY`` (RocketMQ's own property name), the delivery
time of a timer message as ``TIMER_DELIVER_MS``, the born host as ``BORN_HOST``, the trace context as
``TRACE_CONTEXT``.
"""

from __future__ import annotations

import gzip
import hashlib
import re
import zlib
from dataclasses import dataclass
from typing import Any

from mq.errors import MessageTooLargeError, MQClientError
from mq.model.message import Message, MessageExt
from mq.model.validation import MAX_USER_PROPERTY_SIZE, RESERVED_PROPERTIES, check_message, check_user_topic
from mq.proxy.codes import ProxyError
from mq.proxy.pb import definition

#: System property: the message group of a FIFO message [RocketMQ ``__SHARDINGKEY``].
MESSAGE_GROUP = "__SHARDINGKEY"
#: System property: the delivery time of a timer message, epoch ms.
DELIVER_MS = "TIMER_DELIVER_MS"
BORN_HOST = "BORN_HOST"
TRACE_CONTEXT = "TRACE_CONTEXT"
#: Longest client message id, characters.
MAX_MESSAGE_ID = 128
#: What a client message id may hold: letters, digits, ``_ . : -``, starting with a letter or digit —
#: no ``/``, ``%``, ``?``, ``#``, ``\\`` or space, so an id is one safe path segment in every URL
#: (the console's, the API's) and never ``.`` or ``..``. The official clients send hex ids.
MESSAGE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
#: Longest message group, characters [RocketMQ proxy ``maxMessageGroupSize`` 64].
MAX_MESSAGE_GROUP = 64
#: Longest trace context, characters (a W3C ``traceparent`` is 55; RocketMQ sets no limit of its own).
MAX_TRACE_CONTEXT = 1024
#: Longest born host, characters (a DNS name is at most 253; RocketMQ sets no limit of its own).
MAX_BORN_HOST = 255
#: The born timestamps taken, epoch ms: 1970 to 9999-12-31 (protobuf cannot represent later ones, and the
#: endpoint hands them back as Timestamps).
BORN_MS_RANGE = (0, 253_402_300_799_999)
MESSAGE_TYPES = definition.MessageType
#: The message types the endpoint takes (and announces in routes), as ``MessageType`` numbers.
#: The ``MessageType`` numbers, looked up once (every message of every SendMessage is checked against them).
NORMAL, FIFO, DELAY, TRANSACTION, PRIORITY = (
    MESSAGE_TYPES.Value(n) for n in ("NORMAL", "FIFO", "DELAY", "TRANSACTION", "PRIORITY")
)
SUPPORTED_TYPES = [NORMAL, FIFO, DELAY, TRANSACTION, PRIORITY]
#: What the routes of a topic without priority levels announce (every type but PRIORITY).
PLAIN_TYPES = [t for t in SUPPORTED_TYPES if t != PRIORITY]
#: What the routes of a priority topic announce: not FIFO (priority reorders messages, D142).
PRIORITY_TOPIC_TYPES = [t for t in SUPPORTED_TYPES if t != FIFO]


@dataclass
class Incoming:
    """A checked message of a SendMessage request, ready for the store."""

    message: Message
    msg_id: str
    kind: int
    born_ms: int
    system: dict[str, str]
    due_ms: int | None
    group: str | None


def incoming(m: Any, *, max_body_size: int, max_delay_ms: int, now_ms: int) -> Incoming:
    """Check and convert one ``Message`` of a SendMessage request.

    Raises:
        ProxyError: with the RocketMQ code of the first fault found (nothing is stored).
    """
    sp = m.system_properties
    topic = m.topic.name
    try:
        check_user_topic(topic)
    except MQClientError as e:
        raise ProxyError("ILLEGAL_TOPIC", str(e)) from None
    msg_id = sp.message_id
    if len(msg_id) > MAX_MESSAGE_ID or not MESSAGE_ID.fullmatch(msg_id):
        raise ProxyError(
            "ILLEGAL_MESSAGE_ID",
            f"message id {msg_id[:MAX_MESSAGE_ID]!r} must be 1..{MAX_MESSAGE_ID} letters, digits and _ . : - "
            "(starting with a letter or digit)",
        )
    body = bytes(m.body)
    if sp.body_encoding == definition.GZIP:
        try:
            body = gzip.decompress(body) if body[:2] == b"\x1f\x8b" else zlib.decompress(body)
        except (OSError, zlib.error) as e:
            raise ProxyError("MESSAGE_CORRUPTED", f"gzip body of message {msg_id} does not decompress: {e}") from None
    if not body:
        raise ProxyError("MESSAGE_BODY_EMPTY", f"message {msg_id} has an empty body")
    if len(body) > max_body_size:
        raise ProxyError("MESSAGE_BODY_TOO_LARGE", f"body of message {msg_id} is {len(body)} bytes; the limit is {max_body_size}")
    for name in m.user_properties:
        if name.upper() in RESERVED_PROPERTIES or name in (MESSAGE_GROUP, BORN_HOST, TRACE_CONTEXT):
            raise ProxyError("ILLEGAL_MESSAGE_PROPERTY_KEY", f"property name {name!r} is reserved by the system")
    kind = sp.message_type
    group = sp.message_group if sp.HasField("message_group") and sp.message_group else None
    _check_system_fields(sp, group, msg_id)
    due_ms = _delivery_ms(sp) if sp.HasField("delivery_timestamp") else None
    if due_ms is not None and due_ms > now_ms + max_delay_ms:
        raise ProxyError(
            "ILLEGAL_DELIVERY_TIME",
            f"delivery time {due_ms} ms is more than {max_delay_ms} ms ahead (seconds given as milliseconds?)",
        )
    _check_type(kind, group, due_ms, msg_id)
    system: dict[str, str] = {}
    if group:
        system[MESSAGE_GROUP] = group
    if due_ms is not None and due_ms > now_ms:
        system[DELIVER_MS] = str(due_ms)
    if sp.born_host:
        system[BORN_HOST] = sp.born_host
    if sp.HasField("trace_context") and sp.trace_context:
        system[TRACE_CONTEXT] = sp.trace_context
    message = Message(topic, body, sp.tag if sp.HasField("tag") and sp.tag else None, list(sp.keys), dict(m.user_properties))
    if sp.HasField("priority"):  # RIP-80: checked with the message below (0..9)
        message.priority = sp.priority
    try:
        # the body is checked against max_body_size above (what clients are told); tags, keys and
        # properties against their own limit (MAX_USER_PROPERTY_SIZE), on top of the body
        check_message(message, max_body_size + MAX_USER_PROPERTY_SIZE, now_ms=now_ms)
    except MessageTooLargeError as e:
        raise ProxyError("MESSAGE_PROPERTIES_TOO_LARGE", str(e)) from None
    except MQClientError as e:
        raise ProxyError("BAD_REQUEST", f"message {msg_id}: {e}") from None
    born_ms = _born_ms(sp, msg_id) if sp.HasField("born_timestamp") else now_ms
    return Incoming(message, msg_id, kind, born_ms, system, due_ms if due_ms is not None and due_ms > now_ms else None, group)


def _check_system_fields(sp: Any, group: str | None, msg_id: str) -> None:
    """Bound the system fields a client sets that have no limit of their own in the message checks:
    stored as system properties, they would otherwise bypass the properties and size limits (a 1-byte
    message with a 4 MiB trace context). Text must be printable: the console shows it.

    Raises:
        ProxyError: ``ILLEGAL_MESSAGE_TAG``, ``ILLEGAL_MESSAGE_KEY``, ``ILLEGAL_MESSAGE_GROUP`` or
            ``BAD_REQUEST`` naming the field and its limit.
    """
    if sp.HasField("tag") and not sp.tag.isprintable():
        raise ProxyError("ILLEGAL_MESSAGE_TAG", f"message {msg_id}: the tag holds a control character")  # as RocketMQ
    if not all(key.isprintable() for key in sp.keys):
        raise ProxyError("ILLEGAL_MESSAGE_KEY", f"message {msg_id}: a key holds a control character")  # as RocketMQ
    if group is not None and (len(group) > MAX_MESSAGE_GROUP or not group.isprintable()):
        raise ProxyError(
            "ILLEGAL_MESSAGE_GROUP",
            f"message {msg_id}: the message group must be at most {MAX_MESSAGE_GROUP} printable characters, got {len(group)}",
        )
    for name, value, limit in (
        ("trace_context", sp.trace_context, MAX_TRACE_CONTEXT),
        ("born_host", sp.born_host, MAX_BORN_HOST),
    ):
        if len(value) > limit or not value.isprintable():
            raise ProxyError(
                "BAD_REQUEST", f"message {msg_id}: {name} must be at most {limit} printable characters, got {len(value)}"
            )


def _born_ms(sp: Any, msg_id: str) -> int:
    """The born time, ms, when protobuf can represent it (it is handed back to consumers as a Timestamp).

    Raises:
        ProxyError: ``BAD_REQUEST`` for a time before 1970 or after 9999 or nanos outside 0..999 999 999.
    """
    ts = sp.born_timestamp
    born_ms = int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000
    if not 0 <= ts.nanos <= 999_999_999 or not BORN_MS_RANGE[0] <= born_ms <= BORN_MS_RANGE[1]:
        raise ProxyError(
            "BAD_REQUEST",
            f"message {msg_id}: born_timestamp {ts.seconds} s {ts.nanos} ns is not a valid time (1970..9999)",
        )
    return born_ms


def _delivery_ms(sp: Any) -> int:
    """The delivery time, ms; computed by hand: a time given in ms where seconds are expected is out
    of protobuf's valid Timestamp range, and must be refused as too far ahead, not fail."""
    ts = sp.delivery_timestamp
    return int(ts.seconds) * 1000 + int(ts.nanos) // 1_000_000


def _check_type(kind: int, group: str | None, due_ms: int | None, msg_id: str) -> None:
    conflict = (
        (kind == FIFO and not group)
        or (kind == DELAY and due_ms is None)
        or (kind == TRANSACTION and (group or due_ms is not None))
        or (kind == NORMAL and (group or due_ms is not None))
        or (kind == PRIORITY and (group or due_ms is not None))
    )
    if conflict:
        raise ProxyError("MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", f"message {msg_id}: its message type does not fit its fields")
    if kind not in SUPPORTED_TYPES:
        raise ProxyError("UNSUPPORTED", f"message {msg_id}: message type {MESSAGE_TYPES.Name(kind)} is not supported")


def outgoing(
    msg: MessageExt,
    *,
    namespace: str = "",
    receipt_handle: str | None = None,
    attempt: int | None = None,
    invisible_ms: int | None = None,
    transaction: bool = False,
) -> Any:
    """``msg`` as a RocketMQ 5 ``Message`` (with its receipt when handed out to a consumer)."""
    system = msg.system_properties
    out = definition.Message(body=msg.body, user_properties=msg.properties)
    out.topic.name = msg.topic
    out.topic.resource_namespace = namespace
    sp = out.system_properties
    if msg.tags:
        sp.tag = msg.tags
    sp.keys.extend(msg.keys)
    sp.message_id = msg.msg_id
    sp.body_digest.type = definition.MD5
    sp.body_digest.checksum = hashlib.md5(msg.body).hexdigest().upper()
    sp.body_encoding = definition.IDENTITY
    group = system.get(MESSAGE_GROUP)
    deliver = system.get(DELIVER_MS)
    if transaction:
        sp.message_type = TRANSACTION
    elif group:
        sp.message_type = FIFO
        sp.message_group = group
    elif deliver:
        sp.message_type = DELAY
        sp.delivery_timestamp.FromMilliseconds(int(deliver))
    else:
        sp.message_type = PRIORITY if msg.priority else NORMAL
    if msg.priority:
        sp.priority = msg.priority
    sp.born_timestamp.FromMilliseconds(msg.born_timestamp_ms)
    sp.born_host = system.get(BORN_HOST, "")
    sp.store_timestamp.FromMilliseconds(msg.store_timestamp_ms)
    sp.store_host = "rocketredis"
    sp.queue_id = msg.queue_id
    if msg.queue_offset >= 0:
        sp.queue_offset = msg.queue_offset
    if TRACE_CONTEXT in system:
        sp.trace_context = system[TRACE_CONTEXT]
    if receipt_handle is not None:
        sp.receipt_handle = receipt_handle
    if attempt is not None:
        sp.delivery_attempt = attempt
    if invisible_ms is not None:
        sp.invisible_duration.FromMilliseconds(invisible_ms)
    return out


def parse_transaction_id(value: str) -> tuple[str, int, str]:
    """The topic, queue id and half id a :func:`mq.producer.tx_core.transaction_id` names.

    Raises:
        ProxyError: ``INVALID_TRANSACTION_ID``.
    """
    rest, _, half_id = value.rpartition(":")
    topic, _, qid = rest.rpartition(":")
    if not topic or not qid.isdigit() or not half_id:
        raise ProxyError("INVALID_TRANSACTION_ID", f"transaction id {value!r} was not issued by this endpoint")
    return topic, int(qid), half_id
