"""A sync client's one kept connection for single commands: redis-py's command path without a pool
checkout per call (D53).

``redis.Redis.execute_command`` takes a connection from the pool for every command and gives it back
after: two ``getpid`` system calls (fork checks), a ``poll`` of the socket (the "has it unread data?"
check), the pool's lock and four observability counters, then the retry wrapper and the timing hooks
of redis-py 8 — about 20 µs of client CPU a sync send on the project machine, more than the rest of a
send's own work. :func:`execute` runs one command over a connection the client's :class:`Lane` took
from the pool once and keeps: the command is packed, sent and its reply read as redis-py does
(``send_command`` / ``read_response``), with the client's own retry policy (one quick reconnect). A
call that fails other than with an error reply drops the connection, so it never holds an unread
reply; a dropped connection reconnects with ``connect()`` as the pool's checkout does (through Sentinel:
asking the sentinels for the master again).

Only a plain ``redis.Redis`` over a ``ConnectionPool`` (standalone or Sentinel) has a lane; a cluster
client, the embedded store (fakeredis) and a single-connection client run the command the usual way.
So does a call while the lane is busy in another thread (the lock is only tried, never waited for),
and any call while redis-py's own observability (OpenTelemetry metrics) is on, so that its metrics
still count every command. A forked child takes a new connection (the parent's is left alone).

:class:`PipeLane` (D57, the sync ``send_async`` sender) and :class:`AioPipeLane` (its asyncio twin,
the ``mq.aio.Producer`` sender) keep a connection for pipelines whose replies are read a round later;
they share the bookkeeping of rounds written and not read (:class:`_Rounds`) and the packing
(:func:`pack_round`), and differ only in their I/O.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
from redis._parsers.hiredis import _AsyncHiredisParser
from redis.connection import HiredisRespSerializer
from redis.exceptions import ResponseError

#: hiredis's packer of one command (None without hiredis: redis-py packs in Python then).
_hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as _hiredis_pack
except ImportError:
    _hiredis_pack = None

#: redis-py's observability singleton getter (None in a redis-py without it).
get_observability_instance: Callable[[], Any] | None
try:
    from redis.observability.providers import get_observability_instance
except ImportError:
    get_observability_instance = None

#: Attribute of a client holding its :class:`Lane` (or False when it has none).
_LANE = "_mq_lane"
#: Bumped in a forked child: a lane made before the fork takes a new connection.
_generation = 0


def _after_fork() -> None:
    global _generation
    _generation += 1


os.register_at_fork(after_in_child=_after_fork)


class Lane:
    """One connection of a client's pool kept for :func:`execute` (see the module docstring).

    Args:
        pool: the client's connection pool.
    """

    __slots__ = ("_conn", "_generation", "_lock", "_pool")

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self._pool = pool
        self._lock = threading.Lock()
        self._conn: Any = None
        self._generation = _generation

    def try_execute(self, args: tuple[Any, ...]) -> tuple[bool, Any]:
        """``(True, reply)`` of command ``args`` run on the kept connection, or ``(False, None)`` when
        another thread is using it (nothing was sent). Raises what redis-py raises for the command."""
        if not self._lock.acquire(blocking=False):
            return False, None
        try:
            conn = self._conn
            if conn is None or self._generation != _generation:
                # the pool's checks (connected, no unread data) once; a forked child's pool resets itself
                conn = self._conn = self._pool.get_connection()
                self._generation = _generation
            try:
                return True, conn.retry.call_with_retry(lambda: _send_read(conn, args), lambda _error: conn.disconnect())
            except ResponseError:  # the error reply was read whole: the connection is clean
                raise
            except BaseException:
                # never keep a connection that may hold an unread reply (a Sentinel connection does not
                # disconnect itself on a failed read; the pool's checkout would have caught it)
                conn.disconnect()
                raise
            finally:
                if conn.should_reconnect():  # a maintenance notification asked for it, as redis-py's own path does
                    conn.disconnect()
        finally:
            self._lock.release()


def _send_read(conn: Any, args: tuple[Any, ...]) -> Any:
    """Send command ``args`` and read its reply. With hiredis, packed by hiredis at once: redis-py's
    packer first copies the arguments into a new tuple (turning a ``bytearray`` or ``memoryview`` into
    ``bytes``) and splits the command name at spaces, ~2 µs for a put's 15 arguments; the bytes on the
    wire are the same for a one-word command name."""
    if conn._sock is None:
        # as the pool's checkout does: connect() (a Sentinel connection asks the sentinels for the master
        # again), not send's own reconnect to the address the connection had
        conn.connect()
    packer = conn._command_packer
    if _hiredis_pack is not None and type(packer) is HiredisRespSerializer:
        conn.send_packed_command(pack_round([args], packer.pack, True))
    else:
        conn.send_command(*args)
    return conn.read_response()


def lane_of(client: Any) -> Lane | None:
    """The lane of ``client`` (made on first use), or None when it has none (see the module docstring)."""
    lane = client.__dict__.get(_LANE)
    if lane is None:
        eligible = (
            type(client) is redis.Redis and isinstance(client.connection_pool, redis.ConnectionPool) and client.connection is None
        )
        # setdefault: two threads making the first call at once end up with the same lane
        lane = client.__dict__.setdefault(_LANE, Lane(client.connection_pool) if eligible else False)
    return lane or None


def execute(client: Any, *args: Any) -> Any:
    """``client.execute_command(*args)`` for a command with no response callback (``EVALSHA``): over
    the client's lane when it has a free one, else the usual way."""
    lane = lane_of(client)
    if lane is not None and not _observed():
        done, reply = lane.try_execute(args)
        if done:
            return reply
    return client.execute_command(*args)


