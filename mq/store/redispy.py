"""Every private part of redis-py the project relies on, in one module (D112).

redis-py's public API has no way to keep a connection out of the pool and talk over it, to read many
replies from hiredis's reader at once, or to find a pool's connections: the kept connections of
:mod:`mq.store.lease` and the Sentinel view (:mod:`mq.store.sentinel`) need all three. What they need sits
here, each behind a function named for what it does, and ``tests/store/test_redispy.py`` holds one
test per behaviour relied on: a redis-py upgrade that changes one fails there, and is fixed here.
Nothing else in ``mq`` reaches into redis-py (``tests/test_store_boundary.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
import threading
import weakref
from collections.abc import Callable
from typing import Any

import redis
import redis.asyncio
from redis._parsers.commands import AsyncCommandsParser, CommandsParser
from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH_DATA
from redis._parsers.hiredis import _AsyncHiredisParser
from redis.connection import HiredisRespSerializer
from redis.event import AfterSingleConnectionInstantiationEvent, ClientType
from redis.exceptions import ResponseError
from redis.utils import HIREDIS_AVAILABLE

#: hiredis's packer of one command (None without hiredis: redis-py packs in Python then).
hiredis_pack: Callable[[tuple[Any, ...]], bytes] | None
try:
    from hiredis import pack_command as hiredis_pack
except ImportError:
    hiredis_pack = None

#: redis-py's observability singleton getter (None in a redis-py without it).
get_observability_instance: Callable[[], Any] | None
try:
    from redis.observability.providers import get_observability_instance
except ImportError:
    get_observability_instance = None

#: Encodings hiredis's packer writes ``str`` arguments in.
_UTF8 = ("utf-8", "utf8")


def observed() -> bool:
    """Whether redis-py's observability (its OpenTelemetry metrics) is on: then every command must go
    redis-py's own way, so that its metrics count it."""
    if get_observability_instance is None:
        return False
    manager = get_observability_instance().get_provider_manager()
    return manager is not None and bool(manager.config.enabled_telemetry)


# -- sync connections ----------------------------------------------------------------------------


def is_connected(conn: Any) -> bool:
    """Whether sync connection ``conn`` has its socket (redis-py reconnects a closed one only in
    ``send_command``, to the address it had: a kept connection must ``connect()`` first instead)."""
    return conn._sock is not None


def pack(conn: Any, commands: list[tuple[Any, ...]]) -> list[bytes]:
    """``commands`` packed for sync connection ``conn``: by hiredis when its packer is hiredis's."""
    packer = conn._command_packer
    return pack_round(commands, packer.pack, type(packer) is HiredisRespSerializer)


def send_read(conn: Any, args: tuple[Any, ...]) -> Any:
    """Send command ``args`` over sync connection ``conn`` and read its reply. With hiredis, packed by
    hiredis at once: redis-py's packer first copies the arguments into a new tuple (turning a
    ``bytearray`` or ``memoryview`` into ``bytes``) and splits the command name at spaces; the bytes
    on the wire are the same for a one-word command name."""
    if conn._sock is None:
        # as the pool's checkout does: connect() (a Sentinel connection asks for the master again)
        conn.connect()
    packer = conn._command_packer
    name = args[0]
    if hiredis_pack is not None and type(packer) is HiredisRespSerializer and (type(name) is not str or " " not in name):
        try:
            packed = [hiredis_pack(args)]
        except TypeError:  # a bytearray or memoryview argument: redis-py's packer converts it
            packed = packer.pack(*args)
        conn.send_packed_command(packed)
    else:
        conn.send_command(*args)
    return conn.read_response()


