"""Check docker/docker-compose.yml and the Dockerfile it builds, without a Docker engine.

    python scripts/compose_check.py [COMPOSE_FILE] [--dockerfile DOCKERFILE] [--project-dir DIR]

:func:`validate` returns the problems found (an empty list: the files pass); the command prints them
and exits 1 when there are any. The compose file is read with PyYAML. What it checks:

- **commands**: in the project's image (a service with ``build``, or one naming the image such a
  service builds), each service's command line (its ``entrypoint``, else the Dockerfile's
  ``ENTRYPOINT``, followed by its ``command``, else the Dockerfile's ``CMD``) and each ``CMD``
  health check runs ``mq``, parsed by the real parser (:func:`mq.cli.build_parser`: an unknown
  command or option fails), ``python <script>`` with the script copied into the image and its
  arguments accepted by the script's ``build_parser()`` when it has one, or ``python -m <module>``
  with the module copied into the image. Any other program is reported. Commands of external
  images (``redis:7``) are not checked: this check does not know their programs.
- **paths**: the build context and Dockerfile, every ``COPY``/``ADD`` source (in the build context)
  and every bind-mounted source (from the compose file's folder) exist; named volumes are declared.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import pathlib
import posixpath
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_COMPOSE = ROOT / "docker" / "docker-compose.yml"
PYTHONS = {"python", "python3"}


@dataclass
class Image:
    """What the project's Dockerfile puts in its image: the copies and how it runs."""

    context: pathlib.Path
    copies: list[tuple[str, str, str]] = field(default_factory=list)  # (workdir, source, destination)
    workdir: str = "/"
    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)

    def file(self, path: str) -> pathlib.Path | None:
        """The build-context file the image has at ``path`` (relative to WORKDIR), when it has it."""
        path = posixpath.normpath(posixpath.join(self.workdir, path))
        for workdir, source, dest in reversed(self.copies):  # a later COPY wins
            target = posixpath.normpath(posixpath.join(workdir, dest))
            src = self.context / source
            if src.is_dir() and (path + "/").startswith(target + "/"):
                candidate = src / posixpath.relpath(path, target)
            elif not src.is_dir() and path in (target, posixpath.join(target, src.name)):
                candidate = src
            else:
                continue
            if candidate.exists():
                return candidate
        return None


def read_dockerfile(path: pathlib.Path, context: pathlib.Path, problems: list[str]) -> Image:
    """The copies, WORKDIR, ENTRYPOINT and CMD of a Dockerfile; a COPY/ADD source that is missing is a problem."""
    image = Image(context)
    text = "".join(line for line in path.read_text().splitlines(keepends=True) if not line.lstrip().startswith("#"))
    for instruction in text.replace("\\\n", " ").splitlines():
        word, _, rest = instruction.strip().partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "WORKDIR":
            image.workdir = posixpath.join(image.workdir, rest)
        elif word in ("ENTRYPOINT", "CMD"):
            setattr(image, word.lower(), json.loads(rest) if rest.startswith("[") else ["/bin/sh", "-c", rest])
        elif word in ("COPY", "ADD") and "--from=" not in rest:
            args = [a for a in (json.loads(rest) if rest.startswith("[") else shlex.split(rest)) if not a.startswith("--")]
            for source in args[:-1]:
                if not (context / source).exists():
                    problems.append(f"{path.name}: {word} source {source!r} does not exist in {context}")
                image.copies.append((image.workdir, source, args[-1]))
    return image


def parse_error(build: Callable[[], argparse.ArgumentParser], args: Sequence[str]) -> str | None:
    """None when the parser accepts ``args``, else argparse's error line."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build().parse_args(list(args))
    except SystemExit as e:
        if e.code not in (0, None):
            return (err.getvalue().strip().splitlines() or [f"exit code {e.code}"])[-1]
    return None


def script_parser(path: pathlib.Path) -> Callable[[], argparse.ArgumentParser] | None:
    """``build_parser`` of the Python script at ``path`` (imported, not run), when it has one."""
    spec = importlib.util.spec_from_file_location(f"_compose_check_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    build = getattr(module, "build_parser", None)
    return build if callable(build) else None


def check_command(argv: list[str], image: Image) -> list[str]:
    """Problems with running ``argv`` (entry point included) in the project's image."""
    from mq.cli import build_parser

    if not argv:
        return ["empty command"]
    program, args = argv[0], argv[1:]
    if program == "mq":
        error = parse_error(build_parser, args)
        return [f"`{shlex.join(argv)}` is rejected by mq: {error}"] if error else []
    if program not in PYTHONS:
        return [f"{program!r} is not a program of the project's image (mq, python)"]
    if args[:1] == ["-m"] and len(args) > 1:
        module = args[1].replace(".", "/")
        found = image.file(f"{module}.py") or image.file(f"{module}/__main__.py")
        return [] if found else [f"module {args[1]!r} is not in the image"]
    if not args or args[0].startswith("-"):
        return [f"`{shlex.join(argv)}`: only `python <script>` and `python -m <module>` are checked"]
    source = image.file(args[0])
    if source is None:
        return [f"python script {args[0]!r} is not in the image (WORKDIR {image.workdir})"]
    try:
        build = script_parser(source)
    except Exception as e:  # report a script that does not import rather than crash
        return [f"python script {args[0]!r} cannot be imported: {e!r}"]
    error = parse_error(build, args[1:]) if build else None
    return [f"`{shlex.join(argv)}` is rejected by the script: {error}"] if error else []