def _observed() -> bool:
    """Whether redis-py's observability (its OpenTelemetry metrics) is on."""
    if get_observability_instance is None:
        return False
    manager = get_observability_instance().get_provider_manager()
    return manager is not None and bool(manager.config.enabled_telemetry)


class _Rounds:
    """What :class:`PipeLane` and :class:`AioPipeLane` share, without I/O: which rounds are written and
    not read yet, and the rule that a dropped connection loses them all (a round's ticket is the
    connection's epoch when it was written: a drop bumps the epoch)."""

    __slots__ = ("_conn", "_epoch", "_pool", "_unread")

    def __init__(self, pool: Any) -> None:
        self._pool = pool
        self._conn: Any = None
        #: bumped when the connection is dropped: tickets of earlier rounds are then lost
        self._epoch = 0
        #: rounds written and not read yet
        self._unread = 0

    def _wrote(self) -> int:
        """A round was written whole: its ticket."""
        self._unread += 1
        return self._epoch

    def _reading(self, ticket: int) -> Any:
        """The connection to read the round of ``ticket`` from; ``ConnectionError`` when it was lost."""
        conn = self._conn
        if ticket != self._epoch or conn is None:
            raise redis.ConnectionError("connection lost before the replies of a pipeline were read")
        return conn

    def _lost(self) -> Any:
        """The connection was (or is about to be) dropped: every unread round is lost. Returns it."""
        self._epoch += 1
        self._unread = 0
        return self._conn


def pack_round(commands: list[tuple[Any, ...]], pack: Callable[..., list[bytes]], hiredis: bool) -> list[bytes]:
    """``commands`` (tuples of command arguments) in the protocol's form: packed by hiredis one
    command at a time when ``hiredis`` (the connection's own packer ``pack`` for a bytearray or
    memoryview argument, which it converts), else all by ``pack``."""
    packed: list[bytes] = []
    if hiredis and _hiredis_pack is not None:
        for args in commands:
            try:
                packed.append(_hiredis_pack(args))
            except TypeError:  # a bytearray or memoryview argument: redis-py's packer converts it
                packed.extend(pack(*args))
    else:
        for args in commands:
            packed.extend(pack(*args))
    return packed


