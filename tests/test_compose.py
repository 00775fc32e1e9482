"""docker/docker-compose.yml and docker/Dockerfile, checked without a Docker engine (scripts/compose_check.py).

The real files pass; a copy in which one service points to a missing command, script, module or file
fails with a problem naming that service.
"""

from __future__ import annotations

import pathlib

import pytest

from scripts.compose_check import YamlSubsetError, main, parse_yaml, validate

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCKER = ROOT / "docker"
COMPOSE = DOCKER / "docker-compose.yml"
DOCKERFILE = DOCKER / "Dockerfile"


def compose() -> dict:
    doc = parse_yaml(COMPOSE.read_text())
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
    assert broker["healthcheck"]["test"][1:4] == ["mq", "broker", "--check"]
    assert broker["depends_on"]["redis"]["condition"] == "service_healthy"

    assert services["producer"]["entrypoint"] == ["python", "examples/producer_app.py"]
    assert services["consumer"]["entrypoint"] == ["python", "examples/consumer_app.py"]
    assert services["consumer"]["deploy"]["replicas"] == 2

    spark = services["spark"]
    assert spark["profiles"] == ["spark"]
    assert spark["entrypoint"] == ["python", "-m", "spark.jobs.throughput"]
    assert spark["build"]["args"]["EXTRAS"] == "spark"

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
    pytest.param("broker", '["CMD", "mq", "broker"', '["CMD", "mqctl", "broker"', "'mqctl' is not a program",
                 id="healthcheck-program"),
    pytest.param("producer", "examples/producer_app.py", "examples/missing_app.py",
                 "'examples/missing_app.py' is not in the image", id="script"),
    pytest.param("producer", '"--rate", "5"', '"--rte", "5"', "unrecognized arguments: --rte", id="script-option"),
    pytest.param("consumer", '["python", "examples/consumer_app.py"]', '["pythn", "examples/consumer_app.py"]',
                 "'pythn' is not a program", id="program"),
    pytest.param("spark", "spark.jobs.throughput", "spark.jobs.missing", "module 'spark.jobs.missing' is not in the image",
                 id="module"),
    pytest.param("spark", '      args:\n        EXTRAS: "spark"\n', "", "needs the 'spark' extra", id="extra"),
    pytest.param("redis", '["CMD", "redis-cli", "ping"]', '["CMD", "redis-client", "ping"]',
                 "'redis-client' is not a program", id="redis-program"),
    pytest.param("redis-cluster-init", "./redis-cluster-init.sh", "./missing-init.sh", "'./missing-init.sh' does not exist",
                 id="bind-mount"),
    pytest.param("producer", "      consumer:\n        condition", "      consumers:\n        condition",
                 "'consumers', which is not a service", id="depends-on"),
    pytest.param("broker", 'dockerfile: "docker/Dockerfile"', 'dockerfile: "docker/Dockerfile.missing"', "does not exist",
                 id="dockerfile"),
]  # fmt: skip


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
        ("USER mq\n", "", "runs as root"),
        ("COPY mq/ ./mq/", "COPY mqq/ ./mq/", "COPY source 'mqq/' does not exist"),
        ("COPY spark/ ./spark/\n", "", "needs the package spark/"),
        ('ARG EXTRAS=""\n', "", "'EXTRAS' is not an ARG"),
    ],
    ids=["root", "copy-source", "package", "build-arg"],
)
def test_dockerfile_problems(tmp_path: pathlib.Path, old: str, new: str, expected: str) -> None:
    text = DOCKERFILE.read_text()
    assert old in text
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(text.replace(old, new, 1))
    problems = validate(COMPOSE, dockerfile)
    assert any(expected in p for p in problems), problems


