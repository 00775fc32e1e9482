"""deploy/grafana/rocketredis.json and deploy/prometheus/rules.yml against what the exporters really
publish: every series an expression names is in a scrape of a running ``mq broker --metrics-port``
(with a tier), ``mq proxy --metrics-port`` or a client exporter, every series they publish is on the
dashboard, and every expression parses (promtool). Renaming a series without the dashboard, or the
dashboard without a series, fails here instead of showing empty panels in production."""

from __future__ import annotations

import json
import pathlib
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric

import mq.observe.metrics
from mq.observe.metrics import enable_client_metrics
from tests.operator.exporters import broker_cli, mq_cli, promtool, scrape, seed, series_names
from tests.procs import ROOT
from tests.servers import free_port

DASHBOARD = ROOT / "deploy" / "grafana" / "rocketredis.json"
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
#: A rocketredis series name in an expression (every series the project publishes has one of these prefixes).
NAME = re.compile(r"\b(?:rocketredis|mq_proxy)_[a-z0-9_]+\b")
#: Grafana's variables, replaced by values Prometheus parses (promtool knows nothing of Grafana).
VARIABLES = {"$__rate_interval": "5m", "$__interval": "1m", "$job": ".*", "$group": ".*", "$topic": ".*"}


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for p in panels:
        yield p
        yield from _panels(p.get("panels", []))  # a collapsed row holds its panels


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())  # type: ignore[no-any-return]


def dashboard_expressions() -> list[str]:
    d = dashboard()
    exprs = [t["expr"] for p in _panels(d["panels"]) for t in p.get("targets", [])]
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            exprs.append(re.fullmatch(r"label_values\((.*), \w+\)", v["query"]["query"]).group(1))  # type: ignore[union-attr]
    return exprs


def rule_expressions() -> list[str]:
    return [r["expr"] for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


@pytest.fixture(scope="module")
def published(redis_server, tmp_path_factory: pytest.TempPathFactory) -> list[Metric]:
    """Every family the three exporters publish, scraped from running ones with data in the store (a
    topic, sends, a group's offsets) so the labelled families have samples."""
    url, ns = redis_server.url, "t" + uuid.uuid4().hex[:8]
    tier = tmp_path_factory.mktemp("tier")
    mq.observe.metrics.CLIENT_METRICS = None
    try:
        client_port = free_port()
        enable_client_metrics(client_port, registry=CollectorRegistry())
        seed(url, ns)  # the sends are recorded by the client exporter
        families = scrape("127.0.0.1", client_port)
    finally:
        mq.observe.metrics.close_client_metrics_server()
        mq.observe.metrics.CLIENT_METRICS = None
    with broker_cli(url, ns, "--tier-url", tier.as_uri()) as port:
        families += scrape("127.0.0.1", port)
    with mq_cli("proxy", "--url", url, "--namespace", ns, "--port", "0", ready="endpoint on") as port:
        families += scrape("127.0.0.1", port)
    # the scrape really was of this namespace's data, not only of empty families
    assert {"rocketredis_group_lag", "rocketredis_tier_lag_messages", "rocketredis_send_latency_seconds_count"} <= {
        s.name for f in families for s in f.samples
    }
    # x_created: when a labelled child was first seen (the text format shows it as a family of its own)
    return [f for f in families if NAME.fullmatch(f.name) and not f.name.endswith("_created")]


def test_every_dashboard_series_is_published(published: list[Metric]) -> None:
    used = {n for e in dashboard_expressions() for n in NAME.findall(e)}
    assert used, "no rocketredis series found in the dashboard's expressions"
    assert used - series_names(published) == set()


def test_every_rule_series_is_published(published: list[Metric]) -> None:
    used = {n for e in rule_expressions() for n in NAME.findall(e)}
    assert used - series_names(published) == set()


def test_every_published_family_is_on_the_dashboard(published: list[Metric]) -> None:
    """The other way round: a new series gets a panel (or this test names it)."""
    used = {n for e in dashboard_expressions() for n in NAME.findall(e)}
    assert sorted(f.name for f in published if not series_names([f]) & used) == []


def test_dashboard_expressions_parse(tmp_path: pathlib.Path) -> None:
    exprs = dashboard_expressions()
    for name, value in VARIABLES.items():
        exprs = [e.replace(name, value) for e in exprs]
    assert not [e for e in exprs if "$" in e], "a Grafana variable the test does not know"
    rules = {
        "groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr{i}", "expr": e} for i, e in enumerate(exprs)]}]
    }
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))
    assert f"SUCCESS: {len(exprs)} rules found" in promtool("check", "rules", "dashboard.yml", cwd=tmp_path)


def test_dashboard_layout() -> None:
    """What Grafana needs to import it: unique panel ids, every query on the datasource variable,
    panels within the 24-column grid."""
    d = dashboard()
    panels = list(_panels(d["panels"]))
    assert len({p["id"] for p in panels}) == len(panels)
    for p in panels:
        assert p["gridPos"]["x"] >= 0 and p["gridPos"]["x"] + p["gridPos"]["w"] <= 24, p["title"]
        for t in p.get("targets", []):
            assert t["datasource"]["uid"] == "${datasource}", p["title"]
