"""Lite topics [RocketMQ 5.5, RIP-83]: one small ordered topic per session, made by its first send and
gone by itself when idle.

Run: ``python examples/lite_topics.py`` (``$MQ_URL``, else the embedded store). An agent service keeps
one lite topic per chat session under the lite parent ``agent-replies``; the worker that serves a
session subscribes to it at run time and receives that session's replies in order, woken by the
send whatever the number of sessions it serves. It prints the replies of ``session-42`` in order and
the parent's live lite topics (``mq topic lite agent-replies --prefix session-`` lists them too).
"""

from __future__ import annotations

from mq import Admin, Message, Producer, SimpleConsumer

with Admin() as admin:
    # a lite topic expires 10 minutes after its last message: its messages and offsets go with it
    admin.create_topic("agent-replies", read_queues=1, write_queues=1, lite=True, lite_expiration_s=600)

worker = SimpleConsumer("agent-workers", subscriptions={"agent-replies": "*"}, await_duration_s=2)
with worker, Producer("agent-service") as producer:
    worker.subscribe_lite("agent-replies", "session-42")  # this member serves session 42 from now on
    for reply in [b"Hello!", b"Looking that up...", b"Your order ships Monday."]:
        producer.send(Message("agent-replies", reply, lite_topic="session-42"))  # the first send creates it
    producer.send(Message("agent-replies", b"another session", lite_topic="session-7"))

    got = []
    while len(got) < 3:
        for view in worker.receive(max_messages=8, invisible_duration_s=30):
            got.append(view)
            worker.ack(view)
    for view in got:
        print(view.lite_topic, view.queue_offset, view.body.decode())
    worker.unsubscribe_lite("agent-replies", "session-42")  # the session ended

with Admin() as admin:
    print("live lite topics:", admin.list_lite_topics("agent-replies", "session-").names)
