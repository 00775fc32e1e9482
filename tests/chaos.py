"""Fault injection under load: ``python -m tests.chaos [--seconds 60] [--rate 300]`` (``make chaos``).

A producer sends concurrent, ordered (by sharding key) and timer messages while two concurrent
consumers, two orderly consumers, a timer-message consumer and two broker services run, all as
separate processes on a Redis with AOF (``appendfsync always``). Meanwhile the suite

1. kills a concurrent consumer (SIGKILL) and starts a new one,
2. kills a broker service (SIGKILL) and starts it again,
3. kills Redis (SIGKILL) and restarts it from its AOF,
4. pauses an orderly consumer (SIGSTOP) past its lock lease, then resumes it.

Then it stops producing, waits for the consumers to drain, and reports: messages acknowledged to
the producer and never consumed (must be 0), duplicates (reported), ordering violations (must be
0), timer messages lost (must be 0) or delivered early (must be 0), and their lateness.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from mq import Admin, Message, Producer, SelectMessageQueueByHash, SendStatus
from mq.consumer.locks import LOCK_TTL_S
from mq.errors import MQError
from mq.store.connection import Connection
from tests.helpers import QUIET_PERIOD_S
from tests.procs import ROOT, ConsumerProc, first_deliveries, wait_for
from tests.servers import RedisClusterProcs, RedisServer, SentinelProcs

KEYS = 20


@dataclass
class Report:
    """What the suite found."""

    seconds: float = 0.0
    load_seconds: float = 0.0
    acked: dict[str, int] = field(default_factory=dict)
    lost: dict[str, int] = field(default_factory=dict)
    duplicates: dict[str, int] = field(default_factory=dict)
    order_violations: int = 0
    timer_early: int = 0
    timer_late_p99_ms: float = 0.0
    faults: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No loss, no reordering, no early timer message."""
        return not any(self.lost.values()) and self.order_violations == 0 and self.timer_early == 0


class LoadRun:
    """What both suites share: the consumer and broker processes, the acknowledged bodies, draining and
    judging. ``O`` is the ordered topic (``key:seq`` bodies), ``D`` the timer topic (``…:due_ms``)."""

    def __init__(self, ns: str, topics: Sequence[str], seconds: float, rate: int, workdir: pathlib.Path, report: Report) -> None:
        self.ns = ns
        self.seconds = seconds
        self.rate = rate
        self.dir = workdir
        self._acked_lock = threading.Lock()
        self.acked: dict[str, list[str]] = {t: [] for t in topics}
        self.stop_sending = threading.Event()
        self.brokers: list[subprocess.Popen[bytes]] = []
        self.consumers: dict[str, list[ConsumerProc]] = {t: [] for t in topics}
        self.report = report

    @property
    def url(self) -> str:
        """The store URL every process uses."""
        raise NotImplementedError

    def _broker(self, *extra: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            [sys.executable, "-m", "mq", "broker", "--url", self.url, "--namespace", self.ns, *extra],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.DEVNULL,
        )

    def _consumer(self, topic: str, *extra: str) -> ConsumerProc:
        n = sum(len(v) for v in self.consumers.values())
        proc = ConsumerProc(self.url, self.ns, f"g{topic}", topic, self.dir / f"{topic}{n}.log", *extra)
        self.consumers[topic].append(proc)
        return proc

    def _consumed(self, topic: str) -> Counter[str]:
        return Counter(b for p in self.consumers[topic] for b in p.consumed())

    def _drain(self, *, unawaited: Sequence[str] = (), strict: bool = True) -> None:
        """Wait until every acknowledged body is consumed (not for the ``unawaited`` topics); without
        ``strict`` a topic that does not drain in time is left for :meth:`_judge` to count as lost."""
        for topic, acked in self.acked.items():
            wanted = set() if topic in unawaited else set(acked)
            try:
                wait_for(
                    lambda t=topic, w=wanted: w <= set(self._consumed(t)),
                    max(90.0, self.seconds),
                    f"topic {topic} to drain",
                    poll_s=0.5,
                )
            except AssertionError:
                if strict:
                    raise
        time.sleep(QUIET_PERIOD_S)  # the quiet period: a late duplicate is counted in the report too

    def _judge(self) -> None:
        r = self.report
        for topic, acked in self.acked.items():
            seen = self._consumed(topic)
            r.acked[topic] = len(acked)
            r.lost[topic] = len(set(acked) - set(seen))
            r.duplicates[topic] = sum(seen.values()) - len(seen)
        for seqs in first_deliveries(self.consumers["O"]).values():
            r.order_violations += sum(1 for a, b in itertools.pairwise(seqs) if b < a)
        late = []
        for p in self.consumers["D"]:
            for ts, _, _, body in p.records():
                lateness = ts * 1000 - int(body.split(":")[1])
                late.append(lateness)
                r.timer_early += lateness < -5  # clocks: same host; allow rounding of the printed time
        late.sort()
        r.timer_late_p99_ms = round(late[int(len(late) * 0.99) - 1], 1) if late else 0.0

    def _stop_processes(self) -> None:
        for procs in self.consumers.values():
            for p in procs:
                if p.proc.poll() is None:
                    p.proc.send_signal(signal.SIGCONT)
                    p.stop(20)
        for b in self.brokers:
            if b.poll() is None:
                b.terminate()
                b.wait(20)


