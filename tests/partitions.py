"""The partition suite: a Sentinel topology on network namespaces, a fault, and every message accounted for.

``python -m tests.partitions --fault cut-master --sync-replicas 1 --seconds 10 --runs 3`` (root only)
prints one JSON line of figures per run; ``tests/test_partitions.py`` runs short ones in CI.

Hosts (:mod:`tests.netns`): ``n1``, ``n2``, ``n3`` each run a redis-server (``n1`` the first master,
the others its replicas), ``s1``, ``s2``, ``s3`` a sentinel each (quorum 2, down-after 1 s), ``app`` the producer
(``tests/partition_client.py``, ~200 sync sends/s, one log line per send); ``sub`` runs two consumer
groups (``tests/consumer_proc.py``, one log line per delivery). The test process watches the servers
through their unix sockets only.

Faults (``n1`` is the master when the fault starts):

- ``crash``: SIGKILL the master's redis-server; restarted (empty, as after a crash without
  persistence) when the fault ends;
- ``cut-master``: ``n1`` and the producer's host cut off from everyone else;
- ``cut-master-replica``: ``n1``, ``n2`` and the producer's host cut off from ``n3``, the sentinels and
  the consumers.

After the fault ends the producer keeps sending for ``after_s``, stops, the consumers get a quiet
period to catch up, stop cleanly (committing), and the store the sentinels name is read back. The
figures (:class:`Figures`): sends that raised, SEND_OK messages missing from the store (and when
they were sent, seconds from the fault), stored messages never delivered
and delivered twice per group, dirty reads (delivered, not in the final store), committed positions
above a queue's end, the longest time without a SEND_OK, and the stale-master window after the heal
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

ROOT = pathlib.Path(__file__).resolve().parent.parent
FAULTS = ("crash", "cut-master", "cut-master-replica")
DATA_HOSTS = ("n1", "n2", "n3")
SENTINEL_HOSTS = ("s1", "s2", "s3")
MASTER_NAME = "mymaster"
TOPIC, NAMESPACE, GROUPS = "orders", "part", ("g1", "g2")
#: Seconds the whole topology may take to come up (a bound, not a speed claim: in a two-worker suite
#: run beside another worker's Spark or cluster tests it once took over 30 s).
READY_TIMEOUT_S = 60.0
#: Longest quiet period given to the consumers to catch up after the producer stops, seconds.
QUIET_MAX_S = 20.0


@dataclass
class Figures:
    """What one run of a scenario measured (counts of messages; times in seconds)."""

    fault: str
    sync_replicas: int | str
    fault_s: float
    sent: int = 0
    send_ok: int = 0
    send_errors: int = 0
    stored: int = 0
    send_ok_lost: int = 0
    lost_sent_s: tuple[float, float] | None = None
    never_delivered: dict[str, int] = field(default_factory=dict)
    delivered_twice: dict[str, int] = field(default_factory=dict)
    dirty_reads: dict[str, int] = field(default_factory=dict)
    positions_above_end: int = 0
    no_send_ok_s: float = 0.0
    stale_after_heal: int = 0
    stale_window_after_heal_s: float = 0.0
    failover_s: float = 0.0
    run_s: float = 0.0


def _unix(path: str) -> redis.Redis:
    return redis.Redis(unix_socket_path=path, socket_timeout=1, socket_connect_timeout=1, decode_responses=True)


class Topology:
    """The servers and sentinels of one run on a :class:`Network` (see the module's docstring)."""

    def __init__(self, net: Network, workdir: str, *, down_after_ms: int = 1000) -> None:
        self.net, self.workdir, self.down_after_ms = net, workdir, down_after_ms
        self.servers: dict[str, subprocess.Popen[bytes]] = {}
        self.sentinels: dict[str, subprocess.Popen[bytes]] = {}

    def sock(self, host: str, *, sentinel: bool = False) -> str:
        """The unix socket of ``host``'s redis-server (or sentinel)."""
        return os.path.join(self.workdir, f"{host}.{'s' if sentinel else 'r'}.sock")

    @property
    def url(self) -> str:
        """The clients' ``redis+sentinel://`` URL (the sentinels' namespace addresses)."""
        return "redis+sentinel://" + ",".join(f"{self.net.addresses[h]}:26379" for h in SENTINEL_HOSTS) + f"/{MASTER_NAME}/0"

    def start_server(self, host: str) -> None:
        """Start ``host``'s redis-server (a replica of ``n1`` unless it is ``n1``), without persistence."""
        data = os.path.join(self.workdir, host)
        os.makedirs(data, exist_ok=True)
        argv = [
            shutil.which("redis-server") or "redis-server",
            *("--bind", self.net.addresses[host], "--port", "6379", "--protected-mode", "no"),
            *("--unixsocket", self.sock(host), "--unixsocketperm", "700", "--save", "", "--appendonly", "no"),
            *("--dir", data, "--logfile", os.path.join(data, "redis.log"), "--repl-diskless-sync-delay", "0"),
        ]
        if host != "n1":
            argv += ["--replicaof", self.net.addresses["n1"], "6379"]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.sock(host))
        self.servers[host] = self.net.popen(host, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

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
        argv = [shutil.which("redis-server") or "redis-server", conf, "--sentinel"]
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

    def role(self, host: str) -> str | None:
        with contextlib.suppress(redis.RedisError, OSError), _unix(self.sock(host)) as c:
            return str(c.info("replication")["role"])
        return None


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
    sync_replicas: int | str = 1,
    fault_s: float = 5.0,
    warmup_s: float = 2.0,
    after_s: float = 4.0,
    rate: float = 200,
    keep: bool = False,
) -> Figures:
    """One run of ``fault`` lasting ``fault_s`` (see the module's docstring); its figures. ``keep``: leave
    the run's directory (logs, the final store as JSON) and print its path."""
    if fault not in FAULTS:
        raise ValueError(f"fault must be one of {FAULTS}, got {fault!r}")
    began = time.monotonic()
    remove_stale()
    workdir = tempfile.mkdtemp(prefix="rocketredis-part-")
    os.chmod(workdir, 0o755)
    logs = pathlib.Path(workdir)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        with contextlib.ExitStack() as files, Network([*DATA_HOSTS, *SENTINEL_HOSTS, "app", "sub"]) as net:
            topo = Topology(net, workdir)
            topo.start()
            stop_file = logs / "stop"
            produced = logs / "produced.log"
            producer = net.popen(
                "app",
                _python("tests.partition_client", "produce", topo.url, NAMESPACE, TOPIC, str(produced))
                + ["--rate", str(rate), "--sync-replicas", str(sync_replicas), "--stop-file", str(stop_file)],
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
                topo.servers["n1"].kill()
                topo.servers["n1"].wait()
            else:
                net.partition(["n1", "app"] if fault == "cut-master" else ["n1", "n2", "app"])
            failover_at = None
            while time.monotonic() < fault_at + fault_s:
                if failover_at is None and topo.master() not in (None, "n1"):
                    failover_at = time.monotonic()
                time.sleep(0.05)
            if fault == "crash":
                topo.start_server("n1")
            else:
                net.heal()
            healed_at = time.monotonic()
            _wait(lambda: topo.role("n1") == "slave" or topo.master() == "n1", 30, "the old master to rejoin")
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
                fault, sync_replicas, fault_s, produced, {g: logs / f"{g}.log" for g in GROUPS}, dumped, fault_at, healed_at
            )
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
    sync_replicas: int | str,
    fault_s: float,
    produced: pathlib.Path,
    delivered: dict[str, pathlib.Path],
    dumped: pathlib.Path,
    fault_at: float,
    healed_at: float,
) -> Figures:
    """The figures of one run from its logs and the final store."""
    f = Figures(fault, sync_replicas, fault_s)
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
    for group, path in delivered.items():
        got = Counter(line.split(" ")[3] for line in _lines(path) if line.startswith("consume "))
        f.never_delivered[group] = len(in_store - set(got))
        f.delivered_twice[group] = sum(n > 1 for n in got.values())
        f.dirty_reads[group] = sum(body not in in_store for body in got)
    ends = {int(q): end for q, end in final["ends"].items()}
    f.positions_above_end = sum(
        offset > ends.get(int(q), 0) for by_queue in final["committed"].values() for q, offset in by_queue.items()
    )
    times = [fault_at - 1.0] + [t for _, t in ok if t > fault_at - 1.0] + [float(sends[-1][4]) if sends else healed_at]
    f.no_send_ok_s = round(max(b - a for a, b in itertools.pairwise(times)), 2)
    stale = [
        float(t) for outcome, seq, _, _, t in sends if outcome != "error" and float(t) > healed_at and f"m{seq}" not in in_store
    ]
    f.stale_after_heal = len(stale)
    f.stale_window_after_heal_s = round(max(stale) - healed_at, 2) if stale else 0.0
    return f


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a stopped run still removes its namespaces
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--fault", choices=FAULTS, action="append", help="repeatable; default: all")
    p.add_argument(
        "--sync-replicas",
        type=lambda text: int(text) if text.isdigit() else text,
        action="append",
        help="repeatable, a number or a mode name the producer takes; default: 0 and 1",
    )
    p.add_argument("--seconds", type=float, default=10.0, help="how long the fault lasts")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--rate", type=float, default=200)
    p.add_argument("--keep", action="store_true", help="keep each run's logs and print where")
    args = p.parse_args()
    for fault in args.fault or FAULTS:
        for replicas in args.sync_replicas or (0, 1):
            for _ in range(args.runs):
                print(
                    json.dumps(
                        asdict(run_scenario(fault, sync_replicas=replicas, fault_s=args.seconds, rate=args.rate, keep=args.keep))
                    ),
                    flush=True,
                )


if __name__ == "__main__":
    main()
