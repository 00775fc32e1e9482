"""Helpers shared by tests (not fixtures)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import redis


def raw_client(url: str) -> Any:
    """A plain redis-py client for ``url`` (standalone or redis+cluster)."""
    if url.startswith("redis+cluster://"):
        host, port = url.removeprefix("redis+cluster://").split(",")[0].split(":")
        return redis.RedisCluster(host=host, port=int(port))
    return redis.Redis.from_url(url)


class admin_once:
    """``Admin(url, namespace)`` for one call, closed after it: ``admin_once(url, ns).create_topic("T")``
    in place of ``Admin(url, ns).create_topic("T")``, which leaves the admin's connection to the garbage
    collector (a cluster client's sockets then stay open until a collection, D67)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # as Admin's
        self._args = args
        self._kwargs = kwargs

    def __getattr__(self, name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            from mq import Admin

            with Admin(*self._args, **self._kwargs) as admin:
                return getattr(admin, name)(*args, **kwargs)

        return call


def snapshot(url: str, namespace: str) -> dict[bytes, bytes]:
    """Every key of ``namespace`` with its serialised value (``DUMP``), to prove nothing changed."""
    client = raw_client(url)
    try:
        keys = set(client.scan_iter(match=f"*{namespace}*", count=1000))
        return {k: client.dump(k) for k in sorted(keys)}
    finally:
        client.close()


#: Seconds a "nothing more arrives" check watches after the last expected delivery (D67): a
#: duplicate or a late redelivery comes from a path that takes time, and a window shorter than that
#: path proves nothing. Two seconds cover two heartbeats (``HEARTBEAT_INTERVAL_S`` = 1 s: a member
#: change is seen, and the new owner of a queue reads from the stored offset, within one), a retry at
#: the first delay level (1 s), and the long-poll waiter's commit pacing (``WAIT_COMMIT_DELAY_S``).
#: Longer paths (the 20 s rebalance, an invisible time, a lock's TTL) are tested by the tests of
#: those paths, which wait for them explicitly.
QUIET_PERIOD_S = 2.0


def stays_quiet(count: Callable[[], object], what: str, quiet_s: float = QUIET_PERIOD_S, poll_s: float = 0.05) -> None:
    """Watch ``count()`` for ``quiet_s`` seconds after the last expected delivery; fail as soon as it
    changes (something more arrived: a duplicate, a late redelivery)."""
    first = count()
    deadline = time.monotonic() + quiet_s
    while time.monotonic() < deadline:
        time.sleep(poll_s)
        now = count()
        if now != first:
            raise AssertionError(f"{what} changed within the quiet period of {quiet_s} s: {first!r} -> {now!r}")


async def wait_for_async(predicate: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.05) -> None:
    """``tests.procs.wait_for`` for an asyncio test: awaits ``predicate()`` (checked every ``poll_s``
    seconds, the event loop running meanwhile), failing the test after ``timeout_s`` seconds."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        await asyncio.sleep(poll_s)


async def stays_quiet_async(
    count: Callable[[], object], what: str, quiet_s: float = QUIET_PERIOD_S, poll_s: float = 0.05
) -> None:
    """:func:`stays_quiet` for an asyncio test: it awaits between looks, so the consumers running in the
    same event loop keep delivering (a blocking watch would hold them, and no duplicate could show)."""
    first = count()
    deadline = time.monotonic() + quiet_s
    while time.monotonic() < deadline:
        await asyncio.sleep(poll_s)
        now = count()
        if now != first:
            raise AssertionError(f"{what} changed within the quiet period of {quiet_s} s: {first!r} -> {now!r}")


def blocked_readers(url: str, command: str = "xread") -> int:
    """How many clients of the standalone server at ``url`` are blocked in ``command`` (by default
    ``XREAD BLOCK``: long-poll waiters that found their queue caught up)."""
    client = redis.Redis.from_url(url)
    try:
        return sum(1 for c in client.client_list() if c.get("cmd") == command and "b" in c.get("flags", ""))
    finally:
        client.close()


def redis_py_observability_on(monkeypatch: Any) -> None:
    """Make redis-py's observability (its OpenTelemetry metrics) read as on for the test (``monkeypatch``:
    pytest's), by the getter ``mq.store.redispy`` asks: a manager shaped like redis-py's with metrics on."""
    import types

    from mq.store import redispy

    class Manager:
        config = types.SimpleNamespace(enabled_telemetry=("metrics",))

    class Instance:
        def get_provider_manager(self) -> Manager:
            return Manager()

    monkeypatch.setattr(redispy, "get_observability_instance", Instance)
