"""The README's Python snippets, run as written (only the URL points at a redis-server the test starts),
each block after the ones above it in one process, as a reader pastes them; what they print is checked."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

from tests.servers import RedisServer

README = pathlib.Path(__file__).resolve().parent.parent / "README.md"
#: The URL the README's snippets use, replaced by the test server's.
README_URL = "redis://127.0.0.1:6379/0"
#: Seconds the snippets may take together.
RUN_TIMEOUT_S = 120


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python blocks of ``text``, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


def text_blocks(text: str) -> list[str]:
    """The bodies of the ```text blocks (what the README says the snippets print)."""
    return re.findall(r"^```text\n(.*?)^```$", text, flags=re.S | re.M)


def test_the_readme_has_its_snippets() -> None:
    blocks = python_blocks(README.read_text())
    assert len(blocks) >= 2 and README_URL in blocks[0]
    assert "consume_from_where" in blocks[0] and "time.sleep(" in blocks[0]


def test_the_readme_snippets_run_as_written_and_print_what_it_says() -> None:
    text = README.read_text()
    program = "\n".join(python_blocks(text))
    with RedisServer() as server:
        code = program.replace(README_URL, server.url)
        result = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
            cwd=README.parent,
            env={**os.environ, "MQ_URL": ""},
        )
        assert result.returncode == 0, result.stderr
        printed = result.stdout.splitlines()
    said = text_blocks(text)[0].splitlines()  # the README's "prints" block: same lines, ids and queues differ
    assert len(printed) == len(said), (printed, said)
    assert re.fullmatch(r"SEND_OK [0-9a-f]{32} 0", printed[0]), printed[0]
    assert re.fullmatch(r"SEND_OK [0-9a-f]{32} 0", said[0]), said[0]
    assert printed[1] == said[1] == "[b'{\"id\": 1}', b'paid']"

    def shape(line: str) -> str:
        return re.sub(r"queue \d+ offset \d+$", "queue Q offset O", line)

    assert (
        sorted(map(shape, printed[2:]))
        == sorted(map(shape, said[2:]))
        == [
            "orders created b'{\"id\": 1}' queue Q offset O",
            "orders paid b'paid' queue Q offset O",
        ]
    )
