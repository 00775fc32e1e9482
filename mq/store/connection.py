"""Connecting to the store: URL forms, client construction and error translation.

URL forms (see docs/architecture.md):

- ``redis://[user:pass@]host:port/db`` and ``rediss://…`` (TLS): a standalone Redis;
- ``redis+cluster://[user:pass@]host:port[,host:port…]`` (``rediss+cluster://`` for TLS): a Redis
  Cluster, given by seed nodes;
- ``redis+sentinel://[user:pass@]host:port[,host:port…]/MASTER_NAME[/db]`` (``rediss+sentinel://`` for
  TLS): the master a set of Redis Sentinels names, followed across failovers (see
  :func:`parse_sentinel_url`);
- ``memory://`` or ``memory://NAME``: the embedded in-process store (fakeredis). Objects in one
  process that use the same NAME share one store; plain ``memory://`` is the shared store
  named ``default``;
- ``None``: the environment variable ``MQ_URL``, else ``memory://``.

Query parameters ``socket_timeout`` and ``socket_connect_timeout`` (seconds) override the defaults
below. Passwords never appear in ``repr``, logs or error messages: :func:`mask_url` is used for all
of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import re
import threading
from asyncio import get_running_loop as asyncio_loop  # `asyncio` names a flag of the client makers
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.asyncio.retry
import redis.asyncio.sentinel
from redis.backoff import NoBackoff
from redis.cluster import ClusterNode, RedisCluster
from redis.retry import Retry

from mq.errors import MQBrokerError, MQClientError
from mq.keys import Keys
from mq.store import redispy
from mq.store.lease import Lease, lease_for
from mq.store.sentinel import (
    AsyncFollowingConnection,
    AsyncFollowingSentinel,
    AsyncFollowingSSLConnection,
    FollowingConnection,
    FollowingSentinel,
    FollowingSSLConnection,
    view_of,
)

#: Environment variable consulted when no URL is given.
URL_ENV = "MQ_URL"
#: The embedded store used when neither a URL nor ``MQ_URL`` is given.
DEFAULT_URL = "memory://"
#: Seconds to wait for a TCP connection to a Redis node.
DEFAULT_CONNECT_TIMEOUT_S = 1.0
#: Seconds to wait for one Redis reply (long polls use their own, longer budget).
DEFAULT_SOCKET_TIMEOUT_S = 3.0
#: Longest a blocking read of the embedded store blocks, ms (see :attr:`Connection.max_block_ms`).
MEMORY_MAX_BLOCK_MS = 250

#: Every exception redis-py raises for a failed command (cluster errors are not RedisErrors).
REDIS_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, redis.exceptions.RedisClusterException)

_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster", "redis+sentinel", "rediss+sentinel", "memory")
#: TLS query options passed on to a cluster client (a standalone URL passes every option itself).
_CLUSTER_TLS_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_cert_reqs", "ssl_check_hostname")
#: A standalone URL's path: none, ``/`` or ``/DB`` (a number).
_DB_PATH = re.compile(r"(/[0-9]*)?")
_memory_servers: dict[str, Any] = {}
_memory_lock = threading.Lock()


def resolve_url(url: str | None) -> str:
    """The URL to use: ``url``, else ``$MQ_URL``, else ``memory://``."""
    return url or os.environ.get(URL_ENV) or DEFAULT_URL


