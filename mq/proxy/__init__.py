"""``mq proxy``: a RocketMQ 5 gRPC endpoint (``apache.rocketmq.v2.MessagingService``) in front of the
store, so the official RocketMQ 5 clients produce to and consume from rocketredis unchanged.

Needs the ``proxy`` extra (grpcio, protobuf). Modules: :mod:`~mq.proxy.server` (grpc.aio server,
ports, TLS), :mod:`~mq.proxy.service` (the RPC handlers), :mod:`~mq.proxy.telemetry` (Telemetry
sessions, check-back pushes), :mod:`~mq.proxy.settings` (the settings reply), :mod:`~mq.proxy.convert`
(messages both ways), :mod:`~mq.proxy.codes` (status codes), :mod:`~mq.proxy.auth` (signatures),
:mod:`~mq.proxy.backend` (store calls), :mod:`~mq.proxy.metrics`, :mod:`~mq.proxy.pb` and
:mod:`~mq.proxy.generate` (the generated protobuf modules). See docs/rocketmq-clients.md.
"""
