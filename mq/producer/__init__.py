"""Producers and queue selectors."""

from mq.producer.producer import Producer
from mq.producer.selectors import (
    MessageQueueSelector,
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
)
from mq.producer.transaction import LocalTransactionState, TransactionProducer, TransactionSendResult

__all__ = [
    "LocalTransactionState",
    "MessageQueueSelector",
    "Producer",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByMachineRoom",
    "SelectMessageQueueByRandom",
    "TransactionProducer",
    "TransactionSendResult",
]
