"""The store's operations, written once for both I/O styles (sans-I/O).

An *operation* is a generator: it yields :data:`Request` objects, receives each one's reply (or has
the error that request raised thrown in at the ``yield``), and returns its result. It never holds a
client: :func:`run` drives it with a redis-py client, :func:`arun` with a ``redis.asyncio`` one. So
request building, validation, encoding, script names and reply parsing are the same code for
:class:`mq.store.Store` and :class:`mq.store.aio.AsyncStore`; only the two small drivers below differ.

Methods of the store's operation classes are marked :class:`operation`. Read through a
:class:`SyncRunner` (``Store``) such a method runs at once and returns its result; through an
:class:`AsyncRunner` (``AsyncStore``) it returns a coroutine; through anything else (another
operation composing it: ``yield from StoreOps.topic.op(self, name)``) it returns the generator.

Requests:

- :class:`Cmd` — ``fn(client)``: one redis-py call (the sync and asyncio clients share method names;
  the asyncio driver awaits what it returns).
- :class:`Pipe` — ``build(pipeline)`` queues commands on a non-transactional pipeline; the reply is
  the list of replies, a failed slot holding its exception.
- :class:`NodePipe` — the same on the connection of the node that serves ``key`` (a cluster's
  ``WAIT`` must follow the writes on their own node's connection).
- :class:`Scan` — every key matching ``pattern`` (``SCAN``; every master of a cluster).
- :class:`Refresh` — read a cluster's slot map again (best effort).
- :class:`Blocking` — ``fn()``: blocking I/O that is not Redis (a tier segment read); the asyncio
  driver runs it in a worker thread, so the event loop and the consumer's other queues go on.
- :class:`Sleep` — a pause between retries (``time.sleep`` or ``asyncio.sleep``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import inspect
import time
from collections.abc import Callable, Coroutine, Generator
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from redis.exceptions import AskError, MovedError, TryAgainError

from mq.store import lane, redispy
from mq.store.connection import REDIS_ERRORS

if TYPE_CHECKING:
    from mq.store.base import StoreBase


class Request:
    """Something an operation asks its driver to do: :meth:`do` with a sync client, :meth:`ado` with an
    asyncio one (the only place where the two I/O styles differ)."""

    __slots__ = ()

    def do(self, client: Any) -> Any:
        raise NotImplementedError

    async def ado(self, client: Any) -> Any:
        raise NotImplementedError


class Cmd(Request):
    """One client call: ``fn(client)`` (its value, or an awaitable of it on an asyncio client)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        self.fn = fn

    def do(self, client: Any) -> Any:
        return self.fn(client)

    async def ado(self, client: Any) -> Any:
        value = self.fn(client)
        return await value if inspect.isawaitable(value) else value


class Pipe(Request):
    """Commands queued by ``build(pipeline)`` sent in one round trip (per node on a cluster); the reply
    is the list of replies, a failed slot holding its exception."""

    __slots__ = ("build",)

    def __init__(self, build: Callable[[Any], object]) -> None:
        self.build = build

    def do(self, client: Any) -> Any:
        pipe = self._pipeline(client)
        self._fill(pipe, client)
        return list(pipe.execute(raise_on_error=False))

    async def ado(self, client: Any) -> Any:
        pipe = self._pipeline(client, asyncio=True)
        self._fill(pipe, client)
        return list(await pipe.execute(raise_on_error=False))

    def _fill(self, pipe: Any, client: Any) -> None:
        self.build(pipe)

    def _pipeline(self, client: Any, *, asyncio: bool = False) -> Any:
        return client.pipeline(transaction=False)


class NodePipe(Pipe):
    """Commands queued by ``build(pipeline)`` on one connection of the node serving ``key``.

    A cluster client follows a moved slot by itself for its own commands, not for a pipeline on one
    of its nodes, so this request does it: a node that cannot be reached, or a reply saying the slot
    is served elsewhere (MOVED/ASK/TRYAGAIN: a failover promoted the replica, the old master answers
    as its replica), makes the slot map be read again; when every command was refused with MOVED
    (none ran) the pipeline is sent once more to the node now serving ``key``. Without that a
    long-poll waiter's client, which sends nothing else, kept its stale map and failed for good."""

    __slots__ = ("key",)

    def __init__(self, key: str, build: Callable[[Any], object]) -> None:
        super().__init__(build)
        self.key = key

    def do(self, client: Any) -> Any:
        if not _cluster(client):
            return super().do(client)
        node = redispy.node_client(client, self.key) if redispy.is_sync_cluster(client) else None
        queued = self._queued(client, node) if node is not None else None
        routed = lane.execute_many(client, queued) if queued is not None else None
        if routed is not None:  # one round on the node's kept connection (D141)
            return routed
        for again in (True, False):
            try:
                replies = super().do(client)
            except REDIS_ERRORS:
                Refresh().do(client)
                raise
            if not _routed_away(replies):
                return replies
            Refresh().do(client)
            if not (again and _all_moved(replies)):
                break
        return replies

    async def ado(self, client: Any) -> Any:
        if not _cluster(client):
            return await super().ado(client)
        # an asyncio cluster client reads its slot map at its first command, and a node's
        # pipeline may be that first use (a long-poll waiter's first wait): a no-op afterwards
        await client.initialize()
        for again in (True, False):
            try:
                replies = await super().ado(client)
            except REDIS_ERRORS:
                await Refresh().ado(client)
                raise
            if not _routed_away(replies):
                return replies
            await Refresh().ado(client)
            if not (again and _all_moved(replies)):
                break
        return replies

    def _queued(self, client: Any, node: Any) -> list[lane.Routed] | None:
        """The commands of this request as :func:`lane.execute_many` takes them (recorded on a plain
        pipeline of ``node``, the client of the node serving :attr:`key`), or None to pipeline the usual way."""
        return redispy.recorded(node, self.build)

    def _pipeline(self, client: Any, *, asyncio: bool = False) -> Any:
        if not _cluster(client):
            return client.pipeline(transaction=False)
        if asyncio:
            return _async_node_client(client, self.key).pipeline(transaction=False)
        return client.get_redis_connection(client.get_node_from_key(self.key)).pipeline(transaction=False)


