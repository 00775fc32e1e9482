"""``aio.Admin``: :class:`mq.Admin` for asyncio programs [RocketMQ ``mqadmin`` / ``DefaultMQAdminExt``].

Every method of the sync admin, with the same names, arguments and results, as a coroutine on
``redis.asyncio``. Both run the very same operations (:class:`mq.operator.admin.AdminCore`): nothing here reads
or decides anything. Not here yet: the web console's dashboard views that :class:`mq.Admin` mixes in
from :class:`mq.operator.admin_views.AdminViews` (``queue_states``, ``group_lags``, ``message_states`` …), which
are sync-only so far.
"""

from __future__ import annotations

from types import TracebackType

from mq.operator.admin import AdminCore
from mq.store.aio import AsyncStore
from mq.store.connection import Connection
from mq.store.ops import AsyncRunner


class Admin(AdminCore, AsyncRunner):
    """Administration of one namespace, awaited: ``await admin.create_topic("orders")``.

    Use ``async with aio.Admin(url) as admin:``, or ``await start()`` / ``await shutdown()``
    (``await close()`` is the same as ``shutdown``). No thread is started; the asyncio client is
    made on first use, on the running event loop, and must be used from that loop only.

    Args:
        url: store URL (see :mod:`mq.store.connection`); None uses ``$MQ_URL`` or ``memory://``.
        namespace: key prefix separating independent deployments on one Redis.
    """

    def __init__(self, url: str | None = None, namespace: str = "mq") -> None:
        conn = Connection(url, namespace)
        self._open(conn, AsyncStore(conn))

    async def __aenter__(self) -> Admin:
        await self.start()
        return self

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.shutdown()

    async def start(self) -> None:
        """Nothing to start (an admin holds no background work): here for the same life cycle as the
        producers and consumers; the first call connects."""

    async def shutdown(self, timeout_s: float = 3.0) -> None:
        """Close the connections (``timeout_s`` is accepted for the common life cycle; nothing waits)."""
        await self._conn.aclose()

    async def close(self) -> None:
        """Close the connections (as :meth:`shutdown`; the sync admin's ``close``)."""
        await self._conn.aclose()
