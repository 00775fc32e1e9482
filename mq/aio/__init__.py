"""rocketredis for asyncio: the sync classes' names, constructor arguments and methods, with every
method that does I/O a coroutine, natively on ``redis.asyncio`` (no thread per call, no executor)::

    from mq import Message, aio

    async with aio.Producer("producer-group", url) as producer:
        await producer.send(Message("orders", b"hello"))

Each class supports ``async with`` and ``await start()`` / ``await shutdown(timeout_s=…)``. The classes
are imported on first use (module ``__getattr__``), so ``import mq.aio`` stays cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types of the lazy exports, for type checkers
    from mq.aio.admin import Admin as Admin
    from mq.aio.producer import Producer as Producer
    from mq.aio.pull import PullConsumer as PullConsumer
    from mq.aio.push import PushConsumer as PushConsumer
    from mq.aio.simple import SimpleConsumer as SimpleConsumer
    from mq.aio.transaction import TransactionProducer as TransactionProducer

#: exported name → the module of ``mq.aio`` that defines it
_MODULES = {
    "Admin": "admin",
    "Producer": "producer",
    "PullConsumer": "pull",
    "PushConsumer": "push",
    "SimpleConsumer": "simple",
    "TransactionProducer": "transaction",
}

__all__ = sorted(_MODULES)


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'mq.aio' has no attribute {name!r}; it exports {', '.join(__all__)}")
    value = getattr(importlib.import_module(f"mq.aio.{module}"), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
