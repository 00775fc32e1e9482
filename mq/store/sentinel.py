"""Following Sentinel's view: clients leave a master as soon as the sentinels name another (D76).

redis-py asks the sentinels for the master only when it opens a connection, and a connection to the
old master after a partition heals never fails: it keeps taking writes (discarded when Sentinel
demotes that node, 10–14 s later in the partition suite) and long polls keep reading it. So every
``redis+sentinel://`` client of this project gets a :class:`SentinelView`:

- a daemon thread per sentinel set and master name (shared by every client of the process) asks
  *every* sentinel ``SENTINEL MASTER`` each :data:`VIEW_INTERVAL_S` and keeps the address given with
  the highest config epoch (the latest failover any of them knows: a sentinel on the minority side
  of a healed partition still names the old master until the others' hello messages reach it);
- when that address changes it logs a WARNING and drops the sync clients' idle connections to other
  nodes, and shuts down the sockets of those in use (a long poll blocked on the old master wakes with
  a connection error and reconnects);
- every connection (sync and asyncio, pools, lanes and held long-poll connections alike) checks the
  view before it sends: one to a node the view no longer names is dropped and reconnects, and a
  connection asks the view, not the first sentinel that answers, where the master is.

When no sentinel has answered for :data:`VIEW_STALE_S` the view is not used (redis-py asks the
sentinels itself, as before).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import weakref
from collections import Counter
from typing import Any

import redis
import redis.asyncio.sentinel
from redis.backoff import NoBackoff
from redis.retry import Retry
from redis.sentinel import Sentinel, SentinelManagedConnection, SentinelManagedSSLConnection

from mq.store import redispy

log = logging.getLogger("mq.sentinel")

#: Seconds between two readings of every sentinel's view.
VIEW_INTERVAL_S = 0.5
#: Shortest time between two readings when connections fail (each failure asks for one at once), seconds.
VIEW_MIN_GAP_S = 0.05
#: Longest wait for one sentinel's answer (or connection) when reading the view, seconds.
VIEW_TIMEOUT_S = 0.5
#: Seconds after the last answer of any sentinel from which the view is not trusted: redis-py's own
#: discovery (1 s timeouts, the first sentinel with a master not flagged down) is used instead, so a
#: view whose rounds time out on a starved machine does not keep naming a dead master.
VIEW_STALE_S = 2.0

_views: dict[tuple[Any, ...], SentinelView] = {}
_views_lock = threading.Lock()


class SentinelView:
    """The master the sentinels name now, read by a daemon thread (see the module's docstring).

    Args:
        sentinels: ``(host, port)`` of each sentinel.
        master_name: the monitored master's name.
        sentinel_kwargs: redis-py connection options for the sentinels (timeouts, TLS, auth).
    """

    def __init__(self, sentinels: list[tuple[str, int]], master_name: str, sentinel_kwargs: dict[str, Any]) -> None:
        self.master_name = master_name
        # short timeouts: the sentinels are asked one after the other, and one cut off must not hold up
        # the round (a missed answer only leaves that sentinel out of one round)
        timeouts = {
            name: min(float(sentinel_kwargs.get(name) or VIEW_TIMEOUT_S), VIEW_TIMEOUT_S)
            for name in ("socket_timeout", "socket_connect_timeout")
        }
        options = {**sentinel_kwargs, **timeouts, "retry": Retry(NoBackoff(), 0)}
        self._clients = [redis.Redis(host=h, port=p, **options) for h, p in sentinels]
        self._master: tuple[str, int] | None = None
        self._answered_at = 0.0
        self._pools: weakref.WeakSet[Any] = weakref.WeakSet()  # sync pools whose stale connections are dropped
        self._async_pools: weakref.WeakKeyDictionary[Any, asyncio.AbstractEventLoop] = weakref.WeakKeyDictionary()
        self._users = 0
        self._lock = threading.Lock()
        self._wake = threading.Event()  # a connection to the master failed: read the view now
        self._thread: threading.Thread | None = None

    @property
    def master(self) -> tuple[str, int] | None:
        """``(host, port)`` of the master, or None when no sentinel answered lately."""
        if time.monotonic() - self._answered_at > VIEW_STALE_S:
            return None
        return self._master

    def attach(self, pool: Any = None, loop: asyncio.AbstractEventLoop | None = None) -> None:
        """Count one more client of this view (and drop ``pool``'s stale connections on a change: a sync
        pool from the thread, an asyncio one in its event ``loop``); starts the thread on first use."""
        with self._lock:
            self._users += 1
            if pool is not None and loop is not None:
                self._async_pools[pool] = loop
            elif pool is not None:
                self._pools.add(pool)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name=f"mq-sentinel-view-{self.master_name}", daemon=True)
                self._thread.start()

    def detach(self) -> None:
        """One client fewer; the thread ends within one interval after the last one."""
        with self._lock:
            self._users = max(0, self._users - 1)
        self._wake.set()

    def wake(self) -> None:
        """Read the sentinels' view now (a connection to the master failed: a failover may be under way)."""
        self._wake.set()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._users == 0:
                    self._thread = None
                    break
            try:
                self.refresh()
            except Exception:  # never die silently: a bad answer is logged and the next round tries again
                log.exception("reading the sentinels' view of %r failed; trying again in %s s", self.master_name, VIEW_INTERVAL_S)
            time.sleep(VIEW_MIN_GAP_S)  # woken by every failed connection: at most one round a gap
            self._wake.wait(VIEW_INTERVAL_S)
            self._wake.clear()
        for client in self._clients:
            with contextlib.suppress(redis.RedisError, OSError):
                client.close()

    def refresh(self) -> None:
        """Ask every sentinel once; adopt the master given with the highest config epoch, by most of
        those that give it, leaving out answers that flag their master as down (a failover's leader
        names the old master, flagged ``o_down``, until its failover ends — up to a second after the
        other sentinels switched)."""
        votes: Counter[tuple[int, tuple[str, int]]] = Counter()
        for client in self._clients:
            try:
                state = client.execute_command("SENTINEL", "MASTER", self.master_name)  # type: ignore[no-untyped-call]
            except (redis.RedisError, OSError):
                continue  # unreachable (a partition, a crash): the others decide
            fields = _pairs(state)
            if "ip" not in fields or "port" not in fields:
                continue
            if {"s_down", "o_down"} & set(fields.get("flags", "").split(",")):
                continue
            votes[(int(fields.get("config-epoch", "0")), (fields["ip"], int(fields["port"])))] += 1
        best = max(votes, key=lambda answer: (answer[0], votes[answer]), default=None)
        if best is None:
            return
        epoch, master = best
        with self._lock:
            old, self._answered_at = self._master, time.monotonic()
            if master == old:
                return
            self._master = master
            pools = list(self._pools)
            async_pools = list(self._async_pools.items())
        if old is not None:
            log.warning(
                "the sentinels name %s:%d as master of %r now (config epoch %d), not %s:%d: leaving the old one",
                *master,
                self.master_name,
                epoch,
                *old,
            )
        for pool in pools:
            _drop_stale(pool, master)
        for pool, loop in async_pools:
            with contextlib.suppress(RuntimeError):  # the loop is closed: its connections are gone with it
                loop.call_soon_threadsafe(_adrop_stale, pool, master)


def _drop_stale(pool: Any, master: tuple[str, int]) -> None:
    """Drop ``pool``'s idle connections to another node than ``master`` and wake those in use
    (their socket is shut down: a blocked read fails at once and its thread reconnects)."""
    idle, busy = redispy.pool_connections(pool)
    for conn in idle:
        if (conn.host, conn.port) != master:
            conn.disconnect()
    for conn in busy:
        if (conn.host, conn.port) != master:
            redispy.shut_down(conn)


def _adrop_stale(pool: Any, master: tuple[str, int]) -> None:
    """:func:`_drop_stale` for an asyncio pool, run in its event loop: idle connections to another node
    are disconnected, those in use have their transport aborted (a blocked read fails at once)."""
    idle, busy = redispy.pool_connections(pool)
    for conn in [*idle, *busy]:
        if (conn.host, conn.port) != master:
            redispy.abort(conn)


def _pairs(state: Any) -> dict[str, str]:
    """A ``SENTINEL MASTER`` reply (a flat list, or a dict in redis-py's parsed form) as a dict of str."""
    if isinstance(state, dict):
        return {_text(k): _text(v) for k, v in state.items()}
    return {_text(k): _text(v) for k, v in zip(state[::2], state[1::2])}


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def view_of(sentinels: list[tuple[str, int]], master_name: str, sentinel_kwargs: dict[str, Any]) -> SentinelView:
    """The process's one view of ``master_name`` through these sentinels (made on first use)."""
    key = (tuple(sentinels), master_name, tuple(sorted((k, repr(v)) for k, v in sentinel_kwargs.items())))
    with _views_lock:
        view = _views.get(key)
        if view is None:
            view = _views[key] = SentinelView(sentinels, master_name, sentinel_kwargs)
        return view


def _stale(conn: Any, view: SentinelView | None, connected: bool) -> bool:
    """Whether ``conn`` is connected to a node the view no longer names as master."""
    if view is None or not connected:
        return False
    master = view.master
    return master is not None and (conn.host, conn.port) != master


def _wake(manager: Any) -> None:
    view = getattr(manager, "view", None)
    if view is not None:
        view.wake()


class FollowingSentinel(Sentinel):
    """redis-py's sync ``Sentinel`` whose master is the view's, when it has one."""

    view: SentinelView | None = None

    def discover_master(self, service_name: str) -> Any:
        master = self.view.master if self.view is not None else None
        return master or super().discover_master(service_name)  # type: ignore[no-untyped-call]


class FollowingConnection(SentinelManagedConnection):
    """A sync Sentinel connection that leaves a master the view no longer names, before each send."""

    def connect(self) -> None:
        try:
            super().connect()  # type: ignore[no-untyped-call]
        except redis.ConnectionError:
            _wake(self.connection_pool.sentinel_manager)
            raise

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        view = getattr(self.connection_pool.sentinel_manager, "view", None)
        if _stale(self, view, redispy.is_connected(self)):
            self.disconnect()  # type: ignore[no-untyped-call]
            self.connect()  # through the view: to the master it names
        super().send_packed_command(command, check_health)  # type: ignore[no-untyped-call]


class FollowingSSLConnection(FollowingConnection, SentinelManagedSSLConnection):
    """:class:`FollowingConnection` over TLS."""


class AsyncFollowingSentinel(redis.asyncio.sentinel.Sentinel):
    """redis-py's asyncio ``Sentinel`` whose master is the view's, when it has one."""

    view: SentinelView | None = None

    async def discover_master(self, service_name: str) -> Any:
        master = self.view.master if self.view is not None else None
        return master or await super().discover_master(service_name)


class AsyncFollowingConnection(redis.asyncio.sentinel.SentinelManagedConnection):
    """An asyncio Sentinel connection that leaves a master the view no longer names, before each send."""

    async def connect(self) -> None:
        try:
            await super().connect()  # type: ignore[no-untyped-call]
        except redis.ConnectionError:
            _wake(self.connection_pool.sentinel_manager)
            raise

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        view = getattr(self.connection_pool.sentinel_manager, "view", None)
        if _stale(self, view, self.is_connected):
            await self.disconnect()
            await self.connect()
        await super().send_packed_command(command, check_health)


class AsyncFollowingSSLConnection(AsyncFollowingConnection, redis.asyncio.sentinel.SentinelManagedSSLConnection):
    """:class:`AsyncFollowingConnection` over TLS."""
