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
from dataclasses import asdict, dataclass, field

from mq import Admin, Message, Producer, SelectMessageQueueByHash
from mq.consumer.locks import LOCK_TTL_S
from mq.errors import MQError
from tests.procs import ROOT, ConsumerProc, first_deliveries, wait_for
from tests.servers import RedisServer

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


class Chaos:
    """One run of the suite."""

    def __init__(self, seconds: float, rate: int, workdir: pathlib.Path, producers: int = 1) -> None:
        self.seconds = seconds
        self.rate = rate
        self.producers = producers
        self._acked_lock = threading.Lock()
        self.dir = workdir
        self.ns = "chaos"
        self.redis = RedisServer(appendonly=True)
        self.acked: dict[str, list[str]] = {"C": [], "O": [], "D": []}
        self.stop_sending = threading.Event()
        self.brokers: list[subprocess.Popen[bytes]] = []
        self.consumers: dict[str, list[ConsumerProc]] = {"C": [], "O": [], "D": []}
        self.report = Report()

    # -- processes ------------------------------------------------------------------------------

    def _broker(self) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "mq", "broker", "--url", self.redis.url, "--namespace", self.ns],
                                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.DEVNULL)  # fmt: skip

    def _consumer(self, topic: str, *extra: str) -> ConsumerProc:
        n = sum(len(v) for v in self.consumers.values())
        proc = ConsumerProc(self.redis.url, self.ns, f"g{topic}", topic, self.dir / f"{topic}{n}.log", *extra)
        self.consumers[topic].append(proc)
        return proc

    # -- the run --------------------------------------------------------------------------------

    def run(self) -> Report:
        started = time.monotonic()
        self.redis.start()
        try:
            admin = Admin(self.redis.url, self.ns)
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
        with Producer("chaos", self.redis.url, namespace=self.ns) as producer:
            i = 0
            while not self.stop_sending.is_set():
                key = f"k{t}-{i % KEYS}"
                jobs = [("C", Message("C", f"c{t}-{i}".encode()), None),
                        ("O", Message("O", f"{key}:{seq[key]}".encode()), key)]  # fmt: skip
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

    def _consumed(self, topic: str) -> Counter[str]:
        return Counter(b for p in self.consumers[topic] for b in p.consumed())

    def _drain(self) -> None:
        for topic, acked in self.acked.items():
            wanted = set(acked)
            wait_for(lambda t=topic, w=wanted: w <= set(self._consumed(t)), max(90.0, self.seconds), f"topic {topic} to drain",
                     poll_s=0.5)  # type: ignore[misc]
        time.sleep(1.0)

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

    def _stop_all(self) -> None:
        for procs in self.consumers.values():
            for p in procs:
                if p.proc.poll() is None:
                    p.proc.send_signal(signal.SIGCONT)
                    p.stop(20)
        for b in self.brokers:
            if b.poll() is None:
                b.terminate()
                b.wait(20)
        self.redis.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="how long the load and faults last")
    parser.add_argument("--rate", type=int, default=300,
                        help="rounds per second per producer (each: 1 concurrent + 1 ordered msg; 0: as fast as possible)")
    parser.add_argument("--producers", type=int, default=1, help="producer threads")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mq-chaos-") as tmp:
        report = Chaos(args.seconds, args.rate, pathlib.Path(tmp), args.producers).run()
    print(json.dumps(asdict(report) | {"ok": report.ok}, indent=2))
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
