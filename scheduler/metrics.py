"""Prometheus metrics of a namespace, computed from the store at scrape time
(``mq broker --metrics-port``), in the spirit of RocketMQ's exporter.

Series (all gauges):

- ``rocketredis_topic_messages{topic}``: messages ever stored in the topic (sum of max offsets);
- ``rocketredis_group_lag{group,topic,queue}``: messages a group has not consumed yet;
- ``rocketredis_dlq_messages{group}``: messages in the group's dead-letter queue;
- ``rocketredis_timer_backlog``: delayed messages waiting to be due;
- ``rocketredis_half_backlog``: transaction half messages waiting for commit, rollback or check-back;
- ``rocketredis_brokers_healthy``: broker services that reported within the health timeout.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from mq.connection import Connection, translate_errors
from mq.errors import MQError
from mq.store import Store
from mq.validation import DLQ_PREFIX, RETRY_PREFIX

log = logging.getLogger("scheduler.metrics")


class StoreCollector(Collector):
    """Reads the namespace's figures when Prometheus scrapes."""

    def __init__(self, store: Store, health_timeout_s: float) -> None:
        self._store = store
        self._health_timeout_s = health_timeout_s

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            yield from self._collect()
        except MQError as e:  # a scrape during a Redis outage shows no series, not an exception
            log.warning("collecting metrics failed: %s", e)

    def _collect(self) -> Iterator[GaugeMetricFamily]:
        topics = GaugeMetricFamily("rocketredis_topic_messages", "Messages ever stored in a topic", labels=["topic"])
        dlq = GaugeMetricFamily("rocketredis_dlq_messages", "Messages in a group's dead-letter queue", labels=["group"])
        lag = GaugeMetricFamily("rocketredis_group_lag", "Messages a group has not consumed", labels=["group", "topic", "queue"])
        timers = halves = 0
        client = self._store.conn.client
        for config in self._store.topics():
            stats = self._store.queue_stats(config.name, list(range(config.queue_count)))
            if config.name.startswith(DLQ_PREFIX):
                dlq.add_metric([config.name.removeprefix(DLQ_PREFIX)], sum(s.max_offset - s.min_offset for s in stats.values()))
            elif not config.name.startswith(RETRY_PREFIX):
                topics.add_metric([config.name], sum(s.max_offset for s in stats.values()))
            with translate_errors(self._store.conn.url, "counting backlogs"):
                pipe = client.pipeline(transaction=False)
                for q in range(config.queue_count):
                    keys = self._store.queue_keys(config.name, q)
                    pipe.zcard(keys.timer)
                    pipe.zcard(keys.halfidx)
                    pipe.hgetall(keys.offsets)
                replies = pipe.execute()
            timers += sum(replies[0::3])
            halves += sum(replies[1::3])
            for q, committed in enumerate(replies[2::3]):
                for group, offset in committed.items():
                    behind = stats[q].max_offset - max(int(offset), stats[q].min_offset)
                    lag.add_metric([group.decode(), config.name, str(q)], behind)
        yield topics
        yield dlq
        yield lag
        yield GaugeMetricFamily("rocketredis_timer_backlog", "Delayed messages waiting to be due", value=timers)
        yield GaugeMetricFamily("rocketredis_half_backlog", "Transaction half messages not resolved yet", value=halves)
        from scheduler.service import healthy_brokers

        alive = healthy_brokers(self._store.conn.url, self._store.conn.namespace, self._health_timeout_s)
        yield GaugeMetricFamily("rocketredis_brokers_healthy", "Broker services reporting healthy", value=len(alive))


def serve_metrics(port: int, url: str | None, namespace: str, *, health_timeout_s: float = 10.0,
                  addr: str = "127.0.0.1") -> CollectorRegistry:  # fmt: skip
    """Serve the namespace's metrics on ``http://addr:port/metrics``; returns the registry."""
    registry = CollectorRegistry()
    registry.register(StoreCollector(Store(Connection(url, namespace)), health_timeout_s))
    start_http_server(port, addr=addr, registry=registry)
    return registry
