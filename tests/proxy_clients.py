"""The official RocketMQ 5 clients and ``mq proxy`` for the endpoint tests.

Each official client runs in a process of its own (its generated protobuf modules never share a
process with ours): the Python client (``rocketmq-python-client`` from PyPI) in a venv of its own,
the Node.js client (``rocketmq-client-nodejs`` from npm, installed with the machine's npm), both
created on first use under ``$MQ_TEST_CLIENTS_DIR`` (default ``~/.cache/rocketredis-tests``) and
reused after. The endpoint runs as ``python -m mq proxy`` on a free loopback port.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

from tests.servers import wait_until

PYTHON_CLIENT = "rocketmq-python-client==5.1.2"
NODE_CLIENT = "rocketmq-client-nodejs@1.0.8"
HERE = pathlib.Path(__file__).resolve().parent / "rocketmq_clients"
CLIENTS_DIR = pathlib.Path(os.environ.get("MQ_TEST_CLIENTS_DIR", pathlib.Path.home() / ".cache" / "rocketredis-tests"))
REPO = pathlib.Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def _locked(name: str) -> Iterator[pathlib.Path]:
    CLIENTS_DIR.mkdir(parents=True, exist_ok=True)
    with open(CLIENTS_DIR / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield CLIENTS_DIR / name


def python_client() -> pathlib.Path:
    """The python of a venv holding the official Python client (created on first use)."""
    with _locked("python-client") as venv:
        python = venv / "bin" / "python"
        if not (venv / ".installed").exists():
            shutil.rmtree(venv, ignore_errors=True)
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "--quiet", PYTHON_CLIENT], check=True, timeout=600)
            (venv / ".installed").touch()
        return python


def node_client() -> pathlib.Path:
    """A directory whose node_modules holds the official Node.js client (installed on first use)."""
    with _locked("node-client") as prefix:
        if not (prefix / ".installed").exists():
            npm = shutil.which("npm")
            if npm is None:
                raise RuntimeError("npm is missing: install Node.js (apt-get install nodejs npm) to run the Node.js client tests")
            prefix.mkdir(parents=True, exist_ok=True)
            subprocess.run(
                [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), NODE_CLIENT], check=True, timeout=600
            )
            (prefix / ".installed").touch()
        return prefix


def example(name: str, replacements: dict[str, str]) -> str:
    """The source of an official example program with its literal endpoint, topic and group replaced
    (each replacement must apply, so a changed example fails loudly)."""
    source = (HERE / name).read_text()
    for old, new in replacements.items():
        if old not in source:
            raise AssertionError(f"{old!r} is not in {name}: the example changed")
        source = source.replace(old, new)
    return source


def run_python(
    workdir: pathlib.Path, source: str, *, stdin: str | None = None, timeout_s: float = 90, args: Sequence[str] = ()
) -> subprocess.CompletedProcess[str]:
    """Run ``source`` with the official Python client in a new process."""
    path = workdir / f"prog_{time.monotonic_ns()}.py"
    path.write_text(source)
    return subprocess.run(
        [str(python_client()), str(path), *args], input=stdin, capture_output=True, text=True, timeout=timeout_s, cwd=workdir
    )


def rr_client(*args: str, timeout_s: float = 120) -> list[dict[str, Any]]:
    """Run tests/rocketmq_clients/python/rr_client.py with the official client; its JSON lines."""
    done = subprocess.run(
        [str(python_client()), str(HERE / "python" / "rr_client.py"), *args], capture_output=True, text=True, timeout=timeout_s
    )
    if done.returncode != 0:
        raise AssertionError(f"rr_client {args[0]} exited {done.returncode}: {done.stderr[-3000:]}")
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def start_rr_client(*args: str, log: pathlib.Path) -> subprocess.Popen[bytes]:
    """Start rr_client.py in the background, its output to ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [str(python_client()), str(HERE / "python" / "rr_client.py"), *args], stdout=out, stderr=subprocess.STDOUT
        )


def json_lines(log: pathlib.Path) -> list[dict[str, Any]]:
    """The JSON lines of a background client's log."""
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def run_node(workdir: pathlib.Path, source: str, *, timeout_s: float = 90) -> subprocess.CompletedProcess[str]:
    """Run ``source`` with the official Node.js client in a new process."""
    prefix = node_client()
    path = workdir / f"prog_{time.monotonic_ns()}.cjs"
    path.write_text(source)
    env = {**os.environ, "NODE_PATH": str(prefix / "node_modules")}
    return subprocess.run(["node", str(path)], capture_output=True, text=True, timeout=timeout_s, cwd=workdir, env=env)


class ProxyProcess:
    """``python -m mq proxy`` on a free loopback port, in a process of its own (``command``: another
    module taking ``mq proxy``'s options, as ``bench.proxy_floor``)."""

    def __init__(
        self, url: str, namespace: str, log: pathlib.Path, *extra: str, port: int = 0, command: Sequence[str] = ("mq", "proxy")
    ) -> None:
        self.log = log
        self._out = open(log, "ab")  # noqa: SIM115 - closed in stop()
        started = log.stat().st_size
        self.proc = subprocess.Popen(
            [sys.executable, "-m", *command, "--url", url, "--namespace", namespace, "--port", str(port), *extra],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            cwd=REPO,
        )
        self.port = 0

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"mq proxy exited {self.proc.returncode}: {log.read_text()[-3000:]}")
            found = re.search(r"endpoint on 127\.0\.0\.1:(\d+)", log.read_text()[started:])
            if found:
                self.port = int(found.group(1))
            return bool(found)

        wait_until(ready, 60, "mq proxy listening")

    @property
    def endpoint(self) -> str:
        """``host:port`` for a client."""
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the endpoint (SIGTERM, then SIGKILL)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._out.close()
