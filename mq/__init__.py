"""rocketredis: RocketMQ's messaging model on Redis.

Import what you need from here::

    from mq import Admin, Message, Producer
"""

from mq.admin import Admin
from mq.errors import (
    FilterExpressionError,
    InvalidNameError,
    MessageTooLargeError,
    MQBrokerError,
    MQClientError,
    MQError,
    QueueNotWritableError,
    TopicNotFoundError,
)
from mq.message import Message, MessageExt, SendResult, SendStatus
from mq.producer import (
    MessageQueueSelector,
    Producer,
    SelectMessageQueueByHash,
    SelectMessageQueueByMachineRoom,
    SelectMessageQueueByRandom,
)
from mq.queue import MessageQueue
from mq.topic import QueueStats, TopicConfig

__version__ = "0.1.0"

__all__ = [
    "Admin",
    "FilterExpressionError",
    "InvalidNameError",
    "MQBrokerError",
    "MQClientError",
    "MQError",
    "Message",
    "MessageExt",
    "MessageQueue",
    "MessageQueueSelector",
    "MessageTooLargeError",
    "Producer",
    "QueueNotWritableError",
    "QueueStats",
    "SelectMessageQueueByHash",
    "SelectMessageQueueByMachineRoom",
    "SelectMessageQueueByRandom",
    "SendResult",
    "SendStatus",
    "TopicConfig",
    "TopicNotFoundError",
]
