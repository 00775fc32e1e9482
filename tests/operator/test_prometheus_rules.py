"""deploy/prometheus/rules.yml: valid for Prometheus (``promtool check rules``) and firing as meant on
the synthetic series of rules_test.yml (``promtool test rules``).

promtool comes from Debian's ``prometheus`` package, which ``make test`` installs. Without it these
tests fail, never skip: a skipped check would let broken rules through CI unnoticed."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.procs import ROOT

RULES = ROOT / "deploy" / "prometheus"


def _promtool(*args: str) -> str:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: `make test` installs it (apt-get install prometheus), or install it and rerun")
    done = subprocess.run([promtool, *args], cwd=RULES, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"promtool {' '.join(args)} failed:\n{done.stdout}{done.stderr}"
    return done.stdout


def test_rules_are_valid() -> None:
    assert "SUCCESS" in _promtool("check", "rules", "rules.yml")


def test_rules_fire_as_their_tests_say() -> None:
    assert "SUCCESS" in _promtool("test", "rules", "rules_test.yml")
