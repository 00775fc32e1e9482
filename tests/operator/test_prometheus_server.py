"""The operator kit in a real Prometheus (Debian's ``prometheus`` package, which ``make test`` installs
with promtool): it scrapes a running ``mq broker --metrics-port``, loads deploy/prometheus/rules.yml
and evaluates every rule without error, and every dashboard query answers without error, the lag and
rate panels with data. The promtool tests check syntax and synthetic series; this one checks the
expressions on the series as the exporter really serves them (types, labels, staleness)."""

from __future__ import annotations

import json
import pathlib
import shutil
import subprocess
import urllib.parse
import urllib.request
import uuid
from typing import Any

import pytest
import yaml

from tests.operator.exporters import accepts, broker_cli, seed
from tests.operator.test_dashboard import dashboard_expressions
from tests.procs import ROOT, wait_for
from tests.servers import free_port

RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
#: Grafana's variables for a Prometheus scraping every second.
VARIABLES = {"$__rate_interval": "10s", "$__interval": "1s", "$job": ".*", "$group": ".*", "$topic": ".*"}


def _api(port: int, path: str, **params: str) -> Any:
    url = f"http://127.0.0.1:{port}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    try:
        reply = json.loads(urllib.request.urlopen(url, timeout=10).read())
    except urllib.error.HTTPError as e:  # a bad query is a 400 with the error in the body
        reply = json.loads(e.read())
    assert reply["status"] == "success", f"{path} {params}: {reply}"
    return reply["data"]


def test_rules_and_dashboard_queries_in_a_real_prometheus(redis_server, tmp_path: pathlib.Path) -> None:
    binary = shutil.which("prometheus")
    if binary is None:
        pytest.fail("prometheus is missing: `make test` installs it (apt-get install prometheus), or install it and rerun")
    url, ns = redis_server.url, "t" + uuid.uuid4().hex[:8]
    seed(url, ns)
    with broker_cli(url, ns) as metrics_port:
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": "rocketredis", "static_configs": [{"targets": [f"127.0.0.1:{metrics_port}"]}]}],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        port = free_port()
        with (tmp_path / "prometheus.log").open("w") as log:
            proc = subprocess.Popen(
                [binary, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}"]
                + [f"--web.listen-address=127.0.0.1:{port}"],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:

            def up() -> bool:
                assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()[-3000:]
                return accepts("127.0.0.1", port)

            wait_for(up, 60, "Prometheus to listen")

            def rules() -> list[dict[str, Any]]:
                return [r for g in _api(port, "rules")["groups"] for r in g["rules"]]

            # every rule evaluated at least once, none in error
            wait_for(lambda: rules() and all(r["health"] != "unknown" for r in rules()), 60, "the rules' first evaluation")
            assert [(r["name"], r.get("lastError")) for r in rules() if r["health"] != "ok"] == []
            assert len(rules()) == len(yaml.safe_load(RULES.read_text())["groups"][0]["rules"])

            def query(expr: str) -> list[Any]:
                for name, value in VARIABLES.items():
                    expr = expr.replace(name, value)
                return _api(port, "query", query=expr)["result"]  # type: ignore[no-any-return]

            # enough scrapes for the rate windows (10 s) to hold two samples
            def scrapes() -> int:
                series = query("rocketredis_brokers_healthy[10s]")
                return len(series[0]["values"]) if series else 0

            wait_for(lambda: scrapes() >= 3, 60, "three scrapes")
            answers = {expr: query(expr) for expr in dashboard_expressions()}  # each one answers (no 400)
            with_data = {e for e, result in answers.items() if result}
            for series in ("rocketredis_brokers_healthy", "rocketredis_group_lag", "deriv(rocketredis_topic_messages"):
                assert any(series in e for e in with_data), f"no dashboard query on {series} has data"
            assert any("deriv(rocketredis_group_consumed_messages" in e for e in with_data)
            # queue 0: 3 messages, 1 committed; queue 1: no committed offset, no lag series
            lag = query('sum by (group, topic) (max without (instance) (rocketredis_group_lag{group="g"}))')
            assert [(r["metric"], r["value"][1]) for r in lag] == [({"group": "g", "topic": "T"}, "2")]
        finally:
            proc.terminate()
            proc.wait(30)