class NodeCmd(NodePipe):
    """One command, ``build(client)``: a :class:`Cmd` (its value), except on a sync cluster client, where
    it goes to the node serving ``key`` as a :class:`NodePipe` of one command — on that node's kept
    connection (D141): redis-py's cluster command path costs more client CPU than a command such as a
    long-poll's unchecked ``XREAD BLOCK`` (D145). Its error reply is raised, as a :class:`Cmd`'s."""

    __slots__ = ()

    def do(self, client: Any) -> Any:
        if not redispy.is_sync_cluster(client):
            return self.build(client)
        reply = super().do(client)[0]
        if isinstance(reply, Exception):
            raise reply
        return reply

    async def ado(self, client: Any) -> Any:
        value = self.build(client)
        return await value if inspect.isawaitable(value) else value


#: Replies saying a cluster node does not serve a key's slot (now): the command did not run.
ROUTING_ERRORS: tuple[type[Exception], ...] = (MovedError, AskError, TryAgainError)


def _routed_away(replies: list[Any]) -> bool:
    """Whether a node refused any command of its pipeline for a slot it does not serve."""
    return any(isinstance(r, ROUTING_ERRORS) for r in replies)


def _all_moved(replies: list[Any]) -> bool:
    """Whether a node refused every command of its pipeline with MOVED: none ran, sending them again
    to the slot's new node runs each once (a keyless command such as ``WAIT`` runs anyway, so a
    pipeline holding one is never sent again here)."""
    return bool(replies) and all(isinstance(r, MovedError) for r in replies)


class Scan(Request):
    """Every key matching ``pattern``, read ``count`` at a time (every master of a cluster); the reply
    is a list."""

    __slots__ = ("count", "pattern")

    def __init__(self, pattern: str, count: int) -> None:
        self.pattern, self.count = pattern, count

    def do(self, client: Any) -> Any:
        return list(client.scan_iter(match=self.pattern, count=self.count))

    async def ado(self, client: Any) -> Any:
        return [key async for key in client.scan_iter(match=self.pattern, count=self.count)]


class Sleep(Request):
    """Wait ``seconds`` (``time.sleep``, or ``asyncio.sleep`` on an event loop); the reply is None. An
    operation's pause between retries, without holding a client."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    def do(self, client: Any) -> Any:
        time.sleep(self.seconds)

    async def ado(self, client: Any) -> Any:
        await asyncio.sleep(self.seconds)


class Refresh(Request):
    """Read a cluster's slot map again (no-op elsewhere; failures are ignored)."""

    __slots__ = ()

    def do(self, client: Any) -> Any:
        if _cluster(client):
            with contextlib.suppress(*REDIS_ERRORS):
                client.nodes_manager.initialize()

    async def ado(self, client: Any) -> Any:
        if _cluster(client):
            with contextlib.suppress(*REDIS_ERRORS):
                await client.nodes_manager.initialize()


class Blocking(Request):
    """``fn()``, blocking I/O outside Redis: called at once by the sync driver, in a worker thread by the
    asyncio one (``asyncio.to_thread``)."""

    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn

    def do(self, client: Any) -> Any:
        return self.fn()

    async def ado(self, client: Any) -> Any:
        return await asyncio.to_thread(self.fn)


T = TypeVar("T")
#: An operation returning ``T``.
Op = Generator[Request, Any, T]
P = ParamSpec("P")
R = TypeVar("R")


def run(client: Any, op: Op[T]) -> T:
    """Drive ``op`` to its result with a redis-py (or fakeredis) client."""
    send = op.send
    try:
        request = send(None)
        while True:
            try:
                reply = request.do(client)
            except Exception as e:  # handed to the operation at its yield
                request = op.throw(e)
            else:
                request = send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


async def arun(client: Any, op: Op[T]) -> T:
    """Drive ``op`` to its result with a ``redis.asyncio`` (or fakeredis async) client."""
    send = op.send
    try:
        request = send(None)
        while True:
            try:
                reply = await request.ado(client)
            except Exception as e:  # handed to the operation at its yield
                request = op.throw(e)
            else:
                request = send(reply)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]


