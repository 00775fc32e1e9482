"""The Redis store: key layout, Lua scripts and typed operations.

``Store`` is imported on first use: ``mq.store.connection`` and ``mq.store.sentinel`` use :mod:`mq.store.redispy`
(the one home of redis-py's private parts), and the store itself imports ``mq.store.connection``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mq.store.store import Store

__all__ = ["Store"]


def __getattr__(name: str) -> Any:
    if name == "Store":
        from mq.store.store import Store

        globals()["Store"] = Store  # asked once
        return Store
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
