"""Exporters the operator-kit tests scrape: a real ``mq broker --metrics-port`` process, and the HTTP
scrape itself (parsed by prometheus_client's own parser, as a Prometheus server would read it)."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator

from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

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


@contextlib.contextmanager
def broker_cli(url: str, namespace: str, *extra: str, host: str = "127.0.0.1") -> Iterator[int]:
    """Run ``mq broker --metrics-port P --metrics-host host`` (plus ``extra``) until the block ends;
    yields P once the exporter accepts connections. Stopped with SIGTERM (killed if it does not stop)."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "mq", "broker", "--url", url, "--namespace", namespace]
        + ["--metrics-port", str(port), "--metrics-host", host, *extra],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.DEVNULL,
    )
    try:

        def listening() -> bool:
            assert proc.poll() is None, f"mq broker exited with {proc.returncode}"
            return accepts(host, port)

        wait_for(listening, 60, "mq broker's metrics endpoint")
        yield port
    finally:
        proc.terminate()
        try:
            assert proc.wait(30) == 0, f"mq broker exited with {proc.returncode} on SIGTERM"
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
