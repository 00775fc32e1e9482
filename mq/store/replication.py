"""Writes confirmed by replicas: a script call and ``WAIT`` in one pipeline on the node that ran it.

``WAIT n timeout`` counts the replicas that acknowledged every write sent *on the same connection*
before it, so it must reach the very node (and connection) that served the write. On a standalone or
Sentinel-managed client one pipeline is one connection. On a cluster, redis-py's cluster pipeline
would route the keyless ``WAIT`` to a node of its choice, so here each node's calls go out as a
pipeline of that node's own client (``RedisCluster.get_redis_connection``), with one ``WAIT`` at its
end: still one round trip per node, as a plain cluster pipeline.

Redis 7.2 added ``WAITAOF`` (the write also fsynced to the replicas' AOF, RocketMQ's ``SYNC_FLUSH``
on the slave); this module sends ``WAIT`` on every version (see docs/operations.md, "High
availability"): replication to the replicas' memory, RocketMQ's ``SYNC_MASTER``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.exceptions import AskError, MovedError, NoScriptError, TryAgainError

from mq.connection import REDIS_ERRORS
from mq.errors import MQClientError
from mq.store import scripts
from mq.store.ops import Cmd, NodePipe, Op, Refresh

Call = tuple[str, Sequence[str], Sequence[Any]]
#: Errors that mean "this node does not serve the slot (any more)": the script did not run there.
_ROUTING_ERRORS = (MovedError, AskError, TryAgainError)


@dataclass(frozen=True)
class SyncReplicas:
    """How many replicas must confirm a write, and how long to wait for them.

    Attributes:
        replicas: replicas that must acknowledge the write (0: do not wait) [RocketMQ ``SYNC_MASTER``
            when ≥ 1].
        timeout_ms: the longest ``WAIT`` blocks, milliseconds (≥ 1; Redis's 0 would mean forever).
    """

    replicas: int = 0
    timeout_ms: int = 1000

    def __post_init__(self) -> None:
        if not isinstance(self.replicas, int) or isinstance(self.replicas, bool) or self.replicas < 0:
            raise MQClientError(f"sync_replicas must be an int >= 0, got {self.replicas!r}")
        if not isinstance(self.timeout_ms, int) or isinstance(self.timeout_ms, bool) or self.timeout_ms < 1:
            raise MQClientError(f"sync_replicas_timeout_ms must be an int >= 1 (milliseconds), got {self.timeout_ms!r}")

    @property
    def enabled(self) -> bool:
        """Whether writes wait for replicas at all."""
        return self.replicas > 0


def run_synced(calls: Sequence[Call], sync: SyncReplicas, *, kind: str) -> Op[list[tuple[Any, int]]]:
    """The operation running script calls, each node's share followed by ``WAIT`` in one pipeline on
    that node (``kind``: the connection's kind, see :class:`~mq.connection.Connection`).

    Returns, per call in order, ``(result or exception instance, replicas that confirmed)``. The
    embedded ``memory://`` store has no replicas: 0 confirm. Raises the redis-py error of a pipeline
    that failed as a whole (a lost connection): the caller translates it.
    """
    if kind == "cluster":
        return (yield from _run_cluster(calls, sync, refresh=True))
    if kind == "memory":
        return [(r, 0) for r in (yield from scripts.call_many(calls))]
    return (yield from _run_node(list(calls), sync))


def _run_node(calls: list[Call], sync: SyncReplicas) -> Op[list[tuple[Any, int]]]:
    """The calls plus ``WAIT`` in one pipeline on the node of their first key (a NOSCRIPT call is
    loaded and sent again)."""
    replies = yield from _pipeline(calls, sync)
    acked = replies[-1]
    results = replies[:-1]
    missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
    if missing:
        for i in missing:
            yield from scripts.load(calls[i][0], calls[i][1])
        again = yield from _pipeline([calls[i] for i in missing], sync)
        for i, r in zip(missing, again[:-1]):
            results[i] = r
        acked = again[-1]  # WAIT covers every earlier write of the connection
    count = int(acked) if isinstance(acked, int) else 0
    if isinstance(acked, Exception) and not any(isinstance(r, Exception) for r in results):
        raise acked  # WAIT itself refused (e.g. not allowed to the ACL user): say so, do not guess
    return [(r, count) for r in results]


def _pipeline(calls: Sequence[Call], sync: SyncReplicas) -> Op[list[Any]]:
    flagged = yield Cmd(scripts._flagged)  # the same script variant (with its Redis 7 flags) as scripts.Eval

    def build(pipe: Any) -> None:
        scripts.queue_calls(pipe, calls, flagged)
        pipe.execute_command("WAIT", sync.replicas, sync.timeout_ms)

    return list((yield NodePipe(calls[0][1][0], build)))


def _run_cluster(calls: Sequence[Call], sync: SyncReplicas, *, refresh: bool) -> Op[list[tuple[Any, int]]]:
    """Group the calls by the node serving their first key; one pipeline per node.

    A call refused with MOVED/ASK/TRYAGAIN did not run: the topology is read again and those calls
    are sent once more (``refresh``). A node that cannot be reached makes the topology be read again
    before the error is raised, so the caller's next attempt goes to the promoted replica.
    """
    names = yield Cmd(lambda client: [str(client.get_node_from_key(keys[0]).name) for _, keys, _ in calls])  # no I/O
    by_node: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        by_node.setdefault(name, []).append(i)
    out: list[tuple[Any, int]] = [(None, 0)] * len(calls)
    for indexes in by_node.values():
        try:
            done = yield from _run_node([calls[i] for i in indexes], sync)
        except REDIS_ERRORS:
            yield Refresh()
            raise
        for i, result in zip(indexes, done):
            out[i] = result
    moved = [i for i, (r, _) in enumerate(out) if isinstance(r, _ROUTING_ERRORS)]
    if moved and refresh:
        yield Refresh()
        again = yield from _run_cluster([calls[i] for i in moved], sync, refresh=False)
        for i, result in zip(moved, again):
            out[i] = result
    return out
