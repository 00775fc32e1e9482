"""Priority order for consumers [RocketMQ 5.4 RIP-80]: which queue to read next, and which held message
to hand out next (D142). Decisions only — no threads, asyncio or store — so the simple consumers, the
pull consumers, the endpoint and the push consumer's machine all order by the same rules.

A priority topic's queue ``q`` holds priority level ``q % priority_levels`` (see
:class:`mq.model.topic.TopicConfig`), so each queue stays one plain stream with one offset per group:

- reading queues, :func:`priority_order` puts the higher levels first (round-robin within a level, as
  before: queues of topics without levels are level 0, so their order is unchanged);
- handing out what a consumer holds, :class:`HeldMessages` gives the message of highest priority among
  the *oldest held message of each queue*: never a later message of a queue before an earlier one (a
  queue's position moves past what is handed out, so handing out of order within a queue would commit
  past messages not yet handed out).
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Generic, TypeVar

from mq.model.queue import MessageQueue

T = TypeVar("T")
Q = TypeVar("Q")


def queue_level(queue: MessageQueue, levels: Mapping[str, int]) -> int:
    """The priority level ``queue`` holds: ``queue_id % levels[topic]`` (0 for a topic not in
    ``levels``: one without priority levels)."""
    n = levels.get(queue.topic)
    return queue.queue_id % n if n else 0


def priority_order(queues: Sequence[MessageQueue], levels: Mapping[str, int], start: int = 0) -> list[MessageQueue]:
    """``queues`` in the order to read them: higher priority levels first; within a level, round-robin
    from the ``start``-th (``start`` counts rounds: each round begins one queue later). Without levels
    this is ``queues`` rotated by ``start``, the order consumers always read in."""
    n = len(queues)
    if not n:
        return []
    rotated = [queues[(start + i) % n] for i in range(n)]
    if not levels or not any(q.topic in levels for q in queues):
        return rotated
    by_level: dict[int, list[MessageQueue]] = {}
    for q in queues:
        by_level.setdefault(queue_level(q, levels), []).append(q)
    out: list[MessageQueue] = []
    for level in sorted(by_level, reverse=True):
        group = by_level[level]
        out += [group[(start + i) % len(group)] for i in range(len(group))]
    return out


def top_levels_first(
    queues: Sequence[Q], levels: Mapping[str, int], queue_of: Callable[[Q], MessageQueue], pending: Sequence[Q] = ()
) -> list[Q]:
    """What a push or pull consumer pulls next of the ``queues`` ready to be pulled: of a topic with
    priority levels, only the queues of its highest level with messages still to pull, higher levels
    first; the queues of other topics as they come.

    ``pending`` are the held queues that still have messages to pull though they are not ready this
    instant (being pulled by another puller task): their level counts as well, so a lower level is not
    pulled while a higher one's pull is in flight. A queue stops counting once it is caught up (its
    long-poll waiter holds it) or while flow control pauses it (its messages wait in the cache), and only
    then are the next level's queues pulled: with a backlog, the listener gets the higher priorities first.
    """
    if not levels:  # no priority topic subscribed: the held order, at the cost of this check
        return list(queues)
    top: dict[str, int] = {}
    for q in (*queues, *pending):
        mq = queue_of(q)
        if mq.topic in levels:
            top[mq.topic] = max(top.get(mq.topic, 0), queue_level(mq, levels))
    if not top:
        return list(queues)
    kept = [q for q in queues if top.get(queue_of(q).topic, 0) == queue_level(queue_of(q), levels)]
    return sorted(kept, key=lambda q: -queue_level(queue_of(q), levels))  # stable: held order within a level


class HeldMessages(Generic[T]):
    """Messages a consumer holds, handed out highest priority first, each queue's in its order.

    :meth:`put` adds a message of a queue (any hashable key) with its priority; :meth:`take` returns the
    next: among the oldest held message of every queue, the one of highest priority, the earliest put
    among equals (so with no priorities it is the order they were put in). Not thread-safe: a caller
    shared by threads locks around it.
    """

    def __init__(self) -> None:
        self._queues: dict[Hashable, deque[tuple[int, int, T]]] = {}
        self._heads: list[tuple[int, int, Hashable]] = []  # (-priority, seq, queue) of each queue's oldest
        self._seq = itertools.count()
        self._size = 0

    def __len__(self) -> int:
        return self._size

    def put(self, queue: Hashable, priority: int, item: T) -> None:
        """Hold ``item`` of ``queue`` (after that queue's earlier ones)."""
        held = self._queues.get(queue)
        if held is None:
            held = self._queues[queue] = deque()
        entry = (priority, next(self._seq), item)
        if not held:
            heapq.heappush(self._heads, (-priority, entry[1], queue))
        held.append(entry)
        self._size += 1

    def take(self) -> T:
        """The next message to hand out.

        Raises:
            IndexError: nothing is held.
        """
        _, _, queue = heapq.heappop(self._heads)
        held = self._queues[queue]
        _, _, item = held.popleft()
        self._size -= 1
        if held:
            priority, seq, _ = held[0]
            heapq.heappush(self._heads, (-priority, seq, queue))
        else:
            del self._queues[queue]
        return item
