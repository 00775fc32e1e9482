"""Prometheus counters of the endpoint: requests and errors per RPC (``mq proxy --metrics-port``)."""

from __future__ import annotations

from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter


class ProxyMetrics:
    """``mq_proxy_requests_total{rpc}`` and ``mq_proxy_errors_total{rpc,code}``."""

    def __init__(self, registry: CollectorRegistry = REGISTRY) -> None:
        self.requests = Counter("mq_proxy_requests", "RocketMQ 5 RPCs served, by RPC", ["rpc"], registry=registry)
        self.errors = Counter(
            "mq_proxy_errors",
            "RocketMQ 5 RPCs answered with an error status, by RPC and code",
            ["rpc", "code"],
            registry=registry,
        )
        #: The request counter of each RPC, found once: ``labels()`` takes a lock and builds a key per call.
        self._request_counters: dict[str, Any] = {}

    def request(self, rpc: str) -> None:
        """Count one request of ``rpc``."""
        counter = self._request_counters.get(rpc)
        if counter is None:
            counter = self._request_counters[rpc] = self.requests.labels(rpc)
        counter.inc()
