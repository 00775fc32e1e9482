"""The endpoint's one door to the store: every store call as a coroutine.

``await backend.call("put", topic, queue_id, encoded)`` awaits :class:`mq.store.aio.AsyncStore`'s
method of that name (the same operations as :class:`mq.store.Store`, on ``redis.asyncio``: no thread
per call). Two rare, multi-step helpers written for the sync store — seeding a new group's cursors
and moving a message to the dead-letter queue (:func:`mq.consumer.simple.seed_cursors`,
:func:`~mq.consumer.simple.dead_letter`) — run through :meth:`Backend.run` on the sync store in a
small thread pool (see docs/decisions.md, "h-proxy").
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mq.connection import Connection
from mq.store import Store
from mq.store.aio import AsyncStore

#: Threads for the sync helpers of :meth:`Backend.run`.
HELPER_THREADS = 4
#: Socket timeout of the connection used for blocking reads, seconds (longer than any block).
BLOCKING_TIMEOUT_S = 10.0


class Backend:
    """Store calls as coroutines: one connection for quick calls, one for blocking reads.

    Args:
        url: the store URL (``redis://…``, ``memory://``).
        namespace: the key prefix of the deployment.
    """

    def __init__(self, url: str | None, namespace: str) -> None:
        self.connection = Connection(url, namespace)
        self._blocking = Connection(url, namespace, socket_timeout_s=BLOCKING_TIMEOUT_S)
        self.store = AsyncStore(self.connection)
        self._blocking_store = AsyncStore(self._blocking)
        self._sync_store = Store(self.connection)
        self._pool = ThreadPoolExecutor(max_workers=HELPER_THREADS, thread_name_prefix="mq-proxy-store")

    def __repr__(self) -> str:
        return f"Backend({self.connection!r})"

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``await`` the store's operation ``name`` with these arguments."""
        return await getattr(self.store, name)(*args, **kwargs)

    async def blocking(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`call`, on the connection for reads that block (``read_checks``)."""
        return await getattr(self._blocking_store, name)(*args, **kwargs)

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``await`` a sync helper that takes the store first (e.g. :func:`mq.consumer.simple.seed_cursors`)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, self._sync_store, *args, **kwargs))

    async def close(self) -> None:
        """Stop the threads and close the connections."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        await self.connection.aclose()
        await self._blocking.aclose()
