"""A real S3 HTTP endpoint for the tier tests: ``moto``'s server mode on a free 127.0.0.1 port,
started and stopped by pid (never by name). Its buckets live in the process's memory."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import urllib.request

from tests.servers import free_port, spawn_dying_with_parent, wait_until

#: The environment a client of the server needs (moto accepts any credentials; these are fakes).
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_REGION": "us-east-1"}


class MotoServer:
    """One ``python -m moto.server`` process; :meth:`stop` then :meth:`start` brings it back on the
    same port (empty: moto keeps nothing across a restart)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What a process needs to reach the server through the standard S3 environment."""
        return {**FAKE_CREDENTIALS, "AWS_ENDPOINT_URL": self.endpoint}

    def start(self) -> MotoServer:
        self.proc = spawn_dying_with_parent(  # the server must not outlive the test run
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self._answers, 30, f"moto server on port {self.port}")
        return self

    def _answers(self) -> bool:
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.endpoint}/moto-api/", timeout=1):
            return True
        return False

    def create_bucket(self, name: str) -> None:
        """Create bucket ``name`` (an S3 ``PUT /name``)."""
        request = urllib.request.Request(f"{self.endpoint}/{name}", method="PUT")
        with urllib.request.urlopen(request, timeout=10):
            pass

    def stop(self) -> None:
        """Kill the server (its pid) and wait until the port refuses connections."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)
        self.proc = None

        def refused() -> bool:
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) != 0

        wait_until(refused, 10, f"port {self.port} to close")
