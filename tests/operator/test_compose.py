"""docker/docker-compose.yml and docker/Dockerfile, checked without a Docker engine (scripts/compose_check.py).

The real files pass; a copy in which one service runs a missing command, script or module, passes an
option its parser refuses, or points to a missing file fails with a problem naming that service.
"""

from __future__ import annotations

import pathlib

import pytest
import yaml

from scripts.compose_check import main, validate

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "docker-compose.yml"
DOCKERFILE = DOCKER / "Dockerfile"


def compose() -> dict:
    doc = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(doc, dict)
    return doc


def mutated(tmp_path: pathlib.Path, old: str, new: str) -> pathlib.Path:
    """A copy of the compose file with the first ``old`` replaced (relative paths still resolve from docker/)."""
    text = COMPOSE.read_text()
    assert old in text, old
    path = tmp_path / "docker-compose.yml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_the_real_files_pass() -> None:
    assert validate(COMPOSE, DOCKERFILE) == []
    assert validate(COMPOSE) == []  # the Dockerfile each build names


def test_the_topology_is_the_one_the_issue_asks_for() -> None:
    services = compose()["services"]
    redis = services["redis"]
    assert redis["image"].startswith("redis:7")
    assert redis["command"] == ["redis-server", "--appendonly", "yes", "--appendfsync", "everysec"]
    assert redis["healthcheck"]["test"] == ["CMD", "redis-cli", "ping"]
    assert any(v.endswith(":/data") for v in redis["volumes"])

    broker = services["broker"]
    assert broker["command"][:3] == ["broker", "--url", "redis://redis:6379/0"]
    # the tier: the broker uploads to the `tier` volume; every service that reads messages mounts it
    # at the same path and has pyarrow (the `tier` extra)
    tier_path = broker["command"][broker["command"].index("--tier-url") + 1].removeprefix("file://")
    assert "tier" in compose()["volumes"] and f"tier:{tier_path}" in broker["volumes"]
    for name in ("broker", "consumer", "console", "spark", "proxy"):
        assert "tier" in services[name]["build"]["args"]["EXTRAS"].split(","), name
        assert any(v.startswith(f"tier:{tier_path}") for v in services[name]["volumes"]), name
    assert broker["healthcheck"]["test"][1:4] == ["mq", "broker", "--check"]
    assert broker["depends_on"]["redis"]["condition"] == "service_healthy"

    assert services["producer"]["entrypoint"] == ["python", "examples/producer_app.py"]
    assert services["consumer"]["entrypoint"] == ["python", "examples/consumer_app.py"]
    assert services["consumer"]["deploy"]["replicas"] == 2

    spark = services["spark"]
    assert spark["profiles"] == ["spark"]
    assert spark["entrypoint"] == ["python", "-m", "spark.jobs.throughput"]
    assert spark["build"]["args"]["EXTRAS"] == "spark,tier"

    cluster = {name for name, s in services.items() if "cluster" in s.get("profiles", [])}
    nodes = sorted(n for n in cluster if services[n]["command"][0] == "redis-server")
    assert len(nodes) == 3
    assert all("--cluster-enabled" in services[n]["command"] for n in nodes)
    init = services["redis-cluster-init"]
    assert set(init["depends_on"]) == set(nodes)
    assert "--cluster create" in (DOCKER / "redis-cluster-init.sh").read_text()

    dockerfile = DOCKERFILE.read_text()
    assert "FROM python:3.11-slim" in dockerfile
    assert 'ENTRYPOINT ["mq"]' in dockerfile
    assert "USER mq" in dockerfile
    assert "ARG EXTRAS" in dockerfile


