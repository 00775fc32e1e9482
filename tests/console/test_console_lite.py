"""A lite parent's lite topics in the console (issue 31 item 2): ``GET /api/topics/{topic}/lite`` and the
page ``/topics/{topic}/lite`` list them by prefix, a page at a time with the Admin's cursor, against a
real redis-server filled by a real producer; a plain topic, a bad cursor or prefix → a clear 4xx with
nothing written; names, prefixes and cursors are escaped in the page and its links."""

from __future__ import annotations

import html
import itertools
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from starlette.testclient import TestClient

from mq import Admin, Message, Producer
from mq.console import create_app
from tests.helpers import snapshot
from tests.servers import RedisServer

PARENT, ODD_PARENT, PLAIN = "Sessions", "odd%par|ent", "Plain"
#: Lite topics of PARENT: many under "s-" (several pages of 50), a few under "agent-".
SESSIONS = [f"s-{i:03d}" for i in range(120)]
AGENTS = [f"agent-{i}" for i in range(5)]
BASE = "http://127.0.0.1:8080"


@pytest.fixture(scope="module")
def store() -> Iterator[tuple[str, str]]:
    """A redis-server of the module's own: lite parents PARENT (with the lite topics above) and
    ODD_PARENT (a name with URL characters, one lite topic), and a plain topic PLAIN."""
    with RedisServer() as server:
        url, ns = server.url, "lite" + uuid.uuid4().hex[:8]
        with Admin(url, ns) as admin:
            admin.create_topic(PARENT, lite=True, lite_expiration_s=3600)
            admin.create_topic(ODD_PARENT, lite=True)
            admin.create_topic(PLAIN, read_queues=1, write_queues=1)
        with Producer("lite-console", url, namespace=ns) as producer:
            for name in SESSIONS + AGENTS:
                producer.send(Message(PARENT, name.encode(), lite_topic=name))
            producer.send(Message(ODD_PARENT, b"x", lite_topic="a%b|c"))
        yield url, ns


@pytest.fixture
def console(store: tuple[str, str]) -> Iterator[TestClient]:
    """A client of a new console app on the module's store (its store connection closed at the end)."""
    app = create_app(*store)
    try:
        yield TestClient(app, follow_redirects=False, base_url=BASE)
    finally:
        app.state.console.close()


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def every_page(c: TestClient, topic: str, **params: Any) -> list[dict[str, Any]]:
    """Every page of ``GET /api/topics/{topic}/lite`` with ``params``, following ``next_cursor``."""
    pages = [ok(c.get(f"/api/topics/{topic}/lite", params=params))]
    while pages[-1]["next_cursor"] is not None:
        pages.append(ok(c.get(f"/api/topics/{topic}/lite", params={**params, "cursor": pages[-1]["next_cursor"]})))
        assert len(pages) < 100, "the pages never end"
    return pages


def test_the_api_lists_a_lite_parents_topics_by_prefix_page_by_page(console: TestClient) -> None:
    pages = every_page(console, PARENT, prefix="s-", per_page=50)
    assert len(pages) >= 3  # 120 names, at most 50 a page
    assert pages[0]["cursor"] == "0" and pages[0]["topic"] == PARENT and pages[0]["prefix"] == "s-"
    for before, after in itertools.pairwise(pages):
        assert after["cursor"] == before["next_cursor"] and isinstance(after["cursor"], str)
    for p in pages:
        assert len(p["items"]) <= 50 and p["items"] == sorted(p["items"]) and p["per_page"] == 50
    seen = [name for p in pages for name in p["items"]]
    assert sorted(seen) == SESSIONS  # each once, only the prefix's

    assert [name for p in every_page(console, PARENT, prefix="agent-") for name in p["items"]] == AGENTS
    everything = [name for p in every_page(console, PARENT) for name in p["items"]]
    assert sorted(everything) == sorted(SESSIONS + AGENTS)
    none = ok(console.get(f"/api/topics/{PARENT}/lite", params={"prefix": "nobody"}))
    assert (none["items"], none["next_cursor"]) == ([], None)


