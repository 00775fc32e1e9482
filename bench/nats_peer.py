"""NATS JetStream's ``publish_async`` as a comparison for the async send benchmark (``bench.producer``).

Benchmark only, never a test: it runs when both the ``nats-server`` binary and the ``nats-py``
client (``pip install nats-py``) are on the machine, and is skipped otherwise (:func:`start` returns
None and says why). It starts its own ``nats-server -js`` on a free loopback port with its store in a
temporary directory (JetStream's default file storage; like the benchmark's Redis, nothing is
fsynced per message), so nothing else running on the machine is touched, and stops it at the end.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import tempfile
import time
from types import TracebackType
from typing import Any

from tests.servers import free_port

#: Seconds to wait for the server to take connections.
START_TIMEOUT_S = 10.0


class NatsPeer:
    """One ``nats-server`` with JetStream and a client on its own event loop; use :func:`start`."""

    def __init__(self, binary: str, nats: Any) -> None:
        self._nats = nats
        self._dir = tempfile.TemporaryDirectory(prefix="bench-nats-")
        self.port = free_port()
        self._proc = subprocess.Popen(
            [binary, "-js", "-a", "127.0.0.1", "-p", str(self.port), "-sd", self._dir.name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._runner = asyncio.Runner()
        self._client: Any = None
        self._js: Any = None

    def __enter__(self) -> NatsPeer:
        return self

    def __exit__(self, *exc: type[BaseException] | BaseException | TracebackType | None) -> None:
        self.close()

    def connect(self) -> None:
        """Wait for the server, connect, and create the stream ``BENCH`` on subject ``bench``."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                break
            except OSError:
                if time.monotonic() > deadline or self._proc.poll() is not None:
                    raise RuntimeError(f"nats-server did not start on 127.0.0.1:{self.port}") from None
                time.sleep(0.05)

        async def go() -> None:
            self._client = await self._nats.connect(f"nats://127.0.0.1:{self.port}")
            self._js = self._client.jetstream()
            await self._js.add_stream(name="BENCH", subjects=["bench"])

        self._runner.run(go())

    def publish_async(self, n: int, body: bytes) -> None:
        """Publish ``n`` messages with ``publish_async`` and wait for every acknowledgement."""

        async def go() -> None:
            futures = [await self._js.publish_async("bench", body) for _ in range(n)]
            await asyncio.gather(*futures)

        self._runner.run(go())

    def purge(self) -> None:
        """Empty the stream (between rounds, as the Redis cases flush)."""
        self._runner.run(self._js.purge_stream("BENCH"))

    def close(self) -> None:
        """Close the client, stop the server, remove its store."""
        try:
            if self._client is not None:
                self._runner.run(self._client.close())
            self._runner.close()
        finally:
            self._proc.terminate()
            try:
                self._proc.wait(5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._dir.cleanup()


def start() -> NatsPeer | None:
    """A connected :class:`NatsPeer`, or None (with the reason printed) when NATS is not available."""
    binary = shutil.which("nats-server")
    try:
        import nats
    except ImportError:
        nats = None
    if binary is None or nats is None:
        missing = "the nats-server binary" if binary is None else "the nats-py client (pip install nats-py)"
        print(f"NATS JetStream comparison skipped: {missing} is not installed")
        return None
    peer = NatsPeer(binary, nats)
    try:
        peer.connect()
    except Exception as e:
        peer.close()
        print(f"NATS JetStream comparison skipped: {e}")
        return None
    return peer
