"""``mq send --deliver-at`` and ``mq recall`` on a real redis-server."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from mq.cli import main
from mq.cli.recall import NOT_RECALLED
from tests.helpers import admin_once


def test_send_later_then_recall_on_the_command_line(redis_server, namespace: str, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    common = ["--url", redis_server.url, "--namespace", namespace]
    admin_once(redis_server.url, namespace).create_topic("cli", read_queues=2, write_queues=2)
    assert main(["send", "cli", "later", "--deliver-at", str(int(time.time() * 1000) + 60_000), *common]) == 0
    out = capsys.readouterr().out
    m = re.search(r"offset=-1 recall_handle=(\S+)$", out.strip())
    assert m, out
    assert main(["recall", m.group(1), *common]) == 0
    assert "recalled:" in capsys.readouterr().out
    assert main(["recall", m.group(1), *common]) == NOT_RECALLED
    assert "not recalled" in capsys.readouterr().out
    assert main(["recall", "r1.bm9uc2Vuc2U", *common]) == 1  # "nonsense": names no queue entry
    assert "not a recall handle" in capsys.readouterr().err
    assert main(["send", "cli", "now", *common]) == 0
    assert "recall_handle" not in capsys.readouterr().out


def test_the_recall_example_prints_what_it_promises() -> None:
    example = pathlib.Path(__file__).parent.parent.parent / "examples" / "recall.py"
    done = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=60, env={**os.environ, "MQ_URL": ""}
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[1:] == ["recalled True", "recalled again False"]
