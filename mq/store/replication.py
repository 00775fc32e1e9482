"""Writes confirmed by replicas and by disks: a script call and ``WAIT`` (or ``WAITAOF``) in one
pipeline on the node that ran it.

``WAIT n timeout`` counts the replicas that acknowledged every write sent *on the same connection*
before it, so it must reach the very node (and connection) that served the write. On a standalone or
Sentinel-managed client one pipeline is one connection. On a cluster, redis-py's cluster pipeline
would route the keyless ``WAIT`` to a node of its choice, so here each node's calls go out as a
pipeline of that node's own client (``RedisCluster.get_redis_connection``), with one ``WAIT`` at its
end: still one round trip per node, as a plain cluster pipeline.

- ``sync_replicas=n``: ``WAIT n`` — the write is in the memory of n replicas [RocketMQ ``SYNC_MASTER``].
- ``sync_replicas="all"``: ``WAIT`` for every replica the master has (:class:`ReplicaCounts`: the
  ``ROLE`` reply queued before the writes of every pipeline, remembered for :data:`REMEMBER_S`, so a
  replica that is down makes the write wait its timeout and report the shortfall). On a cluster counted
  per node and per hash slot, and a write waits for the larger: a replica promoted by a failover (a new
  node, with no replica of its own) still waits for what its old master had for those slots.
- ``sync_flush=True``: ``WAITAOF 1 n`` instead (Redis ≥ 7.2) — the write is fsynced to the master's
  AOF and to n replicas' AOF [RocketMQ ``SYNC_FLUSH``]; checked once per node before the first write
  (:func:`check_node`): an older server, or one without ``appendonly yes``, is a clear
  :class:`~mq.errors.MQClientError` before anything is written.

See docs/operations.md, "High availability", for what each mode survives (decisions D73–D75).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from redis.exceptions import NoScriptError

from mq.errors import MQClientError
from mq.store import scripts
from mq.store.ops import ROUTING_ERRORS, Cmd, NodePipe, Op, Refresh

log = logging.getLogger("mq.store")

Call = tuple[str, Sequence[str], Sequence[Any]]
#: Errors that mean "this node does not serve the slot (any more)": the script did not run there.
#: ``sync_replicas="all"``: every replica the master has must confirm.
ALL: Literal["all"] = "all"
#: How long (s) ``"all"`` keeps counting a replica its master no longer lists: a replica restarting, or
#: cut off, for less than this makes writes wait their timeout and report the shortfall; one removed for
#: good is forgotten after it, with a WARNING.
REMEMBER_S = 60.0
#: The shard of a standalone or Sentinel-managed store: one master at a time, so what was counted
#: at the old master still counts at the promoted one (its lost replica is missed, not forgotten).
_ONE_MASTER = ""
#: What "all" is counted for: ``_ONE_MASTER``; on a cluster the node's name and each hash slot it
#: served (``"slot:N"``) — the slots outlive the node serving them, so a failover's promoted replica
#: inherits its master's count, and a slot not written before takes its node's.
Shard = str
_NO_DISK = "sync_flush needs a Redis server with appendonly yes: the embedded memory:// store keeps nothing on disk"


def replicas_in_role(role: Any) -> int | None:
    """The replicas a ``ROLE`` reply lists (None: not a master's reply)."""
    if isinstance(role, (list, tuple)) and len(role) >= 3 and role[0] in (b"master", "master"):
        return len(role[2])
    return None


class ReplicaCounts:
    """What ``"all"`` means for each shard (the most replicas the ``ROLE`` of the master serving it
    listed within :data:`REMEMBER_S`), and which nodes passed the ``sync_flush`` check. Shared by threads."""

    def __init__(self) -> None:
        self._peaks: dict[Shard, tuple[int, float]] = {}  # shard -> (replicas, when last listed that many, monotonic s)
        self._checked: set[str] = set()
        self._lock = threading.Lock()

    def wanted(self, shards: Sequence[Shard]) -> int | None:
        """Replicas a write to ``shards`` waits for (the most any of them wants), or None before a
        ``ROLE`` reply counted any of them."""
        got = [peak[0] for peak in map(self._peaks.get, shards) if peak is not None]
        return max(got) if got else None

    def seen(self, shards: Sequence[Shard], role: Any, node: str = "") -> None:
        """Count a ``ROLE`` reply of ``node``, the master serving ``shards`` (a replica's reply, or an
        error, changes nothing)."""
        listed = replicas_in_role(role)
        if listed is None:
            return
        now = time.monotonic()
        with self._lock:
            forgotten: set[int] = set()
            for shard in shards:
                peak, at = self._peaks.get(shard, (listed, now))
                if listed >= peak:
                    self._peaks[shard] = (listed, now)
                elif now - at > REMEMBER_S:
                    forgotten.add(peak)
                    self._peaks[shard] = (listed, now)
            for peak in sorted(forgotten):  # once per count, not per slot
                log.warning(
                    "sync_replicas='all': the master %s has listed %d replica(s) instead of %d for more than %.0f s; "
                    "writes now wait for %d (start the missing replica to be counted again)",
                    node or "(master)",
                    listed,
                    peak,
                    REMEMBER_S,
                    listed,
                )

    def checked(self, node: str) -> bool:
        """Whether ``node`` passed the ``sync_flush`` check."""
        return node in self._checked

    def passed(self, node: str) -> None:
        """Record that ``node`` passed the ``sync_flush`` check."""
        self._checked.add(node)


@dataclass(frozen=True)
class SyncReplicas:
    """How many replicas must confirm a write, whether it must be on disk, and how long to wait.

    Attributes:
        replicas: replicas that must acknowledge the write (0: do not wait; ``"all"``: every replica
            the master has) [RocketMQ ``SYNC_MASTER`` when ≥ 1].
        timeout_ms: the longest ``WAIT`` blocks, milliseconds (≥ 1; Redis's 0 would mean forever).
        flush: the write must also be fsynced to the master's AOF, and to the replicas' when
            ``replicas`` asks for some (``WAITAOF``, Redis ≥ 7.2) [RocketMQ ``SYNC_FLUSH``].
        counts: what ``"all"`` resolved to per node, and the nodes checked for ``flush``.
    """

    replicas: int | Literal["all"] = 0
    timeout_ms: int = 1000
    flush: bool = False
    counts: ReplicaCounts = field(default_factory=ReplicaCounts, compare=False, repr=False)

    def __post_init__(self) -> None:
        wanted = self.replicas
        if not (wanted == ALL and isinstance(wanted, str)) and (
            not isinstance(wanted, int) or isinstance(wanted, bool) or wanted < 0
        ):
            raise MQClientError(f'sync_replicas must be an int >= 0 or "all", got {wanted!r}')
        if not isinstance(self.timeout_ms, int) or isinstance(self.timeout_ms, bool) or self.timeout_ms < 1:
            raise MQClientError(f"sync_replicas_timeout_ms must be an int >= 1 (milliseconds), got {self.timeout_ms!r}")
        if not isinstance(self.flush, bool):
            raise MQClientError(f"sync_flush must be True or False, got {self.flush!r}")

    @property
    def enabled(self) -> bool:
        """Whether writes wait for replicas or disks at all."""
        return self.replicas != 0 or self.flush

    @property
    def all(self) -> bool:
        """Whether ``"all"`` was asked for (resolved per node from ``ROLE``)."""
        return self.replicas == ALL

    def wanted(self, shards: Sequence[Shard]) -> int:
        """Replicas a write to ``shards`` waits for (``"all"``: as counted so far, 0 before any ``ROLE``)."""
        if isinstance(self.replicas, int):
            return self.replicas
        return self.counts.wanted(shards) or 0


@dataclass(frozen=True)
class Confirmed:
    """What ``WAIT`` / ``WAITAOF`` reported for a write.

    Attributes:
        replicas: replicas that confirmed (in memory; with ``flush``, in their AOF on disk).
        wanted: replicas asked for.
        on_disk: whether the master fsynced it to its AOF (None: not asked).
    """

    replicas: int
    wanted: int
    on_disk: bool | None = None

    @property
    def short(self) -> bool:
        """Fewer confirmations than asked for."""
        return self.replicas < self.wanted or self.on_disk is False

    def describe(self, timeout_ms: int) -> str:
        """The shortfall in words."""
        disk = " in their AOF" if self.on_disk is not None else ""
        parts = [f"{self.replicas} of {self.wanted} replica(s) confirmed{disk}"]
        if self.on_disk is False:
            parts.append("the master's AOF was not fsynced")
        return f"stored on the master, but {' and '.join(parts)} within {timeout_ms} ms"


def run_synced(calls: Sequence[Call], sync: SyncReplicas, *, kind: str) -> Op[list[tuple[Any, Confirmed]]]:
    """The operation running script calls, each node's share followed by ``WAIT`` (or ``WAITAOF``) in
    one pipeline on that node (``kind``: the connection's kind, see :class:`~mq.store.connection.Connection`).

    Returns, per call in order, ``(result or exception instance, what was confirmed)``. The embedded
    ``memory://`` store has no replicas (0 confirm) and no disk (``flush`` is refused). Raises the
    redis-py error of a pipeline that failed as a whole (a lost connection): the caller translates it;
    :class:`MQClientError` when a node cannot do ``flush`` (nothing written).
    """
    if kind == "cluster":
        return (yield from _run_cluster(calls, sync, refresh=True))
    if kind == "memory":
        if sync.flush:
            raise MQClientError(_NO_DISK)
        nobody = Confirmed(0, sync.wanted([_ONE_MASTER]))  # "all" of no replicas is 0: confirmed
        return [(r, nobody) for r in (yield from scripts.call_many(calls))]
    return (yield from _run_node(list(calls), sync, _ONE_MASTER, [_ONE_MASTER]))


def check_node(key: str, sync: SyncReplicas, node: str, shards: Sequence[Shard]) -> Op[None]:
    """Before the first write to ``node`` (serving ``key``, in ``shards``): count its replicas for
    ``"all"`` unless its shards are counted already, and for ``flush`` make sure it can ``WAITAOF`` —
    one round trip, once per node.

    Raises:
        MQClientError: ``flush`` on a server older than 7.2 (naming its version) or without ``appendonly yes``.
    """
    probe_flush = sync.flush and not sync.counts.checked(node)
    probe_role = sync.all and sync.counts.wanted(shards) is None
    if not (probe_flush or probe_role):
        return

    def build(pipe: Any) -> None:
        pipe.execute_command("ROLE")
        if probe_flush:  # numlocal 1 with nothing pending answers at once, or says why it cannot
            pipe.execute_command("WAITAOF", 1, 0, 1)

    replies = yield NodePipe(key, build)
    if isinstance(replies[0], Exception):
        raise replies[0]  # e.g. ROLE not allowed to the ACL user: "all" must not quietly mean 0
    sync.counts.seen(shards, replies[0], node)
    if not probe_flush:
        return
    reply = replies[1]
    if isinstance(reply, Exception):
        text = str(reply)
        if "unknown command" in text.lower():
            server = (yield NodePipe(key, lambda pipe: pipe.execute_command("HELLO")))[0]
            raise MQClientError(
                f"sync_flush needs WAITAOF (Redis >= 7.2), but {node or 'the master'} runs {_server_of(server)}: "
                "upgrade the server, or use sync_flush=False (with appendfsync always every write is fsynced "
                "before it is acknowledged anyway)"
            )
        if "appendonly" in text.lower():
            raise MQClientError(
                f"sync_flush needs appendonly yes on {node or 'the master'} (WAITAOF said: {text}): "
                "set it (CONFIG SET appendonly yes, and in redis.conf), or use sync_flush=False"
            )
        raise reply
    sync.counts.passed(node)


def check_first(key: str, sync: SyncReplicas, *, kind: str) -> Op[None]:
    """:func:`check_node` on the node serving ``key`` (at a client's start, so that a server that
    cannot do ``sync_flush`` is refused before anything is written; the other nodes of a cluster are
    checked before their first write)."""
    if not (sync.flush or sync.all):
        return  # a plain WAIT n needs no probe
    if kind == "memory":
        if sync.flush:
            raise MQClientError(_NO_DISK)
        return
    node, shards = _ONE_MASTER, [_ONE_MASTER]
    if kind == "cluster":
        node = yield Cmd(lambda client: _node_name(client, key))
        shards = yield Cmd(lambda client: [node, _slot_shard(client.keyslot(key))])
    yield from check_node(key, sync, node, shards)


def _node_name(client: Any, key: str) -> Any:
    """The name of the cluster node serving ``key`` (no I/O), or an awaitable of it when ``client`` is a
    ``redis.asyncio`` cluster client that has not read the slot map yet (at a producer's start)."""
    if getattr(client, "_initialize", False):

        async def initialized() -> str:
            await client.initialize()
            return str(client.get_node_from_key(key).name)

        return initialized()
    return str(client.get_node_from_key(key).name)


def _server_of(hello: Any) -> str:
    """``"redis 7.0.15"`` from a ``HELLO`` reply (a dict, or a flat list of pairs)."""
    if isinstance(hello, (list, tuple)):
        hello = dict(zip(hello[::2], hello[1::2]))
    if not isinstance(hello, dict):
        return "an unknown server version"
    fields = {
        (k.decode() if isinstance(k, bytes) else str(k)): (v.decode() if isinstance(v, bytes) else str(v))
        for k, v in hello.items()
    }
    return f"{fields.get('server', 'redis')} {fields.get('version', '(unknown version)')}"


def _slot_shard(slot: int) -> Shard:
    return f"slot:{slot}"


def _run_node(calls: list[Call], sync: SyncReplicas, node: str, shards: Sequence[Shard]) -> Op[list[tuple[Any, Confirmed]]]:
    """The calls plus ``WAIT`` in one pipeline on the node of their first key (a NOSCRIPT call is
    loaded and sent again)."""
    key = calls[0][1][0]
    yield from check_node(key, sync, node, shards)
    replies, confirmed = yield from _pipeline(calls, sync, node, shards)
    missing = [i for i, r in enumerate(replies) if isinstance(r, NoScriptError)]
    if missing:
        for i in missing:
            yield from scripts.load(calls[i][0], calls[i][1])
        again, confirmed = yield from _pipeline(
            [calls[i] for i in missing], sync, node, shards
        )  # WAIT covers every earlier write
        for i, r in zip(missing, again):
            replies[i] = r
    if isinstance(confirmed, Exception):
        if not any(isinstance(r, Exception) for r in replies):
            raise confirmed  # WAIT itself refused (e.g. not allowed to the ACL user): say so, do not guess
        confirmed = Confirmed(0, sync.wanted(shards), False if sync.flush else None)
    return [(r, confirmed) for r in replies]


def _pipeline(
    calls: Sequence[Call], sync: SyncReplicas, node: str, shards: Sequence[Shard]
) -> Op[tuple[list[Any], Confirmed | Exception]]:
    """The calls' replies and what was confirmed (or the ``WAIT`` / ``WAITAOF`` error)."""
    flagged = yield Cmd(scripts._flagged)  # the same script variant (with its Redis 7 flags) as scripts.Eval
    wanted = sync.wanted(shards)

    def build(pipe: Any) -> None:
        if sync.all:  # counted now for the next write (this one waits for what was counted so far)
            pipe.execute_command("ROLE")
        scripts.queue_calls(pipe, calls, flagged)
        if not sync.flush or wanted:
            # before WAITAOF too: a replica reports its fsync with its acks, and the one WAIT's GETACK
            # draws comes before the fsync of what it just received; WAITAOF's own GETACK, a loop later,
            # then finds it on disk (measured: ~1 ms a send instead of ~1 s, the replicas' once-a-second
            # ack, on Redis 8.2 and Valkey 9)
            pipe.execute_command("WAIT", wanted, sync.timeout_ms)
        if sync.flush:
            pipe.execute_command("WAITAOF", 1, wanted, sync.timeout_ms)

    replies = list((yield NodePipe(calls[0][1][0], build)))
    if sync.all:
        sync.counts.seen(shards, replies.pop(0), node)
    waited = replies.pop()
    if sync.flush and wanted:
        replies.pop()  # WAIT's count: WAITAOF's (on the replicas' disks) is the one that matters
    if isinstance(waited, Exception):
        return replies, waited
    if sync.flush:
        local, acked = waited
        return replies, Confirmed(int(acked), wanted, int(local) >= 1)
    return replies, Confirmed(int(waited), wanted)


def _run_cluster(calls: Sequence[Call], sync: SyncReplicas, *, refresh: bool) -> Op[list[tuple[Any, Confirmed]]]:
    """Group the calls by the node serving their first key; one pipeline per node.

    A call refused with MOVED/ASK/TRYAGAIN did not run: the topology is read again and those calls
    are sent once more (``refresh``). A node that cannot be reached makes the topology be read again
    before the error is raised, so the caller's next attempt goes to the promoted replica.
    """
    served = yield Cmd(
        lambda client: [(str(client.get_node_from_key(keys[0]).name), client.keyslot(keys[0])) for _, keys, _ in calls]
    )  # no I/O
    by_node: dict[str, list[int]] = {}
    slots: dict[str, set[int]] = {}
    for i, (name, slot) in enumerate(served):
        by_node.setdefault(name, []).append(i)
        slots.setdefault(name, set()).add(slot)
    out: list[tuple[Any, Confirmed]] = [(None, Confirmed(0, 0))] * len(calls)
    for name, indexes in by_node.items():
        shards = [name] + [_slot_shard(slot) for slot in sorted(slots[name])]
        done = yield from _run_node([calls[i] for i in indexes], sync, name, shards)  # NodePipe reads the map again on errors
        for i, result in zip(indexes, done):
            out[i] = result
    moved = [i for i, (r, _) in enumerate(out) if isinstance(r, ROUTING_ERRORS)]
    if moved and refresh:
        yield Refresh()
        again = yield from _run_cluster([calls[i] for i in moved], sync, refresh=False)
        for i, result in zip(moved, again):
            out[i] = result
    return out
