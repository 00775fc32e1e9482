"""``make stack`` (scripts/stack.py): the compose topology as local processes on loopback.

It comes up, the example producer and two consumers exchange messages, ``mq broker --check`` reports
healthy, everything shuts down cleanly, and no process is left behind, also when it fails.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
STACK = ROOT / "scripts" / "stack.py"


def run_stack(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "MQ_URL"}
    return subprocess.run([sys.executable, str(STACK), *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=90)


def alive(pid: int) -> bool:
    """Whether ``pid`` is still one of the stack's processes (a reused pid running something else does not count)."""
    try:
        cmdline = pathlib.Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:
        return False
    return any(marker in cmdline for marker in (b"redis-server", b"_app.py", b"broker", b"console"))


@pytest.mark.slow
def test_stack_exchanges_messages_and_shuts_down_cleanly() -> None:
    # --duration-s is a time limit; the run ends as soon as the exchange is verified (about 4 s)
    result = run_stack("--duration-s", "20")
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[-1].startswith("STACK OK "), result.stdout
    summary = dict(field.split("=", 1) for field in lines[-1].split()[2:])
    assert int(summary["sent"]) == 100
    assert int(summary["received"]) == 100
    per_consumer = [int(n) for n in summary["per_consumer"].split(",")]
    assert len(per_consumer) == 2 and all(per_consumer), summary  # both members of the group consumed
    assert summary["broker_check"] == "0"
    assert any(line.startswith("stack: mq broker --check: healthy:") for line in lines), result.stdout
    assert "appendonly yes, appendfsync everysec" in result.stdout
    pids = [int(p) for p in summary["pids"].split(",")]
    assert summary["console"] == "ok"
    assert any(line.startswith("stack: console on http://127.0.0.1:") for line in lines), result.stdout
    assert len(pids) == 6  # redis-server, broker, two consumers, console, producer
    assert not [p for p in pids if alive(p)]
    assert re.search(
        r"stopped .*consumer-1 \(exit 0\).*console \(exit 0\).*broker \(exit 0\), redis-server \(exit 0\)", result.stdout
    )


def test_a_failed_stack_stops_everything_it_started() -> None:
    result = run_stack("--duration-s", "0.5")  # too short for the consumers to start
    assert result.returncode == 1
    assert "STACK FAILED: timed out after 0.5 s" in result.stdout, result.stdout + result.stderr
    pids = [int(p) for p in re.findall(r"\(pid (\d+), exit", result.stderr)]
    assert pids, result.stderr
    assert not [p for p in pids if alive(p)]
