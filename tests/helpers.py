"""Helpers shared by tests (not fixtures)."""

from __future__ import annotations

from typing import Any

import redis


def raw_client(url: str) -> Any:
    """A plain redis-py client for ``url`` (standalone or redis+cluster)."""
    if url.startswith("redis+cluster://"):
        host, port = url.removeprefix("redis+cluster://").split(",")[0].split(":")
        return redis.RedisCluster(host=host, port=int(port))
    return redis.Redis.from_url(url)


def snapshot(url: str, namespace: str) -> dict[bytes, bytes]:
    """Every key of ``namespace`` with its serialised value (``DUMP``), to prove nothing changed."""
    client = raw_client(url)
    try:
        keys = set(client.scan_iter(match=f"*{namespace}*", count=1000))
        return {k: client.dump(k) for k in sorted(keys)}
    finally:
        client.close()
