"""The store for asyncio programs: :class:`AsyncStore` has every operation of
:class:`~mq.store.Store`, with the same names and arguments, as coroutines on ``redis.asyncio``.

Both run the same operations (:mod:`mq.store.ops`): nothing here builds a request or reads a reply.
"""

from __future__ import annotations

from typing import Any

from mq.store.connection import Connection
from mq.store.ops import AsyncRunner
from mq.store.store import StoreOps


class AsyncStore(StoreOps, AsyncRunner):
    """Typed operations on the Redis data of one namespace, awaited (``await store.put(...)``).

    Args:
        connection: the URL and key names; its :attr:`~mq.store.connection.Connection.async_client` is used
            (close it with ``await connection.aclose()``).
        sync: as for :class:`~mq.store.Store`.
    """

    def _client_of(self, connection: Connection) -> Any:
        return connection.async_client
