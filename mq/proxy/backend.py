"""The endpoint's one door to the store: every store call as a coroutine.

``await backend.call("put", topic, queue_id, encoded)`` runs :class:`mq.store.Store`'s method of that
name in a thread of the endpoint's own pool, so the event loop never blocks on Redis. Method names
and arguments are the store's (``mq.store.Store``), so moving a call onto an asyncio store is
changing what :meth:`Backend.call` awaits, nothing else (see docs/decisions.md, "h-proxy").
"""

from __future__ import annotations

import asyncio
import functools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from mq.connection import Connection
from mq.store import Store

#: Threads running store calls (blocking reads of check-backs hold one each while they wait).
STORE_THREADS = 32
#: Socket timeout of the connection used for blocking reads, seconds (longer than any block).
BLOCKING_TIMEOUT_S = 10.0


class Backend:
    """Store calls as coroutines, over one connection for quick calls and one for blocking reads.

    Args:
        url: the store URL (``redis://…``, ``memory://``).
        namespace: the key prefix of the deployment.
    """

    def __init__(self, url: str | None, namespace: str) -> None:
        self.connection = Connection(url, namespace)
        self._blocking = Connection(url, namespace, socket_timeout_s=BLOCKING_TIMEOUT_S)
        self.store = Store(self.connection)
        self._blocking_store = Store(self._blocking)
        self._pool = ThreadPoolExecutor(max_workers=STORE_THREADS, thread_name_prefix="mq-proxy-store")

    def __repr__(self) -> str:
        return f"Backend({self.connection!r})"

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``await`` the store's method ``name`` with these arguments."""
        return await self._run(getattr(self.store, name), *args, **kwargs)

    async def blocking(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`call`, on the connection for reads that block (``read_checks``)."""
        return await self._run(getattr(self._blocking_store, name), *args, **kwargs)

    async def run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``await`` a function of the store's callers (e.g. :func:`mq.consumer.simple.seed_cursors`) that takes the store first."""
        return await self._run(fn, self.store, *args, **kwargs)

    async def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        """Stop the threads and close the connections."""
        self._pool.shutdown(wait=False, cancel_futures=True)
        self.connection.close()
        self._blocking.close()
