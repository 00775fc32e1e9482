"""Delayed and timer messages: delay levels, due times, and the namespace's timer index.

A delayed message waits in its target queue's timer (see ``put-pending.lua``); the queue's
earliest due time is kept in the ``{ns}:timers`` index, which the broker service polls. The index
write happens after the queue write, in another slot; the broker service's sweep repairs a lost
index write, so a message can be late by a sweep interval in that case, never lost.
"""

from __future__ import annotations

import re
import time

from mq.errors import MQClientError
from mq.model.message import Message
from mq.store import Store
from mq.store.ops import Op
from mq.store.store import StoreOps

#: Delay of each level [RocketMQ ``messageDelayLevel``]; units ms (beyond RocketMQ), s, m, h, d.
DEFAULT_MESSAGE_DELAY_LEVEL = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"^(\d+)(ms|s|m|h|d)$")
#: Seconds the namespace's delay levels read from the store are used before being read again.
DELAY_LEVELS_TTL_S = 30.0


class DelayLevels:
    """The namespace's delay levels (ms each), as the broker service publishes them
    (``message_delay_level``, else :data:`DEFAULT_MESSAGE_DELAY_LEVEL`), read at most every
    :data:`DELAY_LEVELS_TTL_S` (producers and consumers' send-back share it)."""

    def __init__(self) -> None:
        self._levels: tuple[int, ...] = ()
        self._read_s = 0.0

    def op(self, store: StoreOps) -> Op[tuple[int, ...]]:
        """The operation giving the levels (one ``HGET`` when the cached ones are older than the TTL)."""
        if not self._levels or time.monotonic() - self._read_s > DELAY_LEVELS_TTL_S:
            raw = yield from StoreOps.namespace_setting.op(store, "message_delay_level")
            self._levels, self._read_s = parse_delay_levels(raw or DEFAULT_MESSAGE_DELAY_LEVEL), time.monotonic()
        return self._levels


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """The delay of each level in ms, from ``"1s 5s 10s … 2h"``.

    Raises:
        MQClientError: a level is not a whole number followed by ms, s, m, h or d.
    """
    levels = []
    for item in text.split():
        m = _LEVEL.match(item)
        if not m:
            raise MQClientError(f"bad delay level {item!r} in {text!r}: use a number and ms, s, m, h or d, e.g. '30s'")
        levels.append(int(m.group(1)) * _UNITS_MS[m.group(2)])
    if not levels:
        raise MQClientError("message_delay_level needs at least one level")
    return tuple(levels)


def due_time_ms(msg: Message, levels: tuple[int, ...], now_ms: int | None = None) -> int | None:
    """When ``msg`` is due (epoch ms), or None when it is not delayed.

    ``deliver_time_ms`` wins over ``delay_level``; a level above the highest is clamped to it.
    """
    if msg.deliver_time_ms is not None:
        return msg.deliver_time_ms
    if not msg.delay_level:
        return None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return now + levels[min(msg.delay_level, len(levels)) - 1]


def delay_levels(store: Store) -> tuple[int, ...]:
    """The namespace's delay levels (set by the broker service's config), else the defaults."""
    return parse_delay_levels(store.namespace_setting("message_delay_level") or DEFAULT_MESSAGE_DELAY_LEVEL)
