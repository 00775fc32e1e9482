"""The uses of a :class:`~mq.store.lease.Lease` by the store's callers: a sync client's script calls
without a pool checkout each (:func:`execute`, D53) and the pipelined senders' rounds written before
the last one's replies are read (:class:`PipeLane`, D57, and :class:`AioPipeLane`, D58).

Who gets a lease, and what happens when its connection fails, are the lease's rules (see
:mod:`mq.store.lease`); here is only what each use adds: the client's one try-shared lease for
single commands, and the bookkeeping of pipelined rounds written and not read.
"""

from __future__ import annotations

import contextlib
from typing import Any

import redis

from mq.store import redispy
from mq.store.lease import Lease, leasable, lease_for

#: Attribute of a client holding its try-shared :class:`Lease` (or False when it has none).
_LANE = "_mq_lane"


def lane_of(client: Any) -> Lease | None:
    """The try-shared lease of sync ``client`` for single commands (made on first use), or None when
    its kind gets none."""
    lane = client.__dict__.get(_LANE)
    if lane is None:
        eligible = type(client) is redis.Redis and leasable(client)
        # setdefault: two threads making the first call at once end up with the same lease
        lane = client.__dict__.setdefault(_LANE, Lease(client.connection_pool, shared=True) if eligible else False)
    return lane or None


def execute(client: Any, *args: Any, key: Any = None) -> Any:
    """``client.execute_command(*args)`` for a command with no response callback (``EVALSHA``): over
    the client's lease when it has a free one and redis-py's observability is off, else the usual way.
    On a sync cluster, ``key`` (one of the command's keys) names the node: the lease is that node's
    (see :func:`execute_many`)."""
    if not redispy.observed():
        lane = lane_of(client)
        if lane is not None:
            done, reply = lane.call(args)
            if done:
                return reply
        elif key is not None and redispy.is_sync_cluster(client):
            node = redispy.node_client(client, key)
            lane = lane_of(node) if node is not None else None
            if lane is not None:
                try:
                    done, reply = lane.call(args)
                except _REDIRECTED:
                    pass  # the node did not run it: redis-py's own path below follows the redirect
                except _NODE_FAILED:
                    _refresh(client)  # as redis-py does after a failed node, then its path below retries
                else:
                    if done:
                        return reply
    return client.execute_command(*args)


# -- a cluster: straight to the node of a known slot (D141) -------------------------------------------
#
# redis-py's cluster client spends more client CPU on a command than the command's own work: its request
# policy, each key hashed twice, a pool checkout and observability hooks a command, and Python packing
# for a pipeline. Where the store knows a command's slot (a script's first key), it sends the command
# on the try-shared lease of the node its client's slot map names (the node's own ``redis.Redis``
# pool, so one set of connections a node). What the node refuses for its slot (MOVED, ASK, TRYAGAIN,
# CLUSTERDOWN) or loses with its connection is run again through redis-py's cluster client one command
# at a time — what redis-py's cluster pipeline does with such commands — which follows the redirect,
# fixes its slot map and retries as before; a failed connection makes the map be read again first.

#: Replies saying the node did not run a command for its slot (now): redis-py's own path runs it.
_REDIRECTED: tuple[type[Exception], ...] = (
    redis.exceptions.MovedError,
    redis.exceptions.AskError,
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
)
#: A node that could not be reached or answer in time: the slot map is read again, then redis-py's path runs it.
_NODE_FAILED: tuple[type[Exception], ...] = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)


def _refresh(client: Any) -> None:
    """Read cluster ``client``'s slot map again (best effort, as :class:`mq.store.ops.Refresh`)."""
    with contextlib.suppress(redis.RedisError, redis.exceptions.RedisClusterException):
        client.nodes_manager.initialize()


#: A command for :func:`execute_many`: ``(args, options, key, parse)`` — its arguments, its redis-py
#: options, one of its keys, and what turns its reply into the caller's value (None: the reply as read).
Routed = tuple[tuple[Any, ...], dict[str, Any], Any, Any]


