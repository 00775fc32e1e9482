"""The tier's commit protocol under kill -9 of the broker service at each step (mid-upload, after the
upload before the manifest, after the manifest before the trim, during the trim): every message stays
readable exactly once at its offset, and the files a crash leaves are never read and then removed."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import sys

import pytest

from mq import Admin
from mq.store import Store
from mq.store.connection import Connection
from scheduler import BrokerService
from tests.leaks import owned
from tests.procs import ROOT, wait_for
from tests.tier_helpers import body_number, read_from_first, send_numbered, tier_config

pytestmark = [pytest.mark.slow]

TOPIC = "crashy"
N = 2500


def _files(root: pathlib.Path) -> tuple[list[str], list[str]]:
    """Final segment files and temporary ones under the tier's folder."""
    final = sorted(p.name for p in root.rglob("*.parquet") if p.parent.name != "_tmp")
    tmp = sorted(p.name for p in root.rglob("*.parquet") if p.parent.name == "_tmp")
    return final, tmp


@pytest.mark.parametrize("step", ["uploading", "uploaded", "recorded", "trimming"])
def test_kill_9_at_each_step_loses_and_duplicates_nothing(redis_server, namespace, tmp_path, step) -> None:  # type: ignore[no-untyped-def]
    url, root = redis_server.url, tmp_path / "tier"
    tier_url = f"file://{root}"
    with Admin(url, namespace=namespace) as admin:
        admin.create_topic(TOPIC, read_queues=1, write_queues=1)
    ids = send_numbered(url, namespace, TOPIC, 0, range(N))
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.tier_broker_proc", url, namespace, tier_url, step],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.wait(60) == -signal.SIGKILL  # it died at the step, not by itself
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    store = owned(Store(Connection(url, namespace)))
    segments, hot = store.segments(TOPIC, 0), store.hot_queue(TOPIC, 0)
    final, tmp = _files(root)
    # where the kill left things: each step's own evidence
    if step == "uploading":
        assert segments == [] and hot.first == 0 and final == [] and len(tmp) == 1
    elif step == "uploaded":
        assert segments == [] and hot.first == 0 and len(final) == 1 and tmp == []  # an orphan
    elif step == "recorded":
        assert [(s.start, s.end) for s in segments] == [(0, N)] and hot.first == 0  # in both tiers
    else:
        assert [(s.start, s.end) for s in segments] == [(0, N)] and 0 < hot.first < N  # trimmed half-way

    got = read_from_first(url, namespace, "after-crash", TOPIC, N, batch=256)  # read right after the crash, before any repair
    assert [m.queue_offset for m in got] == list(range(N))
    assert [body_number(m.body) for m in got] == list(range(N)) and [m.msg_id for m in got] == ids

    # another broker service takes over once the dead one's lease expires, finishes the work and
    # removes what the crash left in the tier
    lease = store.queue_keys(TOPIC, 0).tier_lease  # 2 s in tests/tier_broker_proc.py
    wait_for(lambda: not store.conn.client.exists(lease), 10, "the dead service's tier lease to expire")
    service = BrokerService(url, namespace, tier_config(tier_url, tier_segment_messages=5000, hot_retention_s=0.001))
    assert service.tier is not None
    service.tier.run()
    service.tier.sweep(0)
    segments = store.segments(TOPIC, 0)
    assert [(s.start, s.end) for s in segments] == [(0, N)] and store.hot_queue(TOPIC, 0).first == N
    assert _files(root) == ([segments[0].name], [])  # the orphan (or temporary file) is gone
    assert service.tier.counters.errors == 0
    service.shutdown()
    store.conn.close()

    again = read_from_first(url, namespace, "after-repair", TOPIC, N, batch=256)
    assert [m.queue_offset for m in again] == list(range(N)) and [m.msg_id for m in again] == ids
