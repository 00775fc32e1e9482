"""The endpoint's one door to the store: every store call as a coroutine.

``await backend.call("put", topic, queue_id, encoded)`` awaits :class:`mq.store.aio.AsyncStore`'s
method of that name (the same operations as :class:`mq.store.Store`, on ``redis.asyncio``: no thread
per call). Multi-step work shared with the simple consumer — seeding a new group's cursors and
moving a message to the dead-letter queue (:func:`mq.consumer.simple_core.seed_cursors_op`,
:func:`~mq.consumer.simple_core.dead_letter_op`) — is an operation too, awaited on the same store
through :meth:`Backend.run`. No thread is started.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis.exceptions

from mq.errors import MQBrokerError
from mq.store.aio import AsyncStore
from mq.store.connection import Connection
from mq.store.ops import Op

log = logging.getLogger("mq.proxy")

#: What redis-py raises when the store does not answer (not when it answers with an error: OOM, NOPERM).
UNREACHABLE: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.ClusterDownError,
    redis.exceptions.RedisClusterException,
    OSError,
)


def is_outage(error: BaseException) -> bool:
    """Whether ``error`` (an :class:`MQBrokerError`) comes from a store that does not answer."""
    return isinstance(error, MQBrokerError) and isinstance(error.__cause__, UNREACHABLE)


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
        #: Whether the store answered the last call that reported (:meth:`report_down`, :meth:`report_up`).
        self.available = True

    def __repr__(self) -> str:
        return f"Backend({self.connection!r})"

    async def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``await`` the store's operation ``name`` with these arguments."""
        return await getattr(self.store, name)(*args, **kwargs)

    async def blocking(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """As :meth:`call`, on the connection for reads that block (``read_checks``)."""
        return await getattr(self._blocking_store, name)(*args, **kwargs)

    async def run(self, op: Callable[..., Op[Any]], *args: Any, **kwargs: Any) -> Any:
        """``await`` an operation that takes the store first (e.g.
        :func:`mq.consumer.simple_core.seed_cursors_op`), on the asyncio store."""
        return await self.store.run(op(self.store, *args, **kwargs))

    async def check(self) -> None:
        """Fail unless the store answers (at start: a clear message instead of serving errors).

        Raises:
            MQBrokerError: naming the store (its URL with the password masked) and what to do.
        """
        try:
            await self.store.broker_beats()  # one small keyed read (it also maps a cluster's slots)
        except MQBrokerError as e:
            raise MQBrokerError(f"the store does not answer: {e} Start Redis or fix --url") from None

    def report_down(self, doing: str, error: BaseException) -> None:
        """Log ``error`` once when the store stops answering (not at every failed call while it is down)."""
        if self.available:
            self.available = False
            log.error("the store stopped answering while %s: %s; requests fail until it is back", doing, error)

    def report_up(self) -> None:
        """Log once when the store answers again."""
        if not self.available:
            self.available = True
            log.warning("the store answers again")

    async def close(self) -> None:
        """Close the connections."""
        await self.connection.aclose()
        await self._blocking.aclose()