def execute_many(client: Any, commands: list[Routed]) -> list[Any] | None:
    """The replies of ``commands`` sent as one pipelined round a node on a sync cluster ``client``:
    written to every node first, then read. Each slot holds its reply (``parse``d) or its exception,
    as a cluster pipeline's ``execute(raise_on_error=False)``. None (nothing sent) for another client,
    under redis-py's observability, or while the slot map lacks a node for a key: the caller pipelines
    the usual way then.

    A node whose lease another thread holds gets its commands through redis-py's cluster pipeline; a
    command the node refused for its slot or lost with its connection is run again through redis-py's
    cluster client, one at a time (see above). Those replies are redis-py's cluster client's own (its
    response callbacks)."""
    if not redispy.is_sync_cluster(client) or redispy.observed():
        return None
    rounds: dict[int, tuple[Lease, list[int]]] = {}
    for i, (_, _, key, _) in enumerate(commands):
        node = redispy.node_client(client, key)
        lane = lane_of(node) if node is not None else None
        if lane is None:
            return None
        entry = rounds.get(id(lane))
        if entry is None:
            entry = rounds[id(lane)] = (lane, [])
        entry[1].append(i)
    replies: list[Any] = [None] * len(commands)
    busy: list[int] = []
    held: list[tuple[Lease, list[int]]] = []
    try:
        for lane, round_ in rounds.values():
            if not lane.hold():
                busy += round_
                continue
            held.append((lane, round_))
            try:
                lane.send([commands[i][0] for i in round_], check_health=True)
            except _NODE_FAILED as e:  # dropped: nothing of this round is read
                held.pop()
                lane.unhold()
                for i in round_:
                    replies[i] = e
        while held:
            lane, round_ = held.pop(0)
            try:
                for i, reply in zip(round_, lane.read(len(round_))):
                    parse = commands[i][3]
                    replies[i] = reply if parse is None or isinstance(reply, Exception) else parse(reply)
                lane.settle()
            except _NODE_FAILED as e:  # dropped: its commands may or may not have run
                for i in round_:
                    replies[i] = e
            finally:
                lane.unhold()
    finally:
        for lane, _ in held:  # an unexpected error: those rounds' replies are unread
            lane.drop()
            lane.unhold()
    if busy:
        pipe = client.pipeline(transaction=False)
        for i in busy:
            pipe.execute_command(*commands[i][0], **commands[i][1])
        for i, reply in zip(busy, pipe.execute(raise_on_error=False)):
            replies[i] = reply
    again = [i for i, r in enumerate(replies) if isinstance(r, _REDIRECTED + _NODE_FAILED)]
    if any(isinstance(replies[i], _NODE_FAILED) for i in again):
        _refresh(client)
    for i in again:
        try:
            replies[i] = client.execute_command(*commands[i][0], **commands[i][1])
        except (redis.RedisError, redis.exceptions.RedisClusterException) as e:
            replies[i] = e
    return replies


class _Rounds:
    """Rounds written on a lease and not read yet. A round's ticket is the lease's epoch when it was
    written: a dropped connection moves the epoch on, and every unread round is lost with it."""

    __slots__ = ("_lease", "_unread")

    def __init__(self, lease: Lease) -> None:
        self._lease = lease
        self._unread = 0

    @property
    def _conn(self) -> Any:
        return self._lease.conn

    def _wrote(self) -> int:
        """A round was written whole: its ticket."""
        self._unread += 1
        return self._lease.epoch

    def _check(self, ticket: int) -> None:
        """Raise ``ConnectionError`` when the round of ``ticket`` was lost with its connection."""
        if ticket != self._lease.epoch or self._lease.conn is None:
            raise redis.ConnectionError("connection lost before the replies of a pipeline were read")

    def _read_one(self) -> bool:
        """A round was read; whether it was the last one unread."""
        self._unread -= 1
        return self._unread == 0

    def _lost(self) -> int:
        """Every unread round is lost (the connection is about to be dropped or given back); how many."""
        unread, self._unread = self._unread, 0
        return unread


