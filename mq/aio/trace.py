"""The message trace for asyncio clients: :class:`AsyncTracer` gathers events as
:class:`mq.observe.trace.Tracer` does (the same :class:`~mq.observe.trace.TraceEvents`) and writes them from a task,
not a thread."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from mq.aio.tasks import cancel_and_wait
from mq.errors import MQError
from mq.model.message import MessageExt
from mq.observe.trace import FLUSH_INTERVAL_S, TraceEvents
from mq.store.aio import AsyncStore
from mq.store.clock import AsyncServerClock

log = logging.getLogger("mq.trace")


class AsyncTracer(TraceEvents):
    """Records the trace events of one asyncio producer or consumer: written every
    ``FLUSH_INTERVAL_S`` in one pipeline by a task (started with the first event), and at :meth:`close`.

    Args:
        store: the client's store.
        group, client_id: who records.
        enabled: True/False for this client; None follows the namespace setting.
    """

    def __init__(self, store: AsyncStore, group: str, client_id: str, enabled: bool | None) -> None:
        super().__init__(group, client_id, enabled)
        self._store = store
        self._clock = AsyncServerClock(store)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._reading = asyncio.Lock()

    def may_be_active(self) -> bool:
        """Whether :meth:`is_active` may say True: a plain check for the common case of tracing off
        with the setting fresh (then nothing is awaited), True when it is on or the setting is to be read."""
        return self.cached_active or self.setting_stale()

    async def is_active(self) -> bool:
        """Whether events are recorded now."""
        if self.setting_stale():
            async with self._reading:  # one read for all the tasks that find it stale at once
                return await self._store.run(self.active_op(self._store))
        return self.cached_active

    async def now_ms(self) -> int:
        """The store's clock, epoch ms (for the events' times)."""
        async with self._reading:  # one ``TIME`` for all the tasks that find the estimate stale at once
            return await self._clock.now_ms()

    async def sent_back(self, msg: MessageExt, to_topic: str) -> None:
        """``msg`` was sent back for another try (or to the DLQ) as a copy in ``to_topic``."""
        if await self.is_active():
            self.sent_back_at(msg, to_topic, await self.now_ms())

    def _added(self, full: bool) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"mq-trace-{self._group}")
        if full:
            self._wake.set()

    async def flush(self) -> None:
        """Write the events gathered so far (a trace is diagnostics: a failure is logged, never raised)."""
        events = self.take()
        if events:
            try:
                await self._store.append_trace(events)
            except MQError as e:
                self.failed(events, e)

    async def close(self) -> None:
        """Stop the writer task and write what is left."""
        task, self._task = self._task, None
        if task is not None:
            await cancel_and_wait([task])
        await self.flush()

    async def _run(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), FLUSH_INTERVAL_S)
            self._wake.clear()
            try:
                await self.flush()
            except Exception:  # the writer never dies: events would pile up unseen
                log.exception("writing trace events of %s failed", self._group)
