"""The asyncio API: the same classes as :mod:`mq`, natively on ``redis.asyncio`` (no thread per
call, no executor around the sync classes). Classes are imported on first use."""

from __future__ import annotations

import importlib
from typing import Any

_CLASSES = {
    "Producer": "mq.aio.producer",
    "TransactionProducer": "mq.aio.transaction",
    "SimpleConsumer": "mq.aio.simple",
}

__all__ = sorted(_CLASSES)


def __getattr__(name: str) -> Any:
    if name in _CLASSES:
        return getattr(importlib.import_module(_CLASSES[name]), name)
    raise AttributeError(f"module 'mq.aio' has no attribute {name!r}")
