"""What the console's pages and JSON API show and do, as plain functions over :class:`mq.Admin`.

Every function takes the :class:`Console` (the app's ``request.app.state.console``) first and returns
the frozen dataclasses of :mod:`mq.console.shapes` (re-exported here): the API serialises them with
:func:`to_jsonable`, pages read their attributes.
They are synchronous (Starlette runs them in its thread pool) and raise :class:`BadInput`
(a :class:`mq.errors.MQClientError`: the API answers 400) or :class:`NotFound` (404) before writing
anything when the input is wrong; store failures raise :class:`mq.errors.MQBrokerError` (503).

Lag that cannot be known — a group with no committed offset on a queue — is ``None`` ("unknown"),
never 0 or −1. Times are epoch milliseconds.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from mq.admin import Admin
from mq.admin_views import QueueState
from mq.connection import mask_url, resolve_url, url_passwords
from mq.console.shapes import (
    BacklogRow,
    Body,
    Broker,
    Check,
    Discarded,
    GroupDetail,
    GroupOnTopic,
    GroupRow,
    Info,
    LagTable,
    Letter,
    Member,
    MessageDetail,
    MessageRow,
    Overview,
    Page,
    Progress,
    QueueRow,
    ResendResult,
    Reset,
    Sent,
    SeriesPoint,
    TopicDetail,
    TopicRow,
    TraceRow,
    to_jsonable,
)
from mq.consumer.retry import dlq_topic, original_topic
from mq.errors import InvalidNameError, MQClientError, TopicNotFoundError
from mq.message import Message, MessageExt
from mq.producer import Producer
from mq.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.rates import Rates, rates_over
from mq.topic import DEFAULT_QUEUE_NUMS, MAX_QUEUE_NUMS, PERMS, TopicConfig
from mq.validation import DLQ_PREFIX, RETRY_PREFIX, check_group, check_topic, check_user_topic

#: Items per page unless asked otherwise, and the most a page may hold.
DEFAULT_PER_PAGE, MAX_PER_PAGE = 50, 500
#: Bytes of a body shown as text, JSON or hex (the size is always given).
BODY_CAP = 64 * 1024
#: Seconds a broker service's last beat may be old and still count as healthy.
BROKER_HEALTHY_S = 10.0
#: Seconds a broker stats snapshot may be old and still give the lists' lag (the service takes one
#: every 10 s by default).
FRESH_SNAPSHOT_S = 60.0
#: Window of the rates the overview shows, seconds.
RATE_WINDOW_S = 60.0
#: Producer group of the test messages the console sends.
PRODUCER_GROUP = "mq-console"


class BadInput(MQClientError):
    """The request is malformed (the API answers 400); nothing was written."""


class NotFound(MQClientError):
    """The topic, group or message does not exist (the API answers 404); nothing was written."""


class Conflict(MQClientError):
    """The request contradicts the store's state, e.g. creating a topic that exists (409)."""


class Console:
    """What one console app works on: one :class:`Admin` (thread-safe: one connection pool) and a
    producer for test messages made on first use.

    Args:
        url: the store URL (kept private: only :attr:`masked_url` is ever shown).
        namespace: key prefix of the deployment.
        read_only: refuse every change (the API answers 403; pages hide their controls).
        token: the access token pages and API calls must carry (None: no login).
    """

    def __init__(self, url: str | None, namespace: str = "mq", *, read_only: bool = False, token: str | None = None) -> None:
        self._url = resolve_url(url)
        self.admin = Admin(self._url, namespace)
        self.namespace = namespace
        self.read_only = read_only
        self.token = token
        self._producer: Producer | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Console({self.masked_url!r}, namespace={self.namespace!r}, read_only={self.read_only})"

    @property
    def url(self) -> str:
        """The store URL, password included: for connecting only, never to be shown."""
        return self._url

    @property
    def masked_url(self) -> str:
        """The store URL with its password replaced by ``***``."""
        return mask_url(self._url)

    @property
    def secrets(self) -> list[str]:
        """Texts no response may contain: the store URL's password, and the access token."""
        return [*url_passwords(self._url), *([self.token] if self.token else [])]

    def producer(self) -> Producer:
        """The console's producer (group :data:`PRODUCER_GROUP`), started on first use."""
        with self._lock:
            if self._producer is None:
                self._producer = Producer(PRODUCER_GROUP, self._url, namespace=self.namespace)
                self._producer.start()
            return self._producer

    def close(self) -> None:
        """Shut the producer down and close the Admin's connection."""
        with self._lock:
            if self._producer is not None:
                self._producer.shutdown()
                self._producer = None
        self.admin.close()


