"""``--metrics-host``: the broker service's exporter and a client exporter listen on the address given
(a second loopback address here) and not on 127.0.0.1, so a scraper in another pod can be let in
without exposing anything else (issue 32)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry

import mq.observe.metrics
from mq.cli.main import build_parser
from mq.observe.metrics import enable_client_metrics
from tests.operator.exporters import accepts, broker_cli, scrape
from tests.servers import free_port

#: Another loopback address: Linux routes all of 127.0.0.0/8 to the loopback interface.
OTHER = "127.0.0.2"


@pytest.fixture
def fresh_client_metrics() -> Iterator[None]:
    """The client metrics are process-wide: start from none and leave none for the next test."""
    mq.observe.metrics.CLIENT_METRICS = None
    yield
    mq.observe.metrics.close_client_metrics_server()
    mq.observe.metrics.CLIENT_METRICS = None


def test_broker_service_exporter_listens_on_the_metrics_host(redis_server, namespace: str) -> None:
    with broker_cli(redis_server.url, namespace, host=OTHER) as port:
        names = {f.name for f in scrape(OTHER, port)}
        assert "rocketredis_brokers_healthy" in names
        assert not accepts("127.0.0.1", port)


def test_client_exporter_listens_on_the_host_given(fresh_client_metrics: None) -> None:
    port = free_port()
    enable_client_metrics(port, registry=CollectorRegistry(), host=OTHER)
    assert "rocketredis_send_latency_seconds" in {f.name for f in scrape(OTHER, port)}
    assert not accepts("127.0.0.1", port)


def test_client_exporter_keeps_its_first_keyword(fresh_client_metrics: None) -> None:
    """``addr=`` was the keyword before ``host=``: code passing it keeps working."""
    port = free_port()
    enable_client_metrics(port, registry=CollectorRegistry(), addr=OTHER)
    assert accepts(OTHER, port) and not accepts("127.0.0.1", port)


@pytest.mark.parametrize("host", [OTHER, "127.0.0.1"])  # the default's value given explicitly is no exception
def test_client_exporter_refuses_two_different_hosts(fresh_client_metrics: None, host: str) -> None:
    with pytest.raises(ValueError, match="pass host only"):
        enable_client_metrics(free_port(), registry=CollectorRegistry(), host=host, addr="127.0.0.3")
    assert mq.observe.metrics.CLIENT_METRICS is None  # refused before anything was registered or served


@pytest.mark.parametrize("command", ["broker", "proxy"])
def test_metrics_addr_is_still_accepted(command: str) -> None:
    """``--metrics-addr`` was the option's name: command lines and compose files using it still parse."""
    parser = build_parser()
    assert parser.parse_args([command, "--metrics-addr", OTHER]).metrics_host == OTHER
    assert parser.parse_args([command, "--metrics-host", OTHER]).metrics_host == OTHER
    assert parser.parse_args([command]).metrics_host == "127.0.0.1"


def test_the_client_exporter_closes_and_its_port_is_free_again(fresh_client_metrics: None) -> None:
    port = free_port()
    enable_client_metrics(port, registry=CollectorRegistry())
    assert accepts("127.0.0.1", port)
    assert mq.observe.metrics.close_client_metrics_server() is True
    assert not accepts("127.0.0.1", port)
    assert mq.observe.metrics.close_client_metrics_server() is False  # nothing left to close
    enable_client_metrics(port, registry=CollectorRegistry())  # the same port serves again
    assert "rocketredis_send_latency_seconds" in {f.name for f in scrape("127.0.0.1", port)}


def test_a_port_given_after_metrics_were_enabled_without_one_is_served(fresh_client_metrics: None) -> None:
    """The first call only records; a later call with a port used to be ignored without a word."""
    registry = CollectorRegistry()
    enable_client_metrics(registry=registry)
    port = free_port()
    enable_client_metrics(port, registry=registry)
    assert "rocketredis_send_latency_seconds" in {f.name for f in scrape("127.0.0.1", port)}


def test_serving_on_another_port_while_one_runs_is_refused(fresh_client_metrics: None) -> None:
    port = free_port()
    enable_client_metrics(port, registry=CollectorRegistry())
    enable_client_metrics(port)  # the same address again: nothing to do
    other = free_port()
    with pytest.raises(ValueError, match=f"already served on 127.0.0.1:{port}"):
        enable_client_metrics(other)
    assert not accepts("127.0.0.1", other)
