"""Every script in examples/ runs (on the embedded store) and prints what it promises."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parent.parent / "examples").glob("*.py"))


def test_examples_exist() -> None:
    assert EXAMPLES


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(path: pathlib.Path) -> None:
    env = {**os.environ, "MQ_URL": ""}
    result = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip()
    if path.name == "dedup.py":
        duplicates = [line.endswith("duplicate True") for line in result.stdout.splitlines() if line.startswith("sent ")]
        assert duplicates == [False, True, False], result.stdout
    if path.name == "ordered_producer.py":
        queues: dict[str, set[str]] = {}
        for line in result.stdout.splitlines():
            order, _, rest = line.partition(" ")
            queues.setdefault(order, set()).add(rest.split("queue ")[1].split()[0])
        assert all(len(q) == 1 for q in queues.values()), queues