# -- input checks -----------------------------------------------------------------------------------


def page_args(page: object = 1, per_page: object = DEFAULT_PER_PAGE) -> tuple[int, int]:
    """``(page, per_page)`` as ints (page ≥ 1, 1 ≤ per_page ≤ :data:`MAX_PER_PAGE`), else BadInput."""
    p = _int("page", page, 1, 2**31)
    n = _int("per_page", per_page, 1, MAX_PER_PAGE)
    return p, n


def parse_time(value: object, name: str = "time") -> int:
    """Epoch milliseconds from an int, a digit string (ms) or an ISO 8601 text (``2026-11-23T21:00:00Z``;
    without a zone it is UTC), else BadInput."""
    if isinstance(value, bool):
        raise BadInput(f"{name} must be epoch milliseconds or an ISO 8601 time, got {value!r}")
    if isinstance(value, int):
        ms = value
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        ms = int(value.strip())
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise BadInput(
                f"{name} must be epoch milliseconds or an ISO 8601 time like 2026-11-23T21:00:00Z, got {value!r}"
            ) from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        ms = int(moment.timestamp() * 1000)
    else:
        raise BadInput(f"{name} must be epoch milliseconds or an ISO 8601 time, got {value!r}")
    if not 0 <= ms < 2**53:
        raise BadInput(f"{name} must be a time after 1970, got {value!r}")
    return ms


# -- overview ---------------------------------------------------------------------------------------


def info(console: Console) -> Info:
    """The console's own settings (shown on every page; ``GET /api``)."""
    import mq

    return Info(console.namespace, console.masked_url, console.read_only, console.token is not None, mq.__version__)


def overview(console: Console) -> Overview:
    """Counts, rates, total lag, dead letters, backlogs and broker health of the namespace. Lag, dead
    letters and backlogs come from the broker service's last stats snapshot when it is at most
    :data:`FRESH_SNAPSHOT_S` old (``lag_as_of_ms`` says when), else from the store now (every queue)."""
    admin = console.admin
    configs = admin.topics()
    table = lag_table(console)
    rates = _recent_rates(admin)
    return Overview(
        topics=sum(1 for c in configs if not _system(c.name)),
        groups=len(admin.groups()),
        in_per_s=None if rates is None else sum(r.per_s for r in rates.topics_in.values()),
        out_per_s=None if rates is None else sum(r.per_s for r in rates.groups_out.values()),
        total_lag=sum(table.lag.values()) if table.lag else None,
        dlq=table.dlq,
        timer_backlog=table.timer_backlog,
        half_backlog=table.half_backlog,
        brokers=brokers(console),
        taken_at_ms=int(time.time() * 1000),
        lag_as_of_ms=table.as_of_ms,
    )


def fresh_snapshot(console: Console) -> dict[str, Any] | None:
    """The broker service's last stats snapshot when it is at most :data:`FRESH_SNAPSHOT_S` old, else None."""
    snap = console.admin.broker_stats()
    if snap is not None and int(snap.get("taken_at_ms", 0)) >= time.time() * 1000 - FRESH_SNAPSHOT_S * 1000:
        return snap
    return None


def lag_table(console: Console) -> LagTable:
    """The namespace's lag figures: from the broker service's last stats snapshot when it is at most
    :data:`FRESH_SNAPSHOT_S` old (one read), else from every queue of the store now (two pipelined
    reads per 2 000 queues: slow on big namespaces without a broker service)."""
    snap = fresh_snapshot(console)
    if snap is not None:
        return LagTable(
            {_pair(k): int(v) for k, v in snap.get("group_lag", {}).items()},
            {str(g): int(n) for g, n in snap.get("dlq_messages", {}).items()},
            int(snap.get("timer_backlog", 0)),
            int(snap.get("half_backlog", 0)),
            int(snap["taken_at_ms"]),
        )
    now_ms = int(time.time() * 1000)
    states = console.admin.queue_states([c.name for c in console.admin.topics()])
    lag: dict[tuple[str, str], int] = {}
    for name, rows in states.items():
        for state in rows:
            for g, n in _lags(state).items():
                lag[(g, name)] = lag.get((g, name), 0) + n
    dlq = {
        name.removeprefix(DLQ_PREFIX): sum(s.stats.max_offset - s.stats.min_offset for s in rows)
        for name, rows in states.items()
        if name.startswith(DLQ_PREFIX)
    }
    timers = sum(b.waiting for b in console.admin.timer_backlog())
    halves = sum(b.waiting for b in console.admin.half_backlog())
    return LagTable(lag, dlq, timers, halves, now_ms)


