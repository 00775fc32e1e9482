"""Concurrent SendMessage calls share store rounds: the puts awaited at the same time go out in one
pipeline (:meth:`mq.store.Store.put_many`, one round trip), as ``mq.aio.Producer``'s sender does.

Profiled under the official Node.js producer at 64 sends in flight (docs/benchmarks.md), a round trip
per SendMessage was a fifth of the endpoint's CPU: redis-py's command path and a socket write per
message. Here the first put goes out at once (one send in flight waits for nobody); puts that arrive
while :data:`ROUNDS_IN_FLIGHT` rounds are in the store wait for the next round, which takes all of
them (at most :data:`MAX_ROUND`). Each put keeps its own result or error: ``put_many`` answers slot by
slot, and a round that fails as a whole (the store does not answer) fails each of its puts with the
same error, which the caller turns into its answer as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from mq.store.aio import AsyncStore

#: Most puts in one round (one pipeline): bounds a round's reply and the wait of its first put.
MAX_ROUND = 256
#: Rounds in the store at once; puts arriving meanwhile gather for the next.
ROUNDS_IN_FLIGHT = 2

_Put = tuple[str, int, Sequence[Sequence[Any]], "asyncio.Future[tuple[int, int]]"]


class PutRounds:
    """Puts of concurrent callers gathered into ``put_many`` rounds on ``store``."""

    def __init__(self, store: AsyncStore) -> None:
        self._store = store
        self._pending: list[_Put] = []
        self._rounds: set[asyncio.Task[None]] = set()
        #: Rounds written so far (the tests and docs/benchmarks.md compare it with the puts: how much was shared).
        self.rounds = 0

    async def put(self, topic: str, queue_id: int, encoded: Sequence[Sequence[Any]]) -> tuple[int, int]:
        """As ``AsyncStore.put``: ``(first_offset, store_timestamp_ms)`` or its error."""
        future: asyncio.Future[tuple[int, int]] = asyncio.get_running_loop().create_future()
        self._pending.append((topic, queue_id, encoded, future))
        self._start()
        return await future

    def _start(self) -> None:
        while self._pending and len(self._rounds) < ROUNDS_IN_FLIGHT:
            batch, self._pending = self._pending[:MAX_ROUND], self._pending[MAX_ROUND:]
            task = asyncio.create_task(self._round(batch))
            self._rounds.add(task)
            task.add_done_callback(self._ended)

    def _ended(self, task: asyncio.Task[None]) -> None:
        self._rounds.discard(task)
        self._start()  # what gathered while this round was in the store

    async def _round(self, batch: list[_Put]) -> None:
        self.rounds += 1
        try:
            results: list[Any] = await self._store.put_many([(t, q, e) for t, q, e, _ in batch])
        except BaseException as e:  # the whole round failed (or was cancelled at shutdown): each put too
            for *_, future in batch:
                if not future.done():
                    future.set_exception(e if isinstance(e, Exception) else asyncio.CancelledError())
            if not isinstance(e, Exception):
                raise
            return
        for (*_, future), result in zip(batch, results, strict=True):
            if future.done():  # its caller was cancelled (a gRPC deadline): the message is stored anyway
                continue
            if isinstance(result, BaseException):
                future.set_exception(result)
            else:
                future.set_result(result)

    async def close(self) -> None:
        """Wait for the rounds in the store (their callers get their answers)."""
        while self._rounds:
            await asyncio.gather(*self._rounds, return_exceptions=True)