class Chaos(LoadRun):
    """One run of the suite."""

    def __init__(self, seconds: float, rate: int, workdir: pathlib.Path, producers: int = 1) -> None:
        super().__init__("chaos", ("C", "O", "D"), seconds, rate, workdir, Report())
        self.producers = producers
        self.redis = RedisServer(appendonly=True)

    @property
    def url(self) -> str:
        """The AOF server's URL."""
        return self.redis.url

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.monotonic()
        self.redis.start()
        try:
            admin = Admin(self.url, self.ns)
            admin.create_topic("C", read_queues=8, write_queues=8)
            admin.create_topic("O", read_queues=8, write_queues=8, order=True)
            admin.create_topic("D", read_queues=1, write_queues=1)
            admin.close()
            self.brokers = [self._broker(), self._broker()]
            for _ in range(2):
                self._consumer("C")
                self._consumer("O", "--orderly")
            self._consumer("D", "--orderly")
            everyone = [p for procs in self.consumers.values() for p in procs]
            wait_for(lambda: all(p.assigned() for p in everyone), 60, "every consumer to get queues")
            senders = [threading.Thread(target=self._produce, args=(t,), daemon=True) for t in range(self.producers)]
            load_started = time.monotonic()
            for sender in senders:
                sender.start()
            self._inject_faults()
            time.sleep(max(0.0, load_started + self.seconds - time.monotonic()))
            self.stop_sending.set()
            for sender in senders:
                sender.join(30)
            self.report.load_seconds = round(time.monotonic() - load_started, 1)
            self._drain()
            self._judge()
        finally:
            self._stop_all()
        self.report.seconds = round(time.monotonic() - started, 1)
        return self.report

    def _produce(self, t: int) -> None:
        """Producer thread ``t``: its own sharding keys, so each key is sent in order by one thread."""
        selector = SelectMessageQueueByHash()
        seq = Counter[str]()
        with Producer("chaos", self.url, namespace=self.ns) as producer:
            i = 0
            while not self.stop_sending.is_set():
                key = f"k{t}-{i % KEYS}"
                jobs = [("C", Message("C", f"c{t}-{i}".encode()), None), ("O", Message("O", f"{key}:{seq[key]}".encode()), key)]
                if i % 10 == 0:
                    due = int(time.time() * 1000) + 1000 + (i % 7) * 300
                    jobs.append(("D", Message("D", f"d{t}-{i}:{due}".encode(), deliver_time_ms=due), None))
                for topic, msg, arg in jobs:
                    self._send(producer, topic, msg, arg, selector)
                seq[key] += 1
                i += 1
                if self.rate:
                    time.sleep(1 / self.rate)

    def _send(self, producer: Producer, topic: str, msg: Message, arg: str | None, selector: SelectMessageQueueByHash) -> None:
        """Send until acknowledged (a failed send may still have been stored: a duplicate, not a loss)."""
        while True:
            try:
                if arg is None:
                    producer.send(msg)
                else:
                    producer.send(msg, selector=selector, arg=arg)
                with self._acked_lock:
                    self.acked[topic].append(msg.body.decode())
                return
            except MQError:
                time.sleep(0.2)

    def _inject_faults(self) -> None:
        step = self.seconds / 6
        time.sleep(step)
        victim = self.consumers["C"][0]
        victim.kill()
        self._consumer("C")
        self.report.faults.append("SIGKILL a concurrent consumer, start a new one")
        time.sleep(step)
        self.brokers[0].send_signal(signal.SIGKILL)
        self.brokers[0].wait(10)
        self.brokers[0] = self._broker()
        self.report.faults.append("SIGKILL a broker service, start it again")
        time.sleep(step)
        self.redis.kill()
        time.sleep(0.5)
        self.redis.start()
        self.report.faults.append("SIGKILL Redis, restart it from its AOF")
        time.sleep(step)
        paused = self.consumers["O"][0]
        paused.proc.send_signal(signal.SIGSTOP)
        time.sleep(LOCK_TTL_S + 3)
        paused.proc.send_signal(signal.SIGCONT)
        self.report.faults.append(f"SIGSTOP an orderly consumer for {LOCK_TTL_S + 3:.0f} s, then SIGCONT")

    def _stop_all(self) -> None:
        self._stop_processes()
        self.redis.stop()


