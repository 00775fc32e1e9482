"""The suite's leak check itself (tests/leaks.py, D67): it names a connection left open, sync or
asyncio, standalone or cluster, and stays quiet once the connection is closed."""

from __future__ import annotations

import asyncio

from mq.store.connection import Connection
from tests.leaks import ConnectionWatch, open_sockets


def _made_while_watched(url: str, namespace: str) -> tuple[ConnectionWatch, Connection]:
    watch = ConnectionWatch()
    watch.start()
    try:
        conn = Connection(url, namespace)
    finally:
        watch.stop()
    return watch, conn


def test_a_sync_connection_left_open_is_named_with_where_it_was_made(backend_url: str, namespace: str) -> None:
    watch, conn = _made_while_watched(backend_url, namespace)
    conn.client.ping()
    [(found, count, made_at)] = watch.left_open()
    assert found is conn and count >= 1 and "test_leaks.py" in made_at
    conn.close()
    assert watch.left_open() == [] and open_sockets(conn) == 0


def test_an_asyncio_client_left_open_is_named_and_aclose_clears_it(backend_url: str, namespace: str) -> None:
    watch, conn = _made_while_watched(backend_url, namespace)

    async def ping() -> None:
        await conn.async_client.ping()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(ping())
        assert [found for found, _, _ in watch.left_open()] == [conn]
        loop.run_until_complete(conn.aclose())
        assert watch.left_open() == []
    finally:
        loop.close()


def test_the_embedded_store_has_no_socket_to_leak(namespace: str) -> None:
    watch, conn = _made_while_watched(f"memory://{namespace}", namespace)
    conn.client.ping()
    assert watch.left_open() == []
