"""What every part of :class:`~mq.store.Store` shares: the client, the keys, error translation and
pipelined batches with one way of handling a failed slot."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any

import redis
import redis.asyncio

from mq.errors import MQBrokerError, ReplicaAckTimeout
from mq.keys import QueueKeys
from mq.model.topic import QueueStats
from mq.store import scripts
from mq.store.connection import Connection, translate_errors
from mq.store.ops import Cmd, Op, Pipe, operation
from mq.store.replication import SyncReplicas, check_first, run_synced

#: One script call of a pipelined batch: ``(script name, keys, argv)``.
ScriptCall = tuple[str, Sequence[str], Sequence[Any]]
#: Queues read per pipelined round trip by :meth:`StoreBase._each_queue` (by default).
QUEUE_BATCH = 2000


#: redis-py's standalone pipelines, whose own response callbacks may be replaced (a cluster's may not).
_PLAIN_PIPELINES = (redis.client.Pipeline, redis.asyncio.client.Pipeline)
#: The last callbacks made by :func:`without_dicts`: (the ones given, the copy without XRANGE's and XREAD's). A
#: copy is dear (D61), and a process mostly runs one client's pipelines (one slot: no growth).
_last_without: tuple[Any, Any] = (None, None)


#: The reads whose entries :func:`without_dicts` leaves as the server sent them.
_DICT_READS = ("XRANGE", "XREAD")


def without_dicts(pipe: Any) -> None:
    """Let ``pipe``'s ``XRANGE`` and ``XREAD`` replies be the server's ``[id, [name, value, …]]`` lists, as the pull
    script returns them: redis-py's per-entry ``(id, dict)`` is a tuple and a dict an entry (D61), and the codec
    decodes the flat lists by columns. A pipeline that has no such switch (a cluster's) keeps its
    dicts, which the codec takes as well."""
    global _last_without
    if not isinstance(pipe, _PLAIN_PIPELINES):
        return
    callbacks: Any = pipe.response_callbacks
    last = _last_without  # read once: another thread may replace it
    if last[0] is not callbacks:
        last = _last_without = (callbacks, type(callbacks)({k: v for k, v in callbacks.items() if k not in _DICT_READS}))
    pipe.response_callbacks = last[1]


class StoreBase:
    """The connection-level helpers the store's operation groups build on."""

    def __init__(self, connection: Connection, *, sync: SyncReplicas | None = None) -> None:
        self.conn = connection
        self.keys = connection.keys
        #: the client the operations run with (:class:`~mq.store.ops.SyncRunner` or ``AsyncRunner``)
        self._client = self._client_of(connection)
        #: replicas the message writes wait for (``WAIT`` in the write's pipeline; see :meth:`write_scripts`)
        self.sync = sync or SyncReplicas()

    def _client_of(self, connection: Connection) -> Any:
        """The client of ``connection`` this store runs its operations with (the sync one here)."""
        return connection.client

    def _errors(self, doing: str) -> AbstractContextManager[None]:
        return translate_errors(self.conn.url, doing)

    def queue_keys(self, topic: str, queue_id: int) -> QueueKeys:
        """The keys of one queue."""
        return self.keys.queue(topic, queue_id)

    @operation
    def server_time_ms(self) -> Op[int]:
        """The Redis server's clock, epoch ms (``TIME``; on a cluster, the node serving the namespace's keys)."""
        with self._errors("reading the server time"):
            if self.conn.kind == "cluster":
                key = self.keys.config
                seconds, micros = yield Cmd(lambda c: c.execute_command("TIME", target_nodes=c.get_node_from_key(key)))
            else:
                seconds, micros = yield Cmd(lambda c: c.time())
        return int(seconds) * 1000 + int(micros) // 1000

    def _script(self, name: str, keys: Sequence[str], argv: Sequence[Any], doing: str) -> Op[Any]:
        """Run one script; store failures raise :class:`MQBrokerError` saying what was being done."""
        with self._errors(doing):
            return (yield scripts.Eval(name, keys, argv))

    def _scripts(self, calls: Sequence[ScriptCall], doing: str, then: Callable[[Any], object] | None = None) -> Op[list[Any]]:
        """Several script calls in one pipeline, then the plain commands ``then(pipeline)`` queues (see
        :func:`scripts.call_many`); each slot holds its reply or an :class:`MQBrokerError`."""
        if not calls:
            return []
        with self._errors(doing):
            replies = yield from scripts.call_many(calls, then)
        return [self._slot(r, doing) for r in replies]

    @operation
    def write_scripts(self, calls: Sequence[ScriptCall], *, sync: SyncReplicas | None = None) -> Op[list[Any]]:
        """Run write scripts ``(name, keys, argv)`` in one pipeline (one per node on a cluster).

        With replicas (or disks) to wait for (``sync``, default the store's own), ``WAIT`` (``WAITAOF``)
        goes in the same pipeline, and a result that fewer replicas confirmed in time comes back as a
        :class:`ReplicaAckTimeout` carrying it. Each slot holds the result or the exception (redis-py's,
        as :func:`scripts.call_many` gives them); a pipeline that failed as a whole raises redis-py's error.
        """
        sync = sync or self.sync
        if not sync.enabled:
            return (yield from scripts.call_many(calls))
        out: list[Any] = []
        for result, confirmed in (yield from run_synced(calls, sync, kind=self.conn.kind)):
            if isinstance(result, Exception) or not confirmed.short:
                out.append(result)
            else:
                out.append(
                    ReplicaAckTimeout(
                        confirmed.describe(sync.timeout_ms), result=result, acked=confirmed.replicas, wanted=confirmed.wanted
                    )
                )
        return out

    @operation
    def check_writes(self) -> Op[None]:
        """Check, before anything is written, that the store can confirm writes as :attr:`sync` asks
        (``sync_flush``: Redis ≥ 7.2 with ``appendonly yes``), and count the master's replicas for
        ``sync_replicas="all"``; one round trip, nothing when writes wait for nothing.

        Raises:
            MQClientError: the server cannot do what ``sync_flush`` asks (saying why and what to do).
            MQBrokerError: the store could not be reached.
        """
        with self._errors("checking how the store confirms writes"):
            yield from check_first(self.keys.config, self.sync, kind=self.conn.kind)

    def _write(self, name: str, keys: Sequence[str], argv: Sequence[Any]) -> Op[Any]:
        """One write script; raises its error, or :class:`ReplicaAckTimeout` (see :meth:`write_scripts`)."""
        if not self.sync.enabled:
            return (yield scripts.Eval(name, keys, argv))
        result = (yield from StoreBase.write_scripts.op(self, [(name, keys, argv)]))[0]
        if isinstance(result, Exception):
            raise result
        return result

    def _pipeline(self, build: Callable[[Any], object], doing: str) -> Op[list[Any]]:
        """Queue commands with ``build(pipe)`` and run them in one round trip; each slot holds its reply
        or an :class:`MQBrokerError`."""
        with self._errors(doing):
            replies = yield Pipe(build)
        return [self._slot(r, doing) for r in replies]

    def _each_queue(
        self,
        queues: Sequence[tuple[str, int]],
        command: Callable[[Any, QueueKeys], object],
        doing: str,
        *,
        batch: int = QUEUE_BATCH,
    ) -> Op[list[Any]]:
        """One pipelined ``command(pipe, queue keys)`` per ``(topic, queue_id)``, ``batch`` queues a round
        trip; the replies in order, or the first failed slot's :class:`MQBrokerError` raised."""
        out: list[Any] = []
        for part in chunks(queues, batch):
            keys = [self.queue_keys(t, q) for t, q in part]

            def build(p: Any, keys: Sequence[QueueKeys] = keys) -> None:
                for k in keys:
                    command(p, k)

            out += all_or_raise((yield from self._pipeline(build, doing)))
        return out

    def _queue_stats(self, queues: Sequence[tuple[str, int]], doing: str) -> Op[list[QueueStats]]:
        """Min/max offset and last store time of each ``(topic, queue_id)`` (the ``queue-stats`` script,
        pipelined, :data:`QUEUE_BATCH` queues a round trip); with a tier, ``min_offset`` is its first offset."""
        out: list[QueueStats] = []
        for part in chunks(queues, QUEUE_BATCH):
            keys = [self.queue_keys(t, q) for t, q in part]
            calls: list[ScriptCall] = [("queue-stats", k.read(), []) for k in keys]
            # the first tier segment's start (score) after the scripts: min_offset is the first of either tier
            replies = all_or_raise((yield from self._scripts(calls, doing, functools.partial(_first_segments, keys))))
            for r, tiered in zip(replies, replies[len(calls) :]):
                low = int(r[0]) if not tiered else min(int(r[0]), int(tiered[0][1]))
                out.append(QueueStats(low, int(r[1]), int(r[2])))
        return out

    def _slot(self, reply: Any, doing: str) -> Any:
        """The one place a failed slot of a pipelined batch becomes an :class:`MQBrokerError`."""
        if not isinstance(reply, Exception) or isinstance(reply, MQBrokerError):
            return reply
        try:
            with self._errors(doing):
                raise reply
        except MQBrokerError as e:
            return e
        except Exception as e:  # not a redis error: still the store's failure for this slot
            return MQBrokerError(f"store error while {doing}: {e!r}")


def _first_segments(keys: Sequence[QueueKeys], pipe: Any) -> None:
    """Queue the first tier segment (with its start offset as score) of each queue."""
    for k in keys:
        pipe.zrange(k.segments, 0, 0, withscores=True)


def all_or_raise(replies: Sequence[Any]) -> list[Any]:
    """``replies`` when no slot failed; else raise the first slot's :class:`MQBrokerError`."""
    for r in replies:
        if isinstance(r, MQBrokerError):
            raise r
    return list(replies)


def chunks(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``items`` in slices of at most ``size``."""
    for i in range(0, len(items), size):
        yield items[i : i + size]
