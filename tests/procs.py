"""Start and watch consumer processes (``tests/consumer_proc.py``) from tests."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parent.parent


class ConsumerProc:
    """One consumer process and the log it writes."""

    def __init__(self, url: str, namespace: str, group: str, topic: str, log: pathlib.Path, *extra: str) -> None:
        self.log = log
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.consumer_proc", url, namespace, group, topic, str(log), *extra],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

    def lines(self) -> list[str]:
        """The log so far."""
        return self.log.read_text().splitlines() if self.log.exists() else []

    def consumed(self) -> list[str]:
        """Bodies consumed so far, in order."""
        return [line.split(" ")[3] for line in self.lines() if line.startswith("consume ")]

    def records(self) -> list[tuple[float, int, int, str]]:
        """``(wall time, queue id, offset, body)`` of each orderly consumption so far."""
        out = []
        for line in self.lines():
            if line.startswith("consume ") and len(line.split(" ")) == 5:
                _, qid, offset, body, ts = line.split(" ")
                out.append((float(ts), int(qid), int(offset), body))
        return out

    def assigned(self) -> set[int] | None:
        """The queue ids it reported last (None before its first report)."""
        reports = [line for line in self.lines() if line.startswith("assigned ")]
        if not reports:
            return None
        ids = reports[-1].split(" ")[2] if len(reports[-1].split(" ")) > 2 else ""
        return {int(i) for i in ids.split(",") if i}

    def registered_at(self) -> float | None:
        """Wall time its consumer had started and registered, or None."""
        found = [line for line in self.lines() if line.startswith("registered ")]
        return float(found[0].split()[1]) if found else None

    def bye_at(self) -> float | None:
        """Wall time its clean shutdown finished, or None."""
        found = [line.split() for line in self.lines() if line.startswith("bye ")]
        return float(found[0][1]) if found else None

    def last_assigned_at(self) -> float:
        """Wall time of its latest change of queues (0 before any)."""
        found = [float(line.split()[1]) for line in self.lines() if line.startswith("assigned ")]
        return found[-1] if found else 0.0

    def assigned_at(self) -> float | None:
        """Wall time of its first non-empty queue assignment, or None."""
        found = [line.split() for line in self.lines() if line.startswith("assigned ")]
        return next((float(f[1]) for f in found if len(f) > 2), None)

    def stop(self, timeout_s: float = 30) -> None:
        """SIGTERM (clean shutdown) and wait."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout_s)

    def kill(self) -> None:
        """SIGKILL and wait."""
        self.proc.kill()
        self.proc.wait(10)


def wait_for(predicate, timeout_s: float, what: str, poll_s: float = 0.05) -> float:  # type: ignore[no-untyped-def]
    """Poll until ``predicate()``; returns the seconds it took, fails the test after ``timeout_s``."""
    started = time.monotonic()
    while not predicate():
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(poll_s)
    return time.monotonic() - started


def counts(procs: list[ConsumerProc]) -> Counter[str]:
    """How often each body was consumed across ``procs``."""
    return Counter(b for p in procs for b in p.consumed())


def first_deliveries(procs: list[ConsumerProc]) -> dict[str, list[int]]:
    """For each sharding key of ``key:seq`` bodies, the seqs in the order of their first delivery
    across ``procs`` (orderly consumer processes, whose records carry wall times)."""
    first: dict[str, float] = {}
    for p in procs:
        for ts, _, _, body in p.records():
            first[body] = min(first.get(body, ts), ts)
    by_key: dict[str, list[tuple[float, int]]] = {}
    for body, ts in first.items():
        key, seq = body.split(":")
        by_key.setdefault(key, []).append((ts, int(seq)))
    return {k: [seq for _, seq in sorted(v)] for k, v in by_key.items()}
