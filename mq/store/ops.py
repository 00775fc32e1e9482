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
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Coroutine, Generator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from mq.connection import REDIS_ERRORS


@dataclass(frozen=True, slots=True)
class Cmd:
    """One client call: ``fn(client)`` (its value, or an awaitable of it on an asyncio client)."""

    fn: Callable[[Any], Any]


@dataclass(frozen=True, slots=True)
class Pipe:
    """Commands queued by ``build(pipeline)`` sent in one round trip (per node on a cluster)."""

    build: Callable[[Any], object]


@dataclass(frozen=True, slots=True)
class NodePipe:
    """Commands queued by ``build(pipeline)`` on one connection of the node serving ``key``."""

    key: str
    build: Callable[[Any], object]


@dataclass(frozen=True, slots=True)
class Scan:
    """Every key matching ``pattern``, read ``count`` at a time; the reply is a list."""

    pattern: str
    count: int


@dataclass(frozen=True, slots=True)
class Refresh:
    """Read a cluster's slot map again (no-op elsewhere; failures are ignored)."""


Request = Cmd | Pipe | NodePipe | Scan | Refresh
T = TypeVar("T")
#: An operation returning ``T``.
Op = Generator[Request, Any, T]
P = ParamSpec("P")
R = TypeVar("R")


def run(client: Any, op: Op[T]) -> T:
    """Drive ``op`` to its result with a redis-py (or fakeredis) client."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = op.send(reply) if error is None else op.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        try:
            reply = _do(client, request)
        except Exception as e:  # handed to the operation at its yield
            error = e


async def arun(client: Any, op: Op[T]) -> T:
    """Drive ``op`` to its result with a ``redis.asyncio`` (or fakeredis async) client."""
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            request = op.send(reply) if error is None else op.throw(error)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        try:
            reply = await _ado(client, request)
        except Exception as e:  # handed to the operation at its yield
            error = e


def _do(client: Any, request: Request) -> Any:
    if isinstance(request, Cmd):
        return request.fn(client)
    if isinstance(request, Pipe):
        pipe = client.pipeline(transaction=False)
        request.build(pipe)
        return list(pipe.execute(raise_on_error=False))
    if isinstance(request, NodePipe):
        node_client = client.get_redis_connection(client.get_node_from_key(request.key)) if _cluster(client) else client
        pipe = node_client.pipeline(transaction=False)
        request.build(pipe)
        return list(pipe.execute(raise_on_error=False))
    if isinstance(request, Scan):
        return list(client.scan_iter(match=request.pattern, count=request.count))
    if _cluster(client):
        with contextlib.suppress(*REDIS_ERRORS):
            client.nodes_manager.initialize()
    return None


async def _ado(client: Any, request: Request) -> Any:
    if isinstance(request, Cmd):
        value = request.fn(client)
        return await value if inspect.isawaitable(value) else value
    if isinstance(request, Pipe):
        pipe = client.pipeline(transaction=False)
        request.build(pipe)
        return list(await pipe.execute(raise_on_error=False))
    if isinstance(request, NodePipe):
        pipe = (_async_node_client(client, request.key) if _cluster(client) else client).pipeline(transaction=False)
        request.build(pipe)
        return list(await pipe.execute(raise_on_error=False))
    if isinstance(request, Scan):
        return [key async for key in client.scan_iter(match=request.pattern, count=request.count)]
    if _cluster(client):
        with contextlib.suppress(*REDIS_ERRORS):
            await client.nodes_manager.initialize()
    return None


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


class SyncRunner:
    """Runs operations at once with the sync client (``self._client``)."""

    _client: Any

    def _run(self, op: Op[T]) -> T:
        return run(self._client, op)


class AsyncRunner:
    """Runs operations as coroutines with the asyncio client (``self._client``)."""

    _client: Any

    def _run(self, op: Op[T]) -> Coroutine[Any, Any, T]:
        return arun(self._client, op)


class operation(Generic[P, R]):
    """Marks a generator method as a store operation (see the module docstring).

    ``Class.method.op`` is the generator function itself, for composing operations.
    """

    def __init__(self, op: Callable[Concatenate[Any, P], Op[R]]) -> None:
        self.op = op
        functools.update_wrapper(self, op)  # type: ignore[arg-type]

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
