"""Commands whose replies are wanted as the bytes the server sent, not parsed (see :mod:`mq.store.columnar`).

:func:`read_replies` writes the commands and an ``ECHO`` of a fresh random token over a connection of
the client's pool, then reads the socket until the bytes end with that ``ECHO``'s reply: the server
answers in order, so everything before it is the commands' replies. A value that happens to end a
read with those exact bytes would need the 16 random hex digits of this call. The connection goes
back to the pool with nothing unread; on any failure it is dropped first.

Only a standalone or Sentinel ``redis.Redis`` over a connection pool, or a cluster client (the
pool of the node that holds the key), has such a connection; for the embedded store (fakeredis) and
a single-connection client :func:`read_replies` returns None and the caller reads the usual way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import redis

#: Bytes asked of the socket at a time.
_RECV_BYTES = 1 << 20


def _pool_of(client: Any, key: str | bytes) -> Any:
    """The connection pool to read ``key`` over, or None when ``client`` has none to lend."""
    if type(client).__module__.startswith("fakeredis"):
        return None
    if isinstance(client, redis.RedisCluster):
        cluster: Any = client
        node = cluster.get_node_from_key(key)
        client = node.redis_connection if node is not None else None
        if client is None:
            return None
    if not isinstance(client, redis.Redis) or getattr(client, "connection", None) is not None:
        return None
    return client.connection_pool


def read_replies(client: Any, key: str | bytes, commands: Sequence[tuple[Any, ...]]) -> bytes | None:
    """The replies of ``commands`` (all on ``key``'s node) as the server sent them, followed by the
    reply of an ``ECHO`` (one more bulk string); None when ``client`` lends no connection.

    Raises:
        redis.RedisError, OSError: the connection failed (it is dropped).
    """
    pool = _pool_of(client, key)
    if pool is None:
        return None
    token = os.urandom(8).hex().encode()
    end = b"$%d\r\n%s\r\n" % (len(token), token)
    conn = pool.get_connection()
    try:
        conn.send_packed_command(conn.pack_commands([*commands, ("ECHO", token)]))
        sock = conn._sock
        chunks: list[bytes] = []
        tail = b""
        while True:
            chunk = sock.recv(_RECV_BYTES)
            if not chunk:
                raise redis.ConnectionError("connection closed while reading a reply")
            chunks.append(chunk)
            tail = chunk[-len(end) :] if len(chunk) >= len(end) else (tail + chunk)[-len(end) :]
            if tail == end:
                return b"".join(chunks)
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)
