"""The partition suite in CI (root only): short runs (5 s faults, one each) of ``tests/partitions.py``'s
scenarios, every message accounted for. The whole matrix (both topologies × three faults × five
modes): ``python -m tests.partitions`` (figures in docs/benchmarks.md and docs/operations.md).

What is asserted is issue 27's acceptance for the modes that promise it: with ``sync_replicas="all"``
no SEND_OK is lost after a master crash, a cut of the master alone, or a cut of the master with a
replica; with ``sync_replicas=1`` none after a crash or a cut of the master alone; on a replicated
Cluster with ``"all"``, none after a crash or a cut of a master alone. In every run: it really
failed over (where one is possible) and the producer had SEND_OKs, no committed position is above a
queue's end, and every stored message was delivered to every group, also where a failover handed
an offset a group had read to another message (``offsets_reused``): positions that cannot skip (D70)
rewind the group there (:func:`_every_stored_message_delivered`).
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
from dataclasses import asdict

import pytest

from tests import netns
from tests.partitions import FAULTS, Figures, account, run_scenario
from tests.procs import wait_for

pytestmark = [pytest.mark.fault, pytest.mark.ha, pytest.mark.slow]

_WHY_NOT = netns.unavailable()
needs_netns = pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or "")
#: How long each fault lasts in CI, seconds (a failover takes about 3 s here).
FAULT_S = 5.0


def _run(fault: str, mode: str, record_property: pytest.RecordProperty, *, topology: str = "sentinel") -> Figures:
    """One run of ``fault`` in ``mode``; its figures printed and recorded. The fault was real (the
    topology failed over, except a cluster master cut off with its only replica, which no other node
    can replace), the producer had SEND_OKs, and no committed position is above a queue's end."""
    figures = run_scenario(fault, mode=mode, topology=topology, fault_s=FAULT_S)
    print(json.dumps(asdict(figures)))
    for name, value in asdict(figures).items():
        record_property(name, value)
    can_fail_over = not (topology == "cluster" and fault == "cut-master-replica")
    assert (figures.failover_s > 0) == can_fail_over and figures.send_ok > 0
    assert figures.positions_above_end == 0
    return figures


def _every_stored_message_delivered(figures: Figures) -> None:
    """0 stored messages never delivered to any group, also a group that was delivered an offset a
    failover then gave to another message (positions that cannot skip rewind it, D70)."""
    assert figures.never_delivered, figures
    missed = {g: n for g, n in figures.never_delivered.items() if n}
    assert not missed, f"stored messages never delivered per group: {missed}"


def _our_namespaces() -> list[str]:
    mine = f"{netns.PREFIX}{os.getpid()}x"
    return [line.split(" ")[0] for line in netns.ip("netns", "list").splitlines() if line.startswith(mine)]


@needs_netns
def test_network_is_removed_on_error_and_stale_ones_by_prefix() -> None:
    with pytest.raises(RuntimeError, match="inside"), netns.Network(["a", "b"]) as net:
        assert len(_our_namespaces()) == 3  # the switch and two hosts
        net.partition(["a"])
        raise RuntimeError("inside")
    assert _our_namespaces() == []
    stale = f"{netns.PREFIX}4194304x0000zz"  # above any pid Linux gives: its run is gone
    netns.ip("netns", "add", stale)
    assert stale in netns.remove_stale()
    assert stale not in netns.ip("netns", "list")


@needs_netns
def test_a_cut_drops_traffic_across_it_and_heal_restores_it(tmp_path: pathlib.Path) -> None:
    with netns.Network(["a", "b", "c"]) as net:
        for host in ("b", "c"):  # a server on each side, reached only from inside the namespaces
            net.popen(
                host,
                ["redis-server", "--bind", net.addresses[host], "--port", "7777", "--save", "", "--protected-mode", "no"],
                stdout=subprocess.DEVNULL,
                cwd=tmp_path,
            )

        def reaches(src: str, dst: str) -> bool:
            argv = net.command(src, ["timeout", "2", "redis-cli", "-h", net.addresses[dst], "-p", "7777", "ping"])
            return subprocess.run(argv, capture_output=True, timeout=10).stdout.strip() == b"PONG"

        wait_for(lambda: reaches("a", "b") and reaches("a", "c"), 10, "the servers")
        net.partition(["a", "b"])
        assert reaches("a", "b") and not reaches("a", "c")
        net.heal()
        assert reaches("a", "c")


