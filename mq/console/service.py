"""What the console's pages and JSON API show and do, as plain functions over :class:`mq.Admin`:
the overview, topics and groups here, the message views in :mod:`mq.console.messages`, the
:class:`Console`, errors and request checks in :mod:`mq.console.context` — all re-exported here, so
pages and API use ``service.<name>``.

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

import dataclasses
import json
import time
from collections.abc import Sequence
from typing import Any

from mq.console.context import (
    DEFAULT_PER_PAGE,
    MAX_PER_PAGE,
    PRODUCER_GROUP,
    BadInput,
    Conflict,
    Console,
    NotFound,
    ReadOnly,
    check_writable,
    int_arg,
    is_system,
    keys_arg,
    page_args,
    parse_time,
    queue_lags,
    readers,
    require_group,
    require_topic,
)
from mq.console.messages import (
    BODY_CAP,
    FIELD_CAP,
    body_view,
    bounded,
    discarded,
    dlq,
    message_detail,
    message_field,
    resend_dlq,
    search_messages,
)
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
    LitePage,
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
    to_jsonable,
)
from mq.consumer.retry import dlq_topic
from mq.errors import InvalidNameError, MQClientError
from mq.model.message import Message
from mq.model.topic import DEFAULT_QUEUE_NUMS, MAX_QUEUE_NUMS, PERMS, TopicConfig
from mq.model.validation import DLQ_PREFIX, check_user_topic
from mq.operator.admin import Admin
from mq.operator.admin_views import QueueState
from mq.operator.rates import Rates, rates_over

#: Seconds a broker service's last beat may be old and still count as healthy.
BROKER_HEALTHY_S = 10.0
#: Seconds a broker stats snapshot may be old and still give the lists' lag (the service takes one
#: every 10 s by default).
FRESH_SNAPSHOT_S = 60.0
#: Window of the rates the overview shows, seconds.
RATE_WINDOW_S = 60.0


# -- overview ---------------------------------------------------------------------------------------


def info(console: Console) -> Info:
    """The console's own settings (shown on every page; ``GET /api``)."""
    import mq

    return Info(console.namespace, console.masked_url, console.read_only, console.token is not None, mq.__version__)


def overview(console: Console) -> Overview:
    """Counts, rates, total lag, dead letters, backlogs and broker health of the namespace. Lag, dead
    letters and backlogs come from the broker service's last stats snapshot when it is at most
    :data:`FRESH_SNAPSHOT_S` old (``lag_as_of_ms`` says when), else from the store now (every queue).

    With such a snapshot the figures that grow with the number of topics (topic count, rates, lag)
    are computed once per snapshot and kept (:func:`snapshot_key`): a call between two snapshots reads
    the snapshot's time, the group set and the broker beats only, however many topics there are."""
    found = console.cached(
        "overview", snapshot_key(console), lambda: overview_of(console, console.admin.topics(), recent_rates(console.admin))
    )
    return refreshed(console, found)


def snapshot_key(console: Console) -> int | None:
    """What the cached overview figures depend on: the time of the broker service's last stats
    snapshot when it is fresh (see :func:`fresh_snapshot`), else None (no caching: read now)."""
    snap = fresh_snapshot(console)
    return None if snap is None else int(snap["taken_at_ms"])


def refreshed(console: Console, found: Overview) -> Overview:
    """``found`` (perhaps kept since the last snapshot) with the parts that are cheap and change between
    snapshots read now: the group count, the broker services' health and the time."""
    return dataclasses.replace(
        found, groups=len(console.admin.groups()), brokers=brokers(console), taken_at_ms=int(time.time() * 1000)
    )