def test_a_copy_source_excluded_by_the_dockerignore_fails(tmp_path: pathlib.Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(DOCKERFILE.read_text())
    ignore = (DOCKER / "Dockerfile.dockerignore").read_text()
    (tmp_path / "Dockerfile.dockerignore").write_text(ignore + "examples\n")
    problems = validate(COMPOSE, dockerfile)
    assert any("'examples/' is excluded from the build context by 'examples'" in p for p in problems), problems


def test_command_line(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(COMPOSE)]) == 0
    assert capsys.readouterr().out.strip().endswith(": ok")
    broken = mutated(tmp_path, "examples/consumer_app.py", "examples/gone.py")
    assert main([str(broken), "--project-dir", str(DOCKER)]) == 1
    out = capsys.readouterr().out
    assert "service 'consumer'" in out and out.strip().endswith("1 problem(s)")


def test_interpolation_uses_defaults_and_flags_variables_without_one(tmp_path: pathlib.Path) -> None:
    ok = mutated(tmp_path, '"--rate", "5"', '"--rate", "${RATE:-5}"')
    assert validate(ok, DOCKERFILE, project_dir=DOCKER) == []
    bad = mutated(tmp_path, '"--rate", "5"', '"--rate", "${RATE}"')
    assert any("needs the variable RATE" in p for p in validate(bad, DOCKERFILE, project_dir=DOCKER))


# --- the YAML subset reader ----------------------------------------------------------------------


def test_parse_yaml_reads_the_subset() -> None:
    text = """\
# a comment
name: "demo"   # trailing comment
services:
  app:
    command: ["a", 'b c', "d, e", 5]
    empty: []
    opts: {}
    flow: {k: v, n: 1}
    url: redis://h:6379/0#not-a-comment
    quoted: "#not a comment"
    single: 'it''s'
    escaped: "tab\\there"
    plain: it's
    flags: [true, false, null, ~, 1.5, -3]
    list:
      - one
      - key: value
        other: 2
      -
        nested: x
    same_indent_list:
    - first
    - second
    nothing:
top: 1
"""
    assert parse_yaml(text) == {
        "name": "demo",
        "services": {
            "app": {
                "command": ["a", "b c", "d, e", 5],
                "empty": [],
                "opts": {},
                "flow": {"k": "v", "n": 1},
                "url": "redis://h:6379/0#not-a-comment",
                "quoted": "#not a comment",
                "single": "it's",
                "escaped": "tab\there",
                "plain": "it's",
                "flags": [True, False, None, None, 1.5, -3],
                "list": ["one", {"key": "value", "other": 2}, {"nested": "x"}],
                "same_indent_list": ["first", "second"],
                "nothing": None,
            }
        },
        "top": 1,
    }


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        ("a: &anchor 1\n", 1, "anchors"),
        ("a: 1\nb: *anchor\n", 2, "aliases"),
        ("a: |\n  text\n", 1, "block scalars"),
        ("a:\n\tb: 1\n", 2, "tabs"),
        ("a: b: c\n", 1, "a mapping where a scalar was expected"),
        ("---\na: 1\n", 1, "document markers"),
        ("a: 1\na: 2\n", 2, "duplicate key"),
        ("a: [1,\n  2]\n", 1, "must close on its line"),
        ("a: 1\n  b: 2\n", 2, "unexpected indentation"),
        ("a: yes\n", 1, "quote it"),
        ("a: 0755\n", 1, "quote it"),
        ('a: "x" y\n', 1, "one quoted string per value"),
    ],
)
def test_parse_yaml_refuses_what_it_does_not_read(text: str, line: int, message: str) -> None:
    with pytest.raises(YamlSubsetError, match=message) as info:
        parse_yaml(text)
    assert info.value.line == line


def test_a_yaml_error_is_reported_with_its_line(tmp_path: pathlib.Path) -> None:
    broken = mutated(tmp_path, "  broker:\n", "  broker:\n   misplaced: 1\n")
    (problem,) = validate(broken, DOCKERFILE, project_dir=DOCKER)
    assert problem.startswith("docker-compose.yml: line ")
