"""Options of the ``mq`` data source, checked once on the driver.

===========================  =====================================================================
option                       meaning
===========================  =====================================================================
``url``                      store URL (``redis://``, ``rediss://``, ``redis+cluster://``,
                             ``redis+sentinel://``); default ``$MQ_URL``. ``memory://`` is refused:
                             Spark tasks run in other processes.
``namespace``                key namespace (default ``mq``)
``topic``                    one topic or a comma list; an entry with ``*`` is a pattern
                             (``%DLQ%*``); default every user topic (no retry/DLQ/system topics)
``table``                    ``messages`` (default), ``offsets`` or ``topics``
``min_store_time``           only messages stored at or after it: epoch ms or ISO-8601 (naive = UTC)
``max_store_time``           only messages stored at or before it (same forms)
``starting_offsets``         ``earliest``, ``latest`` or JSON ``{"topic": {"queue_id": offset}}``;
                             batch default ``earliest``, streaming default ``latest``
``ending_offsets``           batch only: ``latest`` (default) or JSON as above (exclusive ends)
``page_size``                messages per ``XRANGE`` call (default 1000)
``min_partitions``           plan at least about this many partitions (default: as few as the bounds
                             allow; one per queue with ``pack_queues=false``)
``max_partition_messages``   never plan a partition over this many messages (default 100 000)
``pack_queues``              ``true`` (default): small queues share a partition, up to the bounds
                             above; ``false``: every partition reads one queue
``max_messages_per_trigger`` streaming: at most this many messages per micro-batch (default all)
===========================  =====================================================================

Every fault raises :class:`~mq.errors.MQClientError` quoting the offending value.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import urlsplit

from mq.errors import MQClientError
from mq.model.validation import check_topic
from mq.store.connection import URL_ENV, check_url, mask_url, parse_sentinel_url, validate_namespace

#: The tables the source serves.
TABLES = ("messages", "offsets", "topics")
#: Default messages per ``XRANGE`` call.
DEFAULT_PAGE_SIZE = 1000
#: Default largest partition, in messages.
DEFAULT_MAX_PARTITION_MESSAGES = 100_000
#: The most ``min_partitions`` may ask for (more planned one partition per message of a small read).
MAX_MIN_PARTITIONS = 10_000
#: A standalone URL's path: none, ``/`` or ``/`` and a database number.
#: ``starting_offsets``/``ending_offsets`` words.
EARLIEST = "earliest"
LATEST = "latest"

#: Start or end offsets: a word, or explicit offsets ``{topic: {queue_id: offset}}``.
OffsetSpec = str | dict[str, dict[int, int]]

_KNOWN = frozenset(
    {
        "url",
        "namespace",
        "topic",
        "table",
        "min_store_time",
        "max_store_time",
        "starting_offsets",
        "ending_offsets",
        "page_size",
        "min_partitions",
        "max_partition_messages",
        "pack_queues",
        "max_messages_per_trigger",
    }
)
#: Options Spark itself may add (``load(path)`` sets ``path``); ignored.
_SPARK_OWN = frozenset({"path", "paths"})


@dataclass(frozen=True)
class ReadOptions:
    """The checked options (see the module docstring); picklable, holds no connection.

    Attributes:
        url: store URL.
        namespace: key namespace.
        topics: topic names and ``*`` patterns; empty means every user topic.
        table: ``messages``, ``offsets`` or ``topics``.
        min_store_time_ms / max_store_time_ms: inclusive store-time bounds, epoch ms, or None.
        starting_offsets: where reading starts; None means the table's default.
        ending_offsets: where a batch read ends (exclusive).
        page_size: messages per ``XRANGE`` call.
        min_partitions: plan at least about this many partitions; None = as few as
            ``max_partition_messages`` allows (one per non-empty queue without ``pack_queues``).
        max_partition_messages: upper bound of one partition, messages.
        pack_queues: whether several queues may share a partition (else one queue per partition).
        max_messages_per_trigger: streaming micro-batch cap, messages; None = everything available.
    """

    url: str
    namespace: str = "mq"
    topics: tuple[str, ...] = ()
    table: str = "messages"
    min_store_time_ms: int | None = None
    max_store_time_ms: int | None = None
    starting_offsets: OffsetSpec | None = None
    ending_offsets: OffsetSpec = LATEST
    page_size: int = DEFAULT_PAGE_SIZE
    min_partitions: int | None = None
    max_partition_messages: int = DEFAULT_MAX_PARTITION_MESSAGES
    pack_queues: bool = True
    max_messages_per_trigger: int | None = None

    def __repr__(self) -> str:
        return (
            f"ReadOptions(url={mask_url(self.url)!r}, namespace={self.namespace!r}, topics={self.topics!r}, table={self.table!r})"
        )


def parse_options(options: Mapping[str, str]) -> ReadOptions:
    """Check data-source options (names are case-insensitive, as in Spark).

    Raises:
        MQClientError: an unknown option, a missing or unusable URL, a bad topic name, table,
            time, offsets or number.
    """
    opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
    unknown = sorted(set(opts) - _KNOWN - _SPARK_OWN)
    if unknown:
        raise MQClientError(f"unknown option(s) {', '.join(map(repr, unknown))} for format 'mq': use {sorted(_KNOWN)}")
    table = opts.get("table", "messages").strip().lower()
    if table not in TABLES:
        raise MQClientError(f"unknown table {table!r}: use one of {', '.join(TABLES)}")
    return ReadOptions(
        url=_url(opts.get("url")),
        namespace=validate_namespace(opts.get("namespace", "mq")),
        topics=_topics(opts.get("topic", "")),
        table=table,
        min_store_time_ms=_time_ms("min_store_time", opts.get("min_store_time")),
        max_store_time_ms=_time_ms("max_store_time", opts.get("max_store_time")),
        starting_offsets=_offsets("starting_offsets", opts["starting_offsets"]) if "starting_offsets" in opts else None,
        ending_offsets=_offsets("ending_offsets", opts.get("ending_offsets", LATEST), allow_earliest=False),
        page_size=_positive("page_size", opts.get("page_size")) or DEFAULT_PAGE_SIZE,
        min_partitions=_positive("min_partitions", opts.get("min_partitions"), most=MAX_MIN_PARTITIONS),
        max_partition_messages=_positive("max_partition_messages", opts.get("max_partition_messages"))
        or DEFAULT_MAX_PARTITION_MESSAGES,
        pack_queues=_flag("pack_queues", opts.get("pack_queues", "true")),
        max_messages_per_trigger=_positive("max_messages_per_trigger", opts.get("max_messages_per_trigger")),
    )


def is_pattern(selector: str) -> bool:
    """Whether a ``topic`` entry is a pattern (names never contain ``*``)."""
    return "*" in selector


def _url(value: str | None) -> str:
    url = (value or os.environ.get(URL_ENV) or "").strip()
    if not url:
        raise MQClientError(f"option 'url' is missing (and ${URL_ENV} is not set): give the store URL, e.g. redis://host:6379/0")
    check_url(url)  # a bad host, port or database (``[::1/0``, ``/abc``) as an MQClientError with the URL masked
    parts = urlsplit(url)
    if parts.scheme == "memory":
        raise MQClientError(
            f"url {mask_url(url)!r} is the in-process store, which Spark tasks (other processes) cannot see: use a Redis URL"
        )
    if "sentinel" in parts.scheme:
        parse_sentinel_url(url)  # its master name and db, checked now rather than in every task
    return url


def _topics(value: str) -> tuple[str, ...]:
    out = []
    for entry in (e.strip() for e in value.split(",")):
        if entry:
            out.append(entry if is_pattern(entry) else check_topic(entry))
    return tuple(dict.fromkeys(out))


def _time_ms(name: str, value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise MQClientError(f"option {name!r} must be epoch milliseconds or an ISO-8601 time, got {value!r}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def _positive(name: str, value: str | None, *, most: int | None = None) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise MQClientError(f"option {name!r} must be a positive integer, got {value!r}")
    if most is not None and number > most:
        raise MQClientError(
            f"option {name!r} must be at most {most}, got {value!r}: a Spark task costs 0.1–0.3 s beside its reading"
        )
    return number


def _flag(name: str, value: str) -> bool:
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise MQClientError(f"option {name!r} must be 'true' or 'false', got {value!r}")
    return text == "true"


def _offsets(name: str, value: str, *, allow_earliest: bool = True) -> OffsetSpec:
    text = value.strip()
    words = (EARLIEST, LATEST) if allow_earliest else (LATEST,)
    if text.lower() in words:
        return text.lower()
    usage = f'{" or ".join(map(repr, words))} or JSON like {{"topic": {{"0": 42}}}}'
    try:
        raw = json.loads(text)
    except ValueError:
        raise MQClientError(f"option {name!r} must be {usage}, got {value!r}") from None
    if not isinstance(raw, dict) or not all(isinstance(queues, dict) for queues in raw.values()):
        raise MQClientError(f"option {name!r} must be {usage}, got {value!r}")
    parsed: dict[str, dict[int, int]] = {}
    for topic, queues in raw.items():
        parsed[check_topic(topic)] = {}
        for queue, offset in queues.items():
            # JSON keys are strings; an offset must be a JSON integer: 1.9 or true is not taken as 1 (D102)
            if not (queue.isascii() and queue.isdigit()) or type(offset) is not int or offset < 0:
                raise MQClientError(
                    f"option {name!r} gives {topic!r} queue {queue!r} the offset {json.dumps(offset)}: "
                    f"queue ids are decimal digits and offsets non-negative JSON integers, as in {usage}"
                )
            parsed[topic][int(queue)] = offset
    return parsed