class PipeLane(_Rounds):
    """A connection of a client's pool kept by ONE thread for pipelines whose replies it reads later:
    :meth:`send` writes a round of commands and returns a ticket, :meth:`read` reads that round's
    replies, so the next round can be written before the last one's replies are read (Redis answers in
    order; rounds are read in the order they were sent). Commands are packed by hiredis at once (see
    :func:`_send_read`).

    A connection error while writing or reading drops the connection: the round it happened in raises
    it, and every round sent before and not yet read raises ``ConnectionError`` from :meth:`read` (its
    commands may or may not have run). An error reply is that command's slot (a ``ResponseError``).
    No retry here: the caller decides. Not thread-safe.

    Args:
        pool: the client's connection pool (one connection is taken and kept until :meth:`close`).
    """

    __slots__ = ("_generation",)

    def __init__(self, pool: redis.ConnectionPool) -> None:
        super().__init__(pool)
        self._generation = _generation

    def send(self, commands: list[tuple[Any, ...]]) -> int:
        """Write ``commands`` (each a tuple of command arguments); returns the ticket for :meth:`read`.
        Raises redis-py's connection errors (the connection is dropped)."""
        conn = self._conn
        if conn is None or self._generation != _generation:
            conn = self._conn = self._pool.get_connection()
            self._generation, self._unread = _generation, 0
        try:
            if conn._sock is None:
                conn.connect()  # as the pool's checkout does (Sentinel: asks for the master again)
            packer = conn._command_packer
            packed = pack_round(commands, packer.pack, type(packer) is HiredisRespSerializer)
            # no health check (a PING) while replies are unread: it would read one of them
            conn.send_packed_command(packed, check_health=self._unread == 0)
        except BaseException:
            self._drop()
            raise
        return self._wrote()

    def read(self, ticket: int, count: int) -> list[Any]:
        """The ``count`` replies of the round :meth:`send` gave ``ticket`` for (error replies as
        exceptions in their slots). Raises redis-py's connection errors (the connection is dropped)."""
        conn = self._reading(ticket)
        replies: list[Any] = []
        try:
            for _ in range(count):
                try:
                    replies.append(conn.read_response())
                except ResponseError as e:
                    replies.append(e)
        except BaseException:
            self._drop()
            raise
        self._unread -= 1
        if self._unread == 0 and conn.should_reconnect():  # a maintenance notification asked for it
            self._drop()
        return replies

    def close(self) -> None:
        """Give the connection back to the pool (dropped first when replies are unread)."""
        unread = self._unread
        conn = self._lost()
        self._conn = None
        if conn is not None:
            if unread:
                conn.disconnect()
            self._pool.release(conn)

    def _drop(self) -> None:
        conn = self._lost()
        if conn is not None:
            conn.disconnect()


