"""Messages as users build them (:class:`Message`) and as the store returns them (:class:`MessageExt`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum

from mq.model.properties import PRIORITY
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue


def _normalise_keys(keys: str | Sequence[str] | None) -> tuple[str, ...]:
    if keys is None:
        return ()
    if isinstance(keys, str):
        # RocketMQ's setKeys(String) may carry several keys separated by spaces.
        return tuple(k for k in keys.split(" ") if k)
    if isinstance(keys, Iterable) and not isinstance(keys, (bytes, bytearray)):
        return tuple(keys)
    return (keys,)  # not a key: the producer's checks refuse it with an MQClientError


@dataclass(init=False, eq=True)
class Message:
    """A message to send [RocketMQ ``Message``].

    Args:
        topic: the topic to send to.
        body: the payload, 1 B .. ``max_message_size`` (4 MiB by default). Bytes only: a ``str``
            is refused (encode it yourself); nothing is ever pickled.
        tags: one tag, used by TAG filters (``"TagA || TagB"``) and SQL92's ``TAGS``.
        keys: one or more business keys for :meth:`Admin.query_messages_by_key`; a string may hold
            several keys separated by spaces.
        properties: user properties (str → str), visible to SQL92 filters. Names reserved by the
            system (``TAGS``, ``KEYS``, ``DELAY``, …) are refused.
        delay_level: 1..N picks level N of the broker's ``message_delay_level`` (clamped to the top
            level); 0 sends at once.
        deliver_time_ms: absolute delivery time, epoch milliseconds (RocketMQ 5 timer message).
        dedup_id: a deduplication id (1..128 printable characters): a second send of the same id to
            the topic within its ``dedup_window_s`` stores nothing and returns the first send's
            result with ``SendResult.duplicate`` True (D140). Not with a delay, in a batch, nor with a
            ``lite_topic``; on a priority topic its queue is chosen among its level's queues.
        lite_topic: the lite topic of a lite parent ``topic`` this message goes to (created on
            this first send, one queue, ordered; see ``Admin.create_topic(…, lite=True)``) [RIP-83].
        priority: 0..9, higher first [RocketMQ 5.4 RIP-80]; anything but 0 needs a topic created with
            ``priority_levels`` (its queues are split among the levels, D142).
    """

    topic: str
    body: bytes
    tags: str | None
    keys: tuple[str, ...]
    properties: dict[str, str]
    delay_level: int
    deliver_time_ms: int | None
    dedup_id: str | None
    priority: int
    #: a class default: messages read from a queue (built field by field) have none
    lite_topic: str | None = field(default=None, kw_only=True)

    def __init__(
        self,
        topic: str,
        body: bytes,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        *,
        delay_level: int = 0,
        deliver_time_ms: int | None = None,
        dedup_id: str | None = None,
        lite_topic: str | None = None,
        priority: int = 0,
    ) -> None:
        if isinstance(body, str):
            raise TypeError("Message body must be bytes, not str: encode it first, e.g. text.encode('utf-8')")
        self.topic = topic
        self.body = body
        self.tags = tags
        self.keys = () if keys is None else _normalise_keys(keys)
        # a non-mapping is kept as given, for the producer's checks to refuse with an MQClientError
        # (None first: an ABC check costs as much as the rest of the constructor)
        self.properties = {} if properties is None else dict(properties) if isinstance(properties, Mapping) else properties or {}
        self.delay_level = delay_level
        self.deliver_time_ms = deliver_time_ms
        if dedup_id is not None:  # else the class default (below), as a decoded message has it
            self.dedup_id = dedup_id
        if lite_topic is not None:
            self.lite_topic = lite_topic
        self.priority = priority

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(topic={self.topic!r}, tags={self.tags!r}, keys={list(self.keys)!r}, "
            f"body=<{len(self.body)} bytes>)"
        )


#: The class default serves decoded messages: codec._message builds them without calling __init__.
Message.dedup_id = None


@dataclass(init=False, eq=True, repr=False)
class MessageExt(Message):
    """A stored message with what the store added [RocketMQ ``MessageExt``].

    Attributes:
        msg_id: unique id assigned by the producer (RocketMQ's ``UNIQ_KEY``).
        queue_id: the queue it is stored in.
        queue_offset: its offset in that queue (dense from 0).
        born_timestamp_ms: when the producer created it, epoch ms.
        store_timestamp_ms: when the store accepted it (Redis server clock), epoch ms.
        reconsume_times: how often it has been sent back for retry.
        broker_name: the queue's broker name.
        system_properties: properties set by the system, e.g. ``RETRY_TOPIC`` (the original topic of
            a retried or dead-lettered message), ``ORIGIN_MESSAGE_ID`` and ``PRIORITY`` (where
            ``priority`` is stored; a retried copy keeps it).
    """

    msg_id: str
    queue_id: int
    queue_offset: int
    born_timestamp_ms: int
    store_timestamp_ms: int
    reconsume_times: int
    broker_name: str
    system_properties: dict[str, str]

    def __init__(
        self,
        topic: str,
        body: bytes,
        tags: str | None = None,
        keys: str | Sequence[str] | None = None,
        properties: Mapping[str, str] | None = None,
        *,
        msg_id: str,
        queue_id: int,
        queue_offset: int,
        born_timestamp_ms: int,
        store_timestamp_ms: int,
        reconsume_times: int = 0,
        broker_name: str = DEFAULT_BROKER_NAME,
        delay_level: int = 0,
        deliver_time_ms: int | None = None,
        system_properties: Mapping[str, str] | None = None,
        dedup_id: str | None = None,
        lite_topic: str | None = None,
        priority: int | None = None,
    ) -> None:
        system = dict(system_properties or {})
        if priority is None:  # as stored: with the system properties (``dataclasses.replace`` passes it)
            priority = int(system.get(PRIORITY, 0))
        super().__init__(
            topic,
            body,
            tags,
            keys,
            properties,
            delay_level=delay_level,
            deliver_time_ms=deliver_time_ms,
            dedup_id=dedup_id,
            lite_topic=lite_topic,
            priority=priority,
        )
        self.msg_id = msg_id
        self.queue_id = queue_id
        self.queue_offset = queue_offset
        self.born_timestamp_ms = born_timestamp_ms
        self.store_timestamp_ms = store_timestamp_ms
        self.reconsume_times = reconsume_times
        self.broker_name = broker_name
        self.system_properties = system

    @property
    def message_queue(self) -> MessageQueue:
        """The queue this message is stored in."""
        return MessageQueue(self.topic, self.broker_name, self.queue_id)

    def __repr__(self) -> str:
        return (
            f"MessageExt(topic={self.topic!r}, queue_id={self.queue_id}, queue_offset={self.queue_offset}, "
            f"msg_id={self.msg_id!r}, tags={self.tags!r}, keys={list(self.keys)!r}, body=<{len(self.body)} bytes>)"
        )


class SendStatus(str, Enum):
    """Outcome of a send [RocketMQ ``SendStatus``]."""

    SEND_OK = "SEND_OK"
    #: Stored on the master, but fewer replicas than ``sync_replicas`` confirmed it in time: it can
    #: be lost if the master fails before replicating it. Not retried (that would store it twice).
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"


@dataclass(frozen=True)
class SendResult:
    """What a successful send returns [RocketMQ ``SendResult``].

    For a batch, ``msg_id`` is the comma-joined ids and ``queue_offset`` the first message's offset.
    ``recall_handle`` is set for a delayed or timer message (None otherwise): pass it to
    ``Producer.recall`` to remove the message before it is due [RocketMQ 5.3.2].
    ``duplicate`` is True when the send stored nothing because its ``dedup_id`` was seen within the
    topic's window: ``msg_id``, the queue and the offset are then the first send's (D140).
    """

    status: SendStatus
    msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    recall_handle: str | None = None
    duplicate: bool = False

    @property
    def msg_ids(self) -> list[str]:
        """The message ids (several for a batch)."""
        return self.msg_id.split(",")


class Duplicate(tuple[int, int]):
    """What a put returns for a message whose ``dedup_id`` was seen in its queue's window (it stored
    nothing): the first send's ``(offset, store_timestamp_ms)``, and its ``msg_id`` (D140)."""

    msg_id: str

    def __new__(cls, offset: int, store_ms: int, msg_id: str) -> Duplicate:
        self = super().__new__(cls, (offset, store_ms))
        self.msg_id = msg_id
        return self