def brokers(console: Console) -> list[Broker]:
    """The broker services that have beaten, healthy when their last beat is within :data:`BROKER_HEALTHY_S`."""
    now_ms = time.time() * 1000
    return [Broker(b, at, now_ms - at <= BROKER_HEALTHY_S * 1000) for b, at in sorted(console.admin.broker_beats().items())]


def series(console: Console, topic: str | None = None) -> list[SeriesPoint]:
    """The live charts' points over the broker's stats history (the last 3 minutes, one point per
    snapshot): messages in per second (of ``topic``, or of every user topic) and the total lag
    (of the groups reading ``topic``, or of all).

    Raises:
        NotFound: ``topic`` does not exist.
    """
    if topic is not None:
        _topic(console, topic)
    history = console.admin.stats_history()
    points: list[SeriesPoint] = []
    previous: tuple[int, int] | None = None
    for snap in history:
        at = int(snap.get("taken_at_ms", 0))
        stored = snap.get("topic_messages", {})
        total = int(stored.get(topic, 0)) if topic is not None else sum(int(v) for v in stored.values())
        lag_map = {k: int(v) for k, v in snap.get("group_lag", {}).items() if topic is None or k.partition("/")[2] == topic}
        rate = None
        if previous is not None and at > previous[0]:
            rate = max(0, total - previous[1]) / ((at - previous[0]) / 1000)
        points.append(SeriesPoint(at, rate, sum(lag_map.values()) if lag_map else None))
        previous = (at, total)
    return points


def doctor(console: Console) -> list[Check]:
    """The store checks of ``mq doctor`` (slow-ish: one round of ``INFO`` / ``CONFIG`` per master)."""
    from mq.doctor import check

    return [Check(f.level, f.check, f.text) for f in check(console.url, console.namespace)]


def timer_backlog(console: Console) -> list[BacklogRow]:
    """Delayed messages waiting per topic, with the earliest due time."""
    return [BacklogRow(b.topic, b.waiting, b.earliest_ms) for b in console.admin.timer_backlog()]


def half_backlog(console: Console) -> list[BacklogRow]:
    """Unresolved transaction half messages per topic, with the next check-back time."""
    return [BacklogRow(b.topic, b.waiting, b.earliest_ms) for b in console.admin.half_backlog()]


def discarded(
    console: Console, *, topic: str | None = None, page: object = 1, per_page: object = DEFAULT_PER_PAGE
) -> Page[Discarded]:
    """Half messages discarded after too many unanswered check-backs, oldest first, a page of them."""
    p, n = page_args(page, per_page)
    if topic is not None:
        _topic(console, topic)
    found = console.admin.discarded_transactions(topic)
    rows = [
        Discarded(
            m.system_properties["HALF_ID"],
            m.msg_id,
            m.topic,
            m.queue_id,
            int(m.system_properties["TRANSACTION_CHECK_TIMES"]),
            m.system_properties["DISCARD_REASON"],
            m.store_timestamp_ms,
            len(m.body),
        )
        for m in found[(p - 1) * n : p * n]
    ]
    return Page(rows, len(found), p, n)


# -- topics -----------------------------------------------------------------------------------------


def topics(
    console: Console, *, search: str = "", page: object = 1, per_page: object = DEFAULT_PER_PAGE, system: bool = False
) -> Page[TopicRow]:
    """Topics whose name contains ``search`` (case-insensitive), by name, one page with their message
    counts (only the page's queues are read). ``system`` includes retry and DLQ topics."""
    p, n = page_args(page, per_page)
    if not isinstance(search, str):
        raise BadInput(f"search must be text, got {search!r}")
    needle = search.strip().lower()
    configs = {c.name: c for c in console.admin.topics() if (system or not _system(c.name)) and needle in c.name.lower()}
    names = sorted(configs)
    chosen = names[(p - 1) * n : p * n]
    states = console.admin.queue_states(chosen, offsets=False)
    return Page([_topic_row(configs[t], states[t]) for t in chosen], len(names), p, n)


