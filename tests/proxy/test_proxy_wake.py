"""An empty long poll of the endpoint waits in the store (``XREAD BLOCK`` past the group's cursors)
and a send wakes it, instead of sleeping between polls."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import mq.proxy.service as proxy_service
from mq.proxy.pb import definition, service
from tests.proxy.test_proxy import _message, _receive, running, topic_env

pytestmark = pytest.mark.anyio
__all__ = ["topic_env"]  # the fixture, shared with tests/proxy/test_proxy.py


async def test_a_waiting_receive_is_woken_by_an_arrival(topic_env: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the wait bounded only by the poll (20 s), a send while the receive waits ends it with that message."""
    monkeypatch.setattr(proxy_service, "POLL_MAX_S", 60.0)  # no slice: only an arrival ends the wait early
    async with running(*topic_env) as r:
        waiting = asyncio.Event()
        real = r.server.backend.blocking

        async def spy(name: str, *args: Any, **kwargs: Any) -> Any:
            if name == "wait_for_any":
                waiting.set()
            return await real(name, *args, **kwargs)

        r.server.backend.blocking = spy  # type: ignore[method-assign]
        receive = asyncio.ensure_future(_receive(r.stub, "G", "T", poll_s=20))
        await asyncio.wait_for(waiting.wait(), 10)  # the receive found nothing and waits in the store
        sent = await r.stub.SendMessage(service.SendMessageRequest(messages=[_message("T", b"news")]))
        assert sent.status.code == definition.Code.Value("OK")
        status, messages = await asyncio.wait_for(receive, 10)  # a failure detector, far below the 20 s poll
    assert status.code == definition.Code.Value("OK") and [m.body for m in messages] == [b"news"]
