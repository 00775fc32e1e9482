"""The store's clock, as a client estimates it: due times of delayed, retried and transaction
messages are on the Redis server's clock (the clock the broker service delivers by), never on the
sender's, so a skewed client host makes nothing early or late."""

from __future__ import annotations

import threading
import time

from mq.store.base import StoreBase

#: Seconds an estimate of the offset between this host's clock and the server's is trusted.
CLOCK_REFRESH_S = 60.0


class ServerClock:
    """``now_ms()`` on the server's clock: this host's time plus an offset measured with ``TIME``
    (from the midpoint of the round trip: off by at most half of it, well under a millisecond on a LAN)."""

    def __init__(self, store: StoreBase) -> None:
        self._store = store
        self._offset_ms = 0.0
        self._measured_s = -CLOCK_REFRESH_S
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        """The server's time now, epoch ms (one ``TIME`` round trip every ``CLOCK_REFRESH_S``)."""
        with self._lock:
            if time.monotonic() - self._measured_s >= CLOCK_REFRESH_S:
                before = time.time()
                server_ms = self._store.server_time_ms()
                after = time.time()
                self._offset_ms = server_ms - (before + after) / 2 * 1000
                self._measured_s = time.monotonic()
            return int(time.time() * 1000 + self._offset_ms)