# -- high availability: a failover under load -----------------------------------------------------


@dataclass
class HAReport(Report):
    """What a failover run found (``--topology sentinel|cluster``), beside :class:`Report`'s figures."""

    topology: str = ""
    failover_s: float = 0.0
    send_failure_window_s: dict[str, float] = field(default_factory=dict)  # kill → first SEND_OK on any queue
    killed_node_window_s: dict[str, float] = field(default_factory=dict)  # … on a queue of the killed master
    unconfirmed: dict[str, int] = field(default_factory=dict)
    orderly_overlap: int = 0
    timer_lost: int = 0

    @property
    def ok(self) -> bool:
        """With sync_replicas=1: nothing acknowledged lost, no reordering, no overlap, no timer lost or early."""
        synced = [t for t in self.lost if not t.startswith("C0")]
        return (
            not any(self.lost[t] for t in synced)
            and self.order_violations == 0
            and self.orderly_overlap == 0
            and self.timer_lost == 0
            and self.timer_early == 0
        )


def orderly_overlap(procs: list[ConsumerProc], window_s: float) -> int:
    """Times a queue's consumption went A → B → A between two processes within ``window_s``: two
    members consuming one queue at once (a clean hand-over goes A → B only)."""
    timeline: dict[int, list[tuple[float, int]]] = {}
    for n, p in enumerate(procs):
        for ts, qid, _, _ in p.records():
            timeline.setdefault(qid, []).append((ts, n))
    overlaps = 0
    for events in timeline.values():
        events.sort()
        runs: list[tuple[int, float, float]] = []  # (process, first ts, last ts) of each uninterrupted run
        for ts, n in events:
            if runs and runs[-1][0] == n:
                runs[-1] = (n, runs[-1][1], ts)
            else:
                runs.append((n, ts, ts))
        for a, b, c in zip(runs, runs[1:], runs[2:]):
            overlaps += a[0] == c[0] != b[0] and c[1] - a[2] <= window_s
    return overlaps