def _credentials(url: str) -> tuple[str, str, str] | None:
    """``(scheme://, user info, rest)`` split at the *last* ``@`` after the scheme, or None without one.

    Read by hand, not with ``urlsplit``: a password holding a raw ``/``, ``#`` or ``?`` would end
    urlsplit's netloc early and leave the rest of the password in the path, query or fragment.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return None
    userinfo, _, host = rest.rpartition("@")
    return scheme + sep, userinfo, host


#: A query option redis-py takes as a password (``?password=…``, ``?ssl_password=…``): its value is masked too.
_QUERY_SECRET = re.compile(r"([?&](?:ssl_)?password=)[^&#]*", re.IGNORECASE)


def mask_url(url: str) -> str:
    """``url`` with any password (user info, ``password`` or ``ssl_password`` in the query) replaced by
    ``***`` (safe for logs and errors), whatever it holds."""
    url = _QUERY_SECRET.sub(r"\1***", url)
    split = _credentials(url)
    if split is None:
        return url
    prefix, userinfo, host = split
    if ":" not in userinfo:  # a user name only; hide it all if it looks like a mangled password
        return url if not any(c in userinfo for c in "/#?") else f"{prefix}***@{host}"
    user = userinfo.partition(":")[0]
    return f"{prefix}{user}:***@{host}"


def url_passwords(url: str) -> list[str]:
    """The password of ``url`` as written and percent-decoded (empty without one), read as
    :func:`mask_url` reads it: texts that must never be shown."""
    split = _credentials(url)
    if split is None:
        return []
    userinfo = split[1]
    user_only = ":" not in userinfo  # a user name only, unless it looks like a mangled password (mask_url hides it)
    forms = ([userinfo] if any(c in userinfo for c in "/#?") else []) if user_only else [userinfo.split(":", 1)[1]]
    return sorted({f for form in forms for f in (form, unquote(form)) if f}, key=len, reverse=True)


def _without_secret(text: str, url: str) -> str:
    """``text`` with the URL's user info (raw and decoded) replaced by ``***``."""
    split = _credentials(url)
    if split is None:
        return text
    for secret in {split[1], unquote(split[1]), *split[1].split(":", 1)[1:], *unquote(split[1]).split(":", 1)[1:]}:
        if secret:
            text = text.replace(secret, "***")
    return text


def is_out_of_memory(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) is Redis refusing a write at ``maxmemory`` (``OOM``)."""
    seen: BaseException | None = error
    while seen is not None:
        text = str(seen)
        if isinstance(seen, redis.exceptions.OutOfMemoryError) or text.startswith("OOM") or "> 'maxmemory'" in text:
            return True
        seen = seen.__cause__
    return False


def is_unreachable(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) is a node that could not be reached or answered in time
    (through Sentinel also: no master known, or a master demoted under the connection)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
            return True
        seen = seen.__cause__
    return False


def is_refused(error: BaseException) -> bool:
    """Whether ``error`` (or what it wraps) is a connection the node refused: nothing listens there now."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionRefusedError) or "Connection refused" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


#: Characters a namespace cannot hold: hash-tag braces, the key separator, whitespace, and the glob
#: characters of ACL key patterns (a namespace ``t*`` would give its users ``~{t*}:*``, i.e. every
#: namespace starting with ``t``).
NAMESPACE_FORBIDDEN = "{}: \t\r\n*?[]\\^"


def validate_namespace(namespace: str) -> str:
    """Check a namespace: non-empty, printable, none of :data:`NAMESPACE_FORBIDDEN`."""
    if (
        not isinstance(namespace, str)
        or not namespace
        or not namespace.isprintable()
        or any(c in namespace for c in NAMESPACE_FORBIDDEN)
    ):
        raise MQClientError(
            f"invalid namespace {namespace!r}: use a non-empty name without braces, colons, spaces or "
            "glob characters (* ? [ ] \\ ^)"
        )
    return namespace