def as_argv(value: Any) -> list[str] | None:
    """A command or entry point as a list (compose splits the string form like a shell)."""
    return shlex.split(value) if isinstance(value, str) else None if value is None else [str(v) for v in value]


def check_volumes(spec: dict[str, Any], base: pathlib.Path, declared: dict[str, Any]) -> list[str]:
    """Bind-mounted sources must exist (relative to ``base``) and named volumes be declared."""
    problems = []
    for entry in spec.get("volumes") or []:
        if isinstance(entry, dict):
            source, bind = str(entry.get("source", "")), entry.get("type") == "bind"
        else:
            source = str(entry).split(":")[0] if ":" in str(entry) else ""
            bind = source.startswith((".", "/", "~"))
        if bind and not (base / source).exists():
            problems.append(f"bind-mounted {source!r} does not exist ({(base / source).resolve()})")
        elif not bind and source and source not in declared:
            problems.append(f"volume {source!r} is not declared under the top-level volumes")
    return problems


def validate(
    compose_path: str | pathlib.Path = DEFAULT_COMPOSE,
    dockerfile_path: str | pathlib.Path | None = None,
    *,
    project_dir: str | pathlib.Path | None = None,
) -> list[str]:
    """The problems of the compose file (an empty list: it passes).

    Args:
        compose_path: the compose file.
        dockerfile_path: the Dockerfile to read instead of the one each build names (which must
            exist either way).
        project_dir: where relative paths in the compose file start (default: its folder, as compose does).
    """
    compose_path = pathlib.Path(compose_path)
    base = pathlib.Path(project_dir) if project_dir is not None else compose_path.parent
    try:
        doc = yaml.safe_load(compose_path.read_text())
    except (OSError, yaml.YAMLError) as e:
        return [f"{compose_path.name}: {e}"]
    services = doc.get("services") if isinstance(doc, dict) else None
    if not isinstance(services, dict) or not all(isinstance(spec, dict) for spec in services.values()):
        return [f"{compose_path.name}: services must be a mapping of service names to mappings"]
    problems: list[str] = []
    images: dict[str, Image] = {}  # service or image name -> the project's image
    for svc, spec in services.items():
        build = spec.get("build")
        if build is None:
            continue
        build = {"context": build} if isinstance(build, str) else build
        context = (base / str(build.get("context", "."))).resolve()
        dockerfile = context / str(build.get("dockerfile", "Dockerfile"))
        if not dockerfile.is_file():
            problems.append(f"service {svc!r}: Dockerfile {dockerfile} does not exist")
            continue
        image = read_dockerfile(pathlib.Path(dockerfile_path or dockerfile), context, problems)
        images[svc] = images[str(spec.get("image", svc))] = image
    for svc, spec in services.items():
        where = f"service {svc!r}"
        problems += [f"{where}: {p}" for p in check_volumes(spec, base, doc.get("volumes") or {})]
        known = images.get(svc) or images.get(str(spec.get("image")))
        if known is None:
            continue  # an external image: its programs are not known here
        entrypoint, command = as_argv(spec.get("entrypoint")), as_argv(spec.get("command"))
        if entrypoint is None:
            argv = known.entrypoint + (known.cmd if command is None else command)
        else:
            argv = entrypoint + (command or [])  # a service's entrypoint drops the image's CMD
        problems += [f"{where}: command: {p}" for p in check_command(argv, known)]
        test = as_argv((spec.get("healthcheck") or {}).get("test"))
        if test and test[0] == "CMD":
            problems += [f"{where}: healthcheck: {p}" for p in check_command(test[1:], known)]
    return list(dict.fromkeys(problems))  # each once, in order (services share the image)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compose_check.py", description="check a compose file and its Dockerfile without Docker")
    p.add_argument("compose", nargs="?", default=str(DEFAULT_COMPOSE), help="the compose file (default: %(default)s)")
    p.add_argument("--dockerfile", default=None, help="the Dockerfile to check (default: the one each build names)")
    p.add_argument("--project-dir", default=None, help="where relative paths start (default: the compose file's folder)")
    args = p.parse_args(argv)
    problems = validate(args.compose, args.dockerfile, project_dir=args.project_dir)
    for problem in problems:
        print(problem)
    print(f"{args.compose}: {len(problems)} problem(s)" if problems else f"{args.compose}: ok")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
