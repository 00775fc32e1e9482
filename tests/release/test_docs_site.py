"""The documentation site (issue 32, D130): ``mkdocs build --strict`` passes — no broken link, no
missing anchor, no page left out of the nav, every reference entry resolved from the docstrings — and
every public name has an entry on a reference page, so a new name cannot go undocumented.

MkDocs, Material and mkdocstrings come with the ``dev`` extra. Without them the build test fails
with the pip line to run: a skipped check would let a broken site through unseen.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

import mq
import scheduler
from mq import aio

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "reference"
#: an mkdocstrings entry: ``::: mq.Producer`` at the start of a line
ENTRY = re.compile(r"^::: ([\w.]+)\s*$", re.MULTILINE)
#: the build took 3–9 s on the shared 2-core machine (D130); the bound only stops a hung build
BUILD_TIMEOUT_S = 100


def require_mkdocs() -> None:
    """Fail (never skip) without MkDocs and mkdocstrings: CI runs ``make test``, which installs them."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("mkdocstrings_handlers") is None:
        pytest.fail(f"mkdocs or mkdocstrings is missing from {sys.executable}: pip install -e '.[dev]'")


def documented() -> set[str]:
    """The dotted names with an entry on some reference page."""
    return {name for page in REFERENCE.glob("*.md") for name in ENTRY.findall(page.read_text(encoding="utf-8"))}


def test_every_public_name_has_a_reference_entry() -> None:
    public = {f"mq.{name}" for name in mq.__all__} | {f"mq.aio.{name}" for name in aio.__all__}
    public |= {f"scheduler.{name}" for name in scheduler.__all__}
    missing = sorted(public - documented())
    assert not missing, f"public names with no '::: name' entry under docs/reference/: {missing}"


def test_reference_entries_name_only_the_public_api() -> None:
    """An entry through a module path (``mq.producer.core.Producer``) breaks when the module moves;
    the public names (``mq``, ``mq.aio``, ``scheduler``) stay."""
    allowed = {"mq.aio"} | {f"mq.{n}" for n in mq.__all__} | {f"mq.aio.{n}" for n in aio.__all__}
    allowed |= {f"scheduler.{n}" for n in scheduler.__all__}
    assert sorted(documented() - allowed) == []


def test_site_builds_strict(tmp_path: Path) -> None:
    require_mkdocs()
    started = time.monotonic()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # its notice about MkDocs 2 is not our output
    )
    took_s = time.monotonic() - started
    assert done.returncode == 0, f"mkdocs build --strict exited {done.returncode} after {took_s:.1f} s:\n{done.stderr[-4000:]}"
    # the pages the root files become (scripts/docs_hooks.py) and a generated reference entry
    assert (tmp_path / "changelog" / "index.html").is_file()
    assert 'id="mq.Producer"' in (tmp_path / "reference" / "producer" / "index.html").read_text(encoding="utf-8")


def test_root_page_links_are_rewritten_for_the_site() -> None:
    require_mkdocs()
    from scripts.docs_hooks import rewrite_links

    text = "[ops](docs/operations.md#monitoring), [log](CHANGELOG.md), [web](https://example.org/docs/x.md)"
    assert rewrite_links(text) == "[ops](operations.md#monitoring), [log](changelog.md), [web](https://example.org/docs/x.md)"
    # a file outside docs/ has no page: refused by name rather than left as a broken link
    with pytest.raises(ValueError, match=re.escape("examples/fastapi_app.py")):
        rewrite_links("[app](examples/fastapi_app.py)")


def test_sphinx_roles_are_dropped_from_rendered_docstrings() -> None:
    require_mkdocs()
    from scripts.docs_hooks import drop_roles

    html = "see :meth:<code>send</code> and :class:<code>Message</code>; a ratio 1:2:<b>3</b>"
    assert drop_roles(html) == "see <code>send</code> and <code>Message</code>; a ratio 1:2:<b>3</b>"
