"""The Telemetry settings exchange: what the endpoint answers a client's settings with.

Every field the official clients read is set (a missing one made clients fail in the feasibility
probe): the client's own settings echoed, a non-zero ``publishing.max_body_size``, an exponential
backoff policy, ``metric {on: false}``, and for consumers the group's ``fifo`` flag, batch size and
long-polling timeout. Unknown fields a newer client sends are kept by protobuf and ignored.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

from mq.consumer.registry import ClientInfo
from mq.errors import MQClientError
from mq.proxy.codes import ProxyError
from mq.proxy.pb import definition

#: Largest settings a client may send, serialized bytes (kept in the store for an hour per client).
MAX_SETTINGS_BYTES = 64 * 1024
#: Longest user-agent fields a client sends, characters (shown by ``mq group clients`` and the console).
MAX_USER_AGENT = {"version": 64, "platform": 256, "hostname": 255}


@dataclass(frozen=True)
class Limits:
    """The endpoint's limits and defaults the settings reply announces.

    Attributes:
        max_body_size: largest message body, bytes.
        max_delivery_attempts: deliveries of a consumed message before its dead-letter queue.
        producer_attempts: sends a producer tries before giving up.
        backoff_initial_ms, backoff_max_ms, backoff_multiplier: the exponential backoff between retries.
        request_timeout_s: timeout of RPCs other than long polls, seconds.
        long_polling_s: longest long poll of ReceiveMessage, seconds.
        receive_batch_size: messages per receive of a push consumer.
    """

    max_body_size: int = 4 * 1024 * 1024
    max_delivery_attempts: int = 17
    producer_attempts: int = 3
    backoff_initial_ms: int = 1000
    backoff_max_ms: int = 60_000
    backoff_multiplier: float = 2.0
    request_timeout_s: int = 3
    long_polling_s: int = 30
    receive_batch_size: int = 32

    def __post_init__(self) -> None:
        for name, value in asdict(self).items():
            if not (math.isfinite(value) and value > 0):  # nan and inf would start an endpoint that refuses all
                raise MQClientError(f"Limits.{name} must be a positive finite number, got {value!r}")
        if self.backoff_multiplier < 1 or self.backoff_initial_ms > self.backoff_max_ms:
            raise MQClientError("Limits: backoff_multiplier must be at least 1 and backoff_initial_ms at most backoff_max_ms")


def check_client_settings(settings: Any) -> None:
    """Bound what a client's settings put into the store and the group registry.

    Raises:
        ProxyError: ``BAD_REQUEST`` naming the field and its limit.
    """
    size = settings.ByteSize()
    if size > MAX_SETTINGS_BYTES:
        raise ProxyError("BAD_REQUEST", f"client settings of {size} bytes exceed the limit of {MAX_SETTINGS_BYTES}")
    for name, limit in MAX_USER_AGENT.items():
        value = getattr(settings.user_agent, name)
        if len(value) > limit or not value.isprintable():
            raise ProxyError("BAD_REQUEST", f"user_agent.{name} must be at most {limit} printable characters, got {len(value)}")


def reply(client: Any, *, limits: Limits, fifo: bool, max_attempts: int) -> Any:
    """The complete ``Settings`` answering the client's ``client``."""
    out = definition.Settings()
    out.CopyFrom(client)
    policy = out.backoff_policy
    policy.Clear()
    is_consumer = client.WhichOneof("pub_sub") == "subscription"
    policy.max_attempts = max_attempts if is_consumer else limits.producer_attempts
    policy.exponential_backoff.initial.FromMilliseconds(limits.backoff_initial_ms)
    policy.exponential_backoff.max.FromMilliseconds(limits.backoff_max_ms)
    policy.exponential_backoff.multiplier = limits.backoff_multiplier
    if not out.HasField("request_timeout"):
        out.request_timeout.FromSeconds(limits.request_timeout_s)
    if is_consumer:
        sub = out.subscription
        sub.fifo = fifo
        sub.receive_batch_size = limits.receive_batch_size
        sub.long_polling_timeout.FromSeconds(limits.long_polling_s)
    else:
        out.publishing.max_body_size = limits.max_body_size
        out.publishing.validate_message_type = True
    out.metric.Clear()
    out.metric.on = False
    return out


def client_info(client_id: str, settings: Any, host: str) -> str:
    """The registry entry (``ClientInfo`` JSON) of a consumer connected through the endpoint, so
    ``mq group clients`` and ``Admin.consumer_connections`` list official clients too."""
    subs = {e.topic.name: e.expression.expression or "*" for e in settings.subscription.subscriptions}
    kind = {definition.SIMPLE_CONSUMER: "simple", definition.PUSH_CONSUMER: "push"}.get(settings.client_type, "simple")
    ua = settings.user_agent
    status = {"via": "rocketmq-proxy", "language": definition.Language.Name(ua.language), "version": ua.version}
    info = ClientInfo(client_id, ua.hostname or host, 0, subs, kind=kind, status=status)
    # as the registry sends it: without the heartbeat time, which the store sets
    return json.dumps({k: v for k, v in asdict(info).items() if k != "last_heartbeat_ms"}, separators=(",", ":"))