class Connection:
    """A client for one store URL plus the key names of one namespace.

    Attributes:
        kind: ``"standalone"``, ``"sentinel"``, ``"cluster"`` or ``"memory"``.
        client: the underlying redis-py (or fakeredis) client.
        keys: key names for the namespace.
    """

    def __init__(self, url: str | None = None, namespace: str = "mq", *, socket_timeout_s: float | None = None) -> None:
        self.url = resolve_url(url)
        self.namespace = validate_namespace(namespace)
        self.keys = Keys(namespace)
        scheme = urlsplit(self.url).scheme
        if scheme not in _SCHEMES:
            raise MQClientError(
                f"unsupported URL scheme {scheme!r} in {mask_url(self.url)!r}: use one of "
                + ", ".join(f"{s}://" for s in _SCHEMES)
            )
        self.kind = (
            "memory"
            if scheme == "memory"
            else "cluster"
            if "cluster" in scheme
            else "sentinel"
            if "sentinel" in scheme
            else "standalone"
        )
        check_url(self.url)
        self._socket_timeout_s = socket_timeout_s
        self._async_client: Any = None
        self._lease: Lease | None = None  # a copy made by held(): the lease of its client's one connection
        self.client: Any = self._make(asyncio=False)

    def _make(self, *, asyncio: bool) -> Any:
        with translate_errors(self.url):
            try:
                return _make_client(self.url, self.kind, self._socket_timeout_s, asyncio=asyncio)
            except (ValueError, TypeError) as e:  # redis-py's reading of the URL and its query options
                raise MQClientError(
                    f"bad store URL {mask_url(self.url)!r}: {type(e).__name__} {_without_secret(str(e), self.url)}"
                ) from None

    @property
    def async_client(self) -> Any:
        """The ``redis.asyncio`` client of the same URL and options (made on first use, bound to the
        running event loop; close it with :meth:`aclose`). No thread is started for it."""
        if self._async_client is None:
            self._async_client = self._make(asyncio=True)
        return self._async_client

    def __repr__(self) -> str:
        return f"Connection({mask_url(self.url)!r}, namespace={self.namespace!r})"

    @property
    def max_block_ms(self) -> int | None:
        """The longest a blocking read (``XREAD BLOCK``) should block so that closing this connection
        ends it in time, ms; None: no bound (a close disconnects the socket the read waits on). The
        embedded store (fakeredis) waits in-process on a condition that no close reaches, for the
        whole block: a long-poll waiter blocked for 10 s outlived its consumer's shutdown by that long,
        so it blocks ``MEMORY_MAX_BLOCK_MS`` at a time there (a wake is a function call, no round trip)."""
        return MEMORY_MAX_BLOCK_MS if self.kind == "memory" else None

    def node_of(self, key: str) -> str:
        """The address of the node (Redis master) that serves ``key``."""
        if self.kind == "cluster":
            slot = self.client.keyslot(key)
            return str(self.client.nodes_manager.get_node_from_slot(slot).name)
        if self.kind == "memory":
            return "memory"
        if self.kind == "sentinel":  # the master's name: the address changes with each failover
            return f"sentinel:{self.client.connection_pool.service_name}"
        kwargs = self.client.connection_pool.connection_kwargs
        return f"{kwargs.get('host')}:{kwargs.get('port')}"

    def held(self) -> Connection:
        """This connection for one thread's blocking reads. Where the lease rule gives one (standalone
        and Sentinel, :mod:`mq.store.lease`): a copy whose client runs every command on one leased
        connection of this client's pool (no pool checkout, pool lock or liveness poll per command: the
        sync long-poll waiters, D55); closing this connection closes it too. Elsewhere (cluster,
        memory): this connection itself. Give it back with :meth:`release_held`.

        Raises:
            MQBrokerError: the store could not be reached.
        """
        lease = lease_for(self.client)
        if lease is None:
            return self
        held = copy.copy(self)
        held._lease, held._async_client = lease, None
        with translate_errors(self.url, "connecting"):
            held.client = redispy.client_on(self.client.connection_pool, lease.take())
        return held

    def on_reconnect(self, callback: Callable[[Any], None]) -> bool:
        """Call ``callback(redis_connection)`` each time the one connection of a :meth:`held` copy
        (re)connects — redis-py's retry reconnects silently, and a consumer's position check must run
        again after it (D70). On a sync cluster (no held copy: this connection itself), each time any
        connection to any of its nodes (re)connects or its slot map changes (D145). ``callback`` must
        be a bound method: redis-py keeps it as a weak reference. Returns False (and registers
        nothing) where there is neither (``memory://``, a shared pool): the caller then checks on
        every wait."""
        if self._lease is None:
            if redispy.is_sync_cluster(self.client):
                redispy.on_cluster_change(self.client, callback)
                return True
            return False
        self._lease.on_connect(callback)
        return True

    def release_held(self) -> None:
        """Give the connection of a :meth:`held` copy back to its pool (nothing for a shared one)."""
        if self._lease is not None:
            redispy.detach(self.client)
            with contextlib.suppress(*REDIS_ERRORS):
                self._lease.close()

    def close(self) -> None:
        """Close every connection of the sync client (through Sentinel: the sentinels' connections too)."""
        with contextlib.suppress(*REDIS_ERRORS):  # closing a broken connection is not worth an error
            self.client.close()
            for sentinel in _sentinels_of(self.client):
                sentinel.close()
        if self._lease is None:  # a held copy shares its parent's pool, sentinels and view
            _leave_view(self.client)

    def stop_retrying(self) -> None:
        """Every command of the sync client fails at its first error from now on: redis-py's retry no
        longer reconnects and sends it again (a blocked read that a close or :meth:`interrupt` ends
        would block again). For a client being closed for good (the long-poll waiters')."""
        with contextlib.suppress(*REDIS_ERRORS):
            redispy.stop_retrying(self.client)

    def interrupt(self) -> None:
        """From another thread: shut the socket of every connection of the sync client in use now (a
        :meth:`held` copy's too, as they share the pool), so that a read blocked on one (``XREAD
        BLOCK``) fails at once; its own thread then disconnects it (a ``disconnect()`` from here, as
        :meth:`close` does, races that thread's read and reconnect). Idle connections are left as they
        are. Nothing on the embedded store (no socket: see :attr:`max_block_ms`)."""
        if self.kind == "memory":
            return
        with contextlib.suppress(*REDIS_ERRORS):
            redispy.interrupt_in_use(self.client)

    async def aclose(self) -> None:
        """Close every connection of the asyncio client, if one was made (and the sync client's)."""
        client, self._async_client = self._async_client, None
        if client is not None:
            from mq.store.ops import aclose_node_clients

            with contextlib.suppress(*REDIS_ERRORS):
                await aclose_node_clients(client)
                await client.aclose()
                for sentinel in _sentinels_of(client):
                    await sentinel.aclose()
            _leave_view(client)
            await _disconnect_cluster_nodes(client)
        self.close()


