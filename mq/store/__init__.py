"""The Redis store: key layout, Lua scripts and typed operations."""

from mq.store.store import Store

__all__ = ["Store"]
