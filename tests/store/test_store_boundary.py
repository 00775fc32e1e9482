"""The store is the only boundary: no module outside ``mq/store`` runs a Lua script, builds a
pipeline or sends a raw Redis command (``mq/connection.py`` builds and closes clients)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("mq", "scheduler", "spark")


def _offences(path: pathlib.Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("mq.store", "mq.store.scripts"):
            if any(alias.name == "scripts" for alias in node.names) or node.module == "mq.store.scripts":
                found.append(f"{path}:{node.lineno} imports the script loader")
        elif isinstance(node, ast.Import) and any(a.name == "mq.store.scripts" for a in node.names):
            found.append(f"{path}:{node.lineno} imports the script loader")
        elif isinstance(node, ast.Attribute) and node.attr == "client" and path.name != "connection.py":
            found.append(f"{path}:{node.lineno} uses a raw client ({ast.unparse(node)})")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "pipeline":
            found.append(f"{path}:{node.lineno} builds a pipeline")
    return found


def test_only_mq_store_talks_to_redis() -> None:
    offences = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if (ROOT / "mq" / "store") in path.parents:
                continue
            offences += _offences(path)
    assert offences == [], "\n".join(offences)


def test_the_check_finds_an_offence(tmp_path: pathlib.Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("from mq.store import Store, scripts\n\ndef f(conn):\n    pipe = conn.client.pipeline()\n")
    found = _offences(bad)
    assert len(found) == 3, found
