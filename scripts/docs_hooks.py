"""MkDocs hooks (mkdocs.yml): the repository's root Markdown files become pages of the site, and
the docstrings' Sphinx roles are dropped from the rendered pages.

README.md, CHANGELOG.md and CONTRIBUTING.md stay where GitHub and PyPI show them; copying them into
docs/ would make two sources that drift apart (D131). Their links are written for the root
(``docs/operations.md``, ``CHANGELOG.md``), so they are rewritten for a page at the top of docs/.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

#: root file → the page it becomes
ROOT_PAGES = {"README.md": "index.md", "CHANGELOG.md": "changelog.md", "CONTRIBUTING.md": "contributing.md"}

# the target of an inline Markdown link: ](target) or ](target#anchor)
_LINK = re.compile(r"\]\((?P<target>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")


def rewrite_links(markdown: str) -> str:
    """Rewrite a root file's relative links for a page at the top of docs/.

    ``docs/x.md`` becomes ``x.md`` and a root page's name becomes its page's; any other relative link
    (a file outside docs/) would have no page on the site, so it is refused with the link named."""

    def one(match: re.Match[str]) -> str:
        target, anchor = match["target"], match["anchor"] or ""
        if "://" in target or target.startswith("mailto:"):
            return match[0]
        if target.startswith("docs/"):
            return f"]({target.removeprefix('docs/')}{anchor})"
        if target in ROOT_PAGES:
            return f"]({ROOT_PAGES[target]}{anchor})"
        raise ValueError(f"{target!r}: a root page links outside docs/; write it as a code span or link into docs/")

    return _LINK.sub(one, markdown)


# a Sphinx role in a docstring (``:meth:`send```), as the Markdown renderer leaves it: the role's name
# before the code span
_ROLE = re.compile(r":(?:attr|class|data|exc|func|meth|mod|obj):(?=<code>)")


def drop_roles(html: str) -> str:
    """Remove the Sphinx roles the docstrings use (``:class:`Message```) from rendered HTML, leaving
    the code span: Google-style docstrings are rendered as Markdown, which has no roles."""
    return _ROLE.sub("", html)


def on_page_content(html: str, **_: Any) -> str:
    """Every page without the docstrings' Sphinx roles (:func:`drop_roles`): only rendered docstrings have them."""
    return drop_roles(html)


def on_files(files: Files, config: Any) -> Files:
    """Add the root files as generated pages (mkdocs >= 1.6: ``File.generated``)."""
    root = Path(config["config_file_path"]).parent
    for source, page in ROOT_PAGES.items():
        text = (root / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=rewrite_links(text)))
    return files
