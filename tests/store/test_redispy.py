"""One test per private redis-py behaviour ``mq/store/redispy.py`` relies on (D112): a redis-py upgrade
that changes one of them fails here, and is fixed in that one module."""

from __future__ import annotations

import ast
import asyncio
import pathlib
import threading
from typing import Any

import pytest
import redis
import redis.asyncio

from mq.store import redispy
from mq.store.connection import Connection
from tests.helpers import blocked_readers
from tests.leaks import owned
from tests.procs import wait_for
from tests.servers import RedisServer


def _client_id(conn: Any) -> int:
    conn.send_command("CLIENT", "ID")
    return int(conn.read_response())


def test_a_sync_connection_says_whether_it_has_its_socket(redis_server: RedisServer) -> None:
    pool = redis.ConnectionPool.from_url(redis_server.url)
    try:
        conn = pool.make_connection()
        assert not redispy.is_connected(conn)
        conn.connect()
        assert redispy.is_connected(conn)
        conn.disconnect()
        assert not redispy.is_connected(conn)
    finally:
        pool.disconnect()


@pytest.mark.parametrize(
    "commands",
    [
        [("EVALSHA", "abc", 2, "{k}:a", "{k}:b", b"\x00\xff body", "名前", 12, -7, 3.5)],
        [("SET", bytearray(b"k"), memoryview(b"v")), ("SCRIPT LOAD", "return 1")],  # converted, split: redis-py's packer
    ],
)
def test_commands_are_packed_as_the_connection_itself_packs_them(redis_server: RedisServer, commands: Any) -> None:
    pool = redis.ConnectionPool.from_url(redis_server.url)
    try:
        conn = pool.make_connection()
        expected = b"".join(b"".join(conn.pack_command(*args)) for args in commands)
        assert b"".join(redispy.pack(conn, commands)) == expected
    finally:
        pool.disconnect()


def test_send_read_reconnects_a_dropped_connection_and_reads_its_reply(redis_server: RedisServer) -> None:
    pool = redis.ConnectionPool.from_url(redis_server.url)
    try:
        conn = pool.get_connection()
        assert redispy.send_read(conn, ("ECHO", "one")) == b"one"
        conn.disconnect()
        assert redispy.send_read(conn, ("ECHO", "two")) == b"two"  # connect() first, not send's own
        with pytest.raises(redis.ResponseError):
            redispy.send_read(conn, ("INCR", "no such command here", "extra"))
        assert redispy.send_read(conn, ("ECHO", bytearray(b"three"))) == b"three"  # redis-py's packer
        pool.release(conn)
    finally:
        pool.disconnect()


def test_a_connect_callback_runs_on_each_connect(redis_server: RedisServer) -> None:
    pool = redis.ConnectionPool.from_url(redis_server.url)
    seen: list[Any] = []

    class Watcher:  # redis-py keeps the callback weakly: a bound method of an object kept alive here
        def connected(self, conn: Any) -> None:
            seen.append(conn)

    watcher = Watcher()
    try:
        conn = pool.get_connection()
        redispy.on_connect(conn, watcher.connected)
        conn.disconnect()
        conn.connect()
        conn.disconnect()
        redispy.send_read(conn, ("PING",))
        assert seen == [conn, conn]
        pool.release(conn)
    finally:
        pool.disconnect()


def test_a_client_on_a_taken_connection_runs_every_command_on_it(redis_server: RedisServer) -> None:
    pool = redis.ConnectionPool.from_url(redis_server.url)
    try:
        conn = pool.get_connection()
        client = redispy.client_on(pool, conn)
        first = client.client_id()
        conn.disconnect()  # redis-py's single-connection path reconnects it (its retry)
        assert client.client_id() != first
        assert client.connection is conn and client.client_id() == client.client_id()
        assert redispy.detach(client) is conn and client.connection is None
        pool.release(conn)
        assert conn in pool._available_connections
    finally:
        pool.disconnect()


def test_a_pool_lists_its_idle_and_busy_connections(redis_server: RedisServer) -> None:
    pool = redis.ConnectionPool.from_url(redis_server.url)
    try:
        busy = pool.get_connection()
        idle = pool.get_connection()
        pool.release(idle)
        assert redispy.pool_connections(pool) == ([idle], [busy])
        pool.release(busy)
    finally:
        pool.disconnect()