def pack_round(commands: list[tuple[Any, ...]], pack: Callable[..., list[bytes]], hiredis: bool) -> list[bytes]:
    """``commands`` (tuples of command arguments) in the protocol's form: packed by hiredis one
    command at a time when ``hiredis`` (the connection's own packer ``pack`` for a bytearray or
    memoryview argument, which it converts, and for a command name of two words, which it splits),
    else all by ``pack``."""
    packed: list[bytes] = []
    if hiredis and hiredis_pack is not None:
        seen: Any = None  # the last command name found one word: a round repeats the same name object
        for args in commands:
            name = args[0]
            if name is not seen:
                if type(name) is str and " " in name:  # "SCRIPT LOAD": redis-py's packer splits it, hiredis would not
                    packed.extend(pack(*args))
                    continue
                seen = name
            try:
                packed.append(hiredis_pack(args))
            except TypeError:  # a bytearray or memoryview argument: redis-py's packer converts it
                packed.extend(pack(*args))
    else:
        for args in commands:
            packed.extend(pack(*args))
    return packed


def on_connect(conn: Any, callback: Callable[[Any], None]) -> None:
    """Call ``callback(conn)`` each time ``conn`` (re)connects, also when redis-py's retry reconnects
    it silently. redis-py keeps the callback as a weak reference."""
    conn.register_connect_callback(callback)


def client_on(pool: redis.ConnectionPool, conn: Any) -> redis.Redis:
    """A sync client that runs every command on ``conn``, a connection already taken from ``pool``:
    redis-py's single-connection client (its lock, its retry and reconnect), with the connection
    given rather than checked out by its constructor. Give it back with :func:`detach`."""
    client = redis.Redis(connection_pool=pool)
    client.connection = conn
    client._single_connection_client = True
    # as its constructor does: a streaming credential provider re-authenticates this one connection
    client._event_dispatcher.dispatch(
        AfterSingleConnectionInstantiationEvent(conn, ClientType.SYNC, client.single_connection_lock)
    )
    return client


def detach(client: redis.Redis) -> Any:
    """The connection of a :func:`client_on` client, no longer the client's (None when it had none)."""
    conn, client.connection = client.connection, None
    client._single_connection_client = False
    return conn


def pool_connections(pool: Any) -> tuple[list[Any], list[Any]]:
    """``(idle, in use)`` connections of ``pool`` (a snapshot; an asyncio pool's, in its event loop)."""
    if isinstance(pool, redis.asyncio.ConnectionPool):
        return list(pool._get_free_connections()), list(pool._get_in_use_connections())
    with pool._lock:
        return list(pool._get_free_connections()), list(pool._get_in_use_connections())


def shut_down(conn: Any) -> None:
    """Shut down the socket of sync connection ``conn`` in use by another thread: its blocked read
    fails at once and that thread reconnects (a ``disconnect()`` from here would race its read)."""
    sock = conn._sock
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


def abort(conn: Any) -> bool:
    """Abort the transport of asyncio connection ``conn`` (in its event loop): a pending read fails at
    once. False when it has no transport."""
    writer = getattr(conn, "_writer", None)
    if writer is None:
        return False
    writer.transport.abort()
    return True


# -- asyncio connections -------------------------------------------------------------------------


def pack_async(conn: Any, commands: list[tuple[Any, ...]]) -> list[bytes]:
    """``commands`` packed for asyncio connection ``conn``: by hiredis when it writes ``str`` as UTF-8."""
    return pack_round(commands, conn.pack_command, conn.encoder.encoding.lower() in _UTF8)


async def read_replies(conn: Any, count: int) -> list[Any]:
    """``count`` replies from asyncio connection ``conn``, error replies in their slots.

    Read straight from hiredis's reader, many a socket read, under one timeout of the connection's
    ``socket_timeout`` (seconds) renewed whenever data arrives — not a coroutine and a timer a reply as
    ``read_response`` goes (without hiredis, or with RESP3: ``read_response``)."""
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


