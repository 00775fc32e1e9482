"""Topic routes: a producer's cached view of a topic's writable queues and their nodes.

The cache is refreshed every ``ROUTE_REFRESH_S`` [RocketMQ ``pollNameServerInterval``] and at once
when the store refuses a send (queue gone or not writable), so a shrink is seen on the next send.
Loading is an operation (:mod:`mq.store.ops`): the sync and the asyncio producers run the same code.
"""

from __future__ import annotations

import itertools
import random
import threading
import time
from dataclasses import dataclass, field

from mq.errors import MQClientError, StoreEvictedError, TopicNotFoundError, evicted_message
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from mq.model.topic import TopicConfig
from mq.store.ops import Op
from mq.store.store import StoreOps

#: This module's own random numbers: a library must not draw from (and so shift) the application's
#: global ``random`` stream, which a program may seed to repeat its runs.
_RANDOM = random.Random()

#: Seconds a cached route is used before it is read again.
ROUTE_REFRESH_S = 30.0


@dataclass
class TopicRoute:
    """The writable queues of a topic, the node serving each, and the round-robin cursor; on a
    priority topic, its writable queues by level (D142)."""

    config: TopicConfig
    queues: list[MessageQueue]
    nodes: dict[MessageQueue, str]
    loaded_at: float
    _cursor: itertools.count[int] = field(default_factory=lambda: itertools.count(_RANDOM.randrange(1 << 16)))
    #: A priority topic's writable queues by level (None: not a priority topic).
    levels: list[list[MessageQueue]] | None = None

    def next_queue(self, priority: int = 0) -> MessageQueue:
        """The next queue in round-robin order (from a random start); on a priority topic, of the level
        of ``priority``.

        Raises:
            MQClientError: a priority other than 0 for a topic without priority levels.
        """
        if self.levels is None:
            if priority:
                raise no_levels(self.config.name, priority)
            return self.queues[next(self._cursor) % len(self.queues)]
        level = self.levels[self.config.level_for(priority)]
        return level[next(self._cursor) % len(level)]


def no_levels(topic: str, priority: int) -> MQClientError:
    """The error of a message with ``priority`` sent to a topic without priority levels."""
    return MQClientError(
        f"message priority {priority} needs a priority topic; {topic!r} has no priority levels "
        "(create it with Admin.create_topic(..., priority_levels=10) or `mq topic create --priority-levels 10`)"
    )


class RouteCache:
    """Topic routes of one producer, loaded on demand (no I/O of its own: :meth:`get` is an
    operation the producer's runner drives)."""

    def __init__(self, store: StoreOps) -> None:
        self._store = store
        self._routes: dict[str, TopicRoute] = {}
        self._lock = threading.Lock()

    def cached(self, topic: str) -> TopicRoute | None:
        """The route of ``topic`` when it is cached and fresh, else None."""
        route = self._routes.get(topic)
        return route if route is not None and time.monotonic() - route.loaded_at <= ROUTE_REFRESH_S else None

    def get(self, topic: str) -> Op[TopicRoute]:
        """The route of ``topic``, loading it when missing or stale (an operation: ``yield from``).

        Raises:
            TopicNotFoundError: the topic does not exist.
            StoreEvictedError: its config is gone but queues of it are stored (Redis evicted it).
            MQClientError: the topic takes no messages (perm without ``w``).
        """
        route = self.cached(topic)
        if route is None:
            config = yield from StoreOps.topic.op(self._store, topic)
            if config is None and (yield from StoreOps.topic_evicted.op(self._store, topic)):  # the error path only
                raise StoreEvictedError(evicted_message(f"topic {topic!r} has stored queues but no config", topic))
            route = self.loaded(topic, config)
        return route

    def invalidate(self, topic: str) -> None:
        """Forget the cached route of ``topic``."""
        with self._lock:
            self._routes.pop(topic, None)

    def loaded(self, topic: str, config: TopicConfig | None) -> TopicRoute:
        """Cache and return the route of ``topic`` from its config as just read."""
        if config is None:
            raise TopicNotFoundError(f"topic {topic!r} does not exist; create it with Admin.create_topic or `mq topic create`")
        queues = [MessageQueue(topic, DEFAULT_BROKER_NAME, q) for q in range(config.write_queues) if config.writable(q)]
        if not queues:
            raise MQClientError(f"topic {topic!r} is not writable (perm={config.perm!r})")
        nodes = {q: self._store.conn.node_of(self._store.queue_keys(topic, q.queue_id).meta) for q in queues}
        with self._lock:
            old = self._routes.get(topic)
            route = TopicRoute(config, queues, nodes, time.monotonic(), levels=levels_of(config, queues))
            if old is not None:
                route._cursor = old._cursor  # keep round-robin going across refreshes
            self._routes[topic] = route
        return route


def levels_of(config: TopicConfig, queues: list[MessageQueue]) -> list[list[MessageQueue]] | None:
    """``queues`` by the priority level each holds (None: ``config`` has no priority levels)."""
    if not config.priority_levels:
        return None
    levels: list[list[MessageQueue]] = [[] for _ in range(config.priority_levels)]
    for q in queues:
        levels[config.level_of(q.queue_id)].append(q)
    if not all(levels):
        raise MQClientError(f"topic {config.name!r}: a priority level has no writable queue (perm={config.perm!r})")
    return levels
