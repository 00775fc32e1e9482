"""Real ``redis-server`` processes on free loopback ports, for tests and benchmarks.

- :class:`RedisServer`: one standalone server (optionally AOF with ``appendfsync always``,
  restartable on the same port and data directory, pausable with SIGSTOP).
- :class:`RedisClusterProcs`: a 3-master Redis Cluster without replicas, with
  ``cluster-require-full-coverage no`` so the surviving masters keep serving when one stops.

Every process started here is killed at interpreter exit, so none outlives a test run.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import Any

import redis

_live: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    for proc in list(_live):
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def free_port(*, with_bus: bool = False) -> int:
    """A free loopback port (and, with ``with_bus``, port + 10000 free too, for the cluster bus)."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not with_bus:
            return port
        if port + 10000 < 65536:
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port + 10000))
                except OSError:
                    continue
            return port
    raise RuntimeError("no free port pair found")


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if predicate():
                return
        except (redis.RedisError, OSError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")


class RedisServer:
    """One redis-server process on 127.0.0.1."""

    def __init__(
        self,
        *,
        port: int | None = None,
        appendonly: bool = False,
        workdir: str | None = None,
        extra_args: Sequence[str] = (),
        password: str | None = None,
        with_bus: bool = False,
    ) -> None:
        self.port = port or free_port(with_bus=with_bus)
        self.appendonly = appendonly
        self.workdir = workdir or tempfile.mkdtemp(prefix=f"redis-{self.port}-")
        self.extra_args = list(extra_args)
        self.password = password
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        """The server's process id."""
        if self.proc is None:
            raise RuntimeError("server not started")
        return self.proc.pid

    @property
    def url(self) -> str:
        """``redis://[:password@]127.0.0.1:PORT/0``."""
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        """A redis-py client for this server."""
        return redis.Redis(host="127.0.0.1", port=self.port, password=self.password)

    def start(self) -> RedisServer:
        """Start the process and wait until it answers PING (10 s at most)."""
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: run `make test`, which installs it")
        args = [binary, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--dir", self.workdir,
                "--daemonize", "no", "--logfile", os.path.join(self.workdir, "redis.log")]  # fmt: skip
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        if self.password:
            args += ["--requirepass", self.password]
        self.proc = subprocess.Popen([*args, *self.extra_args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _live.add(self.proc)
        try:
            _wait(lambda: self.client().ping(), 10, f"redis-server on port {self.port}")
        except TimeoutError:
            raise RuntimeError(f"redis-server on {self.port} did not start:\n{self.log_tail()}") from None
        return self

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server log."""
        try:
            with open(os.path.join(self.workdir, "redis.log")) as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def _end(self, sig: int, grace_s: float) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _live.discard(self.proc)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM (SIGKILL after 5 s) and wait."""
        self.resume()
        self._end(signal.SIGTERM, 5)

    def kill(self) -> None:
        """SIGKILL and wait: a crash."""
        self._end(signal.SIGKILL, 5)

    def restart(self) -> RedisServer:
        """Stop and start on the same port and data directory (AOF data survives)."""
        self.stop()
        return self.start()

    def pause(self) -> None:
        """SIGSTOP: the server hangs without closing connections."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)


class RedisClusterProcs:
    """A Redis Cluster of three masters on loopback, created with ``redis-cli --cluster create``."""

    CLUSTER_ARGS = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1500",
                    "--cluster-require-full-coverage", "no", "--cluster-allow-reads-when-down", "yes")  # fmt: skip

    def __init__(self, masters: int = 3) -> None:
        self.nodes = [RedisServer(with_bus=True, extra_args=self.CLUSTER_ARGS) for _ in range(masters)]

    @property
    def ports(self) -> list[int]:
        """The masters' ports."""
        return [n.port for n in self.nodes]

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3``."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def client(self) -> redis.RedisCluster:
        """A redis-py cluster client."""
        return redis.RedisCluster(host="127.0.0.1", port=self.ports[0])

    def start(self) -> RedisClusterProcs:
        """Start the nodes, create the cluster and wait until every node agrees it is ok (20 s)."""
        for node in self.nodes:
            node.start()
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not installed: run `make test`, which installs redis-server")
        subprocess.run([cli, "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.ports), "--cluster-replicas", "0",
                        "--cluster-yes"], check=True, capture_output=True, timeout=30)  # fmt: skip
        self._wait_ok(range(len(self.nodes)))
        return self

    def _wait_ok(self, indexes: Any) -> None:
        def ok() -> bool:
            for i in indexes:
                c = self.nodes[i].client()
                info = c.cluster("info")
                c.close()
                if info.get("cluster_state") != "ok" or int(info.get("cluster_slots_assigned", 0)) != 16384:
                    return False
                if int(info.get("cluster_known_nodes", 0)) != len(self.nodes):
                    return False
            return True

        _wait(ok, 20, "the cluster to become ok")

    def stop_node(self, i: int) -> None:
        """Stop master ``i`` (SIGTERM)."""
        self.nodes[i].stop()

    def start_node(self, i: int) -> None:
        """Start master ``i`` again with its old config, and wait until the cluster is ok."""
        self.nodes[i].start()
        self._wait_ok(range(len(self.nodes)))

    def stop(self) -> None:
        """Stop every node and remove their data."""
        for node in self.nodes:
            node.stop()
            shutil.rmtree(node.workdir, ignore_errors=True)

    def __enter__(self) -> RedisClusterProcs:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
