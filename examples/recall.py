"""Recall a delayed message before it is due [RocketMQ 5.3.2 recall].

Run: ``python examples/recall.py`` (``$MQ_URL``, else the embedded store). It sends an order's
"cancel if unpaid" message due in 30 minutes, then the order is paid, so it recalls the message: the
first recall prints ``recalled True`` (it will never be delivered), a second ``recalled again False``
(nothing is scheduled any more). On the command line: ``mq send … --deliver-at TIME`` prints the
handle, ``mq recall HANDLE`` recalls it.
"""

from __future__ import annotations

import time

from mq import Admin, Message, Producer

with Admin() as admin:
    admin.create_topic("orders", read_queues=4, write_queues=4)

with Producer("order-service") as producer:
    due_ms = int(time.time() * 1000) + 30 * 60_000
    sent = producer.send(Message("orders", b"cancel order 42 if unpaid", deliver_time_ms=due_ms))
    print("scheduled", sent.msg_id, "handle", sent.recall_handle)
    assert sent.recall_handle is not None  # set for delayed and timer messages
    # … the customer pays: the cancellation must not happen
    print("recalled", producer.recall(sent.recall_handle))
    print("recalled again", producer.recall(sent.recall_handle))
