"""The asyncio API: the sync classes' names, arguments and methods, awaited on ``redis.asyncio``.

Classes are imported lazily (module ``__getattr__``), so ``import mq.aio`` costs nothing and a class
whose module is missing does not break the others.
"""

from __future__ import annotations

import importlib
from typing import Any

_CLASSES = {
    "PushConsumer": "mq.aio.push",
    "PullConsumer": "mq.aio.pull",
}

__all__ = sorted(_CLASSES)


def __getattr__(name: str) -> Any:
    module = _CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module 'mq.aio' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
