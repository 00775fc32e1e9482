"""The tier's retention (segments past ``file_reserved_time_h`` are deleted) is not silent either:
the messages of deleted segments a group never consumed are counted like Redis's retention loss
(D83) — a WARNING naming group, topic, queue and count, ``rocketredis_messages_expired_unconsumed_total``,
``QueueProgress.expired`` — once however many sweeps run; and ``Admin.delete_topic`` deletes the
topic's tier files."""

from __future__ import annotations

import dataclasses
import logging
import pathlib

import pytest

from mq import Admin
from mq.model.queue import MessageQueue
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerService
from tests.broker.test_retention_loss import _counter
from tests.leaks import owned
from tests.tier_helpers import read_from_first, send_numbered, tier_config

TOPIC = "tier-retention"


def _files(root: pathlib.Path) -> list[pathlib.Path]:
    return sorted(p for p in root.rglob("*.parquet"))


def test_segments_past_retention_count_what_groups_never_consumed(
    redis_server, namespace: str, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    url, root = redis_server.url, tmp_path / "tier"
    admin = owned(Admin(url, namespace))
    admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    send_numbered(url, namespace, TOPIC, 0, range(100))
    store = owned(Store(Connection(url, namespace)))
    q = MessageQueue(TOPIC, "broker-a", 0)
    store.commit_offsets("lagger", {q: 30})
    store.commit_offsets("mid", {q: 50})
    store.commit_offsets("done", {q: 100})
    service = BrokerService(url, namespace, tier_config(f"file://{root}", hot_retention_s=0.001))
    assert service.tier is not None
    service.tier.run()
    send_numbered(url, namespace, TOPIC, 0, range(100, 120))
    assert [(s.start, s.end) for s in store.segments(TOPIC, 0)] == [(0, 40), (40, 80), (80, 100)]
    assert len(_files(root)) == 3

    service.tier.policy = dataclasses.replace(service.tier.policy, reserved_s=0.0)  # every segment is past it
    caplog.set_level(logging.WARNING, logger="scheduler.retention")
    assert service.tier.sweep(0) == 2  # the last segment stays: it marks where Redis takes over
    assert [(s.start, s.end) for s in store.segments(TOPIC, 0)] == [(80, 100)] and len(_files(root)) == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"retention removed 50 messages of topic {TOPIC!r} queue 0 that group 'lagger' had not consumed: they are lost "
        "to it (consume faster, or raise file_reserved_time_h)",
        f"retention removed 30 messages of topic {TOPIC!r} queue 0 that group 'mid' had not consumed: they are lost "
        "to it (consume faster, or raise file_reserved_time_h)",
    ]
    assert _counter(store) == {("lagger", TOPIC): 50, ("mid", TOPIC): 30}
    assert [r.expired for r in admin.consumer_progress("lagger", TOPIC)] == [50]
    assert [r.expired for r in admin.consumer_progress("done", TOPIC)] == [0]
    caplog.clear()
    assert service.tier.sweep(0) == 0 and _counter(store) == {("lagger", TOPIC): 50, ("mid", TOPIC): 30}  # once
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    service._store.publish_settings({"tier_url": f"file://{root}"})
    got = read_from_first(url, namespace, "after", TOPIC, 40)
    assert [m.queue_offset for m in got] == list(range(80, 120))  # what is left, from the tier's new start
    store.conn.close()
    service.shutdown()


def test_deleting_a_topic_deletes_its_tier_files(backend_url: str, namespace: str, tmp_path: pathlib.Path) -> None:
    root = tmp_path / "tier"
    with Admin(backend_url, namespace=namespace) as admin:
        for topic in (TOPIC, "kept"):
            admin.create_topic(topic, read_queues=2, write_queues=2)
            for qid in (0, 1):
                send_numbered(backend_url, namespace, topic, qid, range(50))
        service = BrokerService(backend_url, namespace, tier_config(f"file://{root}", hot_retention_s=0.001))
        assert service.tier is not None
        service.tier.run()
        service._store.publish_settings({"tier_url": f"file://{root}"})  # what a started service does
        assert len(_files(root / namespace / TOPIC)) == 4 and len(_files(root / namespace / "kept")) == 4
        admin.delete_topic(TOPIC)
        assert not (root / namespace / TOPIC).exists()  # segments and folders
        assert len(_files(root / namespace / "kept")) == 4  # another topic's stay
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)  # a new topic of that name starts empty
        assert admin.tier_status(TOPIC)[MessageQueue(TOPIC, "broker-a", 0)].segments == 0
        assert admin.messages(TOPIC, 0, 0) == []
    service.shutdown()


def test_an_upload_that_ends_after_its_topic_was_deleted_is_swept(
    redis_server, namespace: str, tmp_path: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    """``Admin.delete_topic`` removes the topic's folder; an upload writing at that moment puts its file
    back after it (here: the file an upload would have finished, written after the delete). No manifest
    lists it and the per-queue sweep walks only topics that exist: the sweep removes it once it is older
    than the grace period — and not before, and never a file of a topic that exists."""
    url, root = redis_server.url, tmp_path / "tier"
    with Admin(url, namespace=namespace) as admin:
        for topic in (TOPIC, "kept"):
            admin.create_topic(topic, read_queues=1, write_queues=1)
            send_numbered(url, namespace, topic, 0, range(50))
        service = BrokerService(url, namespace, tier_config(f"file://{root}", hot_retention_s=0.001))
        assert service.tier is not None
        service.tier.run()
        service._store.publish_settings({"tier_url": f"file://{root}"})
        late = _files(root / namespace / TOPIC)[0].read_bytes()
        kept = _files(root / namespace / "kept")
        admin.delete_topic(TOPIC)
        orphan = root / namespace / TOPIC / "0" / "0000000000000000000-late.parquet"
        orphan.parent.mkdir(parents=True)
        orphan.write_bytes(late)  # the upload in flight lands after the delete

        assert service.tier.sweep(3600) == 0 and orphan.exists()  # younger than the grace period: kept
        with caplog.at_level(logging.WARNING, logger="scheduler.tier"):
            assert service.tier.sweep(0) == 1
        assert not (root / namespace / TOPIC).exists()  # the file and the folders it made
        assert _files(root / namespace / "kept") == kept != []  # the topic that exists keeps its segments
        assert any(f"topic {TOPIC!r}, which no longer exists" in r.getMessage() for r in caplog.records)
    service.shutdown()
