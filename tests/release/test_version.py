"""The version lives in one place (``mq.__version__``, read by pyproject.toml) and is the release
CHANGELOG.md says is current; ``mq --version`` prints it and the Redis server's version (D124)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

import mq
from mq.cli import main
from tests.servers import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[2]
#: A release heading of CHANGELOG.md: ``## Unreleased — 0.2.0`` (the next release) or ``## 0.1.0 — 2026-11-23``.
HEADING = re.compile(r"^## (?:(Unreleased) — (\d+\.\d+\.\d+)|(\d+\.\d+\.\d+) — (\d{4}-\d{2}-\d{2}))$")


def releases() -> list[tuple[str, str]]:
    """``(version, date or "Unreleased")`` of each ``## `` heading of CHANGELOG.md, top first; a
    heading of another form fails."""
    out = []
    for line in (ROOT / "CHANGELOG.md").read_text().splitlines():
        if line.startswith("## "):
            found = HEADING.match(line)
            assert found, f"CHANGELOG.md heading {line!r} is neither '## Unreleased — X.Y.Z' nor '## X.Y.Z — YYYY-MM-DD'"
            out.append((found[2], found[1]) if found[1] else (found[3], found[4]))
    return out


def test_the_version_is_the_changelog_s_current_release() -> None:
    listed = releases()
    assert listed, "CHANGELOG.md has no release heading"
    assert mq.__version__ == listed[0][0]
    # one section per release, newest first, only the top one unreleased
    versions = [tuple(int(p) for p in v.split(".")) for v, _ in listed]
    assert versions == sorted(set(versions), reverse=True)
    assert all(date != "Unreleased" for _, date in listed[1:])


def test_pyproject_takes_the_version_from_mq() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"]
    assert "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "mq.__version__"}


def version_output(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    assert main(["--version", *args]) == 0
    captured = capsys.readouterr()
    assert captured.err == ""
    return captured.out.splitlines()


def test_without_a_store_it_prints_the_package_version_and_says_why_no_server(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MQ_URL", raising=False)
    assert version_output(capsys) == [
        f"mq {mq.__version__}",
        "server: none given (--url URL or $MQ_URL names the store whose Redis version to show)",
    ]
    assert version_output(capsys, "--url", "memory://") == [
        f"mq {mq.__version__}",
        "server: none (memory:// is the embedded in-process store, not a Redis server)",
    ]


def test_it_prints_the_server_s_version_and_never_the_password(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "pw-4f1c9e"
    with RedisServer(password=secret) as server:
        with server.client() as client:
            version = client.info("server")["redis_version"]
        shown = f"redis://:***@127.0.0.1:{server.port}/0"
        assert version_output(capsys, "--url", server.url) == [f"mq {mq.__version__}", f"server: Redis {version} at {shown}"]
        monkeypatch.setenv("MQ_URL", server.url)  # the CLI's default store
        assert version_output(capsys)[1] == f"server: Redis {version} at {shown}"
        wrong = f"redis://:{secret}-wrong@127.0.0.1:{server.port}/0"
        refused = version_output(capsys, "--url", wrong)
        assert refused[1].startswith(f"server: not reachable at {shown} (")
        assert secret not in "\n".join(refused)


def test_an_unreachable_server_is_said_plainly(capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()  # nothing listens there
    lines = version_output(capsys, "--url", f"redis://:hidden-pw@127.0.0.1:{port}/0")
    assert lines[0] == f"mq {mq.__version__}"
    assert lines[1].startswith(f"server: not reachable at redis://:***@127.0.0.1:{port}/0 (")
    assert lines[1].endswith("; the package version above does not need it")
    assert "hidden-pw" not in lines[1]


def test_the_readme_s_wheel_name_is_the_current_version() -> None:
    named = re.findall(r"rocketredis-(\d+\.\d+\.\d+)-py3-none-any\.whl", (ROOT / "README.md").read_text())
    assert named and set(named) == {mq.__version__}
