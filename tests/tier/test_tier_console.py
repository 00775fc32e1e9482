"""The console over both tiers (tier on a folder): a topic's page and its JSON show, per queue, the
offsets held in the tier and in Redis, segments and bytes; the message search finds tiered messages by
id, by key and by store time, and pages by store time run across the boundary without a gap or a
duplicate. ``Admin.messages`` reads tiered offsets from the tier (the search's time pages use it)."""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import pytest

from mq import Admin
from scheduler import BrokerService
from tests.console.test_console_api import _close_apps, client, ok  # noqa: F401 - _close_apps closes the apps' connections
from tests.tier_helpers import body_number, send_numbered, tier_config

TOPIC = "tiered-console"


@pytest.fixture
def half_tiered(redis_server, namespace: str, tmp_path: pathlib.Path) -> Iterator[tuple[str, str, list[str]]]:  # type: ignore[no-untyped-def]
    """One queue: offsets 0..99 in the tier only (segments of 40), 100..119 in Redis; yields the ids."""
    url = redis_server.url
    with Admin(url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    ids = send_numbered(url, namespace, TOPIC, 0, range(100))
    service = BrokerService(url, namespace, tier_config(f"file://{tmp_path}/tier", hot_retention_s=0.001))
    assert service.tier is not None
    service.start()  # publishes the tier's URL
    try:
        service.tier.run()
        ids += send_numbered(url, namespace, TOPIC, 0, range(100, 120))
        yield url, namespace, ids
    finally:
        service.shutdown()


def test_the_topic_page_shows_the_tiered_and_the_hot_ranges(half_tiered: tuple[str, str, list[str]]) -> None:
    url, ns, _ = half_tiered
    c = client(url, ns)
    [queue] = ok(c.get(f"/api/topics/{TOPIC}"))["queues"]
    assert (queue["min_offset"], queue["max_offset"]) == (0, 120)
    assert (queue["tiered_min_offset"], queue["tiered_end_offset"], queue["hot_min_offset"]) == (0, 100, 100)
    assert queue["tier_segments"] == 3 and queue["tier_bytes"] > 100 * 64
    page = c.get(f"/topics/{TOPIC}")
    assert page.status_code == 200
    assert '<td class="tier-range">0 – 99</td>' in page.text and '<td class="hot-range">100 – 119</td>' in page.text


def test_the_search_finds_tiered_messages_by_id_key_and_time(half_tiered: tuple[str, str, list[str]]) -> None:
    url, ns, ids = half_tiered
    c = client(url, ns)
    by_id = ok(c.get(f"/api/messages?topic={TOPIC}&msg_id={ids[7]}"))
    assert [(m["msg_id"], m["queue_offset"]) for m in by_id["items"]] == [(ids[7], 7)]
    by_key = ok(c.get(f"/api/messages?topic={TOPIC}&key=k7"))
    assert by_key["total"] == 1 and [m["queue_offset"] for m in by_key["items"]] == [7]
    hot_key = ok(c.get(f"/api/messages?topic={TOPIC}&key=k110"))
    assert hot_key["total"] == 1 and [m["queue_offset"] for m in hot_key["items"]] == [110]
    pages = [ok(c.get(f"/api/messages?topic={TOPIC}&begin=0&per_page=45&page={p}")) for p in (1, 2, 3)]
    assert pages[0]["total"] == 120 and pages[0]["pages"] == 3
    offsets = [m["queue_offset"] for p in pages for m in p["items"]]
    assert offsets == list(range(120))  # across the boundary (page 3 starts at 90): no gap, no duplicate
    assert [m["msg_id"] for p in pages for m in p["items"]] == ids
    detail = ok(c.get(f"/api/topics/{TOPIC}/messages/{ids[7]}"))
    assert (detail["msg_id"], detail["queue_offset"]) == (ids[7], 7)


def test_admin_messages_reads_tiered_offsets_from_the_tier(half_tiered: tuple[str, str, list[str]]) -> None:
    url, ns, _ = half_tiered
    with Admin(url, namespace=ns) as admin:
        got = admin.messages(TOPIC, 0, 30, 110)
        assert [m.queue_offset for m in got] == list(range(30, 110)) and [body_number(m.body) for m in got] == list(
            range(30, 110)
        )
        assert [m.queue_offset for m in admin.messages(TOPIC, 0, 95, max_num=10)] == list(range(95, 105))
