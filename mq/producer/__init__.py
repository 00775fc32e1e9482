"""Producers and queue selectors."""

from mq.producer.producer import Producer
from mq.producer.selectors import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
)

__all__ = [
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByMachineRoom",
    "SelectMessageQueueByRandom",
]
