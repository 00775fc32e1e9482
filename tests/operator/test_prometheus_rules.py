"""deploy/prometheus/rules.yml: valid for Prometheus (``promtool check rules``) and firing as meant on
the synthetic series of rules_test.yml (``promtool test rules``).

promtool comes from Debian's ``prometheus`` package, which ``make test`` installs. Without it these
tests fail, never skip: a skipped check would let broken rules through CI unnoticed."""

from __future__ import annotations

import yaml

from tests.operator.exporters import promtool
from tests.procs import ROOT

RULES = ROOT / "deploy" / "prometheus"


def test_rules_are_valid() -> None:
    assert "SUCCESS" in promtool("check", "rules", "rules.yml", cwd=RULES)


def test_rules_fire_as_their_tests_say() -> None:
    assert "SUCCESS" in promtool("test", "rules", "rules_test.yml", cwd=RULES)


def test_the_compose_prometheus_scrapes_the_broker_and_loads_the_rules() -> None:
    """docker/docker-compose.yml's Prometheus: a valid configuration (promtool also checks the rule files
    it names, relative to it as in the container) that scrapes the port and address the broker
    service's metrics listen on in its own container."""
    assert "SUCCESS" in promtool("check", "config", "prometheus.yml", cwd=RULES)
    services = yaml.safe_load((ROOT / "docker" / "docker-compose.yml").read_text())["services"]
    command = services["broker"]["command"]
    assert command[command.index("--metrics-host") + 1] == "0.0.0.0"  # reachable from another container
    config = yaml.safe_load((RULES / "prometheus.yml").read_text())
    targets = [t for job in config["scrape_configs"] for sc in job["static_configs"] for t in sc["targets"]]
    assert f"broker:{command[command.index('--metrics-port') + 1]}" in targets
    assert config["rule_files"] == ["rules.yml"]
    mounts = services["prometheus"]["volumes"]
    assert "../deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro" in mounts
    assert "../deploy/prometheus/rules.yml:/etc/prometheus/rules.yml:ro" in mounts
