"""``mq proxy --workers 2``: two endpoint processes on one port (SO_REUSEPORT), the second serving
while the first is stopped, and gone when the first stops."""

from __future__ import annotations

import contextlib
import os
import pathlib
import signal
import uuid

import grpc
import pytest

from mq import Admin
from mq.proxy.codes import OK
from mq.proxy.pb import grpc_service, service
from tests.proxy.test_proxy import _message
from tests.proxy_clients import ProxyProcess
from tests.servers import RedisServer, wait_until


def _children(pid: int) -> list[int]:
    return [int(c) for c in pathlib.Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _send_on_a_new_connection(endpoint: str) -> bool:
    """One SendMessage on a connection of its own (not a shared subchannel): whether it was stored."""
    with grpc.insecure_channel(endpoint, options=[("grpc.use_local_subchannel_pool", 1)]) as channel:
        stub = grpc_service.MessagingServiceStub(channel)
        try:
            answer = stub.SendMessage(service.SendMessageRequest(messages=[_message("T")]), timeout=2)
        except grpc.RpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:  # its connection went to the stopped process
                return False
            raise
        return bool(answer.status.code == OK)


@pytest.mark.skipif(not hasattr(signal, "SIGSTOP"), reason="needs POSIX signals")
def test_two_workers_share_the_port_and_stop_together(redis_server: RedisServer, tmp_path: pathlib.Path) -> None:
    namespace = f"pw{uuid.uuid4().hex[:8]}"
    with contextlib.closing(Admin(redis_server.url, namespace)) as admin:
        admin.create_topic("T", read_queues=2, write_queues=2)
    log = tmp_path / "proxy.log"
    proxy = ProxyProcess(redis_server.url, namespace, log, "--workers", "2")
    try:
        wait_until(lambda: log.read_text().count("RocketMQ 5 endpoint on") == 2, 60, "the second endpoint process listening")
        [child] = _children(proxy.proc.pid)
        # both on the port the first bound, not one of the second's own
        assert log.read_text().count(f"RocketMQ 5 endpoint on 127.0.0.1:{proxy.port} ") == 2
        assert _send_on_a_new_connection(proxy.endpoint)
        os.kill(proxy.proc.pid, signal.SIGSTOP)  # only the second process can answer now
        try:
            # the kernel spreads new connections over both: of 12, some reach the running one
            answered = [_send_on_a_new_connection(proxy.endpoint) for _ in range(12)]
        finally:
            os.kill(proxy.proc.pid, signal.SIGCONT)
        assert any(answered), "no connection was served while the first process was stopped"
    finally:
        proxy.stop()
    assert proxy.proc.returncode == 0
    assert not pathlib.Path(f"/proc/{child}").exists() or "Z" in pathlib.Path(f"/proc/{child}/stat").read_text().split()[2]


def test_a_workers_config_travels_as_json_data_and_comes_back_whole() -> None:
    """The config a worker gets on its stdin is JSON (data), never a pickle (code), and every field
    comes back, the secret key included."""
    import json
    from pathlib import Path

    from mq.proxy.auth import Credentials
    from mq.proxy.server import ProxyConfig, _config_fields, _config_of
    from mq.proxy.settings import Limits

    config = ProxyConfig(
        url="redis://127.0.0.1:1/0",
        namespace="ns",
        port=0,
        tls_port=0,
        tls_cert=Path("/c.pem"),
        tls_key=Path("/k.pem"),
        credentials=Credentials("ak", "sk", max_skew_s=30.0),
        limits=Limits(max_body_size=1024, long_polling_s=5),
        max_delay_ms=1000,
    )
    sent = json.dumps(_config_fields(config))
    back = _config_of(json.loads(sent))
    assert back.credentials is not None and back.credentials.fields() == ["ak", "sk", 30.0]
    assert (back.url, back.namespace, back.host, back.port, back.tls_port) == ("redis://127.0.0.1:1/0", "ns", "127.0.0.1", 0, 0)
    assert (back.tls_cert, back.tls_key, back.limits, back.max_delay_ms) == (Path("/c.pem"), Path("/k.pem"), config.limits, 1000)