class PipeLane(_Rounds):
    """A sync client's exclusive lease used by ONE thread for pipelines whose replies it reads later:
    :meth:`send` writes a round of commands and returns a ticket, :meth:`read` reads that round's
    replies, so the next round can be written before the last one's replies are read (Redis answers in
    order; rounds are read in the order they were sent).

    A connection error while writing or reading drops the connection: the round it happened in raises
    it, and every round sent before and not yet read raises ``ConnectionError`` from :meth:`read` (its
    commands may or may not have run). An error reply is that command's slot (a ``ResponseError``).
    No retry here: the caller decides. Not thread-safe.
    """

    __slots__ = ()

    def send(self, commands: list[tuple[Any, ...]]) -> int:
        """Write ``commands`` (each a tuple of command arguments); returns the ticket for :meth:`read`.
        Raises redis-py's connection errors (the connection is dropped)."""
        epoch = self._lease.epoch
        try:
            self._lease.send(commands, check_health=self._unread == 0)
        finally:
            if self._lease.epoch != epoch:
                self._lost()
        return self._wrote()

    def read(self, ticket: int, count: int) -> list[Any]:
        """The ``count`` replies of the round :meth:`send` gave ``ticket`` for (error replies as
        exceptions in their slots). Raises redis-py's connection errors (the connection is dropped)."""
        self._check(ticket)
        try:
            replies = self._lease.read(count)
        except BaseException:
            self._lost()
            raise
        if self._read_one():
            self._lease.settle()
        return replies

    def close(self) -> None:
        """Give the connection back to the pool (dropped first when replies are unread)."""
        self._lease.close(dirty=self._lost() > 0)

    def _drop(self) -> None:
        self._lost()
        self._lease.drop()


class AioPipeLane(_Rounds):
    """:class:`PipeLane` for ``redis.asyncio``: a lease used by ONE task (the asyncio producer's
    sender), with the same rules. Cancelling :meth:`send` or :meth:`read` (the task that owns the lane
    is cancelled) drops the connection: a round is never left half written or half read on a
    connection that is used again."""

    __slots__ = ()

    async def send(self, commands: list[tuple[Any, ...]]) -> int:
        """Write ``commands``; returns the ticket for :meth:`read`. Raises redis-py's connection errors
        (the connection is dropped)."""
        epoch = self._lease.epoch
        try:
            await self._lease.asend(commands, check_health=self._unread == 0)
        finally:
            if self._lease.epoch != epoch:
                self._lost()
        return self._wrote()

    async def read(self, ticket: int, count: int) -> list[Any]:
        """The ``count`` replies of the round :meth:`send` gave ``ticket`` for (error replies as
        exceptions in their slots). Raises redis-py's connection errors (the connection is dropped)."""
        self._check(ticket)
        try:
            replies = await self._lease.aread(count)
        except BaseException:
            self._lost()
            raise
        if self._read_one():
            await self._lease.asettle()
        return replies

    async def close(self) -> None:
        """Give the connection back to the pool (dropped first when replies are unread)."""
        await self._lease.aclose(dirty=self._lost() > 0)

    async def _drop(self) -> None:
        self._lost()
        await self._lease.adrop()


def pipe_lane_of(client: Any) -> PipeLane | AioPipeLane | None:
    """A new :class:`PipeLane` of sync ``client`` (an :class:`AioPipeLane` of a ``redis.asyncio`` one),
    or None when the lease rule gives it none."""
    lease = lease_for(client)
    if lease is None:
        return None
    return AioPipeLane(lease) if type(client) is redis.asyncio.Redis else PipeLane(lease)
