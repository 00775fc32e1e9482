"""Send a payment event at most once within a window, whatever the caller retries [D140].

Run: ``python examples/dedup.py`` (``$MQ_URL``, else the embedded store). A payment service sends
"order 42 paid" with the payment's id as ``dedup_id``; its caller times out and sends it again: the
second send stores nothing and prints ``duplicate True`` with the first send's msg id, queue and
offset. A send of another payment id is stored. The topic remembers ids for ``dedup_window_s``
seconds (120 by default, NATS's default; ``mq topic create … --dedup-window-s N``). A producer's own
retries after a lost reply need no dedup id: they never store a message twice.
"""

from __future__ import annotations

from mq import Admin, Message, Producer

with Admin() as admin:
    config = admin.create_topic("payments", read_queues=4, write_queues=4, dedup_window_s=600)
    print("topic", config.name, "remembers dedup ids for", config.dedup_window_s, "s")

with Producer("payment-service") as producer:
    first = producer.send(Message("payments", b"order 42 paid", dedup_id="payment-9001"))
    print("sent", first.msg_id, "queue", first.message_queue.queue_id, "offset", first.queue_offset, "duplicate", first.duplicate)
    again = producer.send(Message("payments", b"order 42 paid", dedup_id="payment-9001"))  # the caller's retry
    print("sent", again.msg_id, "queue", again.message_queue.queue_id, "offset", again.queue_offset, "duplicate", again.duplicate)
    assert again.duplicate and (again.msg_id, again.queue_offset) == (first.msg_id, first.queue_offset)
    other = producer.send(Message("payments", b"order 43 paid", dedup_id="payment-9002"))
    print("sent", other.msg_id, "duplicate", other.duplicate)
