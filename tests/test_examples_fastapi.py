"""examples/fastapi_app.py against real Redis, through an ASGI client: the lifespan starts the aio
producer and push consumer, ``POST /orders`` sends, the consumer processes each order once, and the
shutdown commits what it consumed."""

from __future__ import annotations

import time

import anyio
import httpx
import pytest
from asgi_lifespan import LifespanManager

from examples.fastapi_app import GROUP, TOPIC, create_app
from mq import Admin
from tests.helpers import QUIET_PERIOD_S


@pytest.mark.anyio
async def test_the_endpoint_sends_and_the_lifespan_consumer_processes_each_order_once(backend_url: str, namespace: str) -> None:
    app = create_app(backend_url, namespace)
    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://orders.test") as client:
            sent = []
            for i in range(10):
                response = await client.post("/orders", json={"order_id": f"o-{i}", "amount": i + 0.5})
                assert response.status_code == 202, response.text
                sent.append(response.json())
            bad = await client.post("/orders", json={"order_id": "o-x"})  # no amount: refused, nothing sent
            assert bad.status_code == 422
            with anyio.fail_after(20):
                while len((await client.get("/orders/processed")).json()) < 10:
                    await anyio.sleep(0.05)
            # the quiet period after the last expected delivery: a duplicate would show up in it
            quiet_until = time.monotonic() + QUIET_PERIOD_S
            while time.monotonic() < quiet_until:
                await anyio.sleep(0.1)
                processed = (await client.get("/orders/processed")).json()
                assert len(processed) == 10, "an order processed again within the quiet period"
    assert sorted(row["order"]["order_id"] for row in processed) == [f"o-{i}" for i in range(10)]
    assert {(row["queue"], row["offset"]) for row in processed} == {(s["queue"], s["offset"]) for s in sent}
    assert {row["order"]["amount"] for row in processed} == {i + 0.5 for i in range(10)}
    with Admin(backend_url, namespace) as admin:
        assert sum(s.max_offset for s in admin.topic_status(TOPIC).values()) == 10  # the bad request sent nothing
        assert all(admin.query_message(TOPIC, s["msg_id"]) is not None for s in sent)
        assert sum(p.lag for p in admin.consumer_progress(GROUP, TOPIC)) == 0  # committed by the shutdown
