"""Create a topic, send a few messages every way, and query them back.

Run: ``python examples/quickstart.py`` (embedded store) or with ``MQ_URL=redis://…``.
"""

from mq import Admin, Message, Producer


def main() -> None:
    admin = Admin()
    admin.create_topic("QuickStart", read_queues=4, write_queues=4)
    with Producer("QuickStartProducer") as producer:
        result = producer.send(Message("QuickStart", b"hello", tags="greeting", keys=["k-1"]))
        print("sync:", result.msg_id, "queue", result.message_queue.queue_id, "offset", result.queue_offset)
        print("async:", producer.send_async(Message("QuickStart", b"later")).result(timeout=5).msg_id)
        producer.send_oneway(Message("QuickStart", b"fire and forget"))
        batch = producer.send_batch([Message("QuickStart", b"b%d" % i) for i in range(3)])
        print("batch:", len(batch.msg_ids), "messages at offset", batch.queue_offset)
    found = admin.query_messages_by_key("QuickStart", "k-1")
    print("by key:", [m.body for m in found])


if __name__ == "__main__":
    main()
