"""The broker service's periodic store check (issue 29): each master's ``maxmemory-policy`` and memory
use, read every ``store_check_interval_s``, and what to log about them — once per change of a master's
state, never at every run. Decisions only (no I/O): the service reads, :class:`StoreWatch` decides.

Why periodically and not only at start: a policy changed on a running Redis (``CONFIG SET``, a managed
service's parameter group, a failover to a replica configured differently) lets Redis evict
rocketredis's small bookkeeping keys — topic configs, queue metas, group offsets — and the stored
messages become unreachable without any error until producers and consumers trip over it.

The rule is ``mq doctor``'s (the start-time check's): any policy but ``noeviction`` is misconfigured
(``volatile-*`` too: rocketredis sets no TTL on what it must keep, but a policy that evicts at all is
one ``EXPIRE`` or one changed setting away from losing data, and the broker says so from the start).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

#: Share of ``maxmemory`` above which the store is reported as nearly full (noeviction: writes are
#: refused at maxmemory; another policy: Redis evicts there).
MEMORY_WARN_RATIO = 0.9
#: The policy that never evicts: the only one rocketredis accepts.
NOEVICTION = "noeviction"


@dataclass(frozen=True)
class NodeReading:
    """What one check read from one master.

    Attributes:
        node: the master's address (``host:port``).
        policy: its ``maxmemory-policy``; None when this user may not read it (``CONFIG`` refused).
        used_bytes: ``used_memory``, bytes; None when unknown.
        maxmemory_bytes: ``maxmemory``, bytes (0: no limit); None when unknown.
        evicted_keys: keys Redis evicted since it started (``INFO stats``); None when unknown.
    """

    node: str
    policy: str | None
    used_bytes: int | None
    maxmemory_bytes: int | None
    evicted_keys: int | None

    @property
    def misconfigured(self) -> bool:
        """Whether the policy lets Redis evict keys (unknown counts as not: ``mq doctor`` warns of it)."""
        return self.policy is not None and self.policy != NOEVICTION

    @property
    def used_ratio(self) -> float | None:
        """``used_bytes / maxmemory_bytes``; None without a limit or when unknown."""
        if not self.used_bytes or not self.maxmemory_bytes:
            return None
        return self.used_bytes / self.maxmemory_bytes


class StoreWatch:
    """The last reading of every master and the states already logged; :meth:`observe` returns the log
    records a new check calls for. Used from one job thread; :attr:`readings` is replaced whole, so a
    metrics scrape on another thread reads one check's readings."""

    def __init__(self) -> None:
        #: the last check's readings, by node (the metrics show them)
        self.readings: dict[str, NodeReading] = {}
        self._misconfigured: dict[str, bool] = {}
        self._full: dict[str, bool] = {}
        self._evicting: dict[str, bool] = {}
        self._unknown: set[str] = set()

    def observe(self, readings: list[NodeReading], *, policy_told: bool = False) -> list[tuple[int, str]]:
        """Take one check's readings; ``(level, message)`` for each state that changed since the last
        (``policy_told``: the policy's state is taken, but its record was logged already)."""
        out: list[tuple[int, str]] = []
        previous, self.readings = self.readings, {r.node: r for r in readings}
        for r in readings:
            policy = self._policy(r)
            out += [] if policy_told else policy
            out += self._evictions(r, previous.get(r.node))
            out += self._memory(r)
        return out

    def _policy(self, r: NodeReading) -> list[tuple[int, str]]:
        if r.policy is None:
            if r.node in self._unknown:
                return []
            self._unknown.add(r.node)
            return [
                (logging.WARNING, f"store {r.node}: maxmemory-policy unknown (CONFIG GET is refused); make sure it is noeviction")
            ]
        self._unknown.discard(r.node)
        was = self._misconfigured.get(r.node)
        self._misconfigured[r.node] = r.misconfigured
        if r.misconfigured and was is not True:
            return [
                (
                    logging.ERROR,
                    f"store {r.node}: maxmemory-policy is {r.policy}: Redis evicts rocketredis's keys when it is full "
                    f"({_memory_text(r)}), making stored messages unreachable; set maxmemory-policy noeviction "
                    "(CONFIG SET and redis.conf), then run `mq doctor` (and `mq topic recover` for what it finds)",
                )
            ]
        if not r.misconfigured and was is True:
            return [
                (
                    logging.WARNING,
                    f"store {r.node}: maxmemory-policy is noeviction again; run `mq doctor` to see what was evicted",
                )
            ]
        return []

    def _evictions(self, r: NodeReading, before: NodeReading | None) -> list[tuple[int, str]]:
        if r.evicted_keys is None or before is None or before.evicted_keys is None:
            return []
        evicting = r.evicted_keys > before.evicted_keys
        was = self._evicting.get(r.node, False)
        self._evicting[r.node] = evicting
        if evicting and not was:
            return [
                (
                    logging.ERROR,
                    f"store {r.node}: Redis evicted {r.evicted_keys - before.evicted_keys} keys since the last check "
                    f"(policy {r.policy or 'unknown'}, {_memory_text(r)}); run `mq doctor`, then `mq topic recover`",
                )
            ]
        if was and not evicting:
            return [(logging.WARNING, f"store {r.node}: no more keys evicted since the last check")]
        return []

    def _memory(self, r: NodeReading) -> list[tuple[int, str]]:
        ratio = r.used_ratio
        if ratio is None:
            return []
        full = ratio >= MEMORY_WARN_RATIO
        was = self._full.get(r.node, False)
        self._full[r.node] = full
        if full and not was:
            effect = "writes are refused at maxmemory" if not r.misconfigured else "Redis evicts keys at maxmemory"
            return [(logging.WARNING, f"store {r.node}: {_memory_text(r)}: {effect}; raise maxmemory or shorten retention")]
        if was and not full:
            return [(logging.INFO, f"store {r.node}: memory use back under {MEMORY_WARN_RATIO:.0%} ({_memory_text(r)})")]
        return []


def _memory_text(r: NodeReading) -> str:
    if r.used_bytes is None:
        return "memory use unknown"
    if not r.maxmemory_bytes:
        return f"{r.used_bytes} bytes used, no maxmemory"
    return f"{r.used_bytes} of maxmemory {r.maxmemory_bytes} bytes used ({r.used_bytes / r.maxmemory_bytes:.0%})"