class HiredisPackingConnection(redis.asyncio.Connection):
    """A ``redis.asyncio`` connection that packs commands with hiredis's C packer, as redis-py's sync
    connection does when hiredis is installed (redis.asyncio packs in Python: a quarter of the CPU of
    a pipelined send)."""

    _packer = HiredisRespSerializer()

    def pack_command(self, *args: Any) -> list[bytes]:
        """The Redis protocol form of one command (``args`` as redis-py takes them).

        A command named by one word whose arguments hiredis takes as they are (str, bytes, int, float,
        memoryview: what the stores send) goes to hiredis directly; others (``"SCRIPT LOAD"``, a
        bytearray, a bad value) through redis-py's packer, which splits, converts or names the fault.
        It skips the packer's look at every argument (a sixth of a pipelined send's client time)."""
        command = args[0]
        if hiredis_pack is not None and type(command) is str and " " not in command:
            try:
                return [hiredis_pack(args)]
            except TypeError:
                pass
        packed: list[bytes] = self._packer.pack(*args)
        return packed

    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        """Write packed commands, as redis-py does, with the write timeout (``socket_timeout``, seconds)
        kept by ``asyncio.timeout``: redis-py's ``asyncio.wait_for`` makes every write a task of its own
        on Python 3.11 (a task, a timer and a loop turn per command or pipeline, the write itself
        deferred behind whatever else is ready). Errors are redis-py's, and the connection is dropped
        after any failed or interrupted write, as there."""
        if check_health and self.is_connected:
            await self.check_health()  # type: ignore[no-untyped-call]
        writer = self._writer
        if not self.socket_timeout or writer is None or self._reader is None or isinstance(command, (str, bytes)):
            await super().send_packed_command(command, check_health=False)  # connects, and sends as redis-py does
            return
        try:
            async with asyncio.timeout(self.socket_timeout):
                writer.writelines(command)
                await writer.drain()
        except TimeoutError:  # asyncio.timeout's (an OSError: caught first)
            await self.disconnect(nowait=True)
            raise redis.exceptions.TimeoutError("Timeout writing to socket") from None
        except OSError as e:
            await self.disconnect(nowait=True)
            err_no, errmsg = ("UNKNOWN", e.args[0]) if len(e.args) == 1 else (e.args[0], e.args[1])
            raise redis.exceptions.ConnectionError(f"Error {err_no} while writing to socket. {errmsg}.") from e
        except BaseException:  # cancelled mid-write: the connection cannot be trusted
            await self.disconnect(nowait=True)
            raise


def use_hiredis_packing(pool: redis.asyncio.ConnectionPool) -> None:
    """Make ``pool`` open :class:`HiredisPackingConnection` connections, when hiredis is installed and
    the pool would open plain ones."""
    if HIREDIS_AVAILABLE and pool.connection_class is redis.asyncio.Connection:
        pool.connection_class = HiredisPackingConnection


# -- cluster routing -----------------------------------------------------------------------------

#: Commands whose key count is their third argument (``EVALSHA sha numkeys key…``): redis-py's cluster
#: client parses these itself only for a single command, not in a sync pipeline (redis-py 8.1).
_NUMKEYS_COMMANDS = frozenset({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})
#: Commands whose keys follow their ``STREAMS`` option.
_STREAMS_COMMANDS = frozenset({"XREAD", "XREADGROUP"})
#: Options of XREAD / XREADGROUP before ``STREAMS``, with how many arguments each takes.
_STREAMS_OPTIONS = {"COUNT": 1, "BLOCK": 1, "GROUP": 2, "NOACK": 0}


def _word(arg: Any) -> str:
    return (arg.decode("utf-8", "replace") if isinstance(arg, bytes) else str(arg)).upper()