def topic_detail(console: Console, topic: str) -> TopicDetail:
    """One topic: its queues and every group reading it with its lag.

    Raises:
        NotFound: no such topic. BadInput: a malformed name.
    """
    config = _topic(console, topic)
    states = console.admin.queue_states([config.name])[config.name]
    readable = [s for s in states if s.readable]
    names = {g for s in readable for g in s.offsets} | _subscribers(console, config.name)
    groups = []
    for g in sorted(names):
        queue_lags = {s.message_queue.queue_id: _lags(s).get(g) for s in readable}
        known = [v for v in queue_lags.values() if v is not None]
        groups.append(GroupOnTopic(g, sum(known) if known else None, queue_lags))
    queues = [
        QueueRow(
            s.message_queue.queue_id,
            s.stats.min_offset,
            s.stats.max_offset,
            s.stats.last_store_timestamp_ms,
            s.readable,
            s.writable,
        )
        for s in states
    ]
    return TopicDetail(_topic_row(config, states), queues, groups)


def create_topic(
    console: Console,
    topic: object,
    *,
    read_queues: object = DEFAULT_QUEUE_NUMS,
    write_queues: object = DEFAULT_QUEUE_NUMS,
    perm: object = "rw",
    order: object = False,
) -> TopicRow:
    """Create a new user topic.

    Raises:
        BadInput: a bad name (or a system one), queue count or perm. Conflict: it exists already.
    """
    _writable(console)
    try:
        name = check_user_topic(topic)
    except InvalidNameError as e:
        raise BadInput(str(e)) from None
    r, w = _int("read_queues", read_queues, 1, MAX_QUEUE_NUMS), _int("write_queues", write_queues, 1, MAX_QUEUE_NUMS)
    if perm not in PERMS:
        raise BadInput(f"perm must be one of {', '.join(PERMS)}, got {perm!r}")
    if not isinstance(order, bool):
        raise BadInput(f"order must be true or false, got {order!r}")
    if console.admin.topic_exists(name):
        raise Conflict(f"topic {name!r} exists already: update it instead")
    console.admin.create_topic(name, read_queues=r, write_queues=w, perm=str(perm), order=order)
    return topic_detail(console, name).topic


def update_topic(
    console: Console, topic: str, *, read_queues: object = None, write_queues: object = None, perm: object = None
) -> TopicRow:
    """Change a topic's queue counts or perm (None keeps a value).

    Raises:
        NotFound / BadInput: as :func:`create_topic`; a system topic is refused.
    """
    _writable(console)
    config = _topic(console, topic)
    if _system(config.name):
        raise BadInput(f"{config.name!r} is a system topic: it is managed by its group")
    r = None if read_queues is None else _int("read_queues", read_queues, 1, MAX_QUEUE_NUMS)
    w = None if write_queues is None else _int("write_queues", write_queues, 1, MAX_QUEUE_NUMS)
    if perm is not None and perm not in PERMS:
        raise BadInput(f"perm must be one of {', '.join(PERMS)}, got {perm!r}")
    console.admin.update_topic(config.name, read_queues=r, write_queues=w, perm=None if perm is None else str(perm))
    return topic_detail(console, config.name).topic


def delete_topic(console: Console, topic: str) -> str:
    """Delete a topic and its messages; returns its name.

    Raises:
        NotFound: no such topic.
    """
    _writable(console)
    config = _topic(console, topic)
    console.admin.delete_topic(config.name)
    name: str = config.name
    return name


