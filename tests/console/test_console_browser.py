"""The console's pages in a real headless Chromium (Debian's ``/usr/bin/chromium`` driven by Playwright),
served by uvicorn on a free loopback port, on a real redis-server filled by a real producer and real
push consumers, with a broker service taking stats snapshots every second.

The scenarios of issue 17: the overview shows the topic and a non-zero rate; search by key finds a
message whose page shows its body and "consumed" for the group that consumed it; a dead letter resent
from the DLQ page is consumed by its group; an offset reset by time from the group page is what
``Admin.consumer_progress`` then reports; read-only mode draws no change control and refuses the POST;
with a token, a page asked for without it gets the login form. Each test saves a screenshot into
docs/console/ (used by docs/console.md).

Without Chromium or Playwright these tests FAIL (they are never skipped): ``make test`` installs both.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from mq import Admin, ConsumeConcurrentlyStatus, ConsumeFromWhere, Message, MessageExt, Producer, PushConsumer
from mq.model.queue import DEFAULT_BROKER_NAME, MessageQueue
from scheduler import BrokerConfig, BrokerService
from tests.servers import RedisServer, free_port, wait_until

pytestmark = pytest.mark.slow

#: Debian's Chromium (package ``chromium``); Playwright drives it, it never downloads a browser.
#: ``MQ_TEST_CHROMIUM`` points elsewhere (the test of the missing-browser failure uses it).
CHROMIUM = os.environ.get("MQ_TEST_CHROMIUM", "/usr/bin/chromium")
#: Where the screenshots go: docs/console/ (for docs/console.md) when ``MQ_UPDATE_SCREENSHOTS=1``,
#: else a temporary folder — every run takes them, only a deliberate one changes the docs' files.
SHOTS = (
    Path(__file__).resolve().parents[2] / "docs" / "console"
    if os.environ.get("MQ_UPDATE_SCREENSHOTS") == "1"
    else Path(tempfile.gettempdir()) / f"mq-console-shots-{os.getpid()}"
)
#: Size of the browser window and of the screenshots, CSS pixels.
VIEWPORT = {"width": 1000, "height": 700}
#: Messages per second of the steady producer the overview's rate comes from.
STEADY_RATE = 5.0

TOPIC, BILLING, AUDIT = "orders", "billing", "audit"
SPECIAL_KEY, SPECIAL_BODY = "order-special", b'{"order": 42, "item": "book", "paid": true}'


# -- the browser ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium, launched from Debian's package; a missing browser or Playwright fails the test."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"{CHROMIUM} is missing: the browser tests need Debian's chromium package "
            "(`make test` installs it as root; else run `apt-get install chromium`)",
            pytrace=False,
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail(
            "playwright is missing: install the dev extra (`pip install -e '.[dev,console]'`, as `make test` does)", pytrace=False
        )
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield chromium
        finally:
            chromium.close()


@dataclass
class Tab:
    """A page of its own browser context, recording every request's URL and every script error."""

    page: Any
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    csp: list[str] = field(default_factory=list)  # the browser's Content-Security-Policy reports


@pytest.fixture
def tab(browser: Any) -> Iterator[Tab]:
    """A fresh context (no cookies) with one page; confirmation dialogs are accepted. At the end no
    script error may have happened, and no request may have left the console (nothing from a CDN)."""
    context = browser.new_context(viewport=VIEWPORT)
    page = context.new_page()
    opened = Tab(page)
    page.on("dialog", lambda dialog: dialog.accept())
    page.on("request", lambda request: opened.requests.append(request.url))
    page.on("pageerror", lambda error: opened.errors.append(str(error)))
    page.on("console", lambda m: opened.csp.append(m.text) if "Content Security Policy" in m.text else None)
    try:
        yield opened
    finally:
        context.close()
    assert opened.errors == [], "script errors in the page"
    # the console's own pages break no rule of its CSP (a refused frame is reported too: that one is wanted)
    assert [m for m in opened.csp if "frame-ancestors" not in m] == [], "the console's pages break its CSP"
    outside = [u for u in opened.requests if not u.startswith("http://127.0.0.1:")]
    assert outside == [], "requests that left the console"


