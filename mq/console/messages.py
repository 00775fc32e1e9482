"""The console's message views: search by id, key or store time, a message's page (body views, what
each group did, trace), dead letters (browse, resend) and discarded half messages."""

from __future__ import annotations

import dataclasses
import json

from mq.console.context import (
    DEFAULT_PER_PAGE,
    BadInput,
    Console,
    NotFound,
    check_writable,
    is_system,
    msg_id_arg,
    page_args,
    parse_time,
    readers,
    require_group,
    require_topic,
)
from mq.console.shapes import Body, Discarded, Letter, MessageDetail, MessageRow, Page, ResendResult
from mq.consumer.retry import dlq_topic, original_topic
from mq.model.message import MessageExt
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.observe.trace import TraceEvent

#: Bytes of a body shown as text, JSON or hex (the size is always given).
BODY_CAP = 64 * 1024
#: Deepest nesting of arrays and objects a body is pretty-printed with (deeper: shown as text only;
#: parsing it would exhaust the interpreter's recursion limit).
JSON_MAX_DEPTH = 64
#: Most characters of a pretty-printed body (indentation can make it far larger than the body: longer
#: ones are shown as text only).
JSON_MAX_CHARS = 4 * BODY_CAP
#: Most characters of one field (a property, a system property such as a message group, trace context
#: or born host, the tags, a key, a trace event's client or host) a message's page and API show; a
#: longer value is cut and ends with :func:`cut_mark`, its whole value downloaded by
#: :func:`message_field` (D99). Above every limit the endpoint sets on a single field (trace context 1 024
#: characters), so only values stored before those limits, or written by hand, are cut.
FIELD_CAP = 2048


def cut_mark(more_bytes: int) -> str:
    """What ends a value cut at :data:`FIELD_CAP` characters: how many bytes (UTF-8) were left out."""
    return f"… ({more_bytes:,} bytes more)"


def bounded(value: str) -> tuple[str, int]:
    """``value`` as shown: whole, or its first :data:`FIELD_CAP` characters and :func:`cut_mark`; and
    the whole value's size in bytes (UTF-8) when it was cut, else 0."""
    if len(value) <= FIELD_CAP:
        return value, 0
    shown = value[:FIELD_CAP]
    size = len(value.encode(errors="surrogatepass"))
    return shown + cut_mark(size - len(shown.encode(errors="surrogatepass"))), size


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
    config = require_topic(console, topic)
    given = [
        c for c, v in (("msg_id", msg_id), ("key", key), ("time", begin if begin is not None else end)) if v not in (None, "")
    ]
    if len(given) != 1:
        raise BadInput("search by exactly one of msg_id, key, or a store-time range (begin and/or end)")
    admin = console.admin
    if msg_id:
        found = admin.find_message(msg_id_arg(msg_id), config.name)
        return Page([_row(m) for m in found[(p - 1) * n : p * n]], len(found), p, n)
    if key:
        total = admin.count_messages_by_key(config.name, key)
        return Page([_row(m) for m in admin.messages_by_key(config.name, key, start=(p - 1) * n, count=n)], total, p, n)
    low = parse_time(begin, "begin") if begin not in (None, "") else 0
    high = parse_time(end, "end") if end not in (None, "") else 2**53 - 1
    if low > high:
        raise BadInput(f"begin ({low}) is after end ({high})")
    queues = [MessageQueue(config.name, DEFAULT_BROKER_NAME, q) for q in range(config.queue_count)]
    firsts = [admin.search_offset(mq, low) for mq in queues]  # before the ends: a range never ends before it starts
    if high < 2**53 - 1:
        ends = [admin.search_offset(mq, high + 1) for mq in queues]
    else:  # no end: up to what is stored now (one read of the topic's queues)
        ends = [s.stats.max_offset for s in admin.queue_states([config.name], offsets=False)[config.name]]
    ranges = list(zip(range(config.queue_count), firsts, ends, strict=False))  # a topic resized meanwhile: its old queues
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
    config = require_topic(console, topic)
    found = console.admin.find_message(msg_id_arg(msg_id), config.name)
    if not found:
        raise NotFound(f"message {msg_id!r} is not stored in topic {config.name!r} (removed by retention, or a wrong id)")
    m = found[0]
    group_names = readers(console, config)
    states = console.admin.message_states(m, group_names) if not is_system(config.name) else {}
    trace = console.admin.message_trace(config.name, m.msg_id)
    cut: dict[str, int] = {}  # the fields shown cut: field name (as message_field takes it) -> whole size in bytes

    def show(name: str, value: str) -> str:
        shown, size = bounded(value)
        if size:
            cut[name] = size
        return shown

    tags = show("tags", m.tags) if m.tags is not None else None
    keys = [show(f"key:{i}", k) for i, k in enumerate(m.keys)]
    properties = {show_name(k): show(f"property:{k}", v) for k, v in m.properties.items()}
    system = {show_name(k): show(f"system:{k}", v) for k, v in m.system_properties.items()}
    return MessageDetail(
        m.msg_id,
        m.topic,
        m.queue_id,
        m.queue_offset,
        tags,
        keys,
        properties,
        system,
        m.born_timestamp_ms,
        m.store_timestamp_ms,
        m.reconsume_times,
        body_view(m.body),
        states,
        [_bounded_event(e) for e in trace],
        cut,
    )