def send_test_message(
    console: Console, topic: str, *, body: object, tags: object = None, keys: object = None, properties: object = None
) -> Sent:
    """Send one message to ``topic`` with the console's producer.

    Raises:
        NotFound: no such topic. BadInput: a body that is not text, or bad tags/keys/properties.
    """
    _writable(console)
    config = _topic(console, topic)
    if _system(config.name):
        raise BadInput(f"{config.name!r} is a system topic: send to a user topic")
    if not isinstance(body, str):
        raise BadInput(f"body must be text, got {type(body).__name__}")
    if tags is not None and not isinstance(tags, str):
        raise BadInput(f"tags must be text, got {tags!r}")
    key_list = _keys(keys)
    props = properties if properties is not None else {}
    if not isinstance(props, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in props.items()):
        raise BadInput(f"properties must be an object of text values, got {properties!r}")
    try:
        msg = Message(config.name, body.encode(), tags=tags or None, keys=key_list or None, properties=props)
    except MQClientError as e:
        raise BadInput(str(e)) from None
    result = console.producer().send(msg)
    return Sent(result.msg_id, config.name, result.message_queue.queue_id, result.queue_offset)


# -- groups -----------------------------------------------------------------------------------------


def groups(console: Console, *, search: str = "", page: object = 1, per_page: object = DEFAULT_PER_PAGE) -> Page[GroupRow]:
    """Groups whose name contains ``search``, by name, one page with live members, paused or not, and
    total lag over every queue the group has a committed offset on (None when it has none), from
    :func:`lag_table` (``lag_as_of_ms`` says when it was read)."""
    p, n = page_args(page, per_page)
    if not isinstance(search, str):
        raise BadInput(f"search must be text, got {search!r}")
    needle = search.strip().lower()
    names = [g for g in console.admin.groups() if needle in g.lower()]
    chosen = names[(p - 1) * n : p * n]
    rows: list[GroupRow] = []
    if chosen:
        snap = fresh_snapshot(console)
        as_of_ms = int(snap["taken_at_ms"]) if snap is not None else int(time.time() * 1000)
        if snap is not None:
            table = {_pair(k): int(v) for k, v in snap.get("group_lag", {}).items()}
        else:
            table = console.admin.group_lags(chosen)
        members = console.admin.consumer_connections_of(chosen)
        configs = console.admin.group_configs(chosen)
        for g in chosen:
            lags = {t: v for (group, t), v in table.items() if group == g}
            config = configs.get(g)
            rows.append(
                GroupRow(
                    g,
                    len(members[g]),
                    sum(lags.values()) if lags else None,
                    sorted(lags),
                    None if config is None else config.consume_enable,
                    as_of_ms,
                )
            )
    return Page(rows, len(names), p, n)


def group_detail(console: Console, group: str) -> GroupDetail:
    """One group: config, members, per-queue progress with owner, total lag and DLQ size.

    Raises:
        NotFound: the group never registered and has no config. BadInput: a malformed name.
    """
    g = _group(console, group)
    admin = console.admin
    members = [
        Member(c.client_id, c.host, c.pid, c.kind, dict(c.subscriptions), c.last_heartbeat_ms)
        for c in admin.consumer_connections(g)
    ]
    topics_of = sorted(_group_topics(console, g, {t for m in members for t in m.subscriptions}))
    states = admin.queue_states(topics_of)
    progress: list[Progress] = []
    for t in topics_of:
        owners = admin.queue_owners(t)
        for s in states[t]:
            if not s.readable:
                continue
            offset = s.offsets.get(g)
            q = s.message_queue.queue_id
            progress.append(Progress(t, q, s.stats.max_offset, offset, _lags(s).get(g), owners.get(q, {}).get(g)))
    known = [p.lag for p in progress if p.lag is not None]
    config = _config(console, g)
    dlq = admin.queue_states([dlq_topic(g)]) if admin.topic_exists(dlq_topic(g)) else {}
    dlq_size = sum(s.stats.max_offset - s.stats.min_offset for rows in dlq.values() for s in rows)
    return GroupDetail(
        g,
        config,
        None if config is None else bool(config["consume_enable"]),
        members,
        progress,
        sum(known) if known else None,
        dlq_size,
    )


def set_consume_enable(console: Console, group: str, enabled: bool) -> GroupDetail:
    """Pause (False) or resume (True) a group: members stop or start pulling within a heartbeat. A known
    group without a config gets one with the defaults.

    Raises:
        NotFound: an unknown group.
    """
    _writable(console)
    g = _group(console, group)
    if _config(console, g) is None:
        console.admin.create_group(g, consume_enable=enabled)
    else:
        console.admin.update_group(g, consume_enable=enabled)
    return group_detail(console, g)


