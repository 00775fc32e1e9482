"""Checks on names and messages, made before anything is written.

Every failure raises an :class:`~mq.errors.MQClientError` subclass quoting the offending value.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence

from mq.errors import InvalidNameError, MessageTooLargeError, MQClientError
from mq.keys import KEY_SEPARATOR
from mq.message import Message

#: Allowed characters of topic and group names (RocketMQ ``Validators.PATTERN``).
NAME_PATTERN = re.compile(r"^[%|a-zA-Z0-9_-]+$")
#: Longest topic name (RocketMQ ``TOPIC_MAX_LENGTH``).
TOPIC_MAX_LENGTH = 127
#: Longest retry or dead-letter topic name.
SYSTEM_TOPIC_MAX_LENGTH = 255
#: Longest consumer or producer group name.
GROUP_MAX_LENGTH = 120
#: Default largest message body, bytes (RocketMQ ``maxMessageSize``); also the largest batch.
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024
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
        "TAGS", "KEYS", "DELAY", "UNIQ_KEY", "RETRY_TOPIC", "REAL_TOPIC", "REAL_QID", "TRAN_MSG", "PGROUP",
        "RECONSUME_TIME", "MAX_RECONSUME_TIMES", "ORIGIN_MESSAGE_ID", "TRANSACTION_CHECK_TIMES",
        "TIMER_DELIVER_MS", "WAIT", "MIN_OFFSET", "MAX_OFFSET", "BUYER_ID", "CORRECTION_FLAG",
        "MSG_REGION", "TRACE_ON", "CHECK_IMMUNITY_TIME_IN_SECONDS", "SHARDING_KEY", "INSTANCE_ID",
        "CONSUME_START_TIME", "TIMER_DELAY_SEC", "TIMER_DELAY_MS", "__STARTDELIVERTIME",
    }
)  # fmt: skip


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


def check_message(msg: object, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> Message:
    """Check everything about a message a producer can check without the store.

    Raises:
        TypeError: ``msg`` is not a Message, or its body is not bytes.
        MQClientError: any other fault, naming the value.
    """
    if not isinstance(msg, Message):
        raise TypeError(f"expected a mq.Message, got {type(msg).__name__}")
    check_user_topic(msg.topic)
    if not isinstance(msg.body, (bytes, bytearray, memoryview)):
        raise TypeError(f"Message body must be bytes, got {type(msg.body).__name__}")
    size = len(msg.body)
    if size == 0:
        raise MQClientError(f"message body for topic {msg.topic!r} is empty; send at least 1 byte")
    if size > max_message_size:
        raise MessageTooLargeError(f"message body is {size} bytes; the limit is {max_message_size} (max_message_size)")
    _check_text("tags", msg.tags, allow_none=True)
    for key in msg.keys:
        _check_text("key", key)
        if KEY_SEPARATOR in key:
            raise MQClientError(f"message key {key!r} contains the reserved character \\x1f")
    for name, value in msg.properties.items():
        _check_text("property name", name)
        _check_text(f"property {name!r} value", value)
        if name in RESERVED_PROPERTIES:
            raise MQClientError(f"property name {name!r} is reserved by the system; choose another name")
    if not isinstance(msg.delay_level, int) or msg.delay_level < 0:
        raise MQClientError(f"delay_level must be an int >= 0, got {msg.delay_level!r}")
    if msg.deliver_time_ms is not None and (not isinstance(msg.deliver_time_ms, int) or msg.deliver_time_ms < 0):
        raise MQClientError(f"deliver_time_ms must be epoch milliseconds (int >= 0), got {msg.deliver_time_ms!r}")
    return msg


def check_batch(msgs: Sequence[Message], max_batch_size: int = DEFAULT_MAX_MESSAGE_SIZE) -> str:
    """Check a batch: non-empty, one topic, no delay, total size within ``max_batch_size``.

    Returns the batch's topic.
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
        total += len(msg.body) + sum(len(k) + len(v) for k, v in msg.properties.items())
    if total > max_batch_size:
        raise MessageTooLargeError(f"batch is {total} bytes; the limit is {max_batch_size}")
    return str(topic)


def _check_text(what: str, value: object, *, allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if not isinstance(value, str) or not value.strip():
        raise MQClientError(f"{what} must be a non-blank str, got {value!r}")
