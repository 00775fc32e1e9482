"""Ending background tasks for sure: a cancellation can be lost, so it is repeated until the task
has ended."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

#: Seconds to wait for cancelled tasks before cancelling those still running again.
CANCEL_AGAIN_S = 0.5


async def cancel_and_wait(tasks: Iterable[asyncio.Task[Any]], *, again_s: float = CANCEL_AGAIN_S) -> None:
    """Cancel ``tasks`` (never the caller's own) and return once every one has ended, cancelling again
    every ``again_s`` seconds those still running.

    One cancellation is not always enough: on Python 3.11 asyncio's own timeouts (``asyncio.wait_for``
    and ``asyncio.timeout``, both used inside redis-py's asyncio client) can drop a cancellation that
    arrives as the awaited call completes; a job loop then goes back to its sleep, and a shutdown that
    cancelled it once waited forever (seen in ``aio.PushConsumer.shutdown``: the heartbeat job
    "cancelling" inside its interval sleep). What the tasks raised is retrieved (nothing is logged as
    "never retrieved"); their failures are theirs to log.
    """
    current = asyncio.current_task()
    tasks = [t for t in tasks if t is not current]
    pending = {t for t in tasks if not t.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=again_s)
    for task in tasks:
        if not task.cancelled():
            task.exception()