def reset_offset(console: Console, group: str, topic: str, when: object) -> Reset:
    """Reset ``group``'s offsets on ``topic`` to the first message stored at or after ``when`` (epoch ms
    or ISO 8601); running members continue there within a heartbeat.

    Raises:
        NotFound: an unknown group or topic. BadInput: a bad time.
    """
    _writable(console)
    g = _group(console, group)
    config = _topic(console, topic)
    at = parse_time(when, "timestamp")
    offsets = console.admin.reset_offset_by_time(g, config.name, at)
    return Reset(g, config.name, at, {mq.queue_id: o for mq, o in offsets.items()})


# -- messages ---------------------------------------------------------------------------------------


def search_messages(
    console: Console,
    topic: str,
    *,
    msg_id: str | None = None,
    key: str | None = None,
    begin: object = None,
    end: object = None,
    page: object = 1,
    per_page: object = DEFAULT_PER_PAGE,
) -> Page[MessageRow]:
    """Messages of ``topic`` by id, by business key, or stored in ``[begin, end]`` (epoch ms or ISO 8601;
    one of the three). Every match is reachable page by page (no cap): by key and time in (queue id,
    offset) order.

    Raises:
        NotFound: no such topic. BadInput: none or several criteria, a bad time, page or id.
    """
    p, n = page_args(page, per_page)
    config = _topic(console, topic)
    given = [
        c for c, v in (("msg_id", msg_id), ("key", key), ("time", begin if begin is not None else end)) if v not in (None, "")
    ]
    if len(given) != 1:
        raise BadInput("search by exactly one of msg_id, key, or a store-time range (begin and/or end)")
    admin = console.admin
    if msg_id:
        found = admin.find_message(_msg_id(msg_id), config.name)
        return Page([_row(m) for m in found[(p - 1) * n : p * n]], len(found), p, n)
    if key:
        total = admin.count_messages_by_key(config.name, key)
        return Page([_row(m) for m in admin.messages_by_key(config.name, key, start=(p - 1) * n, count=n)], total, p, n)
    low = parse_time(begin, "begin") if begin not in (None, "") else 0
    high = parse_time(end, "end") if end not in (None, "") else 2**53 - 1
    if low > high:
        raise BadInput(f"begin ({low}) is after end ({high})")
    ranges = []
    for q in range(config.queue_count):
        first = admin.search_offset(MessageQueue(config.name, DEFAULT_BROKER_NAME, q), low)
        after = admin.search_offset(MessageQueue(config.name, DEFAULT_BROKER_NAME, q), high + 1) if high < 2**53 - 1 else None
        if after is None:
            after = admin.queue_states([config.name])[config.name][q].stats.max_offset
        ranges.append((q, first, after))
    total = sum(b - a for _, a, b in ranges)
    rows: list[MessageRow] = []
    skip, want = (p - 1) * n, n
    for q, a, b in ranges:
        if want == 0:
            break
        if skip >= b - a:
            skip -= b - a
            continue
        got = admin.messages(config.name, q, a + skip, min(b, a + skip + want))
        rows += [_row(m) for m in got]
        want -= min(b, a + skip + want) - (a + skip)
        skip = 0
    return Page(rows, total, p, n)


def message_detail(console: Console, topic: str, msg_id: str) -> MessageDetail:
    """Every field of a message, its body (text / JSON / hex, capped), what each group reading the topic
    did with it, and its trace.

    Raises:
        NotFound: no such topic or message. BadInput: a malformed id.
    """
    config = _topic(console, topic)
    found = console.admin.find_message(_msg_id(msg_id), config.name)
    if not found:
        raise NotFound(f"message {msg_id!r} is not stored in topic {config.name!r} (removed by retention, or a wrong id)")
    m = found[0]
    readers = [g.group for g in topic_detail(console, config.name).groups]
    states = console.admin.message_states(m, readers) if not _system(config.name) else {}
    trace = [
        TraceRow(e.kind, e.time_ms, e.group, e.client_id, e.host, e.cost_ms, e.status, e.attempt, e.topic, e.queue_id, e.offset)
        for e in console.admin.message_trace(config.name, m.msg_id)
    ]
    return MessageDetail(
        m.msg_id,
        m.topic,
        m.queue_id,
        m.queue_offset,
        m.tags,
        list(m.keys),
        dict(m.properties),
        dict(m.system_properties),
        m.born_timestamp_ms,
        m.store_timestamp_ms,
        m.reconsume_times,
        body_view(m.body),
        states,
        trace,
    )