def test_shutting_down_a_busy_connection_wakes_its_blocked_read(redis_server: RedisServer, namespace: str) -> None:
    pool = redis.ConnectionPool.from_url(redis_server.url)
    errors: list[BaseException] = []
    conn = pool.get_connection()

    def blocked() -> None:
        try:
            redispy.send_read(conn, ("BLPOP", f"{namespace}:never", 20))
        except redis.ConnectionError as e:
            errors.append(e)

    reader = threading.Thread(target=blocked)
    reader.start()
    try:
        wait_for(lambda: blocked_readers(redis_server.url, "blpop") == 1, 10, "the read blocked")
        redispy.shut_down(conn)
        reader.join(5)
        assert not reader.is_alive() and len(errors) == 1
    finally:
        conn.disconnect()
        pool.disconnect()


@pytest.mark.anyio
async def test_an_asyncio_pool_lists_its_connections_and_an_abort_wakes_a_read(redis_server: RedisServer, namespace: str) -> None:
    conn = owned(Connection(redis_server.url, namespace))
    pool = conn.async_client.connection_pool
    try:
        busy = await pool.get_connection()
        assert redispy.pool_connections(pool) == ([], [busy])
        await busy.send_packed_command(redispy.pack_async(busy, [("BLPOP", f"{namespace}:never", 20)]))
        reading = asyncio.ensure_future(redispy.read_replies(busy, 1))
        await asyncio.to_thread(wait_for, lambda: blocked_readers(redis_server.url, "blpop") == 1, 10, "the read blocked")
        assert redispy.abort(busy)
        with pytest.raises(redis.ConnectionError):
            await asyncio.wait_for(reading, 5)
        await busy.disconnect()
        await pool.release(busy)
    finally:
        await conn.aclose()


@pytest.mark.anyio
async def test_asyncio_replies_are_read_from_hiredis_across_socket_reads(redis_server: RedisServer, namespace: str) -> None:
    conn = owned(Connection(redis_server.url, namespace))
    pool = conn.async_client.connection_pool
    assert pool.connection_class is redispy.HiredisPackingConnection  # hiredis is installed
    try:
        kept = await pool.get_connection()
        await kept.connect()
        key = f"{namespace}:n"
        commands = [("INCR", key)] * 2000 + [("INCR", key, "bad")]
        await kept.send_packed_command(redispy.pack_async(kept, commands))
        replies = await redispy.read_replies(kept, len(commands))  # NOT_ENOUGH_DATA in between
        assert replies[:-1] == list(range(1, 2001)) and isinstance(replies[-1], redis.ResponseError)
        await pool.release(kept)
    finally:
        await conn.aclose()


def test_redis_py_observability_is_off_by_default() -> None:
    assert redispy.get_observability_instance is not None  # the getter is still where it was
    assert redispy.observed() is False


# -- nothing else reaches into redis-py ----------------------------------------------------------

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: Private attributes of redis-py objects the project has used (and now uses only in redispy.py).
PRIVATE = {
    "_sock",
    "_reader",
    "_writer",
    "_parser",
    "_command_packer",
    "_connect_callbacks",
    "_single_connection_client",
    "_get_free_connections",
    "_get_in_use_connections",
    "_available_connections",
    "_in_use_connections",
    "_created_connections",
    "_event_dispatcher",
}