async def _disconnect_cluster_nodes(client: Any) -> None:
    """Disconnect every node of a ``redis.asyncio`` cluster client, known or startup. ``RedisCluster.aclose``
    does nothing while the client is flagged for re-initialisation — as it stays after a failed
    re-initialisation (connect timeouts under load), with connections a command or the attempt opened —
    and those were left to be collected unclosed (``Unclosed ClusterNode``) once the loop was gone."""
    manager = getattr(client, "nodes_manager", None)
    if manager is None:
        return
    nodes = {id(n): n for n in [*manager.nodes_cache.values(), *manager.startup_nodes.values()]}
    await asyncio.gather(*(node.disconnect() for node in nodes.values()), return_exceptions=True)


def _leave_view(client: Any) -> None:
    """Stop following the sentinels' view for ``client`` (once; its thread ends with its last client)."""
    manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
    view = getattr(manager, "view", None)
    if manager is not None and view is not None:
        manager.view = None
        view.detach()


def _sentinels_of(client: Any) -> list[Any]:
    manager = getattr(getattr(client, "connection_pool", None), "sentinel_manager", None)
    return list(getattr(manager, "sentinels", ()))


def check_url(url: str) -> None:
    """Refuse, before connecting, what redis-py would misread or report with the password in it.

    Raises:
        MQClientError: a reserved character in the user info, a bad port, a database that is not a
            number, or a bad query parameter (the message shows the URL masked).
    """
    split = _credentials(url)
    if split is not None and any(c in split[1] for c in "/#?"):
        raise MQClientError(
            f"the user or password in {mask_url(url)!r} holds a reserved character (/ # ?): "
            "percent-encode it, e.g. urllib.parse.quote(password, safe='')"
        )
    try:
        parts = urlsplit(url)
        if "cluster" not in parts.scheme and "sentinel" not in parts.scheme:  # host lists are checked one by one
            _ = parts.port
    except ValueError:
        raise MQClientError(f"bad host or port in {mask_url(url)!r}: use scheme://[user:password@]host:port") from None
    if parts.scheme in ("redis", "rediss") and not _DB_PATH.fullmatch(parts.path):
        # redis-py reads a path that is not a number as db 0: a typo would read another database (D102)
        raise MQClientError(f"url {mask_url(url)!r} names database {parts.path!r}: use a number, e.g. redis://host:6379/0")
    _timeouts(parts.query)


@contextmanager
def translate_errors(url: str, doing: str = "talking to the store") -> Iterator[None]:
    """Turn redis-py exceptions into :class:`MQBrokerError` naming the (masked) URL."""
    try:
        yield
    except redis.exceptions.NoPermissionError as e:
        raise _answered(MQBrokerError(f"permission denied while {doing} at {mask_url(url)}: {e}")) from e
    except redis.exceptions.OutOfMemoryError as e:
        raise _answered(
            MQBrokerError(
                f"the store is full (OOM: used memory is over maxmemory) while {doing} at {mask_url(url)}: "
                f"free memory, raise maxmemory or let retention trim: {e}"
            )
        ) from e
    except REDIS_ERRORS as e:
        error = MQBrokerError(f"store error while {doing} at {mask_url(url)}: {e}")
        raise (_answered(error) if isinstance(e, redis.exceptions.ResponseError) else error) from e