def overview_of(console: Console, configs: Sequence[TopicConfig], rates: Rates | None) -> Overview:
    """:func:`overview` over the topic configs and :func:`recent_rates` the caller has read already (the
    overview page reads them once for the busiest topics as well)."""
    admin = console.admin
    table = lag_table(console, configs)
    return Overview(
        topics=sum(1 for c in configs if not is_system(c.name)),
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


def lag_table(console: Console, configs: Sequence[TopicConfig] | None = None) -> LagTable:
    """The namespace's lag figures: from the broker service's last stats snapshot when it is at most
    :data:`FRESH_SNAPSHOT_S` old (one read), else from every queue of the store now (two pipelined
    reads per 2 000 queues: slow on big namespaces without a broker service) — of the topics
    ``configs`` lists, when the caller has read them, else of those read now."""
    snap = fresh_snapshot(console)
    if snap is not None:
        return LagTable(
            _snapshot_lag(snap),
            {str(g): int(n) for g, n in snap.get("dlq_messages", {}).items()},
            int(snap.get("timer_backlog", 0)),
            int(snap.get("half_backlog", 0)),
            int(snap["taken_at_ms"]),
        )
    now_ms = int(time.time() * 1000)
    if configs is None:
        configs = console.admin.topics()
    states = console.admin.queue_states([c.name for c in configs])
    lag: dict[tuple[str, str], int] = {}
    for name, rows in states.items():
        for state in rows:
            for g, n in queue_lags(state).items():
                lag[(g, name)] = lag.get((g, name), 0) + n
    dlq = {
        name.removeprefix(DLQ_PREFIX): sum(s.stats.stored for s in rows)
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
        require_topic(console, topic)
    return console.cached(f"series {topic}", snapshot_key(console), lambda: _series(console, topic))


def _series(console: Console, topic: str | None) -> list[SeriesPoint]:
    history = console.admin.stats_history()
    points: list[SeriesPoint] = []
    previous: tuple[int, int] | None = None
    for snap in history:
        at = int(snap.get("taken_at_ms", 0))
        stored = snap.get("topic_messages", {})
        total = int(stored.get(topic, 0)) if topic is not None else sum(int(v) for v in stored.values())
        lag_map = {k: v for k, v in _snapshot_lag(snap).items() if topic is None or k[1] == topic}
        rate = None
        if previous is not None and at > previous[0]:
            rate = max(0, total - previous[1]) / ((at - previous[0]) / 1000)
        points.append(SeriesPoint(at, rate, sum(lag_map.values()) if lag_map else None))
        previous = (at, total)
    return points


def doctor(console: Console) -> list[Check]:
    """The store checks of ``mq doctor`` (slow-ish: one round of ``INFO`` / ``CONFIG`` per master)."""
    from mq.operator.doctor import check

    return [Check(f.level, f.check, f.text) for f in check(console.url, console.namespace)]


def timer_backlog(console: Console) -> list[BacklogRow]:
    """Delayed messages waiting per topic, with the earliest due time."""
    return [BacklogRow(b.topic, b.waiting, b.earliest_ms) for b in console.admin.timer_backlog()]


def half_backlog(console: Console) -> list[BacklogRow]:
    """Unresolved transaction half messages per topic, with the next check-back time."""
    return [BacklogRow(b.topic, b.waiting, b.earliest_ms) for b in console.admin.half_backlog()]


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
    configs = {c.name: c for c in console.admin.topics() if (system or not is_system(c.name)) and needle in c.name.lower()}
    names = sorted(configs)
    chosen = names[(p - 1) * n : p * n]
    states = console.admin.queue_states(chosen, offsets=False)
    return Page([_topic_row(configs[t], states[t]) for t in chosen], len(names), p, n)


def topic_detail(console: Console, topic: str) -> TopicDetail:
    """One topic: its queues and every group reading it with its lag.

    Raises:
        NotFound: no such topic. BadInput: a malformed name.
    """
    config = require_topic(console, topic)
    states = console.admin.queue_states([config.name])[config.name]
    readable = [s for s in states if s.readable]
    groups = []
    for g in readers(console, config, states):
        per_queue = {s.message_queue.queue_id: queue_lags(s).get(g) for s in readable}
        known = [v for v in per_queue.values() if v is not None]
        groups.append(GroupOnTopic(g, sum(known) if known else None, per_queue))
    tier = console.admin.tier_status(config.name)  # one manifest read a queue; empty ranges without a tier
    queues = []
    for s in states:
        t = tier.get(s.message_queue)
        tiered = t is not None and t.segments > 0
        queues.append(
            QueueRow(
                s.message_queue.queue_id,
                s.stats.min_offset,
                s.stats.max_offset,
                s.stats.last_store_timestamp_ms,
                s.readable,
                s.writable,
                t.tiered_min_offset if t is not None and tiered else s.stats.min_offset,
                t.tiered_end_offset if t is not None and tiered else s.stats.min_offset,
                max(t.tiered_end_offset, s.stats.min_offset) if t is not None and tiered else s.stats.min_offset,
                t.segments if t is not None else 0,
                t.bytes if t is not None else 0,
            )
        )
    return TopicDetail(_topic_row(config, states), queues, groups)


def lite_topics(
    console: Console, topic: str, *, prefix: object = "", cursor: object = "0", per_page: object = DEFAULT_PER_PAGE
) -> LitePage:
    """A page of the live lite topics of lite parent ``topic`` whose names start with ``prefix``
    (:meth:`mq.Admin.list_lite_topics`): at most ``per_page`` names and the cursor of the next page.
    ``cursor`` is ``"0"`` (or empty) for the first page, then the ``next_cursor`` a page gave.

    Raises:
        NotFound: no such topic. BadInput: a topic that is not a lite parent, a malformed prefix,
            ``per_page`` or cursor.
    """
    config = require_topic(console, topic)
    if not config.lite:
        raise BadInput(
            f"topic {config.name!r} is not a lite parent, so it has no lite topics "
            "(a lite parent is created with `mq topic create --lite` or Admin.create_topic(…, lite=True))"
        )
    if not isinstance(prefix, str):
        raise BadInput(f"prefix must be text, got {prefix!r}")
    n = int_arg("per_page", per_page, 1, MAX_PER_PAGE)
    at = _lite_cursor(cursor)
    try:
        found = console.admin.list_lite_topics(config.name, prefix.strip(), cursor=at, count=n)
    except InvalidNameError as e:
        raise BadInput(f"prefix: {e}") from None
    next_cursor = str(found.cursor) if found.cursor else None
    return LitePage(config.name, prefix.strip(), found.names, per_page=n, cursor=str(at), next_cursor=next_cursor)


def _lite_cursor(value: object) -> int:
    """A lite listing cursor from its text (digits; empty or None: the first page), else BadInput (the
    Admin checks its range)."""
    if value is None or value == "":
        return 0
    if not isinstance(value, str) or not value.isascii() or not value.isdigit() or len(value) > 30:
        shown = repr(value)[:40] + ("…" if len(repr(value)) > 40 else "")
        raise BadInput(f"cursor must be the next_cursor a page gave (digits; 0 or none for the first page), got {shown}")
    return int(value)


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
    check_writable(console)
    try:
        name = check_user_topic(topic)
    except InvalidNameError as e:
        raise BadInput(str(e)) from None
    r, w = int_arg("read_queues", read_queues, 1, MAX_QUEUE_NUMS), int_arg("write_queues", write_queues, 1, MAX_QUEUE_NUMS)
    if perm not in PERMS:
        raise BadInput(f"perm must be one of {', '.join(PERMS)}, got {perm!r}")
    if not isinstance(order, bool):
        raise BadInput(f"order must be true or false, got {order!r}")
    if console.admin.topic_exists(name):
        raise Conflict(f"topic {name!r} exists already: update it instead")
    console.admin.create_topic(name, read_queues=r, write_queues=w, perm=str(perm), order=order)
    console.changed()
    return _read_topic_row(console, name)


def update_topic(
    console: Console, topic: str, *, read_queues: object = None, write_queues: object = None, perm: object = None
) -> TopicRow:
    """Change a topic's queue counts or perm (None keeps a value).

    Raises:
        NotFound / BadInput: as :func:`create_topic`; a system topic is refused.
    """
    check_writable(console)
    config = require_topic(console, topic)
    if is_system(config.name):
        raise BadInput(f"{config.name!r} is a system topic: it is managed by its group")
    r = None if read_queues is None else int_arg("read_queues", read_queues, 1, MAX_QUEUE_NUMS)
    w = None if write_queues is None else int_arg("write_queues", write_queues, 1, MAX_QUEUE_NUMS)
    if perm is not None and perm not in PERMS:
        raise BadInput(f"perm must be one of {', '.join(PERMS)}, got {perm!r}")
    console.admin.update_topic(config.name, read_queues=r, write_queues=w, perm=None if perm is None else str(perm))
    console.changed()
    return _read_topic_row(console, config.name)


def delete_topic(console: Console, topic: str) -> str:
    """Delete a topic and its messages; returns its name.

    Raises:
        NotFound: no such topic.
    """
    check_writable(console)
    config = require_topic(console, topic)
    console.admin.delete_topic(config.name)
    console.changed()
    name: str = config.name
    return name


def send_test_message(
    console: Console, topic: str, *, body: object, tags: object = None, keys: object = None, properties: object = None
) -> Sent:
    """Send one message to ``topic`` with the console's producer.

    Raises:
        NotFound: no such topic. BadInput: a body that is not text, or bad tags/keys/properties.
    """
    check_writable(console)
    config = require_topic(console, topic)
    if is_system(config.name):
        raise BadInput(f"{config.name!r} is a system topic: send to a user topic")
    if not isinstance(body, str):
        raise BadInput(f"body must be text, got {type(body).__name__}")
    if tags is not None and not isinstance(tags, str):
        raise BadInput(f"tags must be text, got {tags!r}")
    key_list = keys_arg(keys)
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
        table = _snapshot_lag(snap) if snap is not None else console.admin.group_lags(chosen)
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
    return _group_detail(console, require_group(console, group))


def _group_detail(console: Console, g: str) -> GroupDetail:
    """:func:`group_detail` of a group known to exist. Its topics are those it has a committed offset
    on (one pipelined ``HGET`` per queue of the namespace) or a live member subscribes to."""
    admin = console.admin
    members = [
        # what a client wrote about itself (its user agent's host name through the endpoint) is cut at FIELD_CAP
        Member(
            bounded(c.client_id)[0],
            bounded(c.host)[0],
            c.pid,
            c.kind,
            {bounded(t)[0]: bounded(e)[0] for t, e in c.subscriptions.items()},
            c.last_heartbeat_ms,
        )
        for c in admin.consumer_connections(g)
    ]
    configs = admin.topics()
    existing = {c.name for c in configs}
    subscribed = {t for m in members for t in m.subscriptions}
    topics_of = sorted(admin.topics_with_offsets(g, configs) | (subscribed & existing))
    states = admin.queue_states(topics_of, owners=True, expired=True)  # four pipelined round trips for every topic at once
    progress: list[Progress] = []
    for t in topics_of:
        for s in states[t]:
            if not s.readable:
                continue
            offset = s.offsets.get(g)
            q = s.message_queue.queue_id
            lost = s.expired.get(g, 0)
            progress.append(Progress(t, q, s.stats.max_offset, offset, queue_lags(s).get(g), s.owners.get(g), lost))
    known = [p.lag for p in progress if p.lag is not None]
    config = _config(console, g)
    dlq = admin.queue_states([dlq_topic(g)], offsets=False) if dlq_topic(g) in existing else {}
    dlq_size = sum(s.stats.stored for rows in dlq.values() for s in rows)
    return GroupDetail(
        g,
        config,
        None if config is None else bool(config["consume_enable"]),
        members,
        progress,
        sum(known) if known else None,
        dlq_size,
        sum(p.expired for p in progress),
    )


def set_consume_enable(console: Console, group: str, enabled: bool) -> GroupDetail:
    """Pause (False) or resume (True) a group: members stop or start pulling within a heartbeat. A known
    group without a config gets one with the defaults.

    Raises:
        NotFound: an unknown group.
    """
    check_writable(console)
    g = require_group(console, group)
    if _config(console, g) is None:
        console.admin.create_group(g, consume_enable=enabled)
    else:
        console.admin.update_group(g, consume_enable=enabled)
    return _group_detail(console, g)


def reset_offset(console: Console, group: str, topic: str, when: object) -> Reset:
    """Reset ``group``'s offsets on ``topic`` to the first message stored at or after ``when`` (epoch ms
    or ISO 8601); running members continue there within a heartbeat.

    Raises:
        NotFound: an unknown group or topic. BadInput: a bad time.
    """
    check_writable(console)
    g = require_group(console, group)
    config = require_topic(console, topic)
    at = parse_time(when, "timestamp")
    offsets = console.admin.reset_offset_by_time(g, config.name, at)
    return Reset(g, config.name, at, {mq.queue_id: o for mq, o in offsets.items()})


# -- helpers ----------------------------------------------------------------------------------------


def _topic_row(config: TopicConfig, states: Sequence[QueueState]) -> TopicRow:
    return TopicRow(
        config.name,
        config.read_queues,
        config.write_queues,
        config.perm,
        config.order,
        is_system(config.name),
        sum(s.stats.stored for s in states),
        max((s.stats.last_store_timestamp_ms for s in states), default=0),
        config.dedup_window_s,
        config.priority_levels,
        config.lite_expiration_ms // 1000 if config.lite else None,
    )


def _read_topic_row(console: Console, name: str) -> TopicRow:
    """The list row of topic ``name`` as stored now (its config, and its queues' stats without offsets)."""
    config = console.admin.topic_config(name)
    return _topic_row(config, console.admin.queue_states([name], offsets=False)[name])


def recent_rates(admin: Admin) -> Rates | None:
    """Rates over the last :data:`RATE_WINDOW_S` seconds of broker snapshots, or over as many as there
    are (a service that started a moment ago); None without two snapshots, or when the newest is older
    than the window (no broker service running)."""
    history = admin.stats_history()
    if len(history) < 2 or int(history[-1]["taken_at_ms"]) < time.time() * 1000 - RATE_WINDOW_S * 1000:
        return None
    span_s = (int(history[-1]["taken_at_ms"]) - int(history[0]["taken_at_ms"])) / 1000
    return rates_over(history, min(RATE_WINDOW_S, span_s)) if span_s > 0 else None


def _snapshot_lag(snap: dict[str, Any]) -> dict[tuple[str, str], int]:
    """``(group, topic)`` → lag of a broker stats snapshot (its ``group_lag`` keys are ``group/topic``:
    names never hold ``/``)."""
    return {(g, t): int(v) for k, v in snap.get("group_lag", {}).items() for g, _, t in [k.partition("/")]}


def _config(console: Console, group: str) -> dict[str, Any] | None:
    try:
        config = console.admin.group_config(group)
    except MQClientError:
        return None
    data: dict[str, Any] = json.loads(config.to_json())
    return data


__all__ = [
    "BODY_CAP",
    "BROKER_HEALTHY_S",
    "DEFAULT_PER_PAGE",
    "DEFAULT_QUEUE_NUMS",
    "FIELD_CAP",
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
    "LitePage",
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
    "body_view",
    "bounded",
    "brokers",
    "check_writable",
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
    "int_arg",
    "is_system",
    "keys_arg",
    "lag_table",
    "lite_topics",
    "message_detail",
    "message_field",
    "overview",
    "overview_of",
    "page_args",
    "parse_time",
    "queue_lags",
    "readers",
    "recent_rates",
    "refreshed",
    "require_group",
    "require_topic",
    "resend_dlq",
    "reset_offset",
    "search_messages",
    "send_test_message",
    "series",
    "set_consume_enable",
    "snapshot_key",
    "timer_backlog",
    "to_jsonable",
    "topic_detail",
    "topics",
    "update_topic",
]
