"""The library draws its random numbers from generators of its own: an application that seeds the
global ``random`` module to repeat a run gets the same numbers whether or not it sends messages (and a
Hypothesis test drawing examples while an endpoint thread picks queues is not told it used ``random``)."""

from __future__ import annotations

import random
import uuid

from mq import Admin, Message, Producer
from mq.producer.selectors import SelectMessageQueueByRandom


def test_sends_and_a_random_selector_leave_the_global_random_stream_alone() -> None:
    url = f"memory://global-random-{uuid.uuid4().hex[:8]}"
    with Admin(url) as admin:
        admin.create_topic("R", read_queues=4, write_queues=4)
    random.seed(1234)
    expected = [random.random() for _ in range(3)]
    random.seed(1234)
    with Producer("rg", url) as producer:  # a new route starts its round-robin at a random queue
        producer.send(Message("R", b"round-robin"))
        for i in range(5):
            producer.send(Message("R", b"%d" % i), selector=SelectMessageQueueByRandom(), arg=None)
    assert [random.random() for _ in range(3)] == expected
