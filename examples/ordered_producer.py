"""Send order events by sharding key, so every order's events land in one queue in order.

``SelectMessageQueueByHash`` computes Java's ``abs(String.hashCode(key) % n)``, so Python and Java
producers agree on the queue for a key. Run: ``python examples/ordered_producer.py``.
"""

from mq import Admin, Message, Producer, SelectMessageQueueByHash


def main() -> None:
    Admin().create_topic("OrderEvents", read_queues=8, write_queues=8, order=True)
    selector = SelectMessageQueueByHash()
    with Producer("OrderProducer") as producer:
        for order_id in ("order-1", "order-2", "order-3"):
            for event in ("created", "paid", "shipped"):
                msg = Message("OrderEvents", f"{order_id}:{event}".encode(), tags=event, keys=[order_id])
                r = producer.send(msg, selector=selector, arg=order_id)
                print(f"{order_id} {event:8} -> queue {r.message_queue.queue_id} offset {r.queue_offset}")


if __name__ == "__main__":
    main()