def _cluster(client: Any) -> bool:
    return hasattr(client, "nodes_manager")


#: Attribute of an asyncio cluster client holding one plain client per node (see :func:`_async_node_client`).
_NODE_CLIENTS = "_mq_node_clients"


def _async_node_client(client: Any, key: str) -> Any:
    """A plain ``redis.asyncio`` client of the node serving ``key`` (redis-py's asyncio cluster has no
    per-node client to pipeline on), made once per node and closed with :func:`aclose_node_clients`."""
    import redis.asyncio

    node = client.get_node_from_key(key)
    clients: dict[str, Any] = client.__dict__.setdefault(_NODE_CLIENTS, {})
    if node.name not in clients:
        kwargs = {k: v for k, v in node.connection_kwargs.items() if k not in ("host", "port")}
        pool = redis.asyncio.ConnectionPool(connection_class=node.connection_class, host=node.host, port=node.port, **kwargs)
        clients[node.name] = redis.asyncio.Redis.from_pool(pool)  # owns the pool: aclose() disconnects it
    return clients[node.name]


async def aclose_node_clients(client: Any) -> None:
    """Close the per-node clients :func:`_async_node_client` made for ``client``."""
    for node_client in client.__dict__.pop(_NODE_CLIENTS, {}).values():
        with contextlib.suppress(*REDIS_ERRORS):
            await node_client.aclose()


def share_client(runner: Any, store: StoreBase) -> None:
    """Make ``runner`` (a producer's, consumer's or admin's own operations) run on ``store``'s client.

    Such an object composes operations of its own and is a runner itself, so a call costs one
    method call and the driver: delegating each run to ``store.run`` would add a call on the send
    path (D108). The client is taken here, inside ``mq/store``, so no code outside reads it.
    """
    runner._client = store._client


class SyncRunner:
    """Runs operations at once with the sync client (``self._client``; :func:`share_client` gives an
    object outside the store its store's).

    A subclass gets each :class:`operation` of its bases as a plain method (made once, when the class
    is made): a call costs what a method call and the driver cost, nothing per attribute access.
    """

    _client: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install(cls, _sync_method)

    def run(self, op: Op[T]) -> T:
        """Run one store operation (a generator of :mod:`mq.store.ops` requests) now and return its
        result. The public way for code outside ``mq/store`` to run an operation it composed."""
        return run(self._client, op)

    _run = run  # kept for mq/store's own callers while the rest moves to ``run``


class AsyncRunner:
    """Runs operations as coroutines with the asyncio client (``self._client``); a subclass gets each
    :class:`operation` as an ``async def`` method."""

    _client: Any

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _install(cls, _async_method)

    def run(self, op: Op[T]) -> Coroutine[Any, Any, T]:
        """``await store.run(op)``: run one store operation on the asyncio client."""
        return arun(self._client, op)

    _run = run  # kept for mq/store's own callers while the rest moves to ``run``


def _install(cls: type, make: Callable[[Callable[..., Op[Any]]], Callable[..., Any]]) -> None:
    """Replace every :class:`operation` ``cls`` sees with the method ``make`` builds for it."""
    for name in dir(cls):
        attr = inspect.getattr_static(cls, name)
        if isinstance(attr, operation):
            setattr(cls, name, make(attr.op))


def _sync_method(op: Callable[..., Op[Any]]) -> Callable[..., Any]:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return run(self._client, op(self, *args, **kwargs))

    method.op = op  # type: ignore[attr-defined]
    return functools.update_wrapper(method, op)


def _async_method(op: Callable[..., Op[Any]]) -> Callable[..., Any]:
    async def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await arun(self._client, op(self, *args, **kwargs))

    method.op = op  # type: ignore[attr-defined]
    return functools.update_wrapper(method, op)


class operation(Generic[P, R]):
    """Marks a generator method as a store operation (see the module docstring).

    ``Class.method.op`` is the generator function itself, for composing operations.
    """

    def __init__(self, op: Callable[Concatenate[Any, P], Op[R]]) -> None:
        self.op = op
        functools.update_wrapper(self, op)

    def __call__(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        """``Class.method(instance, …)`` works as for a plain method (runs as ``instance.method(…)``)."""
        return self.__get__(obj, type(obj))(*args, **kwargs)

    if TYPE_CHECKING:

        @overload
        def __get__(self, obj: None, owner: type) -> operation[P, R]: ...
        @overload
        def __get__(self, obj: SyncRunner, owner: type) -> Callable[P, R]: ...
        @overload
        def __get__(self, obj: AsyncRunner, owner: type) -> Callable[P, Coroutine[Any, Any, R]]: ...
        @overload
        def __get__(self, obj: object, owner: type) -> Callable[P, Op[R]]: ...

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return self
        op = self.op
        runner = getattr(obj, "_run", None)
        if runner is None:
            return functools.partial(op, obj)

        def bound(*args: Any, **kwargs: Any) -> Any:
            return runner(op(obj, *args, **kwargs))

        bound.__name__ = op.__name__
        bound.__doc__ = op.__doc__
        return bound