def screenshot(page: Any, name: str) -> None:
    """Save the visible page as docs/console/NAME.png, palette-compressed when Pillow is installed."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path))
    with contextlib.suppress(ImportError):
        from PIL import Image

        with Image.open(path) as shot:
            small = shot.convert("RGB").quantize(colors=128)
        small.save(path, optimize=True)


# -- the console server -----------------------------------------------------------------------------


@contextlib.contextmanager
def serve(url: str, namespace: str, *, with_producer: bool = False, **options: Any) -> Iterator[str]:
    """``create_app(url, namespace, **options)`` served by uvicorn in a thread on a free loopback port;
    yields its base URL and stops the server (and its store connections) at the end.

    ``with_producer`` starts the console's producer (which it otherwise makes at the first test send)
    here, so a console shared by a module's tests owns it from the start: the per-test leak check
    (tests/leaks.py) would otherwise charge its connection to whichever test sent first."""
    import uvicorn

    from mq.console import create_app

    port = free_port()
    app = create_app(url, namespace, **options)
    if with_producer:
        app.state.console.producer()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", ws="none", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="console-server", daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, 15, "the console to listen")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
    assert not thread.is_alive(), "the console server did not stop"


# -- the store: a real producer, real consumers, a broker service -----------------------------------


@dataclass
class Store:
    """What the module's fixture made: where, what was sent, what the groups consumed."""

    url: str
    namespace: str
    special: MessageExt | None = None
    poison_id: str = ""
    reset_at_ms: int = 0
    consumed: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # group → (msg id, reconsume times)

    def admin(self) -> Admin:
        return Admin(self.url, self.namespace)


def _listener(store: Store, group: str, *, fail_first: Callable[[MessageExt], bool]) -> Any:
    """A listener recording what ``group`` consumed; it fails the first delivery of messages ``fail_first`` picks."""
    seen: set[str] = set()
    lock = threading.Lock()

    def on_messages(msgs: list[MessageExt], ctx: object) -> ConsumeConcurrentlyStatus:
        with lock:
            for m in msgs:
                if fail_first(m) and m.msg_id not in seen:
                    seen.add(m.msg_id)
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER
            store.consumed.setdefault(group, []).extend((m.msg_id, m.reconsume_times) for m in msgs)
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    return on_messages


def _steady(producer: Producer, stop: threading.Event, failures: list[BaseException]) -> None:
    """Send :data:`STEADY_RATE` messages a second until ``stop`` (the overview's rate comes from these)."""
    n = 0
    try:
        while not stop.wait(1 / STEADY_RATE):
            producer.send(Message(TOPIC, b"tick %d" % n, tags="tick", keys=[f"tick-{n}"]))
            n += 1
    except BaseException as e:  # shown by the fixture's teardown: no thread dies silently
        failures.append(e)


@pytest.fixture(scope="module")
def store() -> Iterator[Store]:
    """A redis-server of the module's own with: topic ``orders`` (4 queues); a broker service taking
    stats every second; group ``billing`` consuming (it dead-letters a poison message at its first
    failure, and consumes the letter when it is resent); group ``audit``, which consumed everything and
    stopped (its offsets are reset by the tests); a producer sending 5 messages a second all along."""
    with RedisServer() as server:
        filled = Store(server.url, "console")
        admin = filled.admin()
        admin.create_topic(TOPIC, read_queues=4, write_queues=4)
        admin.set_trace(True)
        broker = BrokerService(server.url, filled.namespace, config=BrokerConfig(stats_interval_s=1.0))
        billing = PushConsumer(
            BILLING,
            server.url,
            namespace=filled.namespace,
            consume_from_where=ConsumeFromWhere.FIRST_OFFSET,
            max_reconsume_times=0,
            trace=True,
        )
        billing.subscribe(TOPIC, "*")
        billing.register_message_listener(_listener(filled, BILLING, fail_first=lambda m: m.tags == "poison"))
        audit = PushConsumer(
            AUDIT, server.url, namespace=filled.namespace, consume_from_where=ConsumeFromWhere.FIRST_OFFSET, trace=True
        )
        audit.subscribe(TOPIC, "*")
        audit.register_message_listener(_listener(filled, AUDIT, fail_first=lambda m: False))
        stop, failures = threading.Event(), []
        with broker, Producer("shop", server.url, namespace=filled.namespace, trace=True) as producer:
            for i in range(40):
                producer.send(Message(TOPIC, b"order %d" % i, tags="created", keys=[f"order-{i}"]))
            time.sleep(0.3)  # the clock moves on: the reset time falls between two sends' store times
            filled.reset_at_ms = int(time.time() * 1000)
            time.sleep(0.3)
            sent = producer.send(Message(TOPIC, SPECIAL_BODY, tags="created", keys=[SPECIAL_KEY], properties={"region": "HZ"}))
            filled.poison_id = producer.send(Message(TOPIC, b"cannot be billed", tags="poison", keys=["order-poison"])).msg_id
            for i in range(40, 60):
                producer.send(Message(TOPIC, b"order %d" % i, tags="created", keys=[f"order-{i}"]))
            found = admin.find_message(sent.msg_id, TOPIC)
            filled.special = found[0]
            with audit:
                wait_until(lambda: len(filled.consumed.get(AUDIT, [])) >= 62, 30, "group audit to consume everything")
                wait_until(lambda: _committed_all(admin, AUDIT), 15, "audit's offsets to be committed")
            steady = threading.Thread(target=_steady, args=(producer, stop, failures), name="steady-producer", daemon=True)
            with billing:
                steady.start()
                try:
                    wait_until(lambda: bool(admin.dlq_messages(BILLING)), 30, "the poison message to reach billing's DLQ")
                    yield filled
                finally:
                    stop.set()
                    steady.join(10)
        assert not failures, f"the steady producer failed: {failures!r}"


