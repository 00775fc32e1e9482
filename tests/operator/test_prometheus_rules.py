"""deploy/prometheus/rules.yml: valid for Prometheus (``promtool check rules``) and firing as meant on
the synthetic series of rules_test.yml (``promtool test rules``).

promtool comes from Debian's ``prometheus`` package, which ``make test`` installs. Without it these
tests fail, never skip: a skipped check would let broken rules through CI unnoticed."""

from __future__ import annotations

from tests.operator.exporters import promtool
from tests.procs import ROOT

RULES = ROOT / "deploy" / "prometheus"


def test_rules_are_valid() -> None:
    assert "SUCCESS" in promtool("check", "rules", "rules.yml", cwd=RULES)


def test_rules_fire_as_their_tests_say() -> None:
    assert "SUCCESS" in promtool("test", "rules", "rules_test.yml", cwd=RULES)
