"""Queue selectors [RocketMQ ``MessageQueueSelector`` and its built-in implementations]."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from mq.errors import MQClientError
from mq.model.message import Message
from mq.model.queue import MessageQueue

#: This module's own random numbers: a library must not draw from (and so shift) the application's
#: global ``random`` stream, which a program may seed to repeat its runs.
_RANDOM = random.Random()


@runtime_checkable
class MessageQueueSelector(Protocol):
    """Picks the queue for a message; plain callables with the same arguments work too.

    Returning None falls back to the producer's default choice (round-robin).
    """

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue | None:
        """The queue for ``msg`` among the topic's writable queues ``mqs``."""
        ...


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode()`` of ``text``: ``s[0]*31^(n-1) + … + s[n-1]`` over UTF-16 units, int32."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_hash(arg: object) -> int:
    """Java's ``hashCode()`` of ``arg`` for str (String), int (Integer or Long) and bytes (Arrays.hashCode).

    Raises:
        MQClientError: for other types, whose hash would not be stable across processes.
    """
    if isinstance(arg, str):
        return java_string_hash(arg)
    if isinstance(arg, bool) or not isinstance(arg, (int, bytes, bytearray)):
        raise MQClientError(
            f"SelectMessageQueueByHash needs a str, int or bytes arg, got {type(arg).__name__}; pass str(arg) "
            "if its text is a stable sharding key"
        )
    if isinstance(arg, int):
        if -(1 << 31) <= arg < 1 << 31:
            return arg
        v = arg & 0xFFFFFFFFFFFFFFFF
        h = (v ^ (v >> 32)) & 0xFFFFFFFF  # Long.hashCode
    else:
        h = 1
        for b in arg:
            h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def consistent_hash(key: int, buckets: int) -> int:
    """Guava's ``Hashing.consistentHash(key, buckets)`` (jump consistent hash): the bucket in
    ``0..buckets-1`` for ``key`` (an int64, e.g. a :func:`java_hash`); when ``buckets`` grows by one, only
    about ``1/buckets`` of the keys move. RocketMQ 5's proxy picks a FIFO message group's queue this way.

    Raises:
        MQClientError: ``buckets`` is not positive.
    """
    if buckets < 1:
        raise MQClientError(f"buckets must be positive, got {buckets}")
    mask = (1 << 64) - 1
    state = key & mask
    candidate = 0
    while True:
        state = (2862933555777941757 * state + 1) & mask  # Java's long arithmetic
        next_ = int((candidate + 1) / (((state >> 33) + 1) / 2147483648.0))
        if next_ >= buckets:
            return candidate
        candidate = next_


class SelectMessageQueueByHash:
    """The same ``arg`` (sharding key) always picks the same queue, in every process.

    The queue is ``mqs[abs(java_hash(arg) % len(mqs))]``, as RocketMQ computes it in Java.
    """

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """The queue for sharding key ``arg``."""
        h = java_hash(arg)
        return mqs[abs(h) % len(mqs)]  # abs(h % n) in Java equals abs(h) % n


class SelectMessageQueueByRandom:
    """A uniformly random queue."""

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
        """A random queue of ``mqs``."""
        return _RANDOM.choice(list(mqs))


class SelectMessageQueueByMachineRoom:
    """RocketMQ ships this unimplemented: it returns None, so the default choice applies."""

    def __init__(self, consumer_idcs: Sequence[str] = ()) -> None:
        self.consumer_idcs = set(consumer_idcs)

    def select(self, mqs: Sequence[MessageQueue], msg: Message, arg: Any) -> MessageQueue | None:
        """Always None (fall back to the default queue choice)."""
        return None
