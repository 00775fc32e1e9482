"""Checks on names and messages, made before anything is written.

Every failure raises an :class:`~mq.errors.MQClientError` subclass quoting the offending value.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Sequence

from mq.errors import InvalidNameError, MessageTooLargeError, MQClientError
from mq.keys import KEY_SEPARATOR
from mq.model.message import Message

#: Allowed characters of topic and group names (RocketMQ ``Validators.PATTERN``).
NAME_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
#: Longest topic name (RocketMQ ``TOPIC_MAX_LENGTH``).
TOPIC_MAX_LENGTH = 127
#: Longest lite topic name (it is part of several key names of its parent, so kept short).
LITE_TOPIC_MAX_LENGTH = 64
#: Longest retry or dead-letter topic name.
SYSTEM_TOPIC_MAX_LENGTH = 255
#: Longest consumer or producer group name.
GROUP_MAX_LENGTH = 120
#: Default largest message body, bytes (RocketMQ ``maxMessageSize``); also the largest batch.
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
#: Most bytes of a message's tags, keys and user properties together (RocketMQ ``maxUserPropertySize``).
MAX_USER_PROPERTY_SIZE = 16 * 1024
#: Most user properties of a message (RocketMQ ``userPropertyMaxNum``).
MAX_PROPERTIES = 128
#: Most keys of a message (RocketMQ bounds keys only by ``maxUserPropertySize``).
MAX_KEYS = 64
#: Highest ``Message.priority`` [RocketMQ 5.4 RIP-80: 0..9, higher first].
MAX_PRIORITY = 9
#: Furthest ahead a ``deliver_time_ms`` may be, ms (RocketMQ 5 proxy ``maxDelayTimeMills``, 1 day).
MAX_DELAY_MS = 24 * 3_600_000
#: Longest ``Message.dedup_id``, characters (D140).
MAX_DEDUP_ID_LENGTH = 128
#: Prefix of a group's retry topic.
RETRY_PREFIX = "%RETRY%"
#: Prefix of a group's dead-letter topic.
DLQ_PREFIX = "%DLQ%"
#: Topics only the system may use.
SYSTEM_TOPICS = frozenset(
    {"SCHEDULE_TOPIC_XXXX", "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC"}
)
#: Property names the system sets; users cannot (RocketMQ's message property names, e.g. ``KEYS`` —
#: not Redis commands).
RESERVED_PROPERTIES = frozenset(
    {
        "TAGS",
        "KEYS",
        "DELAY",
        "UNIQ_KEY",
        "RETRY_TOPIC",
        "REAL_TOPIC",
        "REAL_QID",
        "TRAN_MSG",
        "PGROUP",
        "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES",
        "ORIGIN_MESSAGE_ID",
        "TRANSACTION_CHECK_TIMES",
        "TIMER_DELIVER_MS",
        "WAIT",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "BUYER_ID",
        "CORRECTION_FLAG",
        "MSG_REGION",
        "TRACE_ON",
        "CHECK_IMMUNITY_TIME_IN_SECONDS",
        "SHARDING_KEY",
        "INSTANCE_ID",
        "CONSUME_START_TIME",
        "TIMER_DELAY_SEC",
        "TIMER_DELAY_MS",
        "__STARTDELIVERTIME",
    }
)


def _check_name(kind: str, name: object, max_length: int) -> str:
    if not isinstance(name, str):
        raise InvalidNameError(f"{kind} name must be a str, got {type(name).__name__} {name!r}")
    if not name:
        raise InvalidNameError(f"{kind} name is empty")
    if len(name) > max_length:
        raise InvalidNameError(f"{kind} name {name!r} is {len(name)} characters; the limit is {max_length}")
    if not NAME_PATTERN.match(name):
        raise InvalidNameError(f"{kind} name {name!r} has characters outside [%|a-zA-Z0-9_-]")
    return name


def is_system_topic(topic: str) -> bool:
    """Whether ``topic`` is a system topic or a retry/DLQ topic (not for users to create or send to)."""
    return topic in SYSTEM_TOPICS or topic.startswith((RETRY_PREFIX, DLQ_PREFIX))


def check_topic(topic: object) -> str:
    """A valid topic name (retry/DLQ topics may be longer), else :class:`InvalidNameError`."""
    limit = SYSTEM_TOPIC_MAX_LENGTH if isinstance(topic, str) and topic.startswith(("%RETRY%", "%DLQ%")) else TOPIC_MAX_LENGTH
    return _check_name("topic", topic, limit)


@functools.lru_cache(maxsize=4096)
def _valid_user_topic(topic: str) -> str:
    name = check_topic(topic)
    if is_system_topic(name):
        raise InvalidNameError(f"topic {name!r} is reserved for the system; choose another name")
    return name


def check_user_topic(topic: object) -> str:
    """A valid topic name that users may create and send to (answers are cached per name)."""
    if not isinstance(topic, str):
        check_topic(topic)  # raises, naming the wrong type
    return _valid_user_topic(str(topic))


def check_group(group: object) -> str:
    """A valid group name, else :class:`InvalidNameError`."""
    return _check_name("group", group, GROUP_MAX_LENGTH)


def check_message(msg: object, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE, *, now_ms: int | None = None) -> Message:
    """Check everything about a message a producer can check without the store.

    The limits (one table in docs/security.md): the whole encoded message (body, tags, keys,
    properties) within ``max_message_size`` bytes; tags, keys and properties within
    :data:`MAX_USER_PROPERTY_SIZE` bytes and :data:`MAX_PROPERTIES` / :data:`MAX_KEYS` items; text
    valid UTF-8; ``deliver_time_ms`` at most :data:`MAX_DELAY_MS` after ``now_ms`` (default: now).

    Raises:
        TypeError: ``msg`` is not a Message, or its body is not bytes.
        MQClientError: any other fault, naming the value.
    """
    if not isinstance(msg, Message):
        raise TypeError(f"expected a mq.Message, got {type(msg).__name__}")
    check_user_topic(msg.topic)
    if not isinstance(msg.body, (bytes, bytearray, memoryview)):
        raise TypeError(f"Message body must be bytes, got {type(msg.body).__name__}")
    body_size = len(msg.body)
    if body_size == 0:
        raise MQClientError(f"message body for topic {msg.topic!r} is empty; send at least 1 byte")
    if body_size > max_message_size:
        raise MessageTooLargeError(f"message body is {body_size} bytes; the limit is {max_message_size} (max_message_size)")
    # no tag, key or property (most messages): nothing to go through
    tags, keys, properties = msg.tags, msg.keys, msg.properties
    extra = (
        (0 if tags is None else _check_tags(tags))
        + (0 if keys.__class__ is tuple and not keys else _check_keys(keys))
        + (0 if properties.__class__ is dict and not properties else _check_properties(properties))
    )
    if extra > MAX_USER_PROPERTY_SIZE:
        raise MessageTooLargeError(f"tags, keys and properties take {extra} bytes; the limit is {MAX_USER_PROPERTY_SIZE}")
    if body_size + extra > max_message_size:
        raise MessageTooLargeError(
            f"message is {body_size + extra} bytes with its tags, keys and properties; "
            f"the limit is {max_message_size} (max_message_size)"
        )
    if not (msg.delay_level.__class__ is int and msg.delay_level == 0 and msg.deliver_time_ms is None):
        _check_delay(msg, now_ms)
    if msg.lite_topic is not None:
        _check_lite(msg)
    if msg.priority.__class__ is not int or not 0 <= msg.priority <= MAX_PRIORITY:
        raise MQClientError(f"priority must be an int in 0..{MAX_PRIORITY} (higher first), got {msg.priority!r}")
    if msg.dedup_id is not None:
        check_dedup_id(msg)
    return msg


def check_lite_topic(name: object) -> str:
    """A valid lite topic name (a topic name's characters and length), else :class:`InvalidNameError`."""
    return _check_name("lite topic", name, LITE_TOPIC_MAX_LENGTH)


def _check_lite(msg: Message) -> None:
    check_lite_topic(msg.lite_topic)
    if msg.delay_level or msg.deliver_time_ms is not None:
        raise MQClientError(f"a message to lite topic {msg.lite_topic!r} cannot be delayed or timed; send it at once")


def check_dedup_id(msg: Message) -> None:
    """Raise MQClientError unless ``msg.dedup_id`` is 1..:data:`MAX_DEDUP_ID_LENGTH` printable
    characters on a message sent at once to a queue (a delayed message, or one to a lite topic, is not
    deduplicated: refused, D140)."""
    dedup_id = msg.dedup_id
    if not isinstance(dedup_id, str):
        raise MQClientError(f"dedup_id must be a str or None, got {type(dedup_id).__name__}")
    if not 1 <= len(dedup_id) <= MAX_DEDUP_ID_LENGTH or not dedup_id.isprintable():
        raise MQClientError(
            f"dedup_id must be 1..{MAX_DEDUP_ID_LENGTH} printable characters, got {dedup_id[:MAX_DEDUP_ID_LENGTH]!r}"
        )
    if msg.delay_level or msg.deliver_time_ms is not None:
        raise MQClientError(f"dedup_id {dedup_id!r} on a delayed message: only messages sent at once are deduplicated")
    if msg.lite_topic is not None:
        raise MQClientError(
            f"dedup_id {dedup_id!r} on a message to lite topic {msg.lite_topic!r}: lite topics are not deduplicated "
            "(their sends store in the lite topic's hash, outside any queue's dedup window); send it without dedup_id"
        )


def message_size(msg: Message) -> int:
    """Bytes a checked message counts against ``max_message_size``: body, tags, keys and properties."""
    extra = len(msg.tags.encode()) if msg.tags else 0
    extra += sum(len(k.encode()) + 1 for k in msg.keys)
    extra += sum(len(n.encode()) + len(v.encode()) for n, v in msg.properties.items())
    return len(msg.body) + extra


def _check_tags(tags: object) -> int:
    """Bytes of a valid tag (0 for none); a tag no TAG filter could ever select is refused."""
    if tags is None:
        return 0
    size = _check_text("tags", tags)
    assert isinstance(tags, str)
    if any(c.isspace() or c == "|" for c in tags):
        raise MQClientError(
            f"tag {tags!r} contains '|' or whitespace: a message has one tag, and no TAG filter "
            "could select this one; use a property for several values"
        )
    return size


def _check_keys(keys: Sequence[object]) -> int:
    if len(keys) > MAX_KEYS:
        raise MQClientError(f"a message has {len(keys)} keys; the limit is {MAX_KEYS}")
    size = 0
    for key in keys:
        size += _check_text("key", key) + 1
        if KEY_SEPARATOR in str(key):
            raise MQClientError(f"message key {key!r} contains the reserved character \\x1f")
    return size


def _check_properties(properties: object) -> int:
    if not isinstance(properties, dict):
        raise MQClientError(f"properties must be a dict of str to str, got {type(properties).__name__}")
    if len(properties) > MAX_PROPERTIES:
        raise MQClientError(f"a message has {len(properties)} properties; the limit is {MAX_PROPERTIES}")
    size = 0
    for name, value in properties.items():
        size += _check_text("property name", name)
        size += _check_text(f"property {name!r} value", value)
        if str(name).upper() in RESERVED_PROPERTIES:
            raise MQClientError(
                f"property name {name!r} is reserved by the system (names are compared case-insensitively); choose another name"
            )
    return size


def _check_delay(msg: Message, now_ms: int | None) -> None:
    if not _is_int(msg.delay_level) or msg.delay_level < 0:
        raise MQClientError(f"delay_level must be an int >= 0, got {msg.delay_level!r}")
    when = msg.deliver_time_ms
    if when is None:
        return
    if not _is_int(when) or when < 0:
        raise MQClientError(f"deliver_time_ms must be epoch milliseconds (int >= 0), got {when!r}")
    latest = (int(time.time() * 1000) if now_ms is None else now_ms) + MAX_DELAY_MS
    if when > latest:
        raise MQClientError(
            f"deliver_time_ms {when} is more than {MAX_DELAY_MS // 3_600_000} h ahead (MAX_DELAY_MS); "
            "deliver it later or store the schedule elsewhere"
        )


def _is_int(value: object) -> bool:
    """An int that is not a bool (``True`` is not a delay level)."""
    return isinstance(value, int) and not isinstance(value, bool)


def check_batch(msgs: Sequence[Message], max_batch_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> str:
    """Check a batch: non-empty, one topic, no delay, total size within ``max_batch_size``.

    The total counts each message whole (body, tags, keys, properties). Returns the batch's topic.
    """
    if isinstance(msgs, Message) or not isinstance(msgs, Sequence) or not msgs:
        raise MQClientError("send_batch needs a non-empty list of messages")
    topic = msgs[0].topic if isinstance(msgs[0], Message) else None
    total = 0
    for msg in msgs:
        check_message(msg, max_batch_size)
        if msg.topic != topic:
            raise MQClientError(f"a batch must have one topic; found {topic!r} and {msg.topic!r}")
        if msg.delay_level or msg.deliver_time_ms is not None:
            raise MQClientError("a batch cannot contain delayed or timer messages")
        if msg.dedup_id is not None:
            raise MQClientError(f"a batch cannot carry dedup ids (found {msg.dedup_id!r}): send such messages one by one")
        if msg.lite_topic is not None:
            raise MQClientError("a batch cannot contain lite topic messages; send them one by one")
        if msg.priority != msgs[0].priority:
            raise MQClientError(
                f"a batch goes to one queue, so its messages share one priority; found {msgs[0].priority} and {msg.priority}"
            )
        total += message_size(msg)
    if total > max_batch_size:
        raise MessageTooLargeError(f"batch is {total} bytes; the limit is {max_batch_size}")
    return str(topic)


def _check_text(what: str, value: object) -> int:
    """Bytes of ``value`` as UTF-8; refuses a non-str, a blank str and text UTF-8 cannot encode."""
    if not isinstance(value, str) or not value.strip():
        raise MQClientError(f"{what} must be a non-blank str, got {value!r}")
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise MQClientError(
            f"{what} {value!r} is not valid UTF-8 text ({e.reason} at index {e.start}): lone surrogates cannot be stored"
        ) from None