class HAChaos(LoadRun):
    """Kill the (a) master with SIGKILL under load, let a replica be promoted, keep the load going.

    Producers: ``sync_replicas=1`` sends topic C1 (concurrent), O (ordered by key) and D (timer);
    ``sync_replicas=0`` sends C0. A send counts as acknowledged only with SEND_OK; FLUSH_SLAVE_TIMEOUT
    and errors are sent again (duplicates, never losses). Consumers run as processes; a broker
    service with ``--sync-replicas 1`` delivers the timer messages.
    """

    TOPICS = ("C0", "C1", "O", "D")

    def __init__(self, topology: str, seconds: float, rate: int, workdir: pathlib.Path) -> None:
        self.report: HAReport
        super().__init__("hachaos", self.TOPICS, seconds, rate, workdir, HAReport(topology=topology))
        self.topology = topology
        self.servers: SentinelProcs | RedisClusterProcs = (
            SentinelProcs() if topology == "sentinel" else RedisClusterProcs(replicas=1)
        )
        self.unconfirmed = Counter[str]()
        self.failures: dict[str, list[float]] = {"sync_replicas=0": [], "sync_replicas=1": []}
        self.successes: dict[str, list[float]] = {"sync_replicas=0": [], "sync_replicas=1": []}
        self.queue_successes: dict[str, list[tuple[float, str, int]]] = {"sync_replicas=0": [], "sync_replicas=1": []}
        self.killed_queues: set[tuple[str, int]] = set()

    @property
    def url(self) -> str:
        """The topology's URL (redis+sentinel:// or redis+cluster://)."""
        return self.servers.url

    def run(self) -> HAReport:
        started = time.monotonic()
        self.servers.start()
        try:
            admin = Admin(self.url, self.ns)
            for topic in ("C0", "C1", "O"):
                admin.create_topic(topic, read_queues=6, write_queues=6, order=topic == "O")
            admin.create_topic("D", read_queues=1, write_queues=1)
            admin.close()
            self.brokers = [self._broker("--sync-replicas", "1")]
            for topic in ("C0", "C1"):
                self._consumer(topic)
                self._consumer(topic)
            self._consumer("O", "--orderly")
            self._consumer("O", "--orderly")
            self._consumer("D", "--orderly")
            everyone = [p for procs in self.consumers.values() for p in procs]
            wait_for(lambda: all(p.assigned() for p in everyone), 60, "every consumer to get queues")
            senders = [threading.Thread(target=self._produce, args=(sync,), daemon=True) for sync in (0, 1)]
            load_started = time.monotonic()
            for sender in senders:
                sender.start()
            time.sleep(self.seconds / 3)
            killed_at = self._failover()
            time.sleep(max(0.0, load_started + self.seconds - time.monotonic()))
            self.stop_sending.set()
            for sender in senders:
                sender.join(30)
            self.report.load_seconds = round(time.monotonic() - load_started, 1)
            for mode in self.failures:
                after = [t for t in self.successes[mode] if t > killed_at]
                self.report.send_failure_window_s[mode] = round(after[0] - killed_at, 2) if after else -1.0
                on_killed = [
                    t for t, topic, q in self.queue_successes[mode] if t > killed_at and (topic, q) in self.killed_queues
                ]
                self.report.killed_node_window_s[mode] = round(on_killed[0] - killed_at, 2) if on_killed else -1.0
            self._drain(unawaited=("C0",), strict=False)  # sync_replicas=0 may lose some: not waited for
            self._judge()
        finally:
            self._stop_all()
        self.report.seconds = round(time.monotonic() - started, 1)
        return self.report

    def _failover(self) -> float:
        """SIGKILL the (a) master, wait for the promotion, then restart the victim: it rejoins as a replica,
        so ``sync_replicas=1`` sends can be confirmed again."""
        self.killed_queues = (
            self._queues_on(f"127.0.0.1:{self.servers.nodes[0].port}")
            if isinstance(self.servers, RedisClusterProcs)
            else {(t, q) for t in self.TOPICS for q in range(6)}
        )
        if isinstance(self.servers, SentinelProcs):
            old = self.servers.master.port
            victim = self.servers.kill_master()
            killed_at = time.monotonic()
            self.servers.wait_failover(old)
            self.report.failover_s = round(time.monotonic() - killed_at, 2)
            victim.extra_args += ["--replicaof", "127.0.0.1", str(self.servers.master.port)]  # as sentinel would do
            victim.start()
            self.report.faults.append("SIGKILL the Sentinel master; a replica is promoted; the old master restarts as replica")
        else:
            successor = self.servers.kill_master(0)
            killed_at = time.monotonic()
            self.servers.wait_promoted(successor)
            self.report.failover_s = round(time.monotonic() - killed_at, 2)
            self.servers.nodes[0].start()  # rejoins (nodes.conf) as a replica of the promoted node
            self.report.faults.append(
                "SIGKILL one of the 3 cluster masters; its replica is promoted; the old master restarts as replica"
            )
        return killed_at

    def _produce(self, sync: int) -> None:
        mode = f"sync_replicas={sync}"
        selector = SelectMessageQueueByHash()
        seq = Counter[str]()
        with Producer(f"chaos{sync}", self.url, namespace=self.ns, sync_replicas=sync, sync_replicas_timeout_ms=1000) as p:
            i = 0
            while not self.stop_sending.is_set():
                jobs: list[tuple[str, Message, str | None]] = [(f"C{sync}", Message(f"C{sync}", f"c{sync}-{i}".encode()), None)]
                if sync:
                    key = f"k{i % KEYS}"
                    jobs.append(("O", Message("O", f"{key}:{seq[key]}".encode()), key))
                    seq[key] += 1
                    if i % 10 == 0:
                        due = int(time.time() * 1000) + 1000 + (i % 7) * 300
                        jobs.append(("D", Message("D", f"d-{i}:{due}".encode(), deliver_time_ms=due), None))
                for topic, msg, arg in jobs:
                    self._send(p, mode, topic, msg, arg, selector)
                i += 1
                if self.rate:
                    time.sleep(1 / self.rate)

    def _send(
        self, producer: Producer, mode: str, topic: str, msg: Message, arg: str | None, selector: SelectMessageQueueByHash
    ) -> None:
        """Send until SEND_OK: an unconfirmed or failed send may be stored (a duplicate, never a loss)."""
        while not (self.stop_sending.is_set() and topic != "O"):  # an ordered key's message is always finished
            try:
                result = producer.send(msg) if arg is None else producer.send(msg, selector=selector, arg=arg)
            except MQError:
                self.failures[mode].append(time.monotonic())
                time.sleep(0.05)
                continue
            if result.status is not SendStatus.SEND_OK:
                self.unconfirmed[topic] += 1
                self.failures[mode].append(time.monotonic())
                continue
            now = time.monotonic()
            self.successes[mode].append(now)
            self.queue_successes[mode].append((now, topic, result.message_queue.queue_id))
            with self._acked_lock:
                self.acked[topic].append(msg.body.decode())
            return

    def _queues_on(self, node: str) -> set[tuple[str, int]]:
        """The (topic, queue id) pairs the cluster node ``node`` serves."""
        conn = Connection(self.url, self.ns)
        try:
            return {(t, q) for t in self.TOPICS for q in range(6) if conn.node_of(conn.keys.queue(t, q).meta) == node}
        finally:
            conn.close()

    def _judge(self) -> None:
        super()._judge()
        r = self.report
        r.unconfirmed = {t: self.unconfirmed[t] for t in self.TOPICS}
        r.orderly_overlap = orderly_overlap(self.consumers["O"], LOCK_TTL_S)
        r.timer_lost = r.lost["D"]

    def _stop_all(self) -> None:
        self._stop_processes()
        self.servers.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load and faults last")
    parser.add_argument(
        "--rate",
        type=int,
        default=300,
        help="rounds per second per producer (each: 1 concurrent + 1 ordered msg; 0: as fast as possible)",
    )
    parser.add_argument("--producers", type=int, default=1, help="producer threads")
    parser.add_argument(
        "--topology",
        choices=("standalone", "sentinel", "cluster"),
        default="standalone",
        help="standalone: the faults above on one AOF server; sentinel/cluster: SIGKILL the (a) master "
        "under load and measure the failover",
    )
    args = parser.parse_args()
    if args.topology != "standalone":
        with tempfile.TemporaryDirectory(prefix="mq-chaos-") as tmp:
            ha = HAChaos(args.topology, args.seconds, args.rate, pathlib.Path(tmp)).run()
        print(json.dumps(asdict(ha) | {"ok": ha.ok}, indent=2))
        return 0 if ha.ok else 1
    with tempfile.TemporaryDirectory(prefix="mq-chaos-") as tmp:
        report = Chaos(args.seconds, args.rate, pathlib.Path(tmp), args.producers).run()
    print(json.dumps(asdict(report) | {"ok": report.ok}, indent=2))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
