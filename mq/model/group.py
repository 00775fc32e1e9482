"""Subscription group configuration [RocketMQ ``SubscriptionGroupConfig``, mqadmin ``updateSubGroup``]."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from mq.consumer.types import ConsumeFromWhere
from mq.errors import MQClientError

#: Most retries a group may configure [RocketMQ caps ``retryMaxTimes`` at the DLQ level count].
MAX_RETRY_TIMES = 64


@dataclass(frozen=True)
class GroupConfig:
    """How a consumer group consumes, set by operators with ``Admin.create_group`` / ``mq group create``.

    Attributes:
        group: the group name.
        consume_enable: False pauses every member (push, pull and simple) within one heartbeat (1 s);
            True resumes it.
        retry_max_times: retries of a concurrently consumed message before the DLQ (push consumers
            that do not set ``max_reconsume_times`` themselves).
        consume_from_where: where a member starts on a queue the group has no offset for (every
            consumer kind; wins over the consumer's own argument).
        fifo: the group consumes message groups in order (read by the RocketMQ 5 endpoint).
    """

    group: str
    consume_enable: bool = True
    retry_max_times: int = 16
    consume_from_where: ConsumeFromWhere = ConsumeFromWhere.LAST_OFFSET
    fifo: bool = False

    def __post_init__(self) -> None:
        for name in ("consume_enable", "fifo"):
            if not isinstance(getattr(self, name), bool):
                raise MQClientError(f"{name} must be True or False, got {getattr(self, name)!r}")
        retry = self.retry_max_times
        if not isinstance(retry, int) or isinstance(retry, bool) or not 0 <= retry <= MAX_RETRY_TIMES:
            raise MQClientError(f"retry_max_times must be an int in 0..{MAX_RETRY_TIMES}, got {retry!r}")
        try:
            object.__setattr__(self, "consume_from_where", ConsumeFromWhere(self.consume_from_where))
        except ValueError:
            choices = ", ".join(w.value for w in ConsumeFromWhere)
            raise MQClientError(f"consume_from_where must be one of {choices}, got {self.consume_from_where!r}") from None

    def to_json(self) -> str:
        """The stored form."""
        data = asdict(self) | {"consume_from_where": self.consume_from_where.value}
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str) -> GroupConfig:
        """A stored config (fields this version does not know are ignored)."""
        data: dict[str, Any] = json.loads(raw)
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})
