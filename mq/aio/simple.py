"""``mq.aio.SimpleConsumer``: :class:`mq.SimpleConsumer` for asyncio programs — ``await receive()``,
``await ack()``, ``await change_invisible_duration()`` — on ``redis.asyncio``, with no thread.

Subscriptions, filters, cursor seeding, receipts and dead-lettering are
:mod:`mq.consumer.simple_core`'s, the code the sync consumer runs. A receive cancelled after the store
handed messages out loses nothing: they stay invisible for ``invisible_duration_s``, then are handed
out again (with ``delivery_attempt + 1``), as for a receiver that crashed.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType

from mq.aio.trace import AsyncTracer
from mq.consumer.simple_core import (
    CLUSTER_PAUSE_S,
    AsyncSimpleCore,
    MessageView,
    SimpleSettings,
    check_receive,
    remaining_s,
)
from mq.model.group import GroupConfig
from mq.store.aio import AsyncStore

__all__ = ["MessageView", "SimpleConsumer"]


class SimpleConsumer(SimpleSettings):
    """Receives messages of ``subscriptions`` for ``group`` from asyncio code; the arguments are
    :class:`mq.SimpleConsumer`'s. Members may be sync or asyncio consumers of the same group.

    Use ``async with SimpleConsumer(...) as consumer``, or ``await start()`` and ``await shutdown()``.
    """

    def _open(self) -> None:
        self._store = AsyncStore(self._conn)
        self._poll_store = AsyncStore(self._poll)
        self._tracer = AsyncTracer(self._store, self.group, self.client_id, self.trace)
        self._core = AsyncSimpleCore(self._store, self, self._tracer)

    @property
    def group_config(self) -> GroupConfig | None:
        """The group's config as of the last heartbeat (None: the group has none)."""
        return self._core.group_config

    async def start(self) -> SimpleConsumer:
        """Register and fix the group's starting point (as :meth:`mq.SimpleConsumer.start`). Returns self.
        When it fails, the connections are closed (calling it again opens them again).

        Raises:
            MQClientError: a subscribed topic does not exist (nothing is registered then).
        """
        try:
            await self._core.start()
        except BaseException:  # ``async with`` does not exit what did not enter: close the connections
            await self._close()
            raise
        self._started = True
        return self

    async def shutdown(self, timeout_s: float = 0.0) -> None:
        """Leave the group, write the trace events left and close the connections; messages received and
        not acked reappear after their invisible time. (``timeout_s`` is accepted for symmetry: nothing
        else runs in the background.)"""
        if self._started:
            self._started = False
            await self._core.unregister()
        await self._close()

    async def _close(self) -> None:
        await self._tracer.close()
        await self._conn.aclose()
        await self._poll.aclose()

    async def __aenter__(self) -> SimpleConsumer:
        return await self.start()

    async def __aexit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        await self.shutdown()

    async def receive(self, max_messages: int = 16, invisible_duration_s: float = 30.0) -> list[MessageView]:
        """Up to ``max_messages`` messages, waiting up to ``await_duration_s`` for the first one.

        Each stays invisible to the group's other receivers for ``invisible_duration_s`` (10 s .. 12 h).
        """
        check_receive(self._started, max_messages, invisible_duration_s)
        deadline = time.monotonic() + self.await_duration_s
        while True:
            views, paused = await self._core.round(max_messages, invisible_duration_s)
            if views or remaining_s(deadline) <= 0:
                return views
            await self._wait(self._core.pause_s(paused, remaining_s(deadline)), paused)

    async def subscribe_lite(self, parent: str, lite_topic: str) -> None:
        """Consume lite topic ``lite_topic`` of lite parent ``parent`` from now on: as
        :meth:`mq.SimpleConsumer.subscribe_lite` (ownership in the group, hand-over, wake-up), awaited.

        Raises:
            MQClientError: ``parent`` is not a lite parent, or a name is invalid (nothing is written).
        """
        await self._core.subscribe_lite(parent, lite_topic)

    async def unsubscribe_lite(self, parent: str, lite_topic: str) -> None:
        """Stop consuming lite topic ``lite_topic`` of ``parent``; the group keeps its position there
        (until the lite topic expires), so a later subscriber goes on from it."""
        await self._core.unsubscribe_lite(parent, lite_topic)

    async def ack(self, view: MessageView) -> None:
        """Acknowledge ``view``: it is done and never handed out again.

        Raises:
            MQClientError: the receipt expired (the message was handed out again meanwhile).
        """
        await self._core.ack(view)

    async def change_invisible_duration(self, view: MessageView, invisible_duration_s: float) -> MessageView:
        """Make ``view`` invisible for ``invisible_duration_s`` from now; returns it with a new receipt.

        Raises:
            MQClientError: the receipt expired, or the duration is out of range.
        """
        return await self._core.change_invisible_duration(view, invisible_duration_s)

    async def _wait(self, seconds: float, paused: bool) -> None:
        """Wait until a queue may have news, ``seconds`` at most (standalone: one XREAD over all logs)."""
        if not paused and self._core.lite.parents:  # its wake streams, and its queues' logs when standalone
            streams, block_s = await self._core.wait_plan(seconds, self._conn.kind == "cluster")
            if streams is None or block_s <= 0:
                await asyncio.sleep(block_s)
            else:
                await self._poll_store.wait_lite(streams, int(block_s * 1000))
            return
        if paused or self._conn.kind == "cluster":  # one XREAD cannot span slots: short pauses instead
            await asyncio.sleep(seconds if paused else min(seconds, CLUSTER_PAUSE_S))
            return
        await self._poll_store.wait_for_any(await self._core.cursors(), int(seconds * 1000))
