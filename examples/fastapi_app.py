"""A FastAPI service on ``mq.aio``: the lifespan starts an ``aio.Producer`` and an ``aio.PushConsumer``;
``POST /orders`` sends an order message; the consumer (an async listener, in the same event loop)
records what it processed, listed by ``GET /orders/processed``.

Serve it: ``MQ_URL=redis://127.0.0.1:6379 uvicorn examples.fastapi_app:app`` (uvicorn is not a
dependency: ``pip install uvicorn``). Run as a script, ``python examples/fastapi_app.py`` drives the app
through an ASGI client on the embedded store (no ``$MQ_URL``) — lifespan, three orders, what the
consumer processed — and exits. Needs ``pip install fastapi httpx asgi-lifespan``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel

from mq import ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, aio

TOPIC = "WebOrders"
GROUP = "web-order-workers"
#: How many processed orders ``GET /orders/processed`` keeps (the newest).
KEEP = 100


class Order(BaseModel):
    """The body of ``POST /orders``."""

    order_id: str
    amount: float


def create_app(url: str | None = None, namespace: str = "mq") -> FastAPI:
    """The app, on the store at ``url`` (None: ``$MQ_URL``, else the embedded ``memory://``)."""
    processed: list[dict[str, Any]] = []

    async def on_orders(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        for m in msgs:  # async: awaiting a database here would not block the web requests
            processed.append(
                {"order": Order.model_validate_json(m.body).model_dump(), "queue": m.queue_id, "offset": m.queue_offset}
            )
        del processed[:-KEEP]
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with aio.Admin(url, namespace) as admin:
            if not await admin.topic_exists(TOPIC):
                await admin.create_topic(TOPIC, read_queues=4, write_queues=4)
        consumer = aio.PushConsumer(GROUP, url, namespace=namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET)
        consumer.subscribe(TOPIC, "*")
        consumer.register_message_listener(on_orders)
        async with aio.Producer("web-api", url, namespace=namespace) as producer, consumer:
            app.state.producer = producer
            yield  # serving; on shutdown the consumer finishes in-flight orders and commits, then both close

    app = FastAPI(title="orders", lifespan=lifespan)

    @app.post("/orders", status_code=202)
    async def send_order(order: Order, request: Request) -> dict[str, Any]:
        """Send the order; 202 with where it was stored."""
        message = Message(TOPIC, order.model_dump_json().encode(), tags="created", keys=[order.order_id])
        result = await request.app.state.producer.send(message)
        return {"msg_id": result.msg_id, "queue": result.message_queue.queue_id, "offset": result.queue_offset}

    @app.get("/orders/processed")
    async def list_processed() -> list[dict[str, Any]]:
        """The orders the consumer processed, oldest first (the newest ``KEEP``)."""
        return list(processed)

    return app


#: The app served by ``uvicorn examples.fastapi_app:app``.
app = create_app()


async def _demo() -> None:
    """Start the app (its lifespan), post three orders through an ASGI client, print what was processed."""
    import httpx
    from asgi_lifespan import LifespanManager

    async with LifespanManager(app) as manager:
        transport = httpx.ASGITransport(app=manager.app)
        async with httpx.AsyncClient(transport=transport, base_url="http://orders.example") as client:
            for i in range(3):
                response = await client.post("/orders", json={"order_id": f"order-{i}", "amount": 10.5 * (i + 1)})
                print("POST /orders ->", response.status_code, response.json())
            for _ in range(100):
                processed = (await client.get("/orders/processed")).json()
                if len(processed) >= 3:
                    break
                await asyncio.sleep(0.05)
            for row in processed:
                print("processed", row["order"]["order_id"], "from queue", row["queue"], "offset", row["offset"])


if __name__ == "__main__":
    asyncio.run(_demo())
