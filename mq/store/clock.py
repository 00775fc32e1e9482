"""The store's clock, as a client estimates it: due times of delayed, retried and transaction
messages are on the Redis server's clock (the clock the broker service delivers by), never on the
sender's, so a skewed client host makes nothing early or late."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from mq.store.base import StoreBase
from mq.store.ops import Op

if TYPE_CHECKING:
    from mq.store.aio import AsyncStore
    from mq.store.store import Store

#: Seconds an estimate of the offset between this host's clock and the server's is trusted.
CLOCK_REFRESH_S = 60.0


class ClockOffset:
    """The offset between this host's clock and the server's, from one ``TIME`` round trip (its
    midpoint: off by at most half of it, well under a millisecond on a LAN). No I/O: the sync and
    asyncio clocks feed it."""

    def __init__(self) -> None:
        self._offset_ms = 0.0
        self._measured_s = -CLOCK_REFRESH_S

    def stale(self) -> bool:
        """Whether the estimate is older than :data:`CLOCK_REFRESH_S` (measure again)."""
        return time.monotonic() - self._measured_s >= CLOCK_REFRESH_S

    def measured(self, before_s: float, server_ms: int, after_s: float) -> None:
        """Take a measurement: host time (epoch s) before and after a ``TIME`` that read ``server_ms``."""
        self._offset_ms = server_ms - (before_s + after_s) / 2 * 1000
        self._measured_s = time.monotonic()

    def now_ms(self) -> int:
        """The server's time now by the estimate, epoch ms."""
        return int(time.time() * 1000 + self._offset_ms)

    def now_op(self, store: StoreBase) -> Op[int]:
        """The operation giving the server's time now, epoch ms: measured again (``TIME``) when stale."""
        if self.stale():
            before = time.time()
            server_ms = yield from StoreBase.server_time_ms.op(store)
            self.measured(before, server_ms, time.time())
        return self.now_ms()


class ServerClock:
    """``now_ms()`` on the server's clock (one ``TIME`` round trip every :data:`CLOCK_REFRESH_S`)."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self._offset = ClockOffset()
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """The server's time now, epoch ms."""
        with self._lock:
            return self._store._run(self._offset.now_op(self._store))


class AsyncServerClock:
    """:class:`ServerClock` for an :class:`~mq.store.aio.AsyncStore`: ``await now_ms()``."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store
        self._offset = ClockOffset()

    async def now_ms(self) -> int:
        """The server's time now, epoch ms."""
        return await self._store._run(self._offset.now_op(self._store))