def known_keys(args: tuple[Any, ...]) -> list[Any] | None:
    """The keys of command ``args`` when it is one whose key positions a Redis node would otherwise be
    asked for (``COMMAND GETKEYS``: the commands flagged ``movablekeys``); None for any other command.

    The positions are read the way the server reads them: after ``numkeys`` for scripts and functions,
    and the first half of what follows ``STREAMS`` for XREAD / XREADGROUP (options skipped as the
    server skips them, so a group or consumer named "streams" is not taken for the option)."""
    name = _word(args[0]) if args else ""
    if name in _NUMKEYS_COMMANDS and len(args) >= 3:
        count = int(args[2])
        return list(args[3 : 3 + count])
    if name in _STREAMS_COMMANDS:
        i = 1
        while i < len(args):
            word = _word(args[i])
            if word == "STREAMS":
                rest = args[i + 1 :]
                return list(rest[: len(rest) // 2])
            if word not in _STREAMS_OPTIONS:
                break
            i += 1 + _STREAMS_OPTIONS[word]
    return None


class _KnownKeysParser(CommandsParser):
    """redis-py's sync commands parser, which finds the keys of :func:`known_keys`'s commands itself."""

    def get_keys(self, redis_conn: Any, *args: Any) -> Any:
        keys = known_keys(args)
        return keys if keys is not None else super().get_keys(redis_conn, *args)  # type: ignore[no-untyped-call]


class _AsyncKnownKeysParser(AsyncCommandsParser):
    """:class:`_KnownKeysParser` for the asyncio cluster client."""

    async def get_keys(self, *args: Any) -> Any:
        keys = known_keys(args)
        return keys if keys is not None else await super().get_keys(*args)


def route_by_known_keys(client: redis.RedisCluster | redis.asyncio.RedisCluster) -> None:
    """Make cluster ``client`` find the slot of every command the store sends from its own arguments.

    redis-py asks a node ``COMMAND GETKEYS`` for the keys of each ``movablekeys`` command — XREAD and
    XREADGROUP (twice each: once for the request policy, once for the node), and EVALSHA queued on a
    sync pipeline: a round trip per call, all on the client's default node, so that node fields a lookup
    for every read of the whole cluster (issue 33, D132). The client's parser (shared by its
    pipelines) is given the positions instead; it keeps the command table it read, and asks the
    server for anything else as before."""
    parser = client.commands_parser
    if type(parser) is CommandsParser:
        parser.__class__ = _KnownKeysParser
    elif type(parser) is AsyncCommandsParser:
        parser.__class__ = _AsyncKnownKeysParser


# -- cluster: straight to the node of a known slot (D141) --------------------------------------------


def is_sync_cluster(client: Any) -> bool:
    """Whether ``client`` is redis-py's sync cluster client (not a subclass: one whose routing the store knows)."""
    return type(client) is redis.RedisCluster


def node_client(client: redis.RedisCluster, key: Any) -> redis.Redis | None:
    """The plain client redis-py's sync cluster ``client`` keeps for the primary serving ``key``'s slot in
    its slot map, or None while the map names no node for that slot.

    redis-py keeps one ``redis.Redis`` a node, over a ``ConnectionPool`` whose connections never retry
    by themselves (the cluster client retries, after reading the slot map again); the map lists a
    slot's primary first. One hash of the key and two dictionary look-ups: none of the cluster
    client's command path (its request policy, the key hashed twice, a pool checkout a command)."""
    nodes = client.nodes_manager.slots_cache.get(client.keyslot(key))  # type: ignore[no-untyped-call]
    if not nodes:
        return None
    node = nodes[0]
    return node.redis_connection or client.get_redis_connection(node)


#: Options of a queued command that change how its reply is read (redis-py's ``NEVER_DECODE`` and
#: ``EMPTY_RESPONSE``): such a command is left to redis-py's own pipeline.
_READ_OPTIONS = frozenset({"NEVER_DECODE", "EMPTY_RESPONSE"})
#: A queued command as :func:`recorded` gives it: ``(args, options, key, parse)``.
Queued = tuple[tuple[Any, ...], dict[str, Any], Any, Any]


def recorded(client: redis.Redis, build: Callable[[Any], object]) -> list[Queued] | None:
    """The commands ``build(pipeline)`` queues on a plain (non-transactional) pipeline of ``client``,
    each as ``(args, options, key, parse)``: its arguments, its options as redis-py keeps them, its
    first key (redis-py records a command's keys in its options), and ``parse(reply)`` applying the
    pipeline's response callback (None without one: ``without_dicts`` may have removed it). None when a
    command names no key or is read in a way of its own (the caller pipelines the usual way)."""
    pipe = client.pipeline(transaction=False)
    build(pipe)
    callbacks = pipe.response_callbacks
    out = []
    for args, options in pipe.command_stack:
        keys = options.get("keys")
        if not keys or not _READ_OPTIONS.isdisjoint(options):
            return None
        callback = callbacks.get(args[0])  # type: ignore[no-untyped-call]
        extra = {k: v for k, v in options.items() if k != "keys"}
        parse = None if callback is None else functools.partial(callback, **extra)
        out.append((args, options, keys[0], parse))
    return out


# -- cluster: a signal that a node connection was (re)made or the slot map changed (D145) -------------

#: Attribute of a sync cluster client holding its :class:`_ClusterChanges` (made on first use).
_CHANGES = "_mq_changes"
_CHANGES_LOCK = threading.Lock()


class _ClusterChanges:
    """The callbacks of one sync cluster client (weak references to bound methods, as redis-py keeps a
    connection's connect callbacks), called when any connection of any of its nodes (re)connects or
    its slot map is read again or patched after a MOVED."""

    __slots__ = ("__weakref__", "_callbacks", "_lock")

    def __init__(self) -> None:
        self._callbacks: list[weakref.WeakMethod[Callable[[Any], None]]] = []
        self._lock = threading.Lock()

    def add(self, callback: Callable[[Any], None]) -> None:
        ref = weakref.WeakMethod(callback)
        with self._lock:
            self._callbacks = [r for r in self._callbacks if r() is not None and r != ref] + [ref]

    def fire(self, conn: Any = None) -> None:
        for ref in self._callbacks:  # replaced, never changed in place: a copy is not needed
            callback = ref()
            if callback is not None:
                callback(conn)

    def watch_pool(self, pool: Any) -> None:
        """Have every connection of node ``pool``, made now or later, call :meth:`fire` when it connects."""
        if pool.__dict__.get(_CHANGES) is self:
            return
        pool.__dict__[_CHANGES] = self
        make = pool.make_connection

        def make_connection() -> Any:  # looked up on the instance by the pool's checkout
            conn = make()
            conn.register_connect_callback(self.fire)
            return conn

        pool.make_connection = make_connection
        with pool._lock:
            for conn in [*pool._available_connections, *pool._in_use_connections]:
                conn.register_connect_callback(self.fire)


def on_cluster_change(client: redis.RedisCluster, callback: Callable[[Any], None]) -> None:
    """Call ``callback(connection or None)`` each time a connection to any node of sync cluster
    ``client`` (re)connects — redis-py reconnects a node's pooled connection at checkout and a kept one
    on its next use, silently — and each time its slot map is read again (``initialize``) or patched
    after a MOVED (``move_slot``): a slot served by a node the client was already connected to (a
    promoted replica) changes no connection. ``callback`` must be a bound method; it is kept as a weak
    reference. A sync cluster's counterpart of a held connection's connect callbacks (D70, D145)."""
    changes = client.__dict__.get(_CHANGES)
    if changes is None:
        with _CHANGES_LOCK:
            changes = client.__dict__.get(_CHANGES)
            if changes is None:
                changes = _ClusterChanges()
                _watch_cluster(client, changes)
                client.__dict__[_CHANGES] = changes
    changes.add(callback)


def _watch_cluster(client: redis.RedisCluster, changes: _ClusterChanges) -> None:
    manager = client.nodes_manager
    create = manager.create_redis_node

    def create_redis_node(*args: Any, **kwargs: Any) -> Any:
        node = create(*args, **kwargs)  # type: ignore[no-untyped-call]
        changes.watch_pool(node.connection_pool)
        return node

    def then_fire(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def changed(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            finally:
                changes.fire(None)

        return changed

    manager.create_redis_node = create_redis_node  # type: ignore[method-assign]
    manager.initialize = then_fire(manager.initialize)  # type: ignore[method-assign]
    manager.move_slot = then_fire(manager.move_slot)  # type: ignore[method-assign]
    for node in [*manager.nodes_cache.values(), *manager.startup_nodes.values()]:
        if node.redis_connection is not None:
            changes.watch_pool(node.redis_connection.connection_pool)
