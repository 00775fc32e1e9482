"""The fault-injection suite at a small scale (``make chaos`` runs it longer and harder)."""

from __future__ import annotations

import pytest

from tests.chaos import Chaos

pytestmark = [pytest.mark.slow, pytest.mark.fault]


@pytest.mark.timeout(300)
def test_chaos_small(tmp_path) -> None:
    report = Chaos(seconds=30, rate=100, workdir=tmp_path).run()
    print(report)
    assert report.acked["C"] > 1000 and report.acked["O"] > 1000 and report.acked["D"] > 100
    assert report.lost == {"C": 0, "O": 0, "D": 0}
    assert report.order_violations == 0
    assert report.timer_early == 0
    assert len(report.faults) == 4