@needs_netns
@pytest.mark.parametrize("fault", FAULTS)
def test_sync_replicas_all_loses_nothing_confirmed(fault: str, record_property: pytest.RecordProperty) -> None:
    figures = _run(fault, "all", record_property)
    assert figures.send_ok_lost == 0
    _every_stored_message_delivered(figures)


@needs_netns
@pytest.mark.parametrize("fault", ["crash", "cut-master"])
def test_sync_replicas_1_loses_nothing_confirmed_in_a_crash_or_a_lone_master_cut(
    fault: str, record_property: pytest.RecordProperty
) -> None:
    figures = _run(fault, "1", record_property)
    assert figures.send_ok_lost == 0
    _every_stored_message_delivered(figures)


@needs_netns
@pytest.mark.parametrize("fault", ["crash", "cut-master"])
def test_replicated_cluster_with_sync_replicas_all_loses_nothing_confirmed(
    fault: str, record_property: pytest.RecordProperty
) -> None:
    figures = _run(fault, "all", record_property, topology="cluster")
    assert figures.send_ok_lost == 0
    _every_stored_message_delivered(figures)


def test_accounting_finds_loss_skips_duplicates_dirty_reads_and_reused_offsets(tmp_path: pathlib.Path) -> None:
    """The figures of a made-up run (no namespaces needed): m0–m3 SEND_OK, m4 raised; the store lost
    m2, and a failover gave its offset to m3 (queue 0, offset 2); g1 read m2 (dirty, at the reused
    offset) and never m3, and read m0 twice; g2 read everything stored once; g2's committed position
    is above queue 0's end."""
    produced = tmp_path / "produced.log"
    produced.write_text(
        "ok 0 0 0 100.0\nok 1 0 1 100.5\nok 2 0 2 101.0\nok 3 0 2 104.0\nerror 4 -1 -1 104.5\n"  # m3 reuses offset 2
    )
    (tmp_path / "g1.log").write_text("registered\nconsume 0 0 m0\nconsume 0 1 m1\nconsume 0 2 m2\nconsume 0 0 m0\n")
    (tmp_path / "g2.log").write_text("consume 0 0 m0\nconsume 0 1 m1\nconsume 0 2 m3\n")
    dumped = tmp_path / "store.json"
    stored = [[0, 0, "m0"], [0, 1, "m1"], [0, 2, "m3"]]
    dumped.write_text(json.dumps({"stored": stored, "ends": {"0": 3}, "committed": {"g1": {"0": 3}, "g2": {"0": 4}}}))
    logs = {"g1": tmp_path / "g1.log", "g2": tmp_path / "g2.log"}
    f = account("crash", "0", 5.0, produced, logs, dumped, fault_at=101.5, healed_at=106.5)
    assert (f.sent, f.send_ok, f.send_errors, f.stored) == (5, 4, 1, 3)
    assert f.send_ok_lost == 1 and f.lost_sent_s == (-0.5, -0.5)
    assert f.never_delivered == {"g1": 1, "g2": 0} and f.offsets_reused == {"g1": 1, "g2": 0}
    assert f.delivered_twice == {"g1": 1, "g2": 0} and f.dirty_reads == {"g1": 1, "g2": 0}
    assert f.positions_above_end == 1
    assert f.no_send_ok_s == 3.0  # m2 at 101.0 → m3 at 104.0 (gaps counted from 1 s before the fault)
