"""A connection taken out of a client's pool and kept: one :class:`Lease` for every such use (D111).

``redis.Redis.execute_command`` takes a connection from the pool for every command and gives it back
after (fork checks, a liveness ``poll``, the pool's lock, observability counters, the retry and timing
wrappers): more client CPU than a send's own work. The project keeps a connection instead where one
caller at a time talks a lot: the sync client's script calls (:mod:`mq.store.lane`, D53, try-shared),
the sync long-poll waiters (``Connection.held()``, D55, exclusive) and the pipelined senders' rounds
(``PipeLane`` D57, ``AioPipeLane`` D58, exclusive). They all take, keep, drop and reconnect here.

**Who gets one** (:func:`lease_for`, the one eligibility rule): a plain ``redis.Redis`` or
``redis.asyncio.Redis`` over a ``ConnectionPool`` (standalone or Sentinel), not a single-connection
client, while redis-py's observability is off (its metrics must count every command). A cluster
client, the embedded store (fakeredis) and a single-connection client get none: their callers use
the client the usual way. A *try-shared* lease is used by one caller at a time; another that finds it
busy uses the pool (never waits).

**Reconnect** (the one reconnect rule): a call that fails other than with an error reply drops the
connection (it is never kept with a reply unread; every round written and not read is lost with it:
:attr:`Lease.epoch` moves on), and the next use reconnects it with ``connect()`` as the pool's
checkout does — through Sentinel that asks the view for the master (D76), so a failover moves a kept
connection too — which runs its connect callbacks (:meth:`Lease.on_connect`, the position check of
D70). A maintenance notification asking for a reconnect drops it after the call, as redis-py does. A
forked child takes a new connection from its pool (the parent's is left alone).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from redis.exceptions import ResponseError

from mq.store import redispy
from mq.store.redispy import send_read

#: Bumped in a forked child: a lease made before the fork takes a new connection.
_generation = 0


def _after_fork() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_after_fork)


def leasable(client: Any) -> bool:
    """Whether ``client`` is of the kind that can lease a connection (the first half of the rule;
    redis-py's observability is the second, asked at each use)."""
    if type(client) is redis.Redis:
        pool_type: type[Any] = redis.ConnectionPool
    elif type(client) is redis.asyncio.Redis:
        pool_type = redis.asyncio.ConnectionPool
    else:
        return False
    return isinstance(client.connection_pool, pool_type) and client.connection is None


def lease_for(client: Any, *, shared: bool = False) -> Lease | None:
    """A new lease of ``client``'s pool, or None where the rule gives none (see the module docstring).

    Args:
        client: a sync or asyncio redis-py client (or any other: None).
        shared: try-shared (:meth:`Lease.call`) rather than exclusive.
    """
    if redispy.observed() or not leasable(client):
        return None
    return Lease(client.connection_pool, shared=shared)


class Lease:
    """One connection of ``pool`` kept until :meth:`close` (see the module docstring).

    Exclusive (the default): one thread or task uses it, through :meth:`take` / :meth:`atake`,
    :meth:`send` / :meth:`asend`, :meth:`read` / :meth:`aread`. Try-shared: :meth:`call` from any
    thread, which answers "busy" rather than wait, or :meth:`send` and :meth:`read` between
    :meth:`hold` (which answers "busy" the same way) and :meth:`unhold`.

    Args:
        pool: a sync or asyncio ``ConnectionPool``.
        shared: try-shared.
    """

    __slots__ = ("_conn", "_generation", "_lock", "_pool", "epoch")

    def __init__(self, pool: Any, *, shared: bool = False) -> None:
        self._pool = pool
        self._conn: Any = None
        self._generation = _generation
        self._lock = threading.Lock() if shared else None
        #: moves on each time the connection is dropped: what was written before is lost
        self.epoch = 0

    @property
    def conn(self) -> Any:
        """The kept connection (None before the first take and after :meth:`close`)."""
        return self._conn

    # -- take ----------------------------------------------------------------------------------

    def take(self) -> Any:
        """The kept sync connection, taken from the pool on first use and in a forked child (the pool's
        checks, connected and no unread data, once)."""
        conn = self._conn
        if conn is None or self._generation != _generation:
            conn = self._conn = self._pool.get_connection()
            self._generation = _generation
            self.epoch += 1  # nothing written before (a forked child's parent's rounds) is read on it
        return conn

    async def atake(self) -> Any:
        """:meth:`take` of an asyncio lease."""
        conn = self._conn
        if conn is None or self._generation != _generation:
            conn = self._conn = await self._pool.get_connection()
            self._generation = _generation
            self.epoch += 1
        return conn

    def on_connect(self, callback: Callable[[Any], None]) -> None:
        """Call ``callback(connection)`` each time the kept connection (re)connects (taken first)."""
        redispy.on_connect(self.take(), callback)

    # -- drop and give back ----------------------------------------------------------------------

    def drop(self) -> None:
        """Disconnect the kept connection (kept: the next use reconnects); what was written is lost."""
        self.epoch += 1
        if self._conn is not None:
            self._conn.disconnect()

    async def adrop(self) -> None:
        """:meth:`drop` of an asyncio lease."""
        self.epoch += 1
        if self._conn is not None:
            await self._conn.disconnect(nowait=True)

    def close(self, *, dirty: bool = False) -> None:
        """Give the connection back to the pool; ``dirty``: a reply may be unread, disconnect it first."""
        conn, self._conn = self._conn, None
        self.epoch += 1
        if conn is not None:
            if dirty:
                conn.disconnect()
            self._pool.release(conn)

    async def aclose(self, *, dirty: bool = False) -> None:
        """:meth:`close` of an asyncio lease."""
        conn, self._conn = self._conn, None
        self.epoch += 1
        if conn is not None:
            if dirty:
                await conn.disconnect(nowait=True)
            await self._pool.release(conn)

    # -- I/O -------------------------------------------------------------------------------------

    def call(self, args: tuple[Any, ...]) -> tuple[bool, Any]:
        """``(True, reply)`` of command ``args`` run on the kept connection with the connection's own
        retry policy, or ``(False, None)`` when another thread is using it (nothing was sent). Raises
        what redis-py raises for the command. Try-shared leases only."""
        lock: Any = self._lock
        if not lock.acquire(blocking=False):
            return False, None
        try:
            conn = self._conn
            if conn is None or self._generation != _generation:
                conn = self.take()
            try:
                return True, conn.retry.call_with_retry(lambda: send_read(conn, args), lambda _error: conn.disconnect())
            except ResponseError:  # the error reply was read whole: the connection is clean
                raise
            except BaseException:
                # never keep a connection that may hold an unread reply (a Sentinel connection does not
                # disconnect itself on a failed read; the pool's checkout would have caught it)
                self.drop()
                raise
            finally:
                if conn.should_reconnect():  # a maintenance notification asked for it
                    self.drop()
        finally:
            lock.release()

    def hold(self) -> bool:
        """Take a try-shared lease for one round of :meth:`send` then :meth:`read` (every reply read
        before :meth:`unhold`), or answer False when another thread is using it (nothing taken)."""
        lock: Any = self._lock
        return bool(lock.acquire(blocking=False))

    def unhold(self) -> None:
        """Give back a try-shared lease taken with :meth:`hold`."""
        lock: Any = self._lock
        lock.release()

    def send(self, commands: list[tuple[Any, ...]], *, check_health: bool) -> None:
        """Write ``commands`` (tuples of command arguments) on the kept sync connection, reconnecting
        first if it was dropped; ``check_health``: a ``PING`` first if idle long (never while replies
        are unread: it would read one of them). A failure drops the connection and raises."""
        conn = self.take()
        try:
            if not redispy.is_connected(conn):
                conn.connect()
            conn.send_packed_command(redispy.pack(conn, commands), check_health=check_health)
        except BaseException:
            self.drop()
            raise

    async def asend(self, commands: list[tuple[Any, ...]], *, check_health: bool) -> None:
        """:meth:`send` of an asyncio lease. Cancelled, it drops the connection (a round is never left
        half written on a connection used again)."""
        conn = self._conn
        if conn is None or self._generation != _generation:
            conn = await self.atake()
        try:
            if not conn.is_connected:
                await conn.connect()
            await conn.send_packed_command(redispy.pack_async(conn, commands), check_health=check_health)
        except BaseException:
            await self.adrop()
            raise

    def read(self, count: int) -> list[Any]:
        """The next ``count`` replies on the kept sync connection, error replies as exceptions in their
        slots. A failure drops the connection and raises."""
        conn = self._conn
        replies: list[Any] = []
        try:
            for _ in range(count):
                try:
                    replies.append(conn.read_response())
                except ResponseError as e:
                    replies.append(e)
        except BaseException:
            self.drop()
            raise
        return replies

    async def aread(self, count: int) -> list[Any]:
        """:meth:`read` of an asyncio lease (cancelled, it drops the connection)."""
        try:
            return await redispy.read_replies(self._conn, count)
        except BaseException:
            await self.adrop()
            raise

    def settle(self) -> None:
        """Every reply read: drop the connection if a maintenance notification asked for a reconnect."""
        if self._conn is not None and self._conn.should_reconnect():
            self.drop()

    async def asettle(self) -> None:
        """:meth:`settle` of an asyncio lease."""
        if self._conn is not None and self._conn.should_reconnect():
            await self.adrop()
