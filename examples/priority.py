"""Priority messages [RocketMQ 5.4 RIP-80]: a backlog is handed out higher priority first.

Run: ``python examples/priority.py`` (``$MQ_URL``, else the embedded store). It creates a topic with 10
priority levels (``mq topic create alerts --priority-levels 10``), sends a backlog of routine reports
(priority 0), a few warnings (5) and one page (9), then a simple consumer receives them: the page
first, then the warnings, then the reports. A message that is retried keeps its priority (D142).
"""

from __future__ import annotations

from mq import Admin, ConsumeFromWhere, Message, Producer, SimpleConsumer

with Admin() as admin:
    admin.create_topic("alerts", read_queues=10, write_queues=10, priority_levels=10)

with Producer("monitor") as producer:
    for i in range(5):
        producer.send(Message("alerts", b"daily report %d" % i))  # priority 0: the default
    for i in range(3):
        producer.send(Message("alerts", b"disk 90%% full on host %d" % i, priority=5))
    producer.send(Message("alerts", b"database down", priority=9))

with SimpleConsumer("on-call", subscriptions={"alerts": "*"}, consume_from_where=ConsumeFromWhere.FIRST_OFFSET) as consumer:
    received = consumer.receive(max_messages=16, invisible_duration_s=30)
    for view in received:
        print(view.priority, view.body.decode())
        consumer.ack(view)
    assert [v.priority for v in received] == [9, 5, 5, 5, 0, 0, 0, 0, 0]
