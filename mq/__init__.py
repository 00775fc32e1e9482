"""rocketredis: RocketMQ's messaging model on Redis.

Import what you need from here::

    from mq import Admin, Message, Producer
"""

from mq import aio
from mq.consumer import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueAveragelyByCircle,
    AllocateMessageQueueByConfig,
    AllocateMessageQueueByMachineRoom,
    AllocateMessageQueueConsistentHash,
    AllocateMessageQueueStrategy,
    ClientInfo,
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeHook,
    ConsumeMessageContext,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
    MessageView,
    PullConsumer,
    PushConsumer,
    SimpleConsumer,
)
from mq.errors import (
    FilterExpressionError,
    InvalidNameError,
    MessageTooLargeError,
    MQBrokerError,
    MQClientError,
    MQError,
    QueueNotWritableError,
    StoreEvictedError,
    TopicNotFoundError,
)
from mq.filter import ExpressionType, MessageSelector
from mq.model.message import Message, MessageExt, SendResult, SendStatus
from mq.model.queue import MessageQueue
from mq.model.topic import QueueProgress, QueueStats, TierStats, TopicConfig
from mq.operator.admin import Admin
from mq.producer import (
    LocalTransactionState,
    MessageQueueSelector,
    Producer,
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
    TransactionProducer,
    TransactionSendResult,
)

__version__ = "0.2.0"

__all__ = [
    "Admin",
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
    "ExpressionType",
    "FilterExpressionError",
    "InvalidNameError",
    "LocalTransactionState",
    "MQBrokerError",
    "MQClientError",
    "MQError",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageSelector",
    "MessageTooLargeError",
    "MessageView",
    "Producer",
    "PullConsumer",
    "PushConsumer",
    "QueueNotWritableError",
    "QueueProgress",
    "QueueStats",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByMachineRoom",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "SimpleConsumer",
    "StoreEvictedError",
    "TierStats",
    "TopicConfig",
    "TopicNotFoundError",
    "TransactionProducer",
    "TransactionSendResult",
    "aio",
]