def test_the_topics_list_and_a_topics_page_say_which_topics_are_lite_parents(console: TestClient) -> None:
    rows = {t["name"]: t for t in ok(console.get("/api/topics"))["items"]}
    assert rows[PARENT]["lite_expiration_s"] == 3600
    assert rows[ODD_PARENT]["lite_expiration_s"] == 600  # the default
    assert rows[PLAIN]["lite_expiration_s"] is None
    assert ok(console.get(f"/api/topics/{PARENT}"))["topic"]["lite_expiration_s"] == 3600


@pytest.mark.parametrize(
    ("path", "params", "status", "says"),
    [
        (f"/api/topics/{PLAIN}/lite", {}, 400, f"topic {PLAIN!r} is not a lite parent"),
        ("/api/topics/Nosuch/lite", {}, 404, "does not exist"),
        (f"/api/topics/{PARENT}/lite", {"cursor": "abc"}, 400, "cursor must be the next_cursor a page gave"),
        (f"/api/topics/{PARENT}/lite", {"cursor": "-1"}, 400, "cursor must be the next_cursor a page gave"),
        (f"/api/topics/{PARENT}/lite", {"cursor": "1.5"}, 400, "cursor must be the next_cursor a page gave"),
        (f"/api/topics/{PARENT}/lite", {"cursor": "9" * 5000}, 400, "cursor must be the next_cursor a page gave"),
        # digits past a SCAN cursor: Redis would answer "invalid cursor" (a store error, 503) — refused before
        (f"/api/topics/{PARENT}/lite", {"cursor": str(1 << 88)}, 400, "cursor must be an int in 0.."),
        (f"/api/topics/{PARENT}/lite", {"prefix": "s*"}, 400, "prefix"),
        (f"/api/topics/{PARENT}/lite", {"prefix": "x" * 65}, 400, "prefix"),
        (f"/api/topics/{PARENT}/lite", {"per_page": "0"}, 400, "per_page must be an integer in 1..500"),
    ],
)
def test_a_plain_topic_a_bad_cursor_or_prefix_get_a_clear_4xx_and_nothing_is_written(
    console: TestClient, store: tuple[str, str], path: str, params: dict[str, str], status: int, says: str
) -> None:
    before = snapshot(*store)
    r = console.get(path, params=params)
    assert r.status_code == status, r.text
    assert says in r.json()["error"]
    assert snapshot(*store) == before


def test_the_page_filters_by_prefix_and_its_next_link_carries_the_cursor(console: TestClient) -> None:
    topic_page = console.get(f"/topics/{PARENT}")
    assert topic_page.status_code == 200
    assert f'href="/topics/{PARENT}/lite"' in topic_page.text
    seen: list[str] = []
    path = f"/topics/{PARENT}/lite?prefix=s-"
    for _ in range(20):
        r = console.get(path)
        assert r.status_code == 200, r.text
        seen += re.findall(r'<td class="mono">([^<]*)</td>', r.text)
        assert 'value="s-"' in r.text  # the filter box keeps the prefix
        link = re.search(r'href="([^"]*)" rel="next"', r.text)
        if link is None:
            break
        path = html.unescape(link.group(1))
        assert re.fullmatch(rf"/topics/{PARENT}/lite\?prefix=s-&cursor=[0-9]+", path), path
    assert sorted(seen) == SESSIONS


def test_the_page_escapes_names_and_refuses_a_bad_prefix_with_its_reason(console: TestClient) -> None:
    r = console.get("/topics/odd%25par%7Cent/lite")
    assert r.status_code == 200, r.text
    assert '<td class="mono">a%b|c</td>' in r.text
    assert 'href="/topics/odd%25par%7Cent"' in r.text  # the way back, percent-encoded
    hostile = '"><script>alert(1)</script>'
    refused = console.get(f"/topics/{PARENT}/lite", params={"prefix": hostile})
    assert refused.status_code == 400
    assert "<script>alert(1)" not in refused.text and "&lt;script&gt;alert(1)" in refused.text
    plain = console.get(f"/topics/{PLAIN}/lite")
    assert plain.status_code == 400 and "is not a lite parent" in plain.text