def _reaches_into_redis_py(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("redis", "hiredis"):
            if "._" in f".{node.module}" or any(a.name.startswith("_") for a in node.names):
                found.append(f"{path}:{node.lineno} imports a private part of redis-py")
        elif isinstance(node, ast.Import) and any(a.name.startswith(("redis._", "hiredis")) for a in node.names):
            found.append(f"{path}:{node.lineno} imports a private part of redis-py (or hiredis)")
        elif isinstance(node, ast.Attribute) and node.attr in PRIVATE:
            found.append(f"{path}:{node.lineno} uses redis-py's private {node.attr}")
        elif isinstance(node, ast.Attribute) and node.attr == "register_connect_callback":
            found.append(f"{path}:{node.lineno} registers a connect callback")
    return found


def test_only_redispy_reaches_into_redis_py() -> None:
    offences = []
    for package in ("mq", "scheduler", "spark"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path != ROOT / "mq" / "store" / "redispy.py":
                offences += _reaches_into_redis_py(path)
    assert offences == [], "\n".join(offences)


def test_the_redis_py_check_finds_an_offence(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        "from redis._parsers.hiredis import NOT_ENOUGH_DATA\nimport hiredis\n\n"
        "def f(conn, pool):\n    conn._sock.close()\n    return pool._in_use_connections\n"
    )
    assert len(_reaches_into_redis_py(bad)) == 4


@pytest.mark.parametrize(
    "args",
    [
        ("EVALSHA", "0" * 40, 2, "{q}:a", "{q}:b", "arg"),
        ("EVAL", "return 1", 0, "arg"),
        ("FCALL", "fn", 1, "{q}:a", "arg"),
        ("XREAD", "COUNT", 5, "BLOCK", 100, "STREAMS", "{q}:a", "{q}:b", "0-0", "$"),
        ("XREADGROUP", "GROUP", "streams", "c1", "COUNT", 3, "NOACK", "STREAMS", "{q}:a", ">"),
    ],
)
def test_known_keys_are_the_keys_the_server_finds(redis_server: RedisServer, args: tuple[Any, ...]) -> None:
    """The positions the cluster client is given instead of asking a node (D132) are the server's own:
    ``COMMAND GETKEYS`` on a real server answers the same keys."""
    client = redis.Redis.from_url(redis_server.url)
    try:
        try:
            expected = [k.decode() if isinstance(k, bytes) else k for k in client.execute_command("COMMAND GETKEYS", *args)]
        except redis.ResponseError:  # a script with no keys: the server says it has none
            expected = []
    finally:
        client.close()
    assert redispy.known_keys(args) == expected
    assert redispy.known_keys(("GET", "k")) is None  # any other command: redis-py's own parser


# -- straight to the node of a known slot (D141) -------------------------------------------------


@pytest.mark.cluster
def test_the_node_client_of_a_key_is_the_primary_serving_its_slot(redis_cluster: Any) -> None:
    """redis-py's slot map lists a slot's primary first, and keeps one plain ``redis.Redis`` a node
    whose connections do not retry by themselves (the cluster client retries after reading the map)."""
    client = owned(Connection(redis_cluster.url, "nodes")).client
    assert redispy.is_sync_cluster(client) and not redispy.is_sync_cluster(redis.Redis())
    ports = set()
    for key in [f"{{q{i}}}:log" for i in range(12)]:
        node = redispy.node_client(client, key)
        assert type(node) is redis.Redis
        kwargs = node.connection_pool.connection_kwargs
        assert kwargs["port"] == client.get_node_from_key(key).port
        assert kwargs["retry"].get_retries() == 0
        assert node.execute_command("SET", key, "1") is True  # no MOVED: the node serves the slot
        assert redispy.node_client(client, key) is node  # one client a node
        ports.add(kwargs["port"])
    assert ports == set(redis_cluster.ports)


def test_recorded_commands_carry_their_key_and_the_pipelines_callback(redis_server: RedisServer) -> None:
    """A plain pipeline records each command's keys in its options, and its response callbacks (the ones
    left after ``without_dicts``) turn the raw reply into what the pipeline itself would return."""
    from mq.store.base import without_dicts

    client = redis.Redis.from_url(redis_server.url)
    try:
        client.delete("{r}:s", "{r}:z")
        client.xadd("{r}:s", {"f": "v"}, id="0-1")
        client.zadd("{r}:z", {"m": 2.0})

        def build(pipe: Any) -> None:
            pipe.zrange("{r}:z", 0, 0, withscores=True)
            pipe.xrange("{r}:s", "-", "+", count=5)

        def build_plain(pipe: Any) -> None:
            without_dicts(pipe)
            build(pipe)

        for builder in (build, build_plain):
            queued = redispy.recorded(client, builder)
            assert queued is not None and [q[2] for q in queued] == ["{r}:z", "{r}:s"]
            pipe = client.pipeline(transaction=False)
            builder(pipe)
            expected = pipe.execute()
            conn = client.connection_pool.get_connection()
            try:
                raw = [redispy.send_read(conn, args) for args, _, _, _ in queued]
            finally:
                client.connection_pool.release(conn)
            assert [
                raw_reply if parse is None else parse(raw_reply) for (_, _, _, parse), raw_reply in zip(queued, raw)
            ] == expected
        assert redispy.recorded(client, lambda p: p.ping()) is None  # no key: left to redis-py's pipeline
    finally:
        client.close()
