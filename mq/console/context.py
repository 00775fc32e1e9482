"""What every console view works with: the :class:`Console` (the store through one :class:`mq.Admin`,
the settings), the errors a view raises before writing anything (the API maps them to 400, 403, 404,
409), the checks of request values, and the lookups several views share."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC
from typing import Any, TypeVar

from mq.errors import InvalidNameError, MQClientError, TopicNotFoundError
from mq.model.times import iso_ms
from mq.model.topic import TopicConfig
from mq.model.validation import DLQ_PREFIX, RETRY_PREFIX, check_group, check_topic
from mq.operator.admin import Admin
from mq.operator.admin_views import QueueState
from mq.producer import Producer
from mq.store.connection import mask_url, resolve_url

#: Items per page unless asked otherwise, and the most a page may hold.
DEFAULT_PER_PAGE, MAX_PER_PAGE = 50, 500
#: Producer group of the test messages the console sends.
PRODUCER_GROUP = "mq-console"

T = TypeVar("T")


class BadInput(MQClientError):
    """The request is malformed (the API answers 400); nothing was written."""


class NotFound(MQClientError):
    """The topic, group or message does not exist (the API answers 404); nothing was written."""


class Conflict(MQClientError):
    """The request contradicts the store's state, e.g. creating a topic that exists (409)."""


class ReadOnly(MQClientError):
    """A change was asked of a read-only console (the API answers 403)."""


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
        self._cache: dict[str, tuple[object, Any]] = {}
        self._cache_lock = threading.Lock()
        self._changes = 0

    def __repr__(self) -> str:
        return f"Console({self.masked_url!r}, namespace={self.namespace!r}, read_only={self.read_only})"

    @property
    def url(self) -> str:
        """The store URL, password included: for connecting only, never to be shown."""
        return self._url

    @property
    def masked_url(self) -> str:
        """The store URL with its passwords (user info, ``?password=``, ``?ssl_password=``) replaced by ``***``."""
        return mask_url(self._url)

    def cached(self, name: str, key: object, compute: Callable[[], T]) -> T:
        """The value of ``name`` computed for ``key`` (with this console's changes since), computed now
        when ``key`` differs from the last one. Concurrent callers wait for one computation, so many
        open tabs cost one. A None ``key`` means "do not cache": computed every time."""
        if key is None:
            return compute()
        full = (key, self._changes)
        with self._cache_lock:
            hit = self._cache.get(name)
            if hit is not None and hit[0] == full:
                value: T = hit[1]
                return value
            value = compute()
            self._cache[name] = (full, value)
            return value

    def changed(self) -> None:
        """Note a change this console made (a topic created, updated or deleted): cached views are
        computed again at their next call instead of at the broker's next snapshot."""
        with self._cache_lock:
            self._changes += 1

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


# -- request values -------------------------------------------------------------------------------


def page_args(page: object = 1, per_page: object = DEFAULT_PER_PAGE) -> tuple[int, int]:
    """``(page, per_page)`` as ints (page ≥ 1, 1 ≤ per_page ≤ :data:`MAX_PER_PAGE`), else BadInput."""
    p = int_arg("page", page, 1, 2**31)
    n = int_arg("per_page", per_page, 1, MAX_PER_PAGE)
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
            ms = iso_ms(value, naive=UTC)
        except ValueError:
            raise BadInput(
                f"{name} must be epoch milliseconds or an ISO 8601 time like 2026-11-23T21:00:00Z, got {value!r}"
            ) from None
    else:
        raise BadInput(f"{name} must be epoch milliseconds or an ISO 8601 time, got {value!r}")
    if not 0 <= ms < 2**53:
        raise BadInput(f"{name} must be a time after 1970, got {value!r}")
    return ms


def int_arg(name: str, value: object, low: int, high: int) -> int:
    """``value`` (an int, or digits) as an int in ``low..high``, else BadInput naming ``name``."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise BadInput(f"{name} must be an integer in {low}..{high}, got {value!r}")
    return value


def msg_id_arg(value: object) -> str:
    """A msg id: 1..128 printable characters without surrounding spaces, else BadInput."""
    if not isinstance(value, str) or not 1 <= len(value) <= 128 or not value.isprintable() or value.strip() != value:
        raise BadInput(f"a msg id is 1..128 printable characters without surrounding spaces, got {value!r}")
    return value


def keys_arg(keys: object) -> list[str]:
    """Message keys from a space-separated text or a list of texts (None or "": none), else BadInput."""
    if keys is None or keys == "":
        return []
    if isinstance(keys, str):
        return [k for k in keys.split() if k]
    if isinstance(keys, list) and all(isinstance(k, str) for k in keys):
        return list(keys)
    raise BadInput(f"keys must be text (space-separated) or a list of text, got {keys!r}")


# -- shared lookups --------------------------------------------------------------------------------


def require_topic(console: Console, topic: object) -> TopicConfig:
    """The config of ``topic``: BadInput for a malformed name, NotFound when it does not exist."""
    try:
        name = check_topic(topic)
        return console.admin.topic_config(name)
    except InvalidNameError as e:
        raise BadInput(str(e)) from None
    except TopicNotFoundError:
        raise NotFound(f"topic {topic!r} does not exist") from None


def require_group(console: Console, group: object) -> str:
    """``group`` when the namespace knows it: BadInput for a malformed name, NotFound otherwise."""
    try:
        name = check_group(group)
    except InvalidNameError as e:
        raise BadInput(str(e)) from None
    if name not in console.admin.groups():
        raise NotFound(f"group {name!r} does not exist (it never registered and has no config)")
    return name


def check_writable(console: Console) -> None:
    """ReadOnly when the console refuses changes."""
    if console.read_only:
        raise ReadOnly("the console runs with --read-only: changes are refused")


def is_system(name: str) -> bool:
    """Whether ``name`` is a retry or dead-letter topic."""
    return name.startswith((RETRY_PREFIX, DLQ_PREFIX))


def queue_lags(state: QueueState) -> dict[str, int]:
    """Lag of each group with a committed offset on a queue (the others' is unknown)."""
    s = state.stats
    return {g: s.lag(o) for g, o in state.offsets.items()}


def subscribers(console: Console, topic: str) -> set[str]:
    """Groups with a live member subscribed to ``topic``."""
    members = console.admin.consumer_connections_of(console.admin.groups())
    return {g for g, clients in members.items() if any(topic in c.subscriptions for c in clients)}


def readers(console: Console, topic: TopicConfig, states: list[QueueState] | None = None) -> list[str]:
    """The groups reading ``topic``: those with a committed offset on one of its readable queues (from
    ``states``, read when not given) or a live member subscribed to it, by name."""
    rows = states if states is not None else console.admin.queue_states([topic.name])[topic.name]
    return sorted({g for s in rows if s.readable for g in s.offsets} | subscribers(console, topic.name))
