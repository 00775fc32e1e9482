"""Topic configuration and queue statistics [RocketMQ ``TopicConfig``, ``TopicOffset``]."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from mq.errors import MQClientError
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue

#: Default number of read and of write queues of a new topic (RocketMQ ``defaultTopicQueueNums``
#: is 4 for auto-created topics; ``mqadmin updateTopic`` uses 8; the spec asks for 16).
DEFAULT_QUEUE_NUMS = 16
#: Largest number of queues a topic may have.
MAX_QUEUE_NUMS = 1024
#: A new topic's deduplication window, seconds (NATS JetStream's ``duplicate_window`` default, D140).
DEFAULT_DEDUP_WINDOW_S = 120
#: Longest deduplication window, seconds (seven days; each id is remembered that long).
MAX_DEDUP_WINDOW_S = 7 * 24 * 3600
#: Most priority levels of a topic (priorities 0..9).
MAX_PRIORITY_LEVELS = 10
#: Valid permissions: read and write, read only, write only [RocketMQ PermName 6, 4, 2].
PERMS = ("rw", "r", "w")
#: Longest ``lite_expiration_s`` (30 days), seconds.
MAX_LITE_EXPIRATION_S = 30 * 86400
#: How long a lite topic lives after its last write when its parent names no ``lite_expiration_s``, seconds.
DEFAULT_LITE_EXPIRATION_S = 600


@dataclass(frozen=True)
class TopicConfig:
    """A topic's configuration.

    Attributes:
        name: the topic name.
        read_queues: consumers rebalance over queue ids ``< read_queues``.
        write_queues: producers send to queue ids ``< write_queues``.
        perm: ``"rw"``, ``"r"`` or ``"w"``.
        order: the topic carries ordered messages (informational, as in RocketMQ).
        hot_retention_s: with a tier, how long Redis keeps this topic's tiered messages, seconds
            (None: the broker service's ``hot_retention_s``).
        hot_retention_bytes: with a tier, about how much of each queue's log Redis keeps, bytes
            (None: the broker service's ``hot_retention_bytes``).
        dedup_window_s: how long a message's ``dedup_id`` is remembered, seconds (1 .. seven days):
            a second send of it within the window stores nothing (D140).
        lite: a parent of lite topics [RIP-83]: messages name a lite topic (``Message(…,
            lite_topic=…)``), each a one-queue ordered topic created on its first send.
        lite_expiration_s: a lite topic (its messages and offsets) is removed this long after its
            last write, seconds (Redis expires it; None: :data:`DEFAULT_LITE_EXPIRATION_S`).
        priority_levels: a priority topic's number of levels, 2..10 (None: not a priority topic).
            Queue ``q`` holds level ``q % priority_levels``; a message of priority ``p`` goes to a
            queue of level ``min(p, priority_levels - 1)``, and consumers take higher levels first
            (D142). Needs at least as many read and write queues as levels.
    """

    name: str
    read_queues: int = DEFAULT_QUEUE_NUMS
    write_queues: int = DEFAULT_QUEUE_NUMS
    perm: str = "rw"
    order: bool = False
    hot_retention_s: float | None = None
    hot_retention_bytes: int | None = None
    dedup_window_s: int = DEFAULT_DEDUP_WINDOW_S
    lite: bool = False
    lite_expiration_s: int | None = None
    priority_levels: int | None = None

    def __post_init__(self) -> None:
        for field in ("read_queues", "write_queues"):
            value = getattr(self, field)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_QUEUE_NUMS:
                raise MQClientError(f"{field} must be an int in 1..{MAX_QUEUE_NUMS}, got {value!r}")
        if self.perm not in PERMS:
            raise MQClientError(f"perm must be one of {PERMS}, got {self.perm!r}")
        for name in ("hot_retention_s", "hot_retention_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0):
                raise MQClientError(f"{name} must be a positive number or None, got {value!r}")
        window = self.dedup_window_s
        if not isinstance(window, int) or isinstance(window, bool) or not 1 <= window <= MAX_DEDUP_WINDOW_S:
            raise MQClientError(f"dedup_window_s must be an int in 1..{MAX_DEDUP_WINDOW_S} (seconds), got {window!r}")
        if not isinstance(self.lite, bool):
            raise MQClientError(f"lite must be a bool, got {self.lite!r}")
        expiry = self.lite_expiration_s
        if expiry is not None:
            if not self.lite:
                raise MQClientError("lite_expiration_s is for lite parents only: pass lite=True with it")
            if not isinstance(expiry, int) or isinstance(expiry, bool) or not 1 <= expiry <= MAX_LITE_EXPIRATION_S:
                raise MQClientError(f"lite_expiration_s must be an int in 1..{MAX_LITE_EXPIRATION_S} seconds, got {expiry!r}")
        levels = self.priority_levels
        if levels is not None:
            if levels.__class__ is not int or not 2 <= levels <= MAX_PRIORITY_LEVELS:
                raise MQClientError(f"priority_levels must be an int in 2..{MAX_PRIORITY_LEVELS} or None, got {levels!r}")
            if min(self.read_queues, self.write_queues) < levels:
                raise MQClientError(
                    f"a topic with {levels} priority levels needs at least {levels} read and write queues "
                    f"(one a level at least), got {self.read_queues} and {self.write_queues}"
                )
            if self.lite:
                raise MQClientError("a lite parent cannot have priority levels: each lite topic is one ordered queue")

    @property
    def lite_expiration_ms(self) -> int:
        """How long a lite topic of this parent lives after its last write, ms."""
        return 1000 * (self.lite_expiration_s or DEFAULT_LITE_EXPIRATION_S)

    @property
    def queue_count(self) -> int:
        """How many queues exist in the store: ``max(read_queues, write_queues)``."""
        return max(self.read_queues, self.write_queues)

    def writable(self, queue_id: int) -> bool:
        """Whether producers may send to ``queue_id``."""
        return "w" in self.perm and queue_id < self.write_queues

    def readable(self, queue_id: int) -> bool:
        """Whether consumers may read ``queue_id``."""
        return "r" in self.perm and queue_id < self.read_queues

    def readable_queues(self, broker_name: str = DEFAULT_BROKER_NAME) -> list[MessageQueue]:
        """The queues consumers read, by queue id."""
        return [MessageQueue(self.name, broker_name, q) for q in range(self.read_queues) if self.readable(q)]

    def writable_queues(self, broker_name: str = DEFAULT_BROKER_NAME) -> list[MessageQueue]:
        """The queues producers send to, by queue id."""
        return [MessageQueue(self.name, broker_name, q) for q in range(self.write_queues) if self.writable(q)]

    def level_of(self, queue_id: int) -> int:
        """The priority level queue ``queue_id`` holds (0 on a topic without priority levels)."""
        return queue_id % self.priority_levels if self.priority_levels else 0

    def level_for(self, priority: int) -> int:
        """The level a message of ``priority`` goes to: the priority itself, the top level above it."""
        return min(priority, self.priority_levels - 1) if self.priority_levels else 0

    def to_json(self) -> str:
        """The stored form (hot retention, lite, priority levels and a dedup window only when set: topics
        without stay as before)."""
        data = {k: v for k, v in asdict(self).items() if (v is not None and v is not False) or k not in _OPTIONAL}
        if self.dedup_window_s == DEFAULT_DEDUP_WINDOW_S:  # topics on the default stay as they were stored
            del data["dedup_window_s"]
        return json.dumps(data, separators=(",", ":"))


#: TopicConfig fields stored only when set.
_OPTIONAL = ("hot_retention_s", "hot_retention_bytes", "lite", "lite_expiration_s", "priority_levels")


@dataclass(frozen=True)
class QueueStats:
    """Offsets of one queue [RocketMQ ``TopicOffset``].

    Attributes:
        min_offset: the oldest offset still stored, in Redis or in the tier.
        max_offset: the next offset to be written (messages stored = max − min).
        last_store_timestamp_ms: store time of the newest message, epoch ms (0 when empty).
    """

    min_offset: int
    max_offset: int
    last_store_timestamp_ms: int

    @property
    def stored(self) -> int:
        """Messages stored in the queue now."""
        return self.max_offset - self.min_offset

    def lag(self, consumer_offset: int) -> int:
        """Messages a consumer at ``consumer_offset`` has not consumed yet (trimmed ones do not count)."""
        return self.max_offset - max(consumer_offset, self.min_offset)


@dataclass(frozen=True)
class QueueProgress:
    """A consumer group's position in one queue [RocketMQ ``OffsetWrapper``].

    Attributes:
        message_queue: the queue.
        broker_offset: the queue's max offset (next to be written).
        consumer_offset: the group's committed offset (next to consume); -1 when it has none.
        lag: messages still stored that the group has not consumed yet (``broker_offset -
            max(consumer_offset, min offset)``; all stored ones when it has no offset).
        expired: messages of the queue retention removed before the group consumed them, ever (a
            counter kept in the store; the group never sees them). Not part of ``lag``: a group that
            fell behind retention shows lag 0 and ``expired`` > 0, never 0 and 0.
    """

    message_queue: MessageQueue
    broker_offset: int
    consumer_offset: int
    lag: int
    expired: int = 0


@dataclass(frozen=True)
class TierStats:
    """What the tier holds of one queue (``Admin.tier_status``).

    Attributes:
        tiered_min_offset: the first offset held in the tier.
        tiered_end_offset: one past the last one: Redis holds the queue from here on (equal to
            ``tiered_min_offset`` when nothing is tiered).
        segments: how many segment files hold them.
        bytes: their total size in the tier, bytes.
    """

    tiered_min_offset: int
    tiered_end_offset: int
    segments: int
    bytes: int

    @property
    def messages(self) -> int:
        """Messages held in the tier."""
        return self.tiered_end_offset - self.tiered_min_offset
