"""The shapes of what the console shows: frozen dataclasses of plain values (``str``, ``int``, ``float``,
``bool``, ``None``, lists, dicts and other such dataclasses) that :mod:`mq.console.service` returns,
pages read by attribute and the API turns into JSON with :func:`to_jsonable`.

Lag that cannot be known — a group with no committed offset on a queue — is ``None`` ("unknown"),
never 0 or −1. Times are epoch milliseconds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from mq.model.topic import DEFAULT_DEDUP_WINDOW_S
from mq.observe.trace import TraceEvent

T = TypeVar("T")


@dataclass(frozen=True)
class Page(Generic[T]):
    """One page of a list: ``items`` are the ``page``-th ``per_page`` of ``total`` (pages count from 1)."""

    items: list[T]
    total: int
    page: int
    per_page: int

    @property
    def pages(self) -> int:
        """How many pages the list has (at least 1)."""
        return max(1, math.ceil(self.total / self.per_page))


@dataclass(frozen=True)
class Info:
    """What pages need on every request: ``read_only`` hides change controls."""

    namespace: str
    url: str
    read_only: bool
    login_required: bool
    version: str


@dataclass(frozen=True)
class Broker:
    """A broker service: its id, last health beat (epoch ms) and whether that is recent enough."""

    broker_id: str
    last_beat_ms: int
    healthy: bool


@dataclass(frozen=True)
class BacklogRow:
    """Messages waiting in the timer or the transaction check-backs of one topic."""

    topic: str
    waiting: int
    earliest_ms: int


@dataclass(frozen=True)
class Overview:
    """The overview page.

    Attributes:
        topics, groups: how many user topics and consumer groups the namespace has.
        in_per_s, out_per_s: messages stored / consumed per second over the last minute (or the snapshots
            there are, when the service started less than a minute ago), from the broker service's
            snapshots; None when unknown (fewer than two snapshots, or none in the last minute).
        total_lag: messages not consumed yet, summed over every (group, queue) with a committed offset;
            None when no group has one.
        dlq: group → dead letters stored.
        timer_backlog, half_backlog: delayed messages waiting, unresolved half messages (whole namespace).
        brokers: the broker services and their health.
        taken_at_ms: when this was read.
        lag_as_of_ms: when lag, dead letters and backlogs were read (the broker's last stats snapshot
            when it is recent, else now).
    """

    topics: int
    groups: int
    in_per_s: float | None
    out_per_s: float | None
    total_lag: int | None
    dlq: dict[str, int]
    timer_backlog: int
    half_backlog: int
    brokers: list[Broker]
    taken_at_ms: int
    lag_as_of_ms: int


@dataclass(frozen=True)
class LagTable:
    """Lag of every (group, topic) with a committed offset (summed over the topic's queues), dead
    letters per group, backlogs, and when they were read (epoch ms)."""

    lag: dict[tuple[str, str], int]
    dlq: dict[str, int]
    timer_backlog: int
    half_backlog: int
    as_of_ms: int


@dataclass(frozen=True)
class SeriesPoint:
    """One point of the overview's (or a topic's) live charts, from one broker stats snapshot.

    ``in_per_s`` is None for the first point (no earlier snapshot to compare with); ``total_lag`` is the
    broker's lag sum of that moment (None when it recorded none).
    """

    taken_at_ms: int
    in_per_s: float | None
    total_lag: int | None


@dataclass(frozen=True)
class Check:
    """One line of ``mq doctor``: level ``OK`` / ``WARN`` / ``FAIL``."""

    level: str
    check: str
    text: str


@dataclass(frozen=True)
class TopicRow:
    """A line of the topics list: config, messages stored (max − min over queues), newest store time;
    ``priority_levels`` of a priority topic (None: not one); ``lite_expiration_s`` of a lite parent,
    how long its lite topics live after their last write (None: not one)."""

    name: str
    read_queues: int
    write_queues: int
    perm: str
    order: bool
    system: bool
    messages: int
    last_store_ms: int
    dedup_window_s: int = DEFAULT_DEDUP_WINDOW_S
    priority_levels: int | None = None
    lite_expiration_s: int | None = None


@dataclass(frozen=True)
class LitePage:
    """One page of the live lite topics of lite parent ``topic`` whose names start with ``prefix``.

    Attributes:
        items: their names, at most ``per_page``, sorted within the page (the pages come in no useful
            order: ``SCAN`` over the parent's keys, see :meth:`mq.Admin.list_lite_topics`).
        cursor: this page's cursor (``"0"``: the first page).
        next_cursor: the next page's, or None when this is the last. Cursors are opaque digits, as
            text: they can pass 2**53, which a JSON number in a browser would round.
    """

    topic: str
    prefix: str
    items: list[str]
    per_page: int
    cursor: str
    next_cursor: str | None


@dataclass(frozen=True)
class QueueRow:
    """One queue of a topic. With a tier, ``[tiered_min_offset, tiered_end_offset)`` is read from its
    segments and ``[hot_min_offset, max_offset)`` from Redis (``hot_min_offset`` is
    ``tiered_end_offset``, or ``min_offset`` when nothing is tiered); ``tier_segments`` and
    ``tier_bytes`` (bytes) are what the tier holds."""

    queue_id: int
    min_offset: int
    max_offset: int
    last_store_ms: int
    readable: bool
    writable: bool
    tiered_min_offset: int = 0
    tiered_end_offset: int = 0
    hot_min_offset: int = 0
    tier_segments: int = 0
    tier_bytes: int = 0


@dataclass(frozen=True)
class GroupOnTopic:
    """A group reading a topic: its lag on each queue (None = unknown: no committed offset) and in total
    (None when no queue's lag is known)."""

    group: str
    lag: int | None
    queue_lags: dict[int, int | None]


@dataclass(frozen=True)
class TopicDetail:
    """A topic's page: its row, queues and the groups reading it (groups with a committed offset on
    one of its queues, or a live member subscribed to it)."""

    topic: TopicRow
    queues: list[QueueRow]
    groups: list[GroupOnTopic]


@dataclass(frozen=True)
class GroupRow:
    """A line of the groups list: live members, total lag (None: unknown — no committed offset), topics
    it has offsets on, whether it consumes (None: it has no config), and when the lag was read."""

    group: str
    members: int
    total_lag: int | None
    topics: list[str]
    consume_enable: bool | None
    lag_as_of_ms: int


@dataclass(frozen=True)
class Member:
    """A live member of a group [RocketMQ ``ConsumerConnection``]."""

    client_id: str
    host: str
    pid: int
    kind: str
    subscriptions: dict[str, str]
    last_heartbeat_ms: int


@dataclass(frozen=True)
class Progress:
    """A group's position on one queue: ``consumer_offset`` and ``lag`` are None when it has no committed
    offset there; ``owner`` is the member consuming the queue now (None: nobody holds it); ``expired``
    counts the messages retention removed before the group consumed them (lost to it)."""

    topic: str
    queue_id: int
    broker_offset: int
    consumer_offset: int | None
    lag: int | None
    owner: str | None
    expired: int = 0


@dataclass(frozen=True)
class GroupDetail:
    """A group's page: config (None when it has none), members, progress per queue, dead letters."""

    group: str
    config: dict[str, Any] | None
    consume_enable: bool | None
    members: list[Member]
    progress: list[Progress]
    total_lag: int | None
    dlq_size: int
    total_expired: int = 0


@dataclass(frozen=True)
class MessageRow:
    """A line of a message list."""

    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    tags: str | None
    keys: list[str]
    store_ms: int
    body_size: int


@dataclass(frozen=True)
class Body:
    """A message body for display, capped at :data:`BODY_CAP` bytes: ``text`` when it is UTF-8, ``json``
    pretty-printed when it parses as JSON (not too deep, not too long: ``json_note`` says why it is
    None for a JSON body), ``hex`` always; ``truncated`` when the body was longer."""

    size: int
    truncated: bool
    text: str | None
    json: str | None
    hex: str
    json_note: str | None = None


@dataclass(frozen=True)
class MessageDetail:
    """A message's page: every field, the body, what each reading group did with it, the trace
    (:class:`mq.observe.trace.TraceEvent` rows, oldest first)."""

    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    tags: str | None
    keys: list[str]
    properties: dict[str, str]
    system_properties: dict[str, str]
    born_ms: int
    store_ms: int
    reconsume_times: int
    body: Body
    groups: dict[str, str]
    trace: list[TraceEvent]
    #: the fields shown cut at ``FIELD_CAP`` characters (their value ends with "… (N bytes more)"): the
    #: field's name as ``GET …/messages/{msg_id}?field=NAME`` takes it -> its whole size in bytes
    cut: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Letter:
    """A dead letter: where it was first sent, why it died, whether it was resent already."""

    msg_id: str
    dlq_offset: int
    topic: str
    reason: str | None
    reconsume_times: int
    store_ms: int
    resent: bool
    body_size: int
    keys: list[str]
    tags: str | None


@dataclass(frozen=True)
class ResendResult:
    """What a resend did: msg ids resent now, letters skipped (original topic gone)."""

    group: str
    resent: list[str]
    skipped: list[str]


@dataclass(frozen=True)
class Sent:
    """A test message sent: its id, queue and offset."""

    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int


@dataclass(frozen=True)
class Discarded:
    """A half message rolled back after too many unanswered checks."""

    half_id: str
    msg_id: str
    topic: str
    queue_id: int
    checks: int
    reason: str
    store_ms: int
    body_size: int


@dataclass(frozen=True)
class Reset:
    """The offsets an offset reset set: queue id → new offset."""

    group: str
    topic: str
    timestamp_ms: int
    offsets: dict[int, int]


# -- JSON -------------------------------------------------------------------------------------------


def to_jsonable(value: Any) -> Any:
    """A dataclass (or list / dict of them) as plain JSON values; ``Page`` also carries ``pages``."""
    if isinstance(value, Page):
        return {
            "items": to_jsonable(value.items),
            "total": value.total,
            "page": value.page,
            "per_page": value.per_page,
            "pages": value.pages,
        }
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    return value
