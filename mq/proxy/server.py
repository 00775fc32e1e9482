"""``mq proxy``'s server: grpc.aio on a plaintext port (and a TLS port when given), the
:class:`~mq.proxy.service.MessagingService` and the check-back pump."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from mq.aio.tasks import cancel_and_wait
from mq.errors import MQBrokerError, MQClientError
from mq.model.msgid import new_client_id
from mq.model.validation import MAX_DELAY_MS
from mq.proxy.auth import Credentials
from mq.proxy.backend import Backend
from mq.proxy.metrics import ProxyMetrics
from mq.proxy.pb import grpc_service
from mq.proxy.service import PROXY_PRODUCER_GROUP, MessagingService
from mq.proxy.settings import Limits
from mq.proxy.telemetry import pump_checks

log = logging.getLogger("mq.proxy")

#: Extra room above the largest body for a request's headers and properties, bytes (gRPC's default
#: 4 MiB limit is too small for a 4 MiB body).
GRPC_HEADROOM = 2 * 1024 * 1024


@dataclass
class ProxyConfig:
    """How ``mq proxy`` runs.

    Attributes:
        url, namespace: the store.
        host: address the ports bind (loopback by default).
        port: plaintext gRPC port (0: any free port).
        tls_port: TLS port (None: no TLS), with ``tls_cert`` and ``tls_key`` (PEM files).
        credentials: the access key pair requests must be signed with (None: none).
        limits: sizes, timeouts and attempts.
        max_delay_ms: furthest ahead a delivery time may be, ms.
    """

    url: str | None = None
    namespace: str = "mq"
    host: str = "127.0.0.1"
    port: int = 8081
    tls_port: int | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    credentials: Credentials | None = None
    limits: Limits = field(default_factory=Limits)
    max_delay_ms: int = MAX_DELAY_MS

    def __post_init__(self) -> None:
        for name in ("port", "tls_port"):
            value = getattr(self, name)
            if value is not None and not 0 <= value <= 65535:
                raise MQClientError(f"ProxyConfig.{name} must be a port number 0..65535, got {value!r}")
        if not (isinstance(self.max_delay_ms, int) and self.max_delay_ms > 0):
            raise MQClientError(f"ProxyConfig.max_delay_ms must be a positive whole number of ms, got {self.max_delay_ms!r}")


class ProxyServer:
    """A running endpoint: :meth:`start`, then :meth:`stop` (or ``async with``)."""

    def __init__(self, config: ProxyConfig, metrics: ProxyMetrics | None = None) -> None:
        self.config = config
        self.backend = Backend(config.url, config.namespace)
        self.service = MessagingService(
            self.backend,
            limits=config.limits,
            credentials=config.credentials,
            metrics=metrics,
            max_delay_ms=config.max_delay_ms,
            replica_id=new_client_id(),
        )
        size = config.limits.max_body_size + GRPC_HEADROOM
        self._server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                ("grpc.so_reuseport", 1),  # gRPC's default on Linux, relied on by --workers: said, not assumed
            ]
        )
        grpc_service.add_MessagingServiceServicer_to_server(self.service, self._server)
        self._stop = asyncio.Event()
        self._pump: asyncio.Task[None] | None = None
        #: The bound plaintext and TLS ports (known after :meth:`start`).
        self.port = 0
        self.tls_port: int | None = None

    async def start(self) -> None:
        """Check that the store answers, bind the ports and start serving.

        Raises:
            MQBrokerError: the store does not answer (nothing is bound).
        """
        c = self.config
        try:
            await self.backend.check()
        except MQBrokerError:
            await self.backend.close()
            raise
        self.port = self._server.add_insecure_port(f"{c.host}:{c.port}")
        if c.tls_port is not None:
            if c.tls_cert is None or c.tls_key is None:
                raise ValueError("--tls-port needs --tls-cert and --tls-key (PEM files)")
            creds = grpc.ssl_server_credentials([(c.tls_key.read_bytes(), c.tls_cert.read_bytes())])
            self.tls_port = self._server.add_secure_port(f"{c.host}:{c.tls_port}", creds)
        await self.backend.call("join_checks", PROXY_PRODUCER_GROUP)
        await self._server.start()
        self._pump = asyncio.create_task(
            pump_checks(self.backend, self.service.sessions, PROXY_PRODUCER_GROUP, self.service.replica_id, self._stop)
        )

    async def stop(self, grace_s: float = 1.0) -> None:
        """Stop serving (calls in flight get ``grace_s``), write the trace events left and close the store."""
        self._stop.set()
        if self._pump is not None:
            await cancel_and_wait([self._pump])  # its blocking read released before closing
        await self._server.stop(grace_s)
        await self.service.close()  # the trace events left, while the store is open
        await self.backend.close()

    async def wait(self) -> None:
        """Until the server stops."""
        await self._server.wait_for_termination()


async def serve(config: ProxyConfig, metrics: ProxyMetrics | None = None, workers: int = 1) -> None:
    """Run the endpoint until SIGTERM or SIGINT; prints where it listens.

    With ``workers`` above 1, ``workers - 1`` more endpoint processes serve the same ports once this
    one has bound them (port 0 becomes the port found): gRPC binds with ``SO_REUSEPORT`` on Linux, so
    the kernel spreads new client connections over the processes (D137). One process is CPU-bound
    in gRPC's own code (docs/benchmarks.md), so more processes are how the endpoint uses more cores.
    The extra processes serve no metrics port of their own; they stop with this one.
    """
    server = ProxyServer(config, metrics)
    await server.start()
    where = f"{config.host}:{server.port}" + (f", TLS {config.host}:{server.tls_port}" if server.tls_port else "")
    print(f"mq proxy: RocketMQ 5 endpoint on {where} (store namespace {config.namespace!r}); Ctrl-C to stop", flush=True)
    bound = dataclasses.replace(config, port=server.port, tls_port=server.tls_port)
    others = [_start_worker(bound) for _ in range(workers - 1)]
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    await stopping.wait()
    for other in others:
        other.terminate()
    await server.stop()
    for other in others:
        await asyncio.to_thread(_reap, other)


def _start_worker(config: ProxyConfig) -> subprocess.Popen[bytes]:
    """Another endpoint process on ``config``'s (already bound) ports: the config goes on its stdin,
    not its command line, where ``ps`` would show the secret key."""
    child = subprocess.Popen([sys.executable, "-c", "from mq.proxy.server import worker; worker()"], stdin=subprocess.PIPE)
    assert child.stdin is not None
    child.stdin.write(json.dumps(_config_fields(config)).encode())
    child.stdin.close()
    return child


def _config_fields(config: ProxyConfig) -> dict[str, Any]:
    """``config`` as plain JSON fields (never pickled: a worker builds its config from data, not code)."""
    creds = config.credentials
    return {
        "url": config.url,
        "namespace": config.namespace,
        "host": config.host,
        "port": config.port,
        "tls_port": config.tls_port,
        "tls_cert": None if config.tls_cert is None else str(config.tls_cert),
        "tls_key": None if config.tls_key is None else str(config.tls_key),
        "credentials": None if creds is None else creds.fields(),
        "limits": dataclasses.asdict(config.limits),
        "max_delay_ms": config.max_delay_ms,
    }


def _config_of(fields: dict[str, Any]) -> ProxyConfig:
    """The :class:`ProxyConfig` :func:`_config_fields` wrote (checked again by its constructor)."""
    creds = fields["credentials"]
    return ProxyConfig(
        url=fields["url"],
        namespace=fields["namespace"],
        host=fields["host"],
        port=fields["port"],
        tls_port=fields["tls_port"],
        tls_cert=None if fields["tls_cert"] is None else Path(fields["tls_cert"]),
        tls_key=None if fields["tls_key"] is None else Path(fields["tls_key"]),
        credentials=None if creds is None else Credentials(creds[0], creds[1], max_skew_s=creds[2]),
        limits=Limits(**fields["limits"]),
        max_delay_ms=fields["max_delay_ms"],
    )


def _reap(child: subprocess.Popen[bytes]) -> None:
    try:
        child.wait(10)
    except subprocess.TimeoutExpired:
        log.warning("endpoint worker %d did not stop in 10 s: killed", child.pid)
        child.kill()
        child.wait()


def worker() -> None:
    """An extra endpoint process of ``mq proxy --workers N`` (its config as JSON on stdin from its parent)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = _config_of(json.loads(sys.stdin.buffer.read()))
    asyncio.run(serve(config, ProxyMetrics()))