BROKEN = [
    pytest.param("broker", '["broker", "--url"', '["brokr", "--url"', "invalid choice: 'brokr'", id="subcommand"),
    pytest.param("broker", '"broker", "--check"', '"broker", "--chek"', "unrecognized arguments: --chek", id="option"),
    pytest.param(
        "broker", '["CMD", "mq", "broker"', '["CMD", "mqctl", "broker"', "'mqctl' is not a program", id="healthcheck-program"
    ),
    pytest.param(
        "producer",
        "examples/producer_app.py",
        "examples/missing_app.py",
        "'examples/missing_app.py' is not in the image",
        id="script",
    ),
    pytest.param("producer", '"--rate", "5"', '"--rte", "5"', "unrecognized arguments: --rte", id="script-option"),
    pytest.param(
        "consumer",
        '["python", "examples/consumer_app.py"]',
        '["pythn", "examples/consumer_app.py"]',
        "'pythn' is not a program",
        id="program",
    ),
    pytest.param(
        "spark", "spark.jobs.throughput", "spark.jobs.missing", "module 'spark.jobs.missing' is not in the image", id="module"
    ),
    pytest.param(
        "redis-cluster-init",
        "./redis-cluster-init.sh",
        "./missing-init.sh",
        "'./missing-init.sh' does not exist",
        id="bind-mount",
    ),
    pytest.param(
        "broker", 'dockerfile: "docker/Dockerfile"', 'dockerfile: "docker/Dockerfile.missing"', "does not exist", id="dockerfile"
    ),
    pytest.param(
        "broker",
        '"broker", "--url"',
        '"broker", "--retention-h", "a day", "--url"',
        "argument --retention-h: 'a day' is not a number",
        id="option-value",
    ),
    pytest.param(
        "broker", '"--check", "--url"', '"--check", "--urll"', "unrecognized arguments: --urll", id="healthcheck-option"
    ),
    pytest.param("redis", '"redis-data:/data"', '"redis-date:/data"', "volume 'redis-date' is not declared", id="named-volume"),
]


@pytest.mark.parametrize(("service", "old", "new", "expected"), BROKEN)
def test_a_service_pointing_to_something_missing_fails(
    tmp_path: pathlib.Path, service: str, old: str, new: str, expected: str
) -> None:
    problems = validate(mutated(tmp_path, old, new), DOCKERFILE, project_dir=DOCKER)
    assert problems, "the broken copy passed"
    assert any(f"service {service!r}" in p and expected in p for p in problems), problems


def test_a_dockerfile_without_the_examples_fails_the_services_running_them(tmp_path: pathlib.Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(DOCKERFILE.read_text().replace("COPY examples/ ./examples/\n", ""))
    problems = validate(COMPOSE, dockerfile)
    assert {p.split(":")[0] for p in problems} == {"service 'producer'", "service 'consumer'"}, problems


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        ("COPY mq/ ./mq/", "COPY mqq/ ./mq/", "COPY source 'mqq/' does not exist"),
        (
            "COPY pyproject.toml setup.py README.md ./",
            "ADD pyproject.toml setup.py READ.md ./",
            "ADD source 'READ.md' does not exist",
        ),
        ('ENTRYPOINT ["mq"]', 'ENTRYPOINT ["mqq"]', "'mqq' is not a program"),  # broker and broker-cluster run it
    ],
    ids=["copy-source", "add-source", "entrypoint"],
)
def test_dockerfile_problems(tmp_path: pathlib.Path, old: str, new: str, expected: str) -> None:
    text = DOCKERFILE.read_text()
    assert old in text
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(text.replace(old, new, 1))
    problems = validate(COMPOSE, dockerfile)
    assert any(expected in p for p in problems), problems


def test_a_spark_module_outside_the_copied_packages_fails(tmp_path: pathlib.Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(DOCKERFILE.read_text().replace("COPY spark/ ./spark/\n", ""))
    assert validate(COMPOSE, dockerfile) == ["service 'spark': command: module 'spark.jobs.throughput' is not in the image"]


def test_command_line(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(COMPOSE)]) == 0
    assert capsys.readouterr().out.strip().endswith(": ok")
    broken = mutated(tmp_path, "examples/consumer_app.py", "examples/gone.py")
    assert main([str(broken), "--project-dir", str(DOCKER)]) == 1
    out = capsys.readouterr().out
    assert "service 'consumer'" in out and out.strip().endswith("1 problem(s)")


def test_a_yaml_error_is_reported_with_its_line(tmp_path: pathlib.Path) -> None:
    broken = mutated(tmp_path, "  broker:\n", "  broker:\n   misplaced: [1\n")
    (problem,) = validate(broken, DOCKERFILE, project_dir=DOCKER)
    assert problem.startswith("docker-compose.yml: ") and "line " in problem, problem


def test_the_string_form_of_a_command_is_split_like_compose_does(tmp_path: pathlib.Path) -> None:
    line = (
        'command: ["broker", "--url", "redis://redis:6379/0", "--namespace", "mq", '
        '"--tier-url", "file:///var/lib/rocketredis/tier", "--hot-retention-s", "600", '
        '"--metrics-port", "9108", "--metrics-host", "0.0.0.0"]'
    )
    assert validate(mutated(tmp_path, line, 'command: "broker --url redis://redis:6379/0"'), project_dir=DOCKER) == []
    (problem,) = validate(mutated(tmp_path, line, 'command: "broker --nope"'), project_dir=DOCKER)
    assert problem == "service 'broker': command: `mq broker --nope` is rejected by mq: mq: error: unrecognized arguments: --nope"
