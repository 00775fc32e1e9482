"""The suite's leak check: which store connections a test opened and left open.

``tests/conftest.py`` runs it around every test (D67): each :class:`mq.store.connection.Connection` made
while the test runs is remembered (weakly), and when the test is over (its own fixtures torn down)
garbage is collected and any of them still alive that holds an open socket fails the test, with
where it was made: a connection a library object kept open after it was closed or stopped, a
waiter thread still holding one, one a test keeps in a global. Nothing is closed on the library's
behalf before the check. Collecting garbage first makes an asyncio connection dropped unclosed warn
(``ResourceWarning``, an error under ``filterwarnings = error``) in the test that dropped it, not in
whichever later test the collector happened to run in. A sync connection dropped with its object
(``Admin(url, ns).create_topic(...)``) is closed by redis-py when it is collected: no socket outlives
the test, so that is not counted.
"""

from __future__ import annotations

import traceback
import weakref
from collections.abc import Iterator
from typing import Any, TypeVar

from mq.store.connection import Connection

T = TypeVar("T")

#: Connections a failed check found open: kept referenced for the rest of the session, so their
#: sockets (closed where they can be) are not collected unclosed inside a later, innocent test.
GRAVEYARD: list[Connection] = []


_OWNED: list[Any] = []


def owned(obj: T) -> T:
    """Mark a store, admin or connection the *test* made as closed by the test when it ends (before the
    leak check): ``store = owned(Store(Connection(url, ns)))`` in place of a ``try``/``finally``.
    Only what the test itself opens: connections the library makes inside its objects are never
    closed for it."""
    _OWNED.append(obj)
    return obj


def close_owned() -> None:
    """Close what the test marked with :func:`owned` (a ``Store``: its connection)."""
    while _OWNED:
        obj = _OWNED.pop()
        (obj.conn if hasattr(obj, "conn") and not hasattr(obj, "close") else obj).close()


def _connections_of_pool(pool: Any) -> Iterator[Any]:
    yield from getattr(pool, "_available_connections", ())
    yield from list(getattr(pool, "_in_use_connections", ()))
    yield from getattr(pool, "_connections", ())  # sync BlockingConnectionPool


def socket_holders(client: Any) -> Iterator[Any]:
    """Every redis-py connection object (sync or asyncio) ``client`` can reach: its pool's, its single
    connection, a cluster's nodes' (known and seed), a Sentinel client's sentinels', and the per-node
    clients ``mq.store.ops`` adds to an asyncio cluster client."""
    if client is None:
        return
    single = getattr(client, "connection", None)
    if single is not None:
        yield single
    pool = getattr(client, "connection_pool", None)
    if pool is not None:
        yield from _connections_of_pool(pool)
        for sentinel in getattr(getattr(pool, "sentinel_manager", None), "sentinels", ()):
            yield from socket_holders(sentinel)
    manager = getattr(client, "nodes_manager", None)
    if manager is not None:
        nodes = {id(n): n for n in [*manager.nodes_cache.values(), *manager.startup_nodes.values()]}
        for node in nodes.values():
            yield from getattr(node, "_connections", ())  # asyncio ClusterNode
            yield from socket_holders(getattr(node, "redis_connection", None))  # sync ClusterNode
    for node_client in getattr(client, "__dict__", {}).get("_mq_node_clients", {}).values():
        yield from socket_holders(node_client)


def open_sockets(conn: Connection) -> int:
    """How many sockets ``conn`` (its sync and asyncio clients) holds open (``memory://``: none, its
    fakeredis connections are in-process and shared by name for the whole session)."""
    if conn.kind == "memory":
        return 0
    holders = [*socket_holders(conn.client), *socket_holders(conn._async_client)]
    return len({id(h) for h in holders if h.is_connected})


class ConnectionWatch:
    """Remembers every :class:`Connection` made between :meth:`start` and :meth:`stop`, with the stack
    that made it, so :meth:`left_open` can say which still hold sockets."""

    def __init__(self) -> None:
        self.made: list[tuple[weakref.ref[Connection], str]] = []
        self._real_init: Any = None

    def start(self) -> None:
        real_init = self._real_init = Connection.__init__
        made = self.made

        def init(conn: Connection, *args: Any, **kwargs: Any) -> None:
            real_init(conn, *args, **kwargs)
            made.append((weakref.ref(conn), "".join(traceback.format_stack(limit=12)[:-1])))

        Connection.__init__ = init  # type: ignore[method-assign]  # not monkeypatch: its undo() runs before this check

    def stop(self) -> None:
        Connection.__init__ = self._real_init  # type: ignore[method-assign]

    def left_open(self) -> list[tuple[Connection, int, str]]:
        """``(connection, open sockets, where it was made)`` for each remembered one still open."""
        found = []
        for ref, made_at in self.made:
            conn = ref()
            count = open_sockets(conn) if conn is not None else 0
            if conn is not None and count:
                found.append((conn, count, made_at))
        return found

    def bury(self, conn: Connection) -> None:
        """Close what can be closed without an event loop, and keep ``conn`` referenced (:data:`GRAVEYARD`)."""
        conn.close()
        for holder in socket_holders(conn._async_client):
            writer = getattr(holder, "_writer", None)
            sock = writer.get_extra_info("socket") if writer is not None else None
            if sock is not None:
                sock.close()
        GRAVEYARD.append(conn)