def body_view(body: bytes) -> Body:
    """A body for display: text, pretty JSON and hex of its first :data:`BODY_CAP` bytes."""
    shown = body[:BODY_CAP]
    try:
        text: str | None = shown.decode()
    except UnicodeDecodeError:
        text = shown.decode(errors="ignore") if len(body) > BODY_CAP and _cut_utf8(shown) else None
    pretty = None
    if text is not None and len(body) <= BODY_CAP:
        try:
            pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            pretty = None
    return Body(len(body), len(body) > BODY_CAP, text, pretty, shown.hex())


# -- dead letters -----------------------------------------------------------------------------------


def dlq(console: Console, group: str, *, page: object = 1, per_page: object = DEFAULT_PER_PAGE) -> Page[Letter]:
    """A group's dead letters, oldest first, one page (``total`` counts the letters stored).

    Raises:
        NotFound: an unknown group.
    """
    p, n = page_args(page, per_page)
    g = _group(console, group)
    topic = dlq_topic(g)
    if not console.admin.topic_exists(topic):
        return Page([], 0, p, n)
    stats = console.admin.queue_states([topic])[topic][0].stats
    letters = console.admin.dlq_messages(g, max_num=n, offset=stats.min_offset + (p - 1) * n)
    rows = [
        Letter(
            m.msg_id,
            m.queue_offset,
            original_topic(m),
            m.system_properties.get("DLQ_REASON"),
            m.reconsume_times,
            m.store_timestamp_ms,
            m.system_properties.get("RESENT") == "true",
            len(m.body),
            list(m.keys),
            m.tags,
        )
        for m in letters
    ]
    return Page(rows, stats.max_offset - stats.min_offset, p, n)


def resend_dlq(console: Console, group: str, *, msg_ids: object = None) -> ResendResult:
    """Resend dead letters of ``group`` to that group only: those with ``msg_ids`` (a list of ids), or
    (None) every letter not resent before. Each letter is resent once, however often this is called.

    Raises:
        NotFound: an unknown group. BadInput: ``msg_ids`` not a non-empty list of ids.
    """
    _writable(console)
    g = _group(console, group)
    ids: list[str] | None = None
    if msg_ids is not None:
        if not isinstance(msg_ids, list) or not msg_ids:
            raise BadInput(f"msg_ids must be a non-empty list of msg ids (or leave it out to resend all), got {msg_ids!r}")
        ids = [_msg_id(i) for i in msg_ids]
    report = console.admin.resend_dlq_report(g, msg_ids=ids)
    return ResendResult(g, report.resent, report.skipped)


# -- helpers ----------------------------------------------------------------------------------------


def _lags(state: QueueState) -> dict[str, int]:
    """Lag of each group with a committed offset on a queue (the others' is unknown)."""
    s = state.stats
    return {g: s.max_offset - max(o, s.min_offset) for g, o in state.offsets.items()}


def _topic_row(config: TopicConfig, states: Sequence[QueueState]) -> TopicRow:
    return TopicRow(
        config.name,
        config.read_queues,
        config.write_queues,
        config.perm,
        config.order,
        _system(config.name),
        sum(s.stats.max_offset - s.stats.min_offset for s in states),
        max((s.stats.last_store_timestamp_ms for s in states), default=0),
    )


def _recent_rates(admin: Admin) -> Rates | None:
    """Rates over the last :data:`RATE_WINDOW_S` seconds of broker snapshots, or over as many as there
    are (a service that started a moment ago); None without two snapshots, or when the newest is older
    than the window (no broker service running)."""
    history = admin.stats_history()
    if len(history) < 2 or int(history[-1]["taken_at_ms"]) < time.time() * 1000 - RATE_WINDOW_S * 1000:
        return None
    span_s = (int(history[-1]["taken_at_ms"]) - int(history[0]["taken_at_ms"])) / 1000
    return rates_over(history, min(RATE_WINDOW_S, span_s)) if span_s > 0 else None


def _group_topics(console: Console, group: str, subscribed: set[str]) -> set[str]:
    """Existing topics the group has a committed offset on (one pipelined ``HGET`` per queue of the
    namespace) or a live member subscribes to."""
    configs = console.admin.topics()
    return console.admin.topics_with_offsets(group, configs) | (subscribed & {c.name for c in configs})