def _committed_all(admin: Admin, group: str) -> bool:
    return all(p.lag == 0 for p in admin.consumer_progress(group, TOPIC))


@pytest.fixture(scope="module")
def console(store: Store) -> Iterator[str]:
    """The console on the module's store: no token, changes allowed (its producer made here: the tests
    send through it)."""
    with serve(store.url, store.namespace, with_producer=True) as base:
        yield base


def reload_until(page: Any, predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Reload ``page`` until ``predicate`` holds (what a person does waiting for a figure)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(0.5)
        page.reload()


# -- the scenarios ----------------------------------------------------------------------------------


def test_overview_shows_the_topic_and_a_non_zero_rate(tab: Tab, console: str) -> None:
    page = tab.page
    page.goto(console + "/")
    row = page.locator(f'#busiest tr[data-topic="{TOPIC}"]')

    def rate() -> float:
        text = row.locator(".topic-rate").inner_text() if row.count() else "unknown"
        return 0.0 if text == "unknown" else float(text.replace(",", ""))

    reload_until(page, lambda: rate() > 0, 30, f"a non-zero rate of {TOPIC} on the overview")
    assert row.locator("a").inner_text() == TOPIC
    assert 0 < rate() < 1000
    assert float(page.locator("#rate-in").inner_text()) > 0  # the namespace's rate in
    assert int(page.locator("#topic-count").inner_text()) >= 1  # other tests of this module may add topics first
    assert page.locator("#brokers .badge.ok").inner_text() == "healthy"
    # the live chart of messages in per second: drawn by uPlot from /api/overview/series in this browser
    chart = page.locator("#chart-in")
    page.wait_for_function("() => document.querySelector('#chart-in output').textContent > 0", timeout=20_000)
    assert chart.locator("canvas").count() >= 1
    assert int(chart.get_attribute("data-points") or 0) >= 2
    # htmx swaps fresh figures in every 5 s, without a reload
    read_at = page.locator("#read-at").inner_text()
    page.wait_for_function(f"() => document.querySelector('#read-at').textContent !== {read_at!r}", timeout=15_000)
    screenshot(page, "overview")

    page.locator("#busiest").get_by_role("link", name=TOPIC).click()  # the topic's page: its own chart, its readers
    page.wait_for_function("() => document.querySelector('#chart-topic-in output').textContent > 0", timeout=20_000)
    assert sorted(page.locator("#topic-groups tbody td:first-child").all_inner_texts()) == [AUDIT, BILLING]
    assert page.locator("#queues tbody tr").count() == 4
    screenshot(page, "topic")


def test_search_by_key_finds_the_message_and_its_page_shows_body_and_consumed(tab: Tab, console: str, store: Store) -> None:
    assert store.special is not None
    page = tab.page
    page.goto(console + "/messages")
    page.get_by_label("Topic").fill(TOPIC)
    page.get_by_label("or key").fill(SPECIAL_KEY)
    page.get_by_role("button", name="Search").click()
    results = page.locator("#results tbody tr")
    assert results.count() == 1
    assert results.first.locator("a").inner_text() == store.special.msg_id
    screenshot(page, "messages")

    results.first.locator("a").click()
    page.wait_for_url(f"**/messages/{TOPIC}/{store.special.msg_id}")
    assert '"item": "book"' in page.locator("#body").inner_text()
    billing = page.locator("#group-states tr", has_text=BILLING)
    reload_until(page, lambda: billing.locator("td").nth(1).inner_text() == "consumed", 20, "billing to have consumed it")
    assert page.locator("#group-states tr", has_text=AUDIT).locator("td").nth(1).inner_text() == "consumed"
    assert page.locator("#fields").get_by_text("HZ").count() == 1  # a property
    page.get_by_role("link", name="pretty JSON").click()
    assert page.locator("#body").inner_text().startswith('{\n  "order": 42,')
    page.get_by_role("link", name="hex").click()
    assert page.locator("#body").inner_text().startswith("00000000  " + SPECIAL_BODY[:16].hex())
    kinds = page.locator("#trace tbody tr td:nth-child(2)").all_inner_texts()
    assert "send" in kinds and "consume" in kinds
    screenshot(page, "message")


def test_a_dead_letter_resent_from_the_dlq_page_is_consumed_by_its_group(tab: Tab, console: str, store: Store) -> None:
    page = tab.page
    assert (store.poison_id, 0) not in store.consumed.get(BILLING, [])  # it failed its only delivery
    page.goto(console + f"/messages/{TOPIC}/{store.poison_id}")
    assert page.locator("#group-states tr", has_text=BILLING).locator("td").nth(1).inner_text() == "dead lettered"
    page.goto(console + f"/dlq/{BILLING}")
    letter = page.locator(f'#letters tr[data-msg-id="{store.poison_id}"]')
    assert letter.locator("td.resent").inner_text() == "no"
    letter.get_by_role("checkbox").check()
    page.get_by_role("button", name="Resend selected").click()
    page.locator("#resend-result").wait_for()
    assert page.locator("#resend-result .resent-id").all_inner_texts() == [store.poison_id]
    assert page.locator(f'#letters tr[data-msg-id="{store.poison_id}"] td.resent').inner_text() == "yes"
    screenshot(page, "dlq")
    wait_until(
        lambda: any(i == store.poison_id for i, _ in store.consumed.get(BILLING, [])), 20, "billing to consume the resent letter"
    )
    assert store.admin().resend_dlq(BILLING) == 0  # it was resent once, and is marked so


def test_an_offset_reset_by_time_from_the_group_page_is_what_consumer_progress_reports(
    tab: Tab, console: str, store: Store
) -> None:
    admin = store.admin()
    before = {p.message_queue.queue_id: p.consumer_offset for p in admin.consumer_progress(AUDIT, TOPIC)}
    expected = {q: admin.search_offset(MessageQueue(TOPIC, DEFAULT_BROKER_NAME, q), store.reset_at_ms) for q in range(4)}
    assert expected != before  # the reset moves the offsets back
    page = tab.page
    page.goto(console + f"/groups/{AUDIT}")
    form = page.locator("#reset-offset")
    form.get_by_label("Topic").select_option(TOPIC)
    when = datetime.fromtimestamp(store.reset_at_ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    form.get_by_label("Time (ISO 8601 or epoch ms)").fill(when)
    form.get_by_role("button", name="Reset").click()
    page.locator("#reset-result").wait_for()
    shown = {
        int(q): int(o) for q, o in (row.locator("td").all_inner_texts() for row in page.locator("#reset-result tbody tr").all())
    }
    after = {p.message_queue.queue_id: p.consumer_offset for p in admin.consumer_progress(AUDIT, TOPIC)}
    assert after == expected == shown
    consumer_offsets = {
        int(row.get_attribute("data-queue") or -1): int(row.locator(".consumer-offset").inner_text())
        for row in page.locator(f'#progress tr[data-topic="{TOPIC}"]').all()
    }
    assert consumer_offsets == after  # the page's progress table shows the new offsets too
    screenshot(page, "group")


def test_read_only_mode_shows_no_change_controls_and_refuses_the_post(tab: Tab, store: Store) -> None:
    page = tab.page
    with serve(store.url, store.namespace, read_only=True) as base:
        for path in [
            "/",
            "/topics",
            f"/topics/{TOPIC}",
            "/groups",
            f"/groups/{AUDIT}",
            f"/dlq/{BILLING}",
            "/messages",
            "/transactions",
        ]:
            page.goto(base + path)
            assert page.locator("#read-only-badge").is_visible(), path
            assert page.locator("form[method=post]").count() == 0, f"a change form on {path}"
            assert page.locator("input[type=checkbox][name=msg_id]").count() == 0, path
        page.goto(base + f"/dlq/{BILLING}")  # letters to look at, nothing to resend them with
        screenshot(page, "read-only")
        csrf = next(c["value"] for c in page.context.cookies() if c["name"] == "mq_console_csrf")
        refused = page.request.post(base + f"/topics/{TOPIC}/delete", form={"csrf_token": csrf})
        assert refused.status == 403 and "read-only" in refused.text()
        refused = page.request.post(base + f"/groups/{AUDIT}/pause", form={"csrf_token": csrf})
        assert refused.status == 403
    assert store.admin().topic_exists(TOPIC)
    assert store.admin().groups().count(AUDIT) == 1


def test_with_a_token_a_page_without_it_gets_the_login_form(tab: Tab, store: Store) -> None:
    token = "console-test-token-7f3a"
    page = tab.page
    with serve(store.url, store.namespace, token=token) as base:
        page.goto(base + f"/topics/{TOPIC}")
        assert page.url.startswith(base + "/login")
        assert page.locator("form#login input[type=password]").is_visible()
        assert page.locator("#queues").count() == 0  # nothing of the topic shows
        screenshot(page, "login")
        assert page.request.get(base + "/api/topics").status == 401

        page.locator("form#login input[type=password]").fill("wrong")
        page.locator("form#login button").click()
        assert page.get_by_role("alert").is_visible()
        page.locator("form#login input[type=password]").fill(token)
        page.locator("form#login button").click()
        page.wait_for_url(base + f"/topics/{TOPIC}")
        assert page.locator("#queues tbody tr").count() == 4
        assert token not in page.content()


def test_a_topic_is_created_sent_to_updated_and_deleted_from_its_pages(tab: Tab, console: str, store: Store) -> None:
    admin, page = store.admin(), tab.page
    page.goto(console + "/topics")
    create = page.locator("#create-topic")
    create.get_by_label("Name").fill("invoices")
    create.get_by_label("Read queues").fill("2")
    create.get_by_label("Write queues").fill("2")
    create.get_by_role("button", name="Create").click()
    page.wait_for_url(console + "/topics")
    assert page.locator("#done").inner_text() == "Topic invoices created."
    assert admin.topic_config("invoices").read_queues == 2

    page.goto(console + "/topics/invoices")
    send = page.locator("#send-message")
    send.get_by_label("Keys (space-separated)").fill("inv-1 inv-2")
    send.get_by_label("Body (UTF-8 text)").fill("total 12.50")
    send.get_by_role("button", name="Send").click()
    sent_id = page.locator("#done").inner_text().split()[2]
    [stored] = admin.query_messages_by_key("invoices", "inv-2")
    assert (stored.msg_id, stored.body) == (sent_id, b"total 12.50")
    assert page.locator("#topic-messages").inner_text() == "1"

    update = page.locator("#update-topic")
    update.get_by_label("Write queues").fill("1")
    update.get_by_label("Permission").select_option("r")
    update.get_by_role("button", name="Update").click()
    page.locator("#done").wait_for()
    config = admin.topic_config("invoices")
    assert (config.read_queues, config.write_queues, config.perm) == (2, 1, "r")
    assert page.locator("#queues tbody tr").count() == 2

    page.locator("#delete-topic button").click()  # the confirmation dialog is accepted
    page.locator("#done").wait_for()
    assert page.locator("#done").inner_text() == "Topic invoices deleted."
    assert not admin.topic_exists("invoices")


def test_a_refused_form_shows_the_reason_and_writes_nothing(tab: Tab, console: str, store: Store) -> None:
    admin, page = store.admin(), tab.page
    config = admin.topic_config(TOPIC)
    offsets = admin.consumer_progress(AUDIT, TOPIC)
    page.goto(console + "/topics")
    create = page.locator("#create-topic")
    create.get_by_label("Name").fill(TOPIC)  # exists already
    create.get_by_label("Read queues").fill("2")
    create.get_by_role("button", name="Create").click()
    assert page.locator("#error").is_visible() and "exists already" in page.locator("#error").inner_text()
    assert admin.topic_config(TOPIC) == config
    page.goto(console + f"/groups/{AUDIT}")
    page.locator("#reset-offset").get_by_label("Time (ISO 8601 or epoch ms)").fill("yesterday")
    page.locator("#reset-offset").get_by_role("button", name="Reset").click()
    assert "ISO 8601" in page.locator("#error").inner_text()
    assert [p.consumer_offset for p in admin.consumer_progress(AUDIT, TOPIC)] == [p.consumer_offset for p in offsets]
    assert page.goto(console + "/topics/no-such-topic").status == 404
    assert "does not exist" in page.locator("#error").inner_text()


def test_a_group_is_paused_and_resumed_from_its_page(tab: Tab, console: str, store: Store) -> None:
    admin, page = store.admin(), tab.page
    page.goto(console + "/groups")
    assert page.locator("#groups tbody tr", has_text=BILLING).locator("td").nth(1).inner_text() == "1"  # one live member
    page.locator("#groups").get_by_role("link", name=AUDIT).click()
    page.get_by_role("button", name="Pause consuming").click()
    page.locator("#paused").wait_for()
    assert admin.group_config(AUDIT).consume_enable is False
    page.get_by_role("button", name="Resume consuming").click()
    page.locator("#done").wait_for()
    assert page.locator("#paused").count() == 0
    assert admin.group_config(AUDIT).consume_enable is True


def test_the_topic_list_is_searched_and_paged(tab: Tab, console: str, store: Store) -> None:
    admin, page = store.admin(), tab.page
    for i in range(60):
        admin.create_topic(f"bulk-{i:03d}", read_queues=1, write_queues=1)
    try:
        page.goto(console + "/topics")
        page.get_by_label("Name contains").fill("bulk-")
        page.get_by_role("button", name="Search").click()
        assert page.locator("#topics tbody tr").count() == 50
        assert "page 1 of 2 (60 in all)" in page.locator(".pager").inner_text()
        page.get_by_role("link", name="Next →").click()
        names = page.locator("#topics tbody tr td:first-child a").all_inner_texts()
        assert names == [f"bulk-{i:03d}" for i in range(50, 60)]
    finally:
        for i in range(60):
            admin.delete_topic(f"bulk-{i:03d}")


def test_a_lite_parents_lite_topics_are_filtered_by_prefix_and_paged_from_its_page(tab: Tab, console: str, store: Store) -> None:
    admin, page = store.admin(), tab.page
    admin.create_topic("chats", lite=True)
    chats = [f"chat-{i:02d}" for i in range(60)]
    with Producer("lite-chats", store.url, namespace=store.namespace) as producer:
        for name in [*chats, "bot-1", "bot-2"]:
            producer.send(Message("chats", name.encode(), lite_topic=name))
    page.goto(console + "/topics/chats")
    page.get_by_role("link", name="Its lite topics, by prefix").click()
    assert page.locator("#lite-topics tbody tr").count() == 50  # the first page of 62
    page.get_by_label("Name starts with").fill("chat-")
    page.get_by_role("button", name="Filter").click()
    seen = page.locator("#lite-topics tbody td").all_inner_texts()
    assert len(seen) == 50
    page.get_by_role("link", name="Next page →").click()
    seen += page.locator("#lite-topics tbody td").all_inner_texts()
    assert sorted(seen) == chats  # each once, no bot-
    assert page.get_by_label("Name starts with").input_value() == "chat-"  # the link carried the prefix
    assert page.get_by_role("link", name="Next page →").count() == 0  # the last page
    assert "cursor=" in page.url and "chat-" in page.url
    unlabelled = page.evaluate(
        """() => [...document.querySelectorAll('input:not([type=hidden])')].filter(el => !el.labels.length).length"""
    )
    assert unlabelled == 0 and page.locator("h1").count() == 1
    page.get_by_role("link", name="← First page").click()
    assert page.locator("#lite-topics tbody tr").count() == 50
    screenshot(page, "lite")


def test_the_timers_page_shows_the_delayed_backlog(tab: Tab, console: str, store: Store) -> None:
    with Producer("later", store.url, namespace=store.namespace) as producer:
        producer.send(Message(TOPIC, b"in an hour", deliver_time_ms=int(time.time() * 1000) + 3_600_000))
    page = tab.page
    page.goto(console + "/transactions")
    row = page.locator("#timer-backlog tbody tr", has_text=TOPIC)
    assert row.locator("td").nth(1).inner_text() == "1"
    assert page.locator("#discarded tbody tr").inner_text() == "No half message was discarded."
    screenshot(page, "transactions")


def test_every_page_names_its_controls_for_assistive_technology(tab: Tab, console: str, store: Store) -> None:
    """Every page has a language, one h1 and a main landmark; every visible form control has a label."""
    assert store.special is not None
    page = tab.page
    for path in [
        "/",
        "/topics",
        f"/topics/{TOPIC}",
        "/groups",
        f"/groups/{BILLING}",
        f"/messages?topic={TOPIC}&key={SPECIAL_KEY}",
        f"/messages/{TOPIC}/{store.special.msg_id}",
        "/dlq",
        f"/dlq/{BILLING}",
        "/transactions",
    ]:
        page.goto(console + path)
        assert page.locator("html").get_attribute("lang") == "en", path
        assert page.locator("h1").count() == 1 and page.locator("main").count() == 1, path
        unlabelled = page.evaluate(
            """() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
                 .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
                 .map(el => el.outerHTML)"""
        )
        assert unlabelled == [], path
        assert page.locator("th:not([scope])").count() == 0, f"a table header without scope on {path}"


def test_without_chromium_the_browser_tests_fail_and_are_not_skipped() -> None:
    """A missing browser is a failure with the command that fixes it, never a skip counted as a pass."""
    here = Path(__file__).resolve()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            f"{here}::test_overview_shows_the_topic_and_a_non_zero_rate",
        ],
        cwd=here.parents[2],
        env={**os.environ, "MQ_TEST_CHROMIUM": "/nonexistent/chromium"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1, result.stdout + result.stderr
    assert "/nonexistent/chromium is missing" in result.stdout and "apt-get install chromium" in result.stdout
    assert "1 error" in result.stdout and "skipped" not in result.stdout


def test_a_topics_messages_are_browsed_by_store_time_page_by_page(tab: Tab, console: str, store: Store) -> None:
    """The topic's messages in (queue, offset) order, 50 a page, while the steady producer adds more:
    the second page goes on exactly where the first ended."""
    page = tab.page

    def rows() -> list[tuple[int, int]]:
        cells = page.locator("#results tbody tr").all()
        return [(int(r.locator("td").nth(1).inner_text()), int(r.locator("td").nth(2).inner_text())) for r in cells]

    page.goto(console + f"/topics/{TOPIC}")
    page.get_by_role("link", name="Browse its messages").click()
    first = rows()
    assert len(first) == 50
    assert page.locator(".pager").inner_text().startswith("page 1 of ")
    time.sleep(1.0)  # time passes on purpose: more messages arrive in every queue meanwhile
    page.get_by_role("link", name="Next →").click()
    second = rows()
    both = first + second
    assert second and both == sorted(set(both))  # no message twice, none out of order
    queue, offset = first[-1]
    assert second[0] in ((queue, offset + 1), (queue + 1, 0))  # nothing skipped at the page boundary


# -- hardening, second round (issue 29) -------------------------------------------------------------


def test_a_rebound_name_gets_nothing_from_the_console(browser: Any, console: str, store: Store) -> None:
    """Finding 5, DNS rebinding: Chromium resolves ``rebind.test`` to 127.0.0.1 (as an attacker's DNS
    does after the first load); a script of that origin — for the browser the console's own origin —
    gets 400 for every read and change, so it reads no message and changes nothing."""
    rebinding = browser.browser_type.launch(
        executable_path=CHROMIUM, headless=True, args=["--host-resolver-rules=MAP rebind.test 127.0.0.1"]
    )
    port = console.rsplit(":", 1)[1]
    try:
        page = rebinding.new_page()
        first = page.goto(f"http://rebind.test:{port}/topics")
        assert first is not None and first.status == 400 and TOPIC not in page.content()
        got = page.evaluate(
            """async () => {
                const read = await fetch('/api/topics');
                const change = await fetch('/api/topics', {method: 'POST', headers: {'content-type': 'application/json'},
                                                           body: JSON.stringify({name: 'rebound'})});
                return [read.status, await read.text(), change.status];
            }"""
        )
        assert got[0] == 400 and TOPIC not in got[1] and got[2] == 400
    finally:
        rebinding.close()
    assert not store.admin().topic_exists("rebound")
    tab_page = browser.new_page()  # the console's own name still works in the same browser
    try:
        assert tab_page.goto(console + "/topics").status == 200
    finally:
        tab_page.close()


@contextlib.contextmanager
def attacker_site(html_text: str) -> Iterator[str]:
    """A page of another site on another port of 127.0.0.1 (same site for the browser's cookies)."""
    import http.server

    body = html_text.encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
    thread = threading.Thread(target=server.serve_forever, name="attacker-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


def test_a_page_on_another_port_cannot_frame_the_console(tab: Tab, console: str, store: Store) -> None:
    """Finding 6, clickjacking: a page on another port of 127.0.0.1 frames the group page to make one
    click pause the group; Chromium refuses to render the console in the frame, so there is nothing to
    click."""
    admin, page = store.admin(), tab.page
    frame_html = (
        f'<!doctype html><title>win a prize</title><iframe id="bait" src="{console}/groups/{AUDIT}" '
        'width="900" height="600"></iframe>'
    )
    with attacker_site(frame_html) as evil:
        page.goto(evil)
        page.wait_for_load_state("load")
        deadline = time.monotonic() + 10
        while not any("frame-ancestors" in m or "X-Frame-Options" in m for m in tab.csp) and time.monotonic() < deadline:
            page.wait_for_timeout(100)
        [child] = [f for f in page.frames if f is not page.main_frame]
        assert child.get_by_role("button", name="Pause consuming").count() == 0
        assert AUDIT not in child.content()
        assert any("frame-ancestors 'none'" in m for m in tab.csp), tab.csp
    config = admin.group_configs([AUDIT]).get(AUDIT)  # none yet, or one still consuming: not paused
    assert config is None or config.consume_enable is True
    page.goto(console + "/")  # the console itself, top level: htmx and the charts run under the CSP
    page.wait_for_function("() => document.querySelector('#chart-in output').textContent !== '…'", timeout=20_000)
    page.locator("#doctor-checks").wait_for(timeout=20_000)


def test_logging_out_ends_the_session_even_for_a_kept_copy_of_its_cookie(tab: Tab, store: Store) -> None:
    """Finding 7: each login gets a new random session; after "Log out" a copy of the cookie (kept by
    whoever saw it) opens nothing."""
    from mq.console.auth import SESSION_COOKIE

    token = "console-test-token-logout"
    page = tab.page
    with serve(store.url, store.namespace, token=token) as base:

        def log_in() -> dict[str, Any]:
            page.goto(base + f"/topics/{TOPIC}")
            page.locator("form#login input[type=password]").fill(token)
            page.locator("form#login button").click()
            page.wait_for_url(base + f"/topics/{TOPIC}")
            [cookie] = [c for c in page.context.cookies() if c["name"] == SESSION_COOKIE]
            assert cookie["httpOnly"] and cookie["expires"] > time.time()  # expires: not a browser-lifetime cookie
            return dict(cookie)

        first = log_in()
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url(base + "/login")
        second = log_in()
        assert second["value"] != first["value"]
        page.get_by_role("button", name="Log out").click()
        page.wait_for_url(base + "/login")
        page.context.add_cookies([second])  # the copy someone kept
        page.goto(base + f"/topics/{TOPIC}")
        assert page.url.startswith(base + "/login") and page.locator("#queues").count() == 0
        assert page.request.get(base + "/api/topics").status == 401


def test_message_ids_with_url_characters_open_from_their_links(tab: Tab, console: str, store: Store) -> None:
    """Finding 14: a RocketMQ 5 client chooses its message ids; ids with ``/``, ``?``, ``#``, ``%`` or
    ``..`` are encoded in every link, and each link opens its own message (real uvicorn: one decoding)."""
    from mq.store import Store as MessageStore
    from mq.store import codec
    from mq.store.connection import Connection

    admin, page = store.admin(), tab.page
    admin.create_topic("oddids", read_queues=1, write_queues=1)
    odd = ["../../topics/oddids/x", "a/b?c=1#d", "100% sure", "..", "%2F"]
    conn = Connection(store.url, store.namespace)
    try:
        for i, msg_id in enumerate(odd):
            MessageStore(conn).put("oddids", 0, [codec.encode(Message("oddids", b"odd body %d" % i), msg_id, 1)])
    finally:
        conn.close()
    try:
        for i, msg_id in enumerate(odd):
            page.goto(console + "/messages?topic=oddids&begin=0")
            page.locator("#results").get_by_role("link", name=msg_id, exact=True).click()
            page.wait_for_load_state("load")
            assert page.locator("h1 .mono").inner_text() == msg_id, page.url
            assert page.locator("#body").inner_text() == f"odd body {i}"
            page.get_by_role("link", name="hex").click()
            assert page.locator("#body").inner_text().startswith("00000000  6f646420"), page.url  # "odd "
    finally:
        admin.delete_topic("oddids")
