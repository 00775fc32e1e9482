"""Exporters the operator-kit tests scrape: a real ``mq broker --metrics-port`` process, and the HTTP
scrape itself (parsed by prometheus_client's own parser, as a Prometheus server would read it)."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from mq import Admin, Message, MessageQueue, Producer
from mq.store import Store
from mq.store.connection import Connection
from tests.procs import ROOT, wait_for
from tests.servers import free_port

#: Sample names a family of each type publishes besides (or instead of) its own name.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_count", "_sum", "_created"),
    "summary": ("_count", "_sum", "_created"),
    "gauge": ("",),
    "info": ("_info",),
    "stateset": ("",),
    "gaugehistogram": ("_bucket", "_gcount", "_gsum"),
    "unknown": ("",),
}


def scrape(host: str, port: int) -> list[Metric]:
    """The families served on ``http://host:port/metrics``."""
    text = urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=10).read().decode()
    return list(text_string_to_metric_families(text))


def series_names(families: list[Metric]) -> set[str]:
    """Every sample name ``families`` publish: a family with no sample yet (no group has a DLQ, say)
    still says its type, hence which names its samples have, and a dashboard or rule may use them."""
    names = set()
    for f in families:
        names |= {f.name + suffix for suffix in SUFFIXES[f.type]}
        names |= {s.name for s in f.samples}
    return names


def accepts(host: str, port: int) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted (refused: nothing listens there)."""
    try:
        with socket.create_connection((host, port), timeout=5):
            return True
    except ConnectionRefusedError:
        return False


def seed(url: str, namespace: str) -> None:
    """Data for the labelled series: topic T (2 queues) with 3 messages on each queue, and group g's
    offset 1 on queue 0 (lag 2 there; queue 1 has no committed offset, hence no lag series)."""
    with Admin(url, namespace) as admin:
        admin.create_topic("T", read_queues=2, write_queues=2)
    with Producer("p", url, namespace=namespace) as producer:
        for i in range(6):
            producer.send(Message("T", b"%d" % i), queue=MessageQueue("T", "broker-a", i % 2))
    store = Store(Connection(url, namespace))
    try:
        store.commit_offsets("g", {MessageQueue("T", "broker-a", 0): 1})
    finally:
        store.conn.close()


def promtool(*args: str, cwd: str | os.PathLike[str]) -> str:
    """Run promtool (Debian's ``prometheus`` package; ``make test`` installs it) and return its output;
    the test fails when promtool is missing or fails. Never a skip: CI would pass without checking."""
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: `make test` installs it (apt-get install prometheus), or install it and rerun")
    done = subprocess.run([found, *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"promtool {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


@contextlib.contextmanager
def broker_cli(url: str, namespace: str, *extra: str, host: str = "127.0.0.1") -> Iterator[int]:
    """Run ``mq broker --metrics-port P --metrics-host host`` (plus ``extra``) until the block ends;
    yields P once the service runs. Stopped with SIGTERM, on which it must exit 0."""
    with mq_cli("broker", "--url", url, "--namespace", namespace, *extra, host=host, ready="running; Ctrl-C to stop") as port:
        yield port


@contextlib.contextmanager
def mq_cli(*args: str, ready: str, host: str = "127.0.0.1") -> Iterator[int]:
    """Run ``mq ARGS --metrics-port P --metrics-host host`` until the block ends; yields P once the
    command printed ``ready`` (it has then set up its signal handlers: a SIGTERM before that kills it)."""
    port = free_port()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mq", *args, "--metrics-port", str(port), "--metrics-host", host],
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=out,
            stderr=subprocess.STDOUT,
        )

        def output() -> str:
            out.seek(0)
            return out.read()

        try:

            def started() -> bool:
                assert proc.poll() is None, f"mq {args[0]} exited with {proc.returncode}:\n{output()}"
                return ready in output()

            wait_for(started, 60, f"mq {args[0]} to start")
            yield port
        finally:
            proc.terminate()
            try:
                assert proc.wait(30) == 0, f"mq {args[0]} exited with {proc.returncode} on SIGTERM:\n{output()}"
            finally:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait(10)
