"""Consumers: push, pull, rebalance strategies, offsets and consume types."""

from mq.consumer.allocate import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
)
from mq.consumer.pull import PullConsumer
from mq.consumer.push import PushConsumer
from mq.consumer.registry import ClientInfo
from mq.consumer.simple import MessageView, SimpleConsumer
from mq.consumer.types import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeHook,
    ConsumeMessageContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
)

__all__ = [
    "AllocateMessageQueueAveragely",
    "AllocateMessageQueueAveragelyByCircle",
    "AllocateMessageQueueByConfig",
    "AllocateMessageQueueByMachineRoom",
    "AllocateMessageQueueConsistentHash",
    "AllocateMessageQueueStrategy",
    "ClientInfo",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeHook",
    "ConsumeMessageContext",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "MessageModel",
    "MessageView",
    "PullConsumer",
    "PushConsumer",
    "SimpleConsumer",
]