class AioPipeLane(_Rounds):
    """:class:`PipeLane` for ``redis.asyncio``: a connection of the client's pool kept by ONE task
    (the asyncio producer's sender), rounds written ahead of reading the last one's replies, with the
    same rules (a round's replies in its slots, error replies as exceptions; a connection error drops
    the connection and loses every unread round; no health-check ``PING`` while replies are unread; a
    dropped connection reconnects with ``connect()``, through Sentinel asking for the master again).

    Cancelling :meth:`send` or :meth:`read` (the task that owns the lane is cancelled) drops the
    connection: a round is never left half written or half read on a connection that is used again.

    Replies are read straight from hiredis's reader, many a socket read, under one timeout of the
    connection's ``socket_timeout`` (seconds) renewed whenever data arrives — not a coroutine and a
    timer a reply as ``read_response`` goes (without hiredis, or with RESP3: ``read_response``).

    Args:
        pool: the asyncio client's connection pool (one connection is taken and kept until :meth:`close`).
    """

    __slots__ = ()

    async def send(self, commands: list[tuple[Any, ...]]) -> int:
        """Write ``commands``; returns the ticket for :meth:`read`. Raises redis-py's connection errors
        (the connection is dropped)."""
        conn = self._conn
        if conn is None:
            conn = self._conn = await self._pool.get_connection()
            self._unread = 0
        try:
            if not conn.is_connected:
                await conn.connect()  # as the pool's checkout does (Sentinel: asks for the master again)
            packed = pack_round(commands, conn.pack_command, conn.encoder.encoding.lower() in _UTF8)
            await conn.send_packed_command(packed, check_health=self._unread == 0)
        except BaseException:
            await self._drop()
            raise
        return self._wrote()

    async def read(self, ticket: int, count: int) -> list[Any]:
        """The ``count`` replies of the round :meth:`send` gave ``ticket`` for (error replies as
        exceptions in their slots). Raises redis-py's connection errors (the connection is dropped)."""
        conn = self._reading(ticket)
        try:
            replies = await _read_replies(conn, count)
        except BaseException:
            await self._drop()
            raise
        self._unread -= 1
        if self._unread == 0 and conn.should_reconnect():
            await self._drop()
        return replies

    async def close(self) -> None:
        """Give the connection back to the pool (dropped first when replies are unread)."""
        unread = self._unread
        conn = self._lost()
        self._conn = None
        if conn is not None:
            if unread:
                await conn.disconnect(nowait=True)
            await self._pool.release(conn)

    async def _drop(self) -> None:
        conn = self._lost()
        if conn is not None:
            await conn.disconnect(nowait=True)


#: Encodings hiredis's packer writes ``str`` arguments in.
_UTF8 = ("utf-8", "utf8")


async def _read_replies(conn: Any, count: int) -> list[Any]:
    """``count`` replies from asyncio connection ``conn``, error replies in their slots."""
    replies: list[Any] = []
    parser: Any = conn._parser
    if type(parser) is not _AsyncHiredisParser or conn.protocol not in (2, "2", None) or not conn.is_connected:
        for _ in range(count):
            try:
                replies.append(await conn.read_response())
            except ResponseError as e:
                replies.append(e)
        return replies
    reader: Any = parser._reader
    gets = reader.gets
    read_more: Any = parser.read_from_socket
    timeout = conn.socket_timeout
    loop = asyncio.get_running_loop()
    try:
        async with asyncio.timeout(timeout) as deadline:
            while len(replies) < count:
                reply = gets()
                if reply is _NOT_ENOUGH_DATA:
                    await read_more()
                    if timeout:
                        deadline.reschedule(loop.time() + timeout)
                elif isinstance(reply, redis.ConnectionError):
                    raise reply
                else:
                    replies.append(reply)  # an error reply is a ResponseError here, not raised
    except TimeoutError:  # asyncio.timeout's (an OSError: caught first)
        raise redis.TimeoutError("Timeout reading from socket") from None
    except OSError as e:
        raise redis.ConnectionError(f"Error while reading from socket: {e.args}") from e
    if conn.health_check_interval:
        conn.next_health_check = loop.time() + conn.health_check_interval
    return replies


def pipe_lane_of(client: Any) -> PipeLane | AioPipeLane | None:
    """A new :class:`PipeLane` of sync ``client`` (an :class:`AioPipeLane` of a ``redis.asyncio`` one),
    or None when it can have none: the clients without a :class:`Lane` (cluster, embedded store,
    single-connection client; asyncio: the same), or redis-py's observability on."""
    if _observed():
        return None
    if type(client) is redis.asyncio.Redis:
        eligible = isinstance(client.connection_pool, redis.asyncio.ConnectionPool) and client.connection is None
        return AioPipeLane(client.connection_pool) if eligible else None
    if lane_of(client) is None:
        return None
    return PipeLane(client.connection_pool)