def _answered(error: MQBrokerError) -> MQBrokerError:
    """``error``, marked as an error reply: the command ran nothing (D140)."""
    error.answered = True
    return error


def _timeouts(query: str) -> dict[str, float]:
    params = parse_qs(query)
    out = {"socket_connect_timeout": DEFAULT_CONNECT_TIMEOUT_S, "socket_timeout": DEFAULT_SOCKET_TIMEOUT_S}
    for name in out:
        if name in params:
            try:
                out[name] = float(params[name][0])
            except ValueError:
                out[name] = float("nan")
            if not 0 < out[name] < float("inf"):
                raise MQClientError(f"URL parameter {name}={params[name][0]!r} must be a positive number of seconds")
    return out


#: Connections an asyncio client opens to a standalone server at most (redis.asyncio's own default).
ASYNC_MAX_CONNECTIONS = 100
#: Seconds a task waits for a free connection of that pool before the call fails.
ASYNC_POOL_WAIT_S = 20.0


def _make_client(url: str, kind: str, socket_timeout_s: float | None, *, asyncio: bool = False) -> Any:
    """A sync (redis-py) or ``asyncio`` (``redis.asyncio``) client for ``url``, with the same options."""
    parts = urlsplit(url)
    if kind == "memory":
        return _memory_client(parts.netloc or "default", asyncio=asyncio)
    # One quick reconnect inside redis-py; the callers (producer retries, consumer loops) own the
    # longer retry policy and its time budget.
    retry = redis.asyncio.retry.Retry(NoBackoff(), 1) if asyncio else Retry(NoBackoff(), 1)
    common: dict[str, Any] = {"retry": retry, **_timeouts(parts.query)}
    if socket_timeout_s is not None:  # blocking reads (long polling) wait longer than one reply
        common["socket_timeout"] = socket_timeout_s
    if kind == "sentinel":
        return _sentinel_client(parse_sentinel_url(url), common, asyncio=asyncio)
    if kind == "standalone":
        # from_url also honours the query's own options (ssl_cert_reqs, …) over these defaults.
        if asyncio:  # many tasks at once wait for a free connection rather than fail ("Too many connections")
            pool = redis.asyncio.BlockingConnectionPool.from_url(
                url, health_check_interval=30, max_connections=ASYNC_MAX_CONNECTIONS, timeout=ASYNC_POOL_WAIT_S, **common
            )
            redispy.use_hiredis_packing(pool)
            return redis.asyncio.Redis.from_pool(pool)
        return redis.Redis.from_url(url, health_check_interval=30, **common)
    nodes = [_seed(hostport, asyncio=asyncio) for hostport in parts.netloc.rpartition("@")[2].split(",") if hostport]
    if not nodes:
        raise MQClientError(f"no seed nodes in {mask_url(url)!r}: use redis+cluster://host:port[,host:port]")
    tls: dict[str, Any] = {k: v[0] for k, v in parse_qs(parts.query).items() if k in _CLUSTER_TLS_OPTIONS}
    cluster = (redis.asyncio.RedisCluster if asyncio else RedisCluster)(
        startup_nodes=nodes,
        **tls,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        ssl=parts.scheme.startswith("rediss"),
        require_full_coverage=False,
        **common,
    )
    redispy.route_by_known_keys(cluster)  # no COMMAND GETKEYS round trip per XREAD / pipelined EVALSHA (D132)
    return cluster


@dataclass(frozen=True, repr=False)
class SentinelURL:
    """The parts of a ``redis+sentinel://`` URL (``repr`` hides the password)."""

    sentinels: list[tuple[str, int]]
    master_name: str
    db: int
    username: str | None
    password: str | None
    tls: bool
    options: dict[str, str]

    def __repr__(self) -> str:
        return f"SentinelURL(sentinels={self.sentinels!r}, master_name={self.master_name!r}, db={self.db})"