def _subscribers(console: Console, topic: str) -> set[str]:
    """Groups with a live member subscribed to ``topic``."""
    members = console.admin.consumer_connections_of(console.admin.groups())
    return {g for g, clients in members.items() if any(topic in c.subscriptions for c in clients)}


def _pair(key: str) -> tuple[str, str]:
    """``(group, topic)`` of a stats snapshot's ``group/topic`` key (names never hold ``/``)."""
    group, _, topic = key.partition("/")
    return group, topic


def _config(console: Console, group: str) -> dict[str, Any] | None:
    try:
        config = console.admin.group_config(group)
    except MQClientError:
        return None
    data: dict[str, Any] = json.loads(config.to_json())
    return data


def _topic(console: Console, topic: object) -> TopicConfig:
    try:
        name = check_topic(topic)
        return console.admin.topic_config(name)
    except InvalidNameError as e:
        raise BadInput(str(e)) from None
    except TopicNotFoundError:
        raise NotFound(f"topic {topic!r} does not exist") from None


def _group(console: Console, group: object) -> str:
    try:
        name = check_group(group)
    except InvalidNameError as e:
        raise BadInput(str(e)) from None
    if name not in console.admin.groups():
        raise NotFound(f"group {name!r} does not exist (it never registered and has no config)")
    return name


def _msg_id(value: object) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 128 or not value.isprintable() or value.strip() != value:
        raise BadInput(f"a msg id is 1..128 printable characters without surrounding spaces, got {value!r}")
    return value


def _keys(keys: object) -> list[str]:
    if keys is None or keys == "":
        return []
    if isinstance(keys, str):
        return [k for k in keys.split() if k]
    if isinstance(keys, list) and all(isinstance(k, str) for k in keys):
        return list(keys)
    raise BadInput(f"keys must be text (space-separated) or a list of text, got {keys!r}")


def _int(name: str, value: object, low: int, high: int) -> int:
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


def _writable(console: Console) -> None:
    if console.read_only:
        raise ReadOnly("the console runs with --read-only: changes are refused")


class ReadOnly(MQClientError):
    """A change was asked of a read-only console (the API answers 403)."""


def _system(name: str) -> bool:
    return name.startswith((RETRY_PREFIX, DLQ_PREFIX))


def _row(m: MessageExt) -> MessageRow:
    return MessageRow(m.msg_id, m.topic, m.queue_id, m.queue_offset, m.tags, list(m.keys), m.store_timestamp_ms, len(m.body))


def _cut_utf8(shown: bytes) -> bool:
    """Whether ``shown`` is valid UTF-8 but for a character cut at its end (by the cap)."""
    for cut in range(1, 4):
        try:
            shown[:-cut].decode()
            return True
        except UnicodeDecodeError:
            continue
    return False


__all__ = [
    "BODY_CAP",
    "BROKER_HEALTHY_S",
    "DEFAULT_PER_PAGE",
    "DEFAULT_QUEUE_NUMS",
    "FRESH_SNAPSHOT_S",
    "MAX_PER_PAGE",
    "PRODUCER_GROUP",
    "RATE_WINDOW_S",
    "BacklogRow",
    "BadInput",
    "Body",
    "Broker",
    "Check",
    "Conflict",
    "Console",
    "Discarded",
    "GroupDetail",
    "GroupOnTopic",
    "GroupRow",
    "Info",
    "LagTable",
    "Letter",
    "Member",
    "MessageDetail",
    "MessageRow",
    "NotFound",
    "Overview",
    "Page",
    "Progress",
    "QueueRow",
    "ReadOnly",
    "ResendResult",
    "Reset",
    "Sent",
    "SeriesPoint",
    "TopicDetail",
    "TopicRow",
    "TraceRow",
    "body_view",
    "brokers",
    "create_topic",
    "delete_topic",
    "discarded",
    "dlq",
    "doctor",
    "fresh_snapshot",
    "group_detail",
    "groups",
    "half_backlog",
    "info",
    "message_detail",
    "overview",
    "page_args",
    "parse_time",
    "resend_dlq",
    "reset_offset",
    "search_messages",
    "send_test_message",
    "series",
    "set_consume_enable",
    "timer_backlog",
    "to_jsonable",
    "topic_detail",
    "topics",
    "update_topic",
]