def show_name(name: str) -> str:
    """A property's name as shown: names are not downloadable, so a long one is only cut (a name over
    :data:`FIELD_CAP` characters can only have been written by hand)."""
    return bounded(name)[0]


def message_field(console: Console, topic: str, msg_id: str, name: object) -> str:
    """The whole value of one field of a message, as a message's page cuts it (D99): ``tags``,
    ``key:N`` (the N-th key, from 0), ``property:NAME`` or ``system:NAME``.

    Raises:
        NotFound: no such topic, message or field. BadInput: a malformed id or field name.
    """
    if not isinstance(name, str) or not name:
        raise BadInput("name the field: tags, key:N, property:NAME or system:NAME")
    config = require_topic(console, topic)
    found = console.admin.find_message(msg_id_arg(msg_id), config.name)
    if not found:
        raise NotFound(f"message {msg_id!r} is not stored in topic {config.name!r} (removed by retention, or a wrong id)")
    m = found[0]
    kind, _, rest = name.partition(":")
    value: str | None = None
    if name == "tags":
        value = m.tags
    elif kind == "key" and rest.isdigit():
        value = m.keys[int(rest)] if int(rest) < len(m.keys) else None
    elif kind == "property" and rest:
        value = m.properties.get(rest)
    elif kind == "system" and rest:
        value = m.system_properties.get(rest)
    else:
        raise BadInput(f"unknown field {name[:64]!r}: expected tags, key:N, property:NAME or system:NAME")
    if value is None:
        raise NotFound(f"message {msg_id!r} has no field {name[:64]!r}")
    return value


def _bounded_event(e: TraceEvent) -> TraceEvent:
    """A trace event with its client-written text fields cut at :data:`FIELD_CAP` characters."""
    group, client_id, host, status, topic = (bounded(v)[0] for v in (e.group, e.client_id, e.host, e.status, e.topic))
    if (group, client_id, host, status, topic) == (e.group, e.client_id, e.host, e.status, e.topic):
        return e
    return dataclasses.replace(e, group=group, client_id=client_id, host=host, status=status, topic=topic)


def body_view(body: bytes) -> Body:
    """A body for display: text, pretty JSON (when the whole body is JSON nested at most
    :data:`JSON_MAX_DEPTH` deep and its pretty form is at most :data:`JSON_MAX_CHARS` long; else
    ``json_note`` says why not) and hex of its first :data:`BODY_CAP` bytes."""
    shown = body[:BODY_CAP]
    try:
        text: str | None = shown.decode()
    except UnicodeDecodeError:
        text = shown.decode(errors="ignore") if len(body) > BODY_CAP and _cut_utf8(shown) else None
    pretty: str | None = None
    note: str | None = None
    if text is not None and len(body) <= BODY_CAP:
        if text.lstrip()[:1] in ("[", "{") and json_depth(text) > JSON_MAX_DEPTH:
            note = f"nested deeper than {JSON_MAX_DEPTH} levels"
        else:
            try:
                pretty = json.dumps(json.loads(text), indent=2, ensure_ascii=False)
            except ValueError:
                pretty = None
            if pretty is not None and len(pretty) > JSON_MAX_CHARS:
                note = f"{len(pretty):,} characters long pretty-printed (over {JSON_MAX_CHARS:,})"
                pretty = None
    return Body(len(body), len(body) > BODY_CAP, text, pretty, shown.hex(), note)


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in ``text``, outside JSON strings (one pass, no parsing)."""
    depth = deepest = 0
    in_string = escaped = False
    for c in text:
        if in_string:
            if escaped:
                escaped = False
            elif c == "\\":
                escaped = True
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest


def dlq(console: Console, group: str, *, page: object = 1, per_page: object = DEFAULT_PER_PAGE) -> Page[Letter]:
    """A group's dead letters, oldest first, one page (``total`` counts the letters stored).

    Raises:
        NotFound: an unknown group.
    """
    p, n = page_args(page, per_page)
    g = require_group(console, group)
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
    return Page(rows, stats.stored, p, n)


def resend_dlq(console: Console, group: str, *, msg_ids: object = None) -> ResendResult:
    """Resend dead letters of ``group`` to that group only: those with ``msg_ids`` (a list of ids), or
    (None) every letter not resent before. Each letter is resent once, however often this is called.

    Raises:
        NotFound: an unknown group. BadInput: ``msg_ids`` not a non-empty list of ids.
    """
    check_writable(console)
    g = require_group(console, group)
    ids: list[str] | None = None
    if msg_ids is not None:
        if not isinstance(msg_ids, list) or not msg_ids:
            raise BadInput(f"msg_ids must be a non-empty list of msg ids (or leave it out to resend all), got {msg_ids!r}")
        ids = [msg_id_arg(i) for i in msg_ids]
    report = console.admin.resend_dlq_report(g, msg_ids=ids)
    return ResendResult(g, report.resent, report.skipped)


def discarded(
    console: Console, *, topic: str | None = None, page: object = 1, per_page: object = DEFAULT_PER_PAGE
) -> Page[Discarded]:
    """Half messages discarded after too many unanswered check-backs, oldest first, a page of them."""
    p, n = page_args(page, per_page)
    if topic is not None:
        require_topic(console, topic)
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