def parse_sentinel_url(url: str) -> SentinelURL:
    """Split ``redis+sentinel://[user:pass@]host:port[,host:port…]/MASTER_NAME[/db][?options]``.

    The credentials are those of the master and its replicas; the sentinels are asked without them
    unless the query says ``sentinel_auth=yes`` (then the same credentials are used for both). TLS
    (``rediss+sentinel://``) applies to both, with the same ``ssl_*`` query options as a cluster URL.

    Raises:
        MQClientError: no sentinel address, a bad port, no master name, or a bad db number.
    """
    parts = urlsplit(url)
    masked = mask_url(url)
    hosts = [h for h in parts.netloc.rpartition("@")[2].split(",") if h]
    if not hosts:
        raise MQClientError(f"no sentinel address in {masked!r}: use redis+sentinel://host:port[,host:port]/MASTER_NAME")
    sentinels = []
    for hostport in hosts:
        host, _, port = hostport.rpartition(":")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise MQClientError(f"bad sentinel address {hostport!r} in {masked!r}: use host:port")
        sentinels.append((host or "127.0.0.1", int(port)))
    path = [p for p in parts.path.split("/") if p]
    if not path or len(path) > 2:
        raise MQClientError(f"{masked!r} names no master: use redis+sentinel://host:port[,…]/MASTER_NAME[/db]")
    if len(path) == 2 and not path[1].isdigit():
        raise MQClientError(f"bad db {path[1]!r} in {masked!r}: use a number, e.g. …/{path[0]}/0")
    options = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return SentinelURL(
        sentinels=sentinels,
        master_name=unquote(path[0]),
        db=int(path[1]) if len(path) == 2 else 0,
        username=unquote(parts.username) if parts.username else None,
        password=unquote(parts.password) if parts.password else None,
        tls=parts.scheme.startswith("rediss"),
        options=options,
    )


def _sentinel_client(parsed: SentinelURL, common: dict[str, Any], *, asyncio: bool = False) -> Any:
    """A client of the master the sentinels name: redis-py asks them again after a failed connection,
    and the process's :class:`~mq.store.sentinel.SentinelView` makes every connection leave a node the
    sentinels no longer name (also one that still answers: an old master after a partition heals)."""
    tls: dict[str, Any] = {k: v for k, v in parsed.options.items() if k in _CLUSTER_TLS_OPTIONS}
    auth = {"username": parsed.username, "password": parsed.password}
    sentinel_kwargs: dict[str, Any] = {
        "socket_timeout": common["socket_connect_timeout"],
        "socket_connect_timeout": common["socket_connect_timeout"],
        "ssl": parsed.tls,
        **tls,
    }
    if parsed.options.get("sentinel_auth", "").lower() in ("1", "yes", "true"):
        sentinel_kwargs |= auth
    sentinel = (AsyncFollowingSentinel if asyncio else FollowingSentinel)(
        parsed.sentinels,
        sentinel_kwargs=sentinel_kwargs,
        ssl=parsed.tls,
        **tls,
        **auth,
        **common,
    )
    # every connection checks, before it sends, that the sentinels still name its node (D76)
    sentinel.view = view_of(parsed.sentinels, parsed.master_name, sentinel_kwargs)
    if asyncio:
        following: type[Any] = AsyncFollowingSSLConnection if parsed.tls else AsyncFollowingConnection
    else:
        following = FollowingSSLConnection if parsed.tls else FollowingConnection
    client = sentinel.master_for(parsed.master_name, db=parsed.db, health_check_interval=30, connection_class=following)
    if asyncio:
        try:  # made on first use inside a coroutine: its connections live in that event loop
            loop = asyncio_loop()
        except RuntimeError:
            loop = None
        sentinel.view.attach(client.connection_pool if loop is not None else None, loop)
    else:
        sentinel.view.attach(client.connection_pool)
    return client


def _seed(hostport: str, *, asyncio: bool = False) -> Any:
    host, _, port = hostport.rpartition(":")
    try:
        if asyncio:
            return redis.asyncio.cluster.ClusterNode(host or "127.0.0.1", int(port))
        return ClusterNode(host or "127.0.0.1", int(port))  # type: ignore[no-untyped-call]
    except ValueError:
        raise MQClientError(f"bad cluster seed {hostport!r}: use host:port") from None


def _memory_client(name: str, *, asyncio: bool = False) -> Any:
    import fakeredis

    with _memory_lock:
        server = _memory_servers.get(name)
        if server is None:
            server = _memory_servers[name] = fakeredis.FakeServer()
    return (fakeredis.FakeAsyncRedis if asyncio else fakeredis.FakeRedis)(server=server)
