"""Background tasks of mq.aio end for sure when cancelled (mq/aio/tasks.py)."""

from __future__ import annotations

import asyncio

import anyio
import pytest

from mq.aio.tasks import cancel_and_wait


async def _stubborn(started: asyncio.Event, cancels: list[int]) -> None:
    """A job loop whose first cancellation is lost (as a racing ``asyncio.wait_for`` loses it on 3.11)."""
    started.set()
    try:
        await asyncio.sleep(10)
    except asyncio.CancelledError:
        cancels.append(1)  # dropped, as wait_for drops it when the awaited call completes at once
    while True:  # back to its interval sleep
        await asyncio.sleep(3600)


@pytest.mark.anyio
async def test_a_task_that_lost_a_cancellation_still_ends() -> None:
    started, cancels = asyncio.Event(), []
    task = asyncio.create_task(_stubborn(started, cancels))
    await started.wait()
    with anyio.fail_after(5):  # one cancel and a wait (the old shutdown) never returned here
        await cancel_and_wait([task], again_s=0.05)
    assert task.cancelled() and cancels == [1]


@pytest.mark.anyio
async def test_failures_are_retrieved_and_the_callers_task_is_left_alone() -> None:
    async def fails() -> None:
        raise ValueError("boom")

    failed = asyncio.create_task(fails())
    await asyncio.sleep(0)
    current = asyncio.current_task()
    assert current is not None
    with anyio.fail_after(5):
        await cancel_and_wait([failed, current])  # type: ignore[list-item]
    assert failed.done() and isinstance(failed.exception(), ValueError) and not current.cancelled()
