"""``mq demo``: a guided tour of what rocketredis does, on the embedded store by default."""

from __future__ import annotations

import time

from mq.admin import Admin
from mq.connection import mask_url, resolve_url
from mq.message import Message
from mq.producer import Producer, SelectMessageQueueByHash

#: The demo's topic.
TOPIC = "DemoOrders"
#: Orders the demo sends, each with a few events in order.
ORDERS = ("order-1001", "order-1002", "order-1003", "order-1004", "order-1005")
EVENTS = ("created", "paid", "shipped")


def run(url: str | None = None, namespace: str = "mq") -> int:
    """Run the demo against ``url``; returns the exit code."""
    url = resolve_url(url)
    print(f"rocketredis demo on {mask_url(url)} (namespace {namespace!r})\n")
    with Admin(url, namespace) as admin, Producer("DemoProducer", url, namespace=namespace) as producer:
        config = admin.create_topic(TOPIC, read_queues=4, write_queues=4)
        print(f"1. topic {config.name}: {config.read_queues} read / {config.write_queues} write queues")

        sent = []
        hash_selector = SelectMessageQueueByHash()
        for order in ORDERS:
            for event in EVENTS:
                msg = Message(TOPIC, f"{order} {event}".encode(), tags=event, keys=[order],
                              properties={"region": "HZ" if order[-1] in "135" else "SH", "amount": "42"})  # fmt: skip
                sent.append(producer.send(msg, selector=hash_selector, arg=order))
        print(f"2. sent {len(sent)} order events by sharding key: each order's events share one queue")
        for order in ORDERS[:2]:
            queues = {r.message_queue.queue_id for r, o in zip(sent, (o for o in ORDERS for _ in EVENTS)) if o == order}
            print(f"     {order} -> queue {', '.join(map(str, sorted(queues)))}")

        batch = [Message(TOPIC, f"audit {i}".encode(), tags="audit") for i in range(10)]
        result = producer.send_batch(batch)
        print(f"3. sent a batch of {len(batch)} to queue {result.message_queue.queue_id}, "
              f"offsets {result.queue_offset}..{result.queue_offset + len(batch) - 1}")  # fmt: skip

        futures = [producer.send_async(Message(TOPIC, f"click {i}".encode(), tags="click")) for i in range(20)]
        done = [f.result(timeout=10) for f in futures]
        print(f"4. sent {len(done)} async messages (pipelined by the background sender)")

        found = admin.query_message(TOPIC, sent[0].msg_id)
        print(f"5. query by id {sent[0].msg_id}: {found.body.decode() if found else 'not found'!r}")
        by_key = admin.query_messages_by_key(TOPIC, ORDERS[0])
        print(f"   query by key {ORDERS[0]}: {[m.body.decode() for m in by_key]}")

        print("6. queue status:")
        for mq, stats in sorted(admin.topic_status(TOPIC).items()):
            print(f"     queue {mq.queue_id}: offsets {stats.min_offset}..{stats.max_offset}")
        mq0 = sorted(admin.topic_status(TOPIC))[0]
        print(f"   search_offset(queue 0, now) = {admin.search_offset(mq0, int(time.time() * 1000) + 1000)}")
    print("\nDone. Try it on Redis: MQ_URL=redis://127.0.0.1:6379/0 make demo")
    return 0
