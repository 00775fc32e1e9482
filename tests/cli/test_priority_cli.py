"""``mq topic create --priority-levels``, ``mq send --priority`` and what ``mq topic list`` shows (D142)."""

from __future__ import annotations

import pytest

from mq.cli import main
from tests.servers import RedisServer


def test_priority_topic_from_the_command_line(
    redis_server: RedisServer, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["--url", redis_server.url, "--namespace", namespace]
    assert (
        main(["topic", "create", "alerts", "--read-queues", "10", "--write-queues", "10", "--priority-levels", "10", *common])
        == 0
    )
    assert "priority_levels=10" in capsys.readouterr().out
    assert main(["send", "alerts", "down", "--priority", "9", *common]) == 0
    assert " queue=9 " in capsys.readouterr().out  # queue 9 holds level 9
    assert main(["topic", "list", *common]) == 0
    header, row = capsys.readouterr().out.splitlines()[:2]
    assert header.split()[-1] == "PRIORITY_LEVELS" and row.split()[0] == "alerts" and row.split()[-1] == "10"
    assert main(["topic", "create", "plain", "--read-queues", "2", "--write-queues", "2", *common]) == 0
    capsys.readouterr()
    assert main(["send", "plain", "x", "--priority", "3", *common]) == 1
    assert "priority-levels" in capsys.readouterr().err
    assert main(["topic", "create", "few", "--read-queues", "4", "--write-queues", "4", "--priority-levels", "10", *common]) == 1
    assert "at least 10" in capsys.readouterr().err
