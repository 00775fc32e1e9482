"""The generated protobuf and gRPC modules of the RocketMQ 5 protocol (``apache.rocketmq.v2``),
generated on first use when missing (see :mod:`mq.proxy.generate`).

The modules are typed ``Any``: they are generated, and mypy does not read them.
"""

from __future__ import annotations

import importlib
from typing import Any

from mq.proxy import generate

if not generate.up_to_date():
    generate.generate()

#: ``definition_pb2``: Resource, Message, Settings, Code, …
definition: Any = importlib.import_module("mq.proxy._pb.apache.rocketmq.v2.definition_pb2")
#: ``service_pb2``: the request and response messages.
service: Any = importlib.import_module("mq.proxy._pb.apache.rocketmq.v2.service_pb2")
#: ``service_pb2_grpc``: ``MessagingServiceServicer``, ``MessagingServiceStub``, ``add_MessagingServiceServicer_to_server``.
grpc_service: Any = importlib.import_module("mq.proxy._pb.apache.rocketmq.v2.service_pb2_grpc")
#: ``google.protobuf`` well-known types (Duration, Timestamp).
Code: Any = definition.Code
