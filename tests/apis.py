"""Both APIs behind one interface: the ``api`` fixture runs a behaviour test once with the sync classes
(``mq``) and once with the asyncio ones (``mq.aio``), so the test body is written once.

``api.make("PushConsumer", "g", url, namespace=ns)`` gives an object with the sync API's look:

- ``"sync"``: the :mod:`mq` class itself.
- ``"aio"``: the :mod:`mq.aio` class, made and driven on an event loop in an anyio blocking portal
  thread. Each method call goes through the portal and is awaited there when it returns an awaitable
  (``start``, ``send``, ``receive``, ``poll``, ``shutdown``, admin methods …); ``with obj:`` is
  ``async with``. The test's own callbacks are plain functions: for ``"aio"`` the listeners,
  check-back ``checker`` and transaction ``executor`` are handed over as ``async def`` wrappers of
  them, so the asyncio classes run async callbacks (the callbacks must not block: they run on the loop).

Objects the test leaves running are shut down when it ends.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
from collections.abc import Callable, Iterator
from typing import Any

import anyio.from_thread
import pytest

#: Classes both APIs have.
CLASSES = ("Producer", "TransactionProducer", "PushConsumer", "PullConsumer", "SimpleConsumer", "Admin")
#: Methods whose callable arguments are the test's callbacks: method → positions and keyword names.
CALLBACK_ARGS: dict[str, tuple[tuple[int, ...], tuple[str, ...]]] = {
    "register_message_listener": ((0,), ("listener",)),
    "register_orderly_listener": ((0,), ("listener",)),
    "send_message_in_transaction": ((1,), ("executor",)),
    "__init__": ((), ("checker",)),
}


def _as_async(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` as an ``async def`` (what an asyncio program registers)."""

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return call


def _async_callbacks(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    positions, names = CALLBACK_ARGS.get(method, ((), ()))
    args = tuple(_as_async(a) if i in positions and callable(a) else a for i, a in enumerate(args))
    kwargs = {k: _as_async(v) if k in names and callable(v) else v for k, v in kwargs.items()}
    return args, kwargs


async def _invoke(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    result = fn(*args, **kwargs)
    return await result if inspect.isawaitable(result) else result


class Driven:
    """An :mod:`mq.aio` object whose methods are called through a blocking portal (see the module docstring)."""

    def __init__(self, portal: anyio.from_thread.BlockingPortal, obj: Any) -> None:
        self._portal = portal
        self._obj = obj

    def __repr__(self) -> str:
        return f"Driven({self._obj!r})"

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._obj, name)
        if not callable(value) or inspect.isclass(value):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            args, kwargs = _async_callbacks(name, args, kwargs)
            result = self._portal.call(_invoke, value, args, kwargs)
            return self if result is self._obj else result

        return call

    def __enter__(self) -> Driven:
        self._portal.call(_invoke, self._obj.__aenter__, (), {})
        return self

    def __exit__(self, *exc: object) -> None:
        self._portal.call(_invoke, self._obj.__aexit__, (None, None, None), {})


class Api:
    """The classes of one API with the sync API's look (see the module docstring).

    Attributes:
        name: ``"sync"`` or ``"aio"``.
    """

    def __init__(self, name: str, portal: anyio.from_thread.BlockingPortal | None = None) -> None:
        self.name = name
        self._portal = portal
        self._made: list[Any] = []

    def make(self, cls: str, *args: Any, **kwargs: Any) -> Any:
        """A new ``cls`` (one of :data:`CLASSES`) of this API, made with ``args`` and ``kwargs``."""
        if cls not in CLASSES:
            raise ValueError(f"unknown class {cls!r}: use one of {CLASSES}")
        if self._portal is None:
            obj = getattr(importlib.import_module("mq"), cls)(*args, **kwargs)
        else:
            aio_cls = getattr(importlib.import_module("mq.aio"), cls)
            args, kwargs = _async_callbacks("__init__", args, kwargs)
            obj = Driven(self._portal, self._portal.call(_invoke, aio_cls, args, kwargs))
        self._made.append(obj)
        return obj

    producer = functools.partialmethod(make, "Producer")
    transaction_producer = functools.partialmethod(make, "TransactionProducer")
    push_consumer = functools.partialmethod(make, "PushConsumer")
    pull_consumer = functools.partialmethod(make, "PullConsumer")
    simple_consumer = functools.partialmethod(make, "SimpleConsumer")
    admin = functools.partialmethod(make, "Admin")

    def close(self) -> None:
        """Shut down (close, for an admin) what the test made, newest first; errors of objects already
        shut down or never started are ignored."""
        for obj in reversed(self._made):
            with contextlib.suppress(Exception):
                obj.close() if isinstance(getattr(obj, "_obj", obj), _admin_classes()) else obj.shutdown()
        self._made.clear()


def _admin_classes() -> tuple[type, ...]:
    import mq
    import mq.aio

    return (mq.Admin, mq.aio.Admin)


@pytest.fixture(params=["sync", "aio"])
def api(request: pytest.FixtureRequest) -> Iterator[Api]:
    """The sync API, then the asyncio one on a loop in a blocking-portal thread."""
    if request.param == "sync":
        chosen = Api("sync")
        try:
            yield chosen
        finally:
            chosen.close()
        return
    with anyio.from_thread.start_blocking_portal("asyncio") as portal:
        chosen = Api("aio", portal)
        try:
            yield chosen
        finally:
            chosen.close()
