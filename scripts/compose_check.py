"""Check docker/docker-compose.yml and docker/Dockerfile without a Docker engine.

    python scripts/compose_check.py [COMPOSE_FILE] [--dockerfile DOCKERFILE] [--project-dir DIR]

:func:`validate` returns the problems found (an empty list: the files pass); the command prints them
and exits 1 when there are any. What it checks:

- the compose file parses (:func:`parse_yaml`, a reader for the plain YAML subset the file keeps to:
  block mappings and lists, one-line flow lists and mappings, quoted and plain scalars, comments;
  anchors, tags, multi-line strings, tabs and documents markers are refused with their line) and
  uses known top-level and service keys; ``${VAR:-default}`` and ``$$`` are interpolated as
  compose does, with the defaults;
- every service's command resolves to something the image has. In the project image (a service
  with ``build``, or the image such a service builds) the entry point and command (the Dockerfile's
  ``ENTRYPOINT``/``CMD`` unless the service overrides them) must be a console script of the
  project (``[project.scripts]``), parsed with that command's own argument parser (so an unknown
  ``mq`` subcommand or option fails), or ``python <path>`` with the path present in the image (via
  its ``COPY``s) and its arguments accepted by the script's ``build_parser()`` when it has one, or
  ``python -m <module>`` with the module present in the image; an external image must be one this
  checker knows (``redis``) and the command one of its programs. Health checks are checked the
  same way (``CMD`` and ``CMD-SHELL``), and so is the script of ``sh <file>``/``sh -c``;
- every referenced file exists: build contexts, Dockerfiles, ``COPY`` sources (not excluded by the
  ``.dockerignore``), bind-mounted files;
  named volumes are declared; ``depends_on`` names services (with a health check where the
  condition is ``service_healthy``) that are enabled whenever the dependent is (profiles);
- the Dockerfile runs as a non-root ``USER``, has an exec-form ``ENTRYPOINT``, copies what
  ``pip install .`` needs (pyproject, its readme, the packages) and declares every build argument
  the compose file passes; a module of a package that is also a project extra (``spark``) needs
  that extra in the build's ``EXTRAS``.
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import importlib
import importlib.util
import io
import json
import pathlib
import re
import shlex
import sys
import tomllib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_COMPOSE = ROOT / "docker" / "docker-compose.yml"
DEFAULT_DOCKERFILE = ROOT / "docker" / "Dockerfile"

# ---------------------------------------------------------------------------------------------
# A reader for the plain YAML subset
# ---------------------------------------------------------------------------------------------


class YamlSubsetError(ValueError):
    """The text is not in the YAML subset :func:`parse_yaml` reads; the message names the line."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}")
        self.line = line


@dataclass
class _Line:
    no: int
    indent: int
    text: str


_UNSUPPORTED_START = {"&": "anchors", "*": "aliases", "!": "tags", "|": "block scalars", ">": "block scalars",
                      "%": "directives", "@": "reserved indicators", "`": "reserved indicators", "?": "complex keys"}  # fmt: skip
_AMBIGUOUS = {"yes", "no", "on", "off", "y", "n"}
_INT = re.compile(r"[-+]?[0-9]+\Z")
_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")


def _quote_may_open(text: str, i: int) -> bool:
    """A quote opens a quoted scalar only at the start of a token."""
    return i == 0 or text[i - 1] in " \t[{,:-"


def _strip_comment(text: str) -> str:
    quote = None
    i = 0
    while i < len(text):
        ch = text[i]
        if quote == '"':
            if ch == "\\":
                i += 1
            elif ch == '"':
                quote = None
        elif quote == "'":
            if ch == "'":
                quote = None  # '' (an escaped quote) closes and reopens
        elif ch in "\"'" and _quote_may_open(text, i):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
        i += 1
    return text.rstrip()


def _lines(text: str) -> list[_Line]:
    out = []
    for no, raw in enumerate(text.splitlines(), 1):
        body = raw.lstrip(" ")
        if body.strip() and "\t" in raw[: len(raw) - len(raw.lstrip(" \t"))]:
            raise YamlSubsetError(no, "tabs are not allowed for indentation")
        stripped = _strip_comment(body)
        if not stripped:
            continue
        if stripped in ("---", "...") or stripped.startswith(("--- ", "%")):
            raise YamlSubsetError(no, "document markers and directives are not supported")
        out.append(_Line(no, len(raw) - len(body), stripped))
    return out


def _is_item(text: str) -> bool:
    return text == "-" or text.startswith("- ")


def _closing_quote(text: str, start: int) -> int:
    """The index of the quote closing the scalar that opens at ``start``, or -1."""
    quote = text[start]
    i = start + 1
    while i < len(text):
        if quote == '"' and text[i] == "\\":
            i += 2
            continue
        if text[i] == quote:
            if quote == "'" and i + 1 < len(text) and text[i + 1] == "'":
                i += 2
                continue
            return i
        i += 1
    return -1


def _split_key(text: str, no: int) -> tuple[str, str] | None:
    """``(key, rest)`` when ``text`` starts a mapping entry ``key: rest``, else None."""
    if text[0] in "\"'":
        end = _closing_quote(text, 0)
        if end < 0:
            raise YamlSubsetError(no, "unterminated quoted scalar")
        after = text[end + 1 :]
        if after == ":" or after.startswith(": "):
            return str(_scalar(text[: end + 1], no)), after[1:].strip()
        return None
    if text[0] in "[{":
        return None
    m = re.search(r":( |\Z)", text)
    if m is None:
        return None
    key = text[: m.start()].rstrip()
    if not key:
        raise YamlSubsetError(no, "empty mapping key")
    return key, text[m.end() :].strip()


def _scalar(text: str, no: int) -> Any:
    if text[0] == '"':
        if _closing_quote(text, 0) != len(text) - 1:
            raise YamlSubsetError(no, f"bad double-quoted scalar {text!r} (one quoted string per value)")
        try:
            return json.loads(text)
        except ValueError:
            raise YamlSubsetError(no, f"bad escape in {text!r}") from None
    if text[0] == "'":
        if _closing_quote(text, 0) != len(text) - 1:
            raise YamlSubsetError(no, f"bad single-quoted scalar {text!r} (one quoted string per value)")
        return text[1:-1].replace("''", "'")
    if text[0] in _UNSUPPORTED_START:
        raise YamlSubsetError(no, f"{_UNSUPPORTED_START[text[0]]} are not supported: {text!r}")
    if re.search(r":( |\Z)", text):
        raise YamlSubsetError(no, f"a mapping where a scalar was expected: {text!r} (quote it?)")
    if text.lower() in _AMBIGUOUS or re.match(r"[-+]?0[0-9xXoObB]", text):
        raise YamlSubsetError(no, f"{text!r} reads differently in YAML 1.1 and 1.2: quote it")
    if text in ("null", "Null", "NULL", "~"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.match(text):
        return int(text)
    if _FLOAT.match(text):
        return float(text)
    return text


def _split_flow(inner: str, no: int) -> list[str]:
    items, depth, start, i = [], 0, 0, 0
    while i < len(inner):
        ch = inner[i]
        if ch in "\"'" and _quote_may_open(inner, i):
            end = _closing_quote(inner, i)
            if end < 0:
                raise YamlSubsetError(no, "unterminated quoted scalar")
            i = end
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:i].strip())
            start = i + 1
        i += 1
    items.append(inner[start:].strip())
    if items and items[-1] == "":
        items.pop()  # a trailing comma
    if any(item == "" for item in items):
        raise YamlSubsetError(no, "empty item in a flow collection")
    return items


def _value(text: str, no: int) -> Any:
    """A scalar, or a one-line flow list or mapping of scalars."""
    if text[0] in "[{":
        close = "]" if text[0] == "[" else "}"
        if not text.endswith(close):
            raise YamlSubsetError(no, "a flow collection must close on its line")
        items = _split_flow(text[1:-1], no)
        if any(item[0] in "[{" for item in items):
            raise YamlSubsetError(no, "nested flow collections are not supported")
        if close == "]":
            return [_scalar(item, no) for item in items]
        out: dict[str, Any] = {}
        for item in items:
            kv = _split_key(item, no)
            if kv is None:
                raise YamlSubsetError(no, f"expected key: value in a flow mapping, got {item!r}")
            out[kv[0]] = _scalar(kv[1], no) if kv[1] else None
        return out
    return _scalar(text, no)


class _Parser:
    def __init__(self, lines: list[_Line]) -> None:
        self.lines = lines
        self.i = 0

    def parse(self) -> Any:
        if not self.lines:
            return None
        value = self.block(self.lines[0].indent)
        if self.i < len(self.lines):
            raise YamlSubsetError(self.lines[self.i].no, "unexpected indentation")
        return value

    def block(self, indent: int) -> Any:
        first = self.lines[self.i]
        if _is_item(first.text):
            return self.sequence(indent)
        if _split_key(first.text, first.no) is None:
            raise YamlSubsetError(first.no, f"expected 'key: value' or '- item', got {first.text!r}")
        return self.mapping(indent)

    def nested(self, indent: int) -> Any:
        """The value of a key or item with nothing after it on its line: the block below, or null."""
        if self.i < len(self.lines):
            nxt = self.lines[self.i]
            if nxt.indent > indent or (nxt.indent == indent and _is_item(nxt.text)):
                return self.block(nxt.indent)
        return None

    def mapping(self, indent: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.indent < indent:
                break
            if line.indent > indent:
                raise YamlSubsetError(line.no, "unexpected indentation (multi-line values are not supported)")
            kv = _split_key(line.text, line.no)
            if kv is None:
                raise YamlSubsetError(line.no, f"expected 'key: value', got {line.text!r}")
            key, rest = kv
            if key in result:
                raise YamlSubsetError(line.no, f"duplicate key {key!r}")
            self.i += 1
            result[key] = _value(rest, line.no) if rest else self.nested(indent)
        return result

    def sequence(self, indent: int) -> list[Any]:
        items: list[Any] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.indent < indent or (line.indent == indent and not _is_item(line.text)):
                break
            if line.indent > indent:
                raise YamlSubsetError(line.no, "unexpected indentation")
            content = line.text[1:].lstrip(" ")
            if not content:
                self.i += 1
                items.append(self.nested(indent + 1) if self.i < len(self.lines) and self.lines[self.i].indent > indent else None)
            elif _is_item(content) or _split_key(content, line.no) is not None:
                # "- key: value" / "- - x": the item is a block that starts on this line, at its column
                self.lines[self.i] = _Line(line.no, indent + len(line.text) - len(content), content)
                items.append(self.block(self.lines[self.i].indent))
            else:
                self.i += 1
                items.append(_value(content, line.no))
        return items


def parse_yaml(text: str) -> Any:
    """Parse ``text`` in the supported YAML subset (see the module docstring); raises :class:`YamlSubsetError`."""
    return _Parser(_lines(text)).parse()


# ---------------------------------------------------------------------------------------------
# Compose interpolation
# ---------------------------------------------------------------------------------------------

_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def interpolate(value: Any, problems: list[str], where: str = "") -> Any:
    """``value`` with ``$$`` → ``$`` and ``${VAR:-default}`` → ``default``, as compose does without the variable set.

    A variable without a default (``${VAR}``, ``$VAR``, ``${VAR:?message}``) is a problem: the file
    should run as it is.
    """
    if isinstance(value, dict):
        return {k: interpolate(v, problems, f"{where}.{k}" if where else k) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, problems, f"{where}[{i}]") for i, v in enumerate(value)]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1) or m.group(4)
        if m.group(2) in (":-", "-"):
            return m.group(3)
        problems.append(f"{where}: needs the variable {name} (give it a default: ${{{name}:-…}})")
        return ""

    return _VAR.sub(one, value)


# ---------------------------------------------------------------------------------------------
# The Dockerfile and the project image
# ---------------------------------------------------------------------------------------------


@dataclass
class Copy:
    sources: list[str]
    dest: str  # absolute path in the image
    dest_is_dir: bool
    line: int


@dataclass
class Dockerfile:
    path: pathlib.Path
    base: str = ""
    args: set[str] = field(default_factory=set)
    copies: list[Copy] = field(default_factory=list)
    pip_dirs: list[str] = field(default_factory=list)  # working directories of RUN pip install …
    workdir: str = "/"
    user: str = ""
    entrypoint: list[str] | None = None
    cmd: list[str] | None = None
    problems: list[str] = field(default_factory=list)


def _instructions(text: str) -> Iterator[tuple[int, str, str]]:
    """``(line, INSTRUCTION, arguments)`` with continuation lines joined and comments dropped."""
    buf: list[str] = []
    start = 0
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue  # comment lines inside a continued instruction are skipped by Docker
        if not buf:
            start = no
        if line.endswith("\\"):
            buf.append(line[:-1].strip())
            continue
        buf.append(line)
        joined = " ".join(part for part in buf if part)
        buf = []
        word, _, rest = joined.partition(" ")
        yield start, word.upper(), rest.strip()
    if buf:
        joined = " ".join(buf)
        word, _, rest = joined.partition(" ")
        yield start, word.upper(), rest.strip()


def _exec_form(rest: str) -> list[str] | None:
    if rest.startswith("["):
        with contextlib.suppress(ValueError):
            value = json.loads(rest)
            if isinstance(value, list) and all(isinstance(v, str) for v in value):
                return value
    return None


def _abs(path: str, workdir: str) -> str:
    joined = path if path.startswith("/") else f"{workdir.rstrip('/')}/{path}"
    parts: list[str] = []
    for part in joined.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
            continue
        parts.append(part)
    return "/" + "/".join(parts)


def _dockerignore(dockerfile: pathlib.Path, context: pathlib.Path) -> list[str]:
    """The context's exclusion patterns: ``<Dockerfile>.dockerignore`` beside it (BuildKit), else ``.dockerignore``."""
    for candidate in (dockerfile.with_name(dockerfile.name + ".dockerignore"), context / ".dockerignore"):
        with contextlib.suppress(OSError):
            lines = (line.strip() for line in candidate.read_text().splitlines())
            return [line for line in lines if line and not line.startswith("#")]
    return []


def _ignored(source: str, patterns: list[str]) -> str | None:
    """The last pattern deciding that ``source`` (or a folder above it) is excluded, else None (``!`` re-includes)."""
    rel = source.strip("/").removeprefix("./")
    parts = rel.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    decided = None
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw.removeprefix("!").strip("/").removeprefix("./")
        variants = {pattern, pattern.removeprefix("**/")}
        hit = any(fnmatch.fnmatchcase(p, v) for p in prefixes for v in variants)
        hit = hit or (pattern.startswith("**/") and any(fnmatch.fnmatchcase(part, pattern[3:]) for part in parts))
        if hit:
            decided = None if negate else raw
    return decided


def parse_dockerfile(path: pathlib.Path, context: pathlib.Path) -> Dockerfile:
    """The parts of the Dockerfile the checks need; problems of the Dockerfile itself in ``.problems``."""
    df = Dockerfile(path)
    name = path.name
    ignore = _dockerignore(path, context)
    try:
        text = path.read_text()
    except OSError as e:
        df.problems.append(f"{name}: cannot read: {e}")
        return df
    for no, word, rest in _instructions(text):
        if word == "FROM":
            df.base = rest.split()[0] if rest else ""
        elif word == "ARG":
            df.args.add(rest.split("=", 1)[0].strip())
        elif word == "WORKDIR":
            df.workdir = _abs(rest, df.workdir)
        elif word == "USER":
            df.user = rest.split(":")[0]
        elif word in ("ENTRYPOINT", "CMD"):
            form = _exec_form(rest)
            if form is None:
                if word == "ENTRYPOINT":
                    df.problems.append(f"{name}:{no}: ENTRYPOINT should be in exec form (a JSON list): signals must reach it")
                form = ["/bin/sh", "-c", rest]
            if word == "ENTRYPOINT":
                df.entrypoint, df.cmd = form, None  # a new ENTRYPOINT resets CMD
            else:
                df.cmd = form
        elif word in ("COPY", "ADD"):
            args = _exec_form(rest) or shlex.split(rest)
            flags = [a for a in args if a.startswith("--")]
            paths = [a for a in args if not a.startswith("--")]
            if any(f.startswith("--from") for f in flags):
                continue
            if len(paths) < 2:
                df.problems.append(f"{name}:{no}: {word} needs a source and a destination")
                continue
            *sources, dest = paths
            for src in sources:
                if re.match(r"[a-z]+://", src):
                    continue
                if not list(context.glob(src.rstrip("/") or ".")) and not (context / src).exists():
                    df.problems.append(f"{name}:{no}: {word} source {src!r} does not exist in the build context {context}")
            for src in sources:
                pattern = _ignored(src, ignore)
                if pattern:
                    df.problems.append(f"{name}:{no}: {word} source {src!r} is excluded from the build context by {pattern!r}")
            dest_is_dir = dest.endswith("/") or len(sources) > 1 or any((context / s).is_dir() for s in sources)
            df.copies.append(Copy(sources, _abs(dest, df.workdir), dest_is_dir, no))
        elif word == "RUN" and re.search(r"\bpip3? install\b", rest):
            df.pip_dirs.append(df.workdir)
    if not df.base:
        df.problems.append(f"{name}: no FROM")
    if df.user in ("", "root", "0"):
        df.problems.append(f"{name}: the image runs as root: add a USER with an unprivileged user")
    if df.entrypoint is None:
        df.problems.append(f"{name}: no ENTRYPOINT")
    return df


SHELLS = {"sh", "bash", "/bin/sh", "/bin/bash"}
PYTHONS = {"python", "python3", "python3.11"}


class Image:
    """What a service's container has: programs, files, and how it runs a command."""

    name = ""

    def entrypoint(self) -> list[str]:
        return []

    def cmd(self) -> list[str]:
        return []

    def has_program(self, program: str) -> bool:
        raise NotImplementedError

    def file(self, path: str) -> pathlib.Path | None:
        """The source of the image file ``path`` (absolute), when the image has it."""
        return None

    def effective(self, argv: list[str]) -> list[str]:
        """The command the container's entry point finally runs for ``argv``."""
        return argv


class ExternalImage(Image):
    """An image this checker knows by its programs (the compose file only runs ``redis``)."""

    KNOWN: ClassVar[dict[str, set[str]]] = {
        "redis": {"redis-server", "redis-cli", "redis-sentinel", "redis-benchmark", "redis-check-aof", "redis-check-rdb",
                  "docker-entrypoint.sh", "sh", "bash", "getent", "grep", "cut", "head", "sleep", "cat", "echo"},
    }  # fmt: skip

    def __init__(self, name: str) -> None:
        self.name = name
        self.programs = self.KNOWN[self.repository(name)]

    @staticmethod
    def repository(image: str) -> str:
        name = image.split("@")[0]
        if ":" in name.rsplit("/", 1)[-1]:
            name = name.rsplit(":", 1)[0]
        return name.removeprefix("docker.io/").removeprefix("library/")

    def cmd(self) -> list[str]:
        return ["redis-server"]

    def effective(self, argv: list[str]) -> list[str]:
        # redis's docker-entrypoint.sh: a first argument that is an option (or a .conf) means redis-server
        if argv and (argv[0].startswith("-") or argv[0].endswith(".conf")):
            return ["redis-server", *argv]
        return argv

    def has_program(self, program: str) -> bool:
        return program.rsplit("/", 1)[-1] in self.programs


class ProjectImage(Image):
    """The image built from the project's Dockerfile."""

    BASE_PROGRAMS: ClassVar[set[str]] = {*PYTHONS, *SHELLS, "pip", "pip3", "env"}

    def __init__(self, name: str, context: pathlib.Path, dockerfile: Dockerfile, build_args: dict[str, str]) -> None:
        self.name = name
        self.context = context
        self.df = dockerfile
        self.build_args = build_args
        self.pyproject: dict[str, Any] = {}
        with contextlib.suppress(OSError, tomllib.TOMLDecodeError):
            self.pyproject = tomllib.loads((context / "pyproject.toml").read_text())
        installed = bool(self.df.pip_dirs) and self.file(_abs("pyproject.toml", self.df.pip_dirs[0])) is not None
        self.scripts: dict[str, str] = dict(self.pyproject.get("project", {}).get("scripts", {})) if installed else {}

    def entrypoint(self) -> list[str]:
        return list(self.df.entrypoint or [])

    def cmd(self) -> list[str]:
        return list(self.df.cmd or [])

    def has_program(self, program: str) -> bool:
        return program in self.BASE_PROGRAMS or program in self.scripts

    def file(self, path: str) -> pathlib.Path | None:
        for copy in reversed(self.df.copies):  # a later COPY wins
            for src in copy.sources:
                source = self.context / src
                if source.is_dir():
                    target = copy.dest
                    if path == target or path.startswith(target.rstrip("/") + "/"):
                        candidate = source / path[len(target) :].lstrip("/")
                        if candidate.exists():
                            return candidate
                else:
                    target = _abs(source.name, copy.dest) if copy.dest_is_dir else copy.dest
                    if path == target and source.exists():
                        return source
        return None

    def packages(self) -> list[str]:
        """Top-level package patterns ``pip install .`` installs."""
        find = self.pyproject.get("tool", {}).get("setuptools", {}).get("packages", {}).get("find", {})
        return list(find.get("include", ["*"]))

    def extras(self) -> set[str]:
        return {e.strip() for e in self.build_args.get("EXTRAS", "").split(",") if e.strip()}


# ---------------------------------------------------------------------------------------------
# Commands
# ---------------------------------------------------------------------------------------------


def _parse_with(build: Callable[[], argparse.ArgumentParser], args: Sequence[str]) -> str | None:
    """None when the parser accepts ``args``, else argparse's error line."""
    err = io.StringIO()
    try:
        parser = build()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parser.parse_args(list(args))
    except SystemExit as e:
        if e.code not in (0, None):
            lines = [line for line in err.getvalue().splitlines() if line.strip()]
            return lines[-1] if lines else f"exit code {e.code}"
    except Exception as e:  # the parser could not be built: report it rather than crash
        return f"cannot check the arguments: {e!r}"
    return None


def _entry_point_parser(target: str, context: pathlib.Path) -> Callable[[], argparse.ArgumentParser] | None:
    """``build_parser`` of the module defining the console script ``module:function``, when there is one."""
    module_name, _, func_name = target.partition(":")
    if str(context) not in sys.path:
        sys.path.insert(0, str(context))
    try:
        module = importlib.import_module(module_name)
        func = getattr(module, func_name.split(".")[0]) if func_name else module
        defining = sys.modules.get(getattr(func, "__module__", module_name), module)
    except Exception:
        return None
    build = getattr(defining, "build_parser", None) or getattr(module, "build_parser", None)
    return build if callable(build) else None


def _script_parser(path: pathlib.Path) -> Callable[[], argparse.ArgumentParser] | None:
    """``build_parser`` of the Python script at ``path`` (imported, not run), when it has one."""
    try:
        spec = importlib.util.spec_from_file_location(f"_compose_check_{path.stem}", path)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception:
        return None
    build = getattr(module, "build_parser", None)
    return build if callable(build) else None


@dataclass
class Container:
    """One service's container: its image, working directory and bind mounts (container path → host path)."""

    image: Image
    workdir: str
    binds: dict[str, pathlib.Path]

    def file(self, path: str) -> pathlib.Path | None:
        path = _abs(path, self.workdir)
        for target, source in sorted(self.binds.items(), key=lambda kv: -len(kv[0])):
            if path == target or path.startswith(target.rstrip("/") + "/"):
                candidate = source / path[len(target) :].lstrip("/") if path != target else source
                return candidate if candidate.exists() else None
        return self.image.file(path)


def check_command(argv: list[str], box: Container) -> list[str]:
    """Problems with running ``argv`` (the final command line, entry point included) in ``box``."""
    if not argv:
        return ["empty command"]
    program, args = argv[0], argv[1:]
    image = box.image
    if program in PYTHONS and isinstance(image, ProjectImage):
        return _check_python(args, box, image)
    if program in SHELLS or program.rsplit("/", 1)[-1] in ("sh", "bash"):
        return _check_shell(args, box)
    if not image.has_program(program):
        return [f"{program!r} is not a program of the image {image.name!r}"]
    if isinstance(image, ProjectImage) and program in image.scripts:
        build = _entry_point_parser(image.scripts[program], image.context)
        if build is not None:
            error = _parse_with(build, args)
            if error:
                return [f"`{shlex.join(argv)}` is rejected by {program}: {error}"]
    return []


def _check_python(args: list[str], box: Container, image: ProjectImage) -> list[str]:
    if not args:
        return ["python without a script or module"]
    if args[0] == "-m":
        if len(args) < 2:
            return ["python -m without a module"]
        return _check_module(args[1], box, image)
    if args[0].startswith("-"):
        return [f"python option {args[0]!r} is not checked: use `python <script>` or `python -m <module>`"]
    source = box.file(args[0])
    if source is None:
        return [f"python script {args[0]!r} is not in the image (working directory {box.workdir})"]
    build = _script_parser(source)
    if build is not None:
        error = _parse_with(build, args[1:])
        if error:
            return [f"`python {shlex.join(args)}` is rejected by the script: {error}"]
    return []


def _check_module(module: str, box: Container, image: ProjectImage) -> list[str]:
    rel = module.replace(".", "/")
    top = module.split(".")[0]
    dirs = [box.workdir]
    if any(fnmatch.fnmatchcase(top, pattern) for pattern in image.packages()):
        dirs += image.df.pip_dirs  # installed by pip install . from there
    found = any(box.file(_abs(f"{rel}{suffix}", d)) for d in dirs for suffix in (".py", "/__main__.py"))
    if not found:
        return [f"module {module!r} is not in the image"]
    extras = image.pyproject.get("project", {}).get("optional-dependencies", {})
    if top in extras and top not in image.extras():
        return [f"module {module!r} needs the {top!r} extra: build with args EXTRAS: {top!r}"]
    return []


def _check_shell(args: list[str], box: Container) -> list[str]:
    if not args:
        return ["a shell without a script"]
    if args[0] == "-c":
        if len(args) < 2:
            return ["sh -c without a script"]
        return _check_shell_script(args[1], box)
    if box.file(args[0]) is None:
        return [f"shell script {args[0]!r} is not in the container (image files or bind mounts)"]
    return []


def _check_shell_script(script: str, box: Container) -> list[str]:
    """The first program of a shell script must exist; a simple script (no shell syntax) is checked whole."""
    try:
        words = shlex.split(script)
    except ValueError as e:
        return [f"cannot split the shell command {script!r}: {e}"]
    if not words:
        return ["empty shell command"]
    if re.search(r"[|;&<>()$`]", script):
        first = words[0]
        return [] if box.image.has_program(first) else [f"{first!r} is not a program of the image {box.image.name!r}"]
    return check_command(words, box)


# ---------------------------------------------------------------------------------------------
# The compose file
# ---------------------------------------------------------------------------------------------

TOP_KEYS = {"name", "version", "services", "volumes", "networks", "configs", "secrets", "include"}
SERVICE_KEYS = {
    "build", "image", "command", "entrypoint", "environment", "env_file", "depends_on", "healthcheck", "volumes",
    "deploy", "profiles", "restart", "working_dir", "user", "ports", "expose", "stop_grace_period", "stop_signal",
    "init", "networks", "labels", "logging", "container_name", "hostname", "tmpfs", "ulimits", "read_only",
    "cap_add", "cap_drop", "security_opt", "pull_policy", "platform", "shm_size", "extra_hosts", "sysctls",
    "secrets", "configs", "scale", "mem_limit", "cpus",
}  # fmt: skip
CONDITIONS = {"service_started", "service_healthy", "service_completed_successfully"}
DURATION = re.compile(r"([0-9]+(\.[0-9]+)?(us|ms|s|m|h))+\Z")
RESTART = re.compile(r"(no|always|unless-stopped|on-failure(:[0-9]+)?)\Z")


def _argv(value: Any, what: str, problems: list[str], svc: str) -> list[str] | None:
    """A command or entry point as a list (the string form is split like compose does)."""
    if value is None:
        return None
    if isinstance(value, str):
        return shlex.split(value)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    problems.append(f"service {svc!r}: {what} must be a string or a list of strings")
    return None


def _depends_on(value: Any) -> dict[str, str]:
    if isinstance(value, list):
        return {str(v): "service_started" for v in value}
    if isinstance(value, dict):
        return {k: str((v or {}).get("condition", "service_started")) if isinstance(v, dict) else "?" for k, v in value.items()}
    return {}


def validate(
    compose_path: str | pathlib.Path = DEFAULT_COMPOSE,
    dockerfile_path: str | pathlib.Path | None = None,
    *,
    project_dir: str | pathlib.Path | None = None,
) -> list[str]:
    """The problems of the compose file (an empty list: it passes).

    Args:
        compose_path: the compose file.
        dockerfile_path: the Dockerfile the project image is built from (default: each build's own
            ``dockerfile``). Every build's ``dockerfile`` must exist either way.
        project_dir: the directory relative paths in the compose file start from (default: the
            compose file's directory, as compose does).
    """
    compose_path = pathlib.Path(compose_path)
    base = pathlib.Path(project_dir) if project_dir is not None else compose_path.parent
    fname = compose_path.name
    try:
        doc = parse_yaml(compose_path.read_text())
    except OSError as e:
        return [f"{fname}: cannot read: {e}"]
    except YamlSubsetError as e:
        return [f"{fname}: {e}"]
    problems: list[str] = []
    if not isinstance(doc, dict) or not isinstance(doc.get("services"), dict) or not doc["services"]:
        return [f"{fname}: no services"]
    doc = interpolate(doc, problems)
    for key in doc:
        if key not in TOP_KEYS and not key.startswith("x-"):
            problems.append(f"{fname}: unknown top-level key {key!r}")
    volumes = doc.get("volumes") or {}
    services: dict[str, Any] = doc["services"]

    # the images: those built here first, so services that only name them find them
    dockerfiles: dict[pathlib.Path, Dockerfile] = {}
    built: dict[str, ProjectImage] = {}
    images: dict[str, Image | None] = {}
    for svc, spec in services.items():
        if not isinstance(spec, dict):
            problems.append(f"service {svc!r}: must be a mapping")
            continue
        build = spec.get("build")
        if build is None:
            continue
        if isinstance(build, str):
            build = {"context": build}
        if not isinstance(build, dict):
            problems.append(f"service {svc!r}: build must be a path or a mapping")
            images[svc] = None
            continue
        context = (base / str(build.get("context", "."))).resolve()
        declared = context / str(build.get("dockerfile", "Dockerfile"))
        if not context.is_dir():
            problems.append(f"service {svc!r}: build context {build.get('context')!r} is not a directory ({context})")
            images[svc] = None
            continue
        if not declared.is_file():
            problems.append(f"service {svc!r}: Dockerfile {build.get('dockerfile', 'Dockerfile')!r} does not exist in {context}")
            images[svc] = None
            continue
        df_path = pathlib.Path(dockerfile_path).resolve() if dockerfile_path is not None else declared.resolve()
        if df_path not in dockerfiles:
            dockerfiles[df_path] = parse_dockerfile(df_path, context)
            problems += dockerfiles[df_path].problems
        df = dockerfiles[df_path]
        args = {str(k): "" if v is None else str(v) for k, v in (build.get("args") or {}).items()}
        for arg in args:
            if arg not in df.args:
                problems.append(f"service {svc!r}: build argument {arg!r} is not an ARG of {df_path.name}")
        project = ProjectImage(str(spec.get("image") or svc), context, df, args)
        for need in _install_needs(project):
            problems.append(f"{df_path.name}: {need}")
        images[svc] = project
        if spec.get("image"):
            built[str(spec["image"])] = project

    for svc, spec in services.items():
        if not isinstance(spec, dict):
            continue
        where = f"service {svc!r}"
        for key in spec:
            if key not in SERVICE_KEYS and not key.startswith("x-"):
                problems.append(f"{where}: unknown key {key!r}")
        if svc not in images:
            name = spec.get("image")
            if not name:
                problems.append(f"{where}: needs an image or a build")
                continue
            name = str(name)
            if name in built:
                images[svc] = built[name]
            elif ExternalImage.repository(name) in ExternalImage.KNOWN:
                if ":" not in name.rsplit("/", 1)[-1] or name.endswith(":latest"):
                    problems.append(f"{where}: pin the image {name!r} to a version tag")
                images[svc] = ExternalImage(name)
            else:
                problems.append(f"{where}: the image {name!r} is neither built here nor known to this checker")
                continue
        image = images[svc]
        if image is None:
            continue
        image_workdir = image.df.workdir if isinstance(image, ProjectImage) else "/"
        binds = _binds(spec, base, volumes, where, problems)
        box = Container(image, _abs(str(spec.get("working_dir") or ""), image_workdir), binds)

        entrypoint = _argv(spec.get("entrypoint"), "entrypoint", problems, svc)
        command = _argv(spec.get("command"), "command", problems, svc)
        if entrypoint is not None:
            argv = entrypoint + (command or [])  # a service entrypoint drops the image's CMD
        else:
            argv = image.effective(image.entrypoint() + (command if command is not None else image.cmd()))
        problems += [f"{where}: command: {p}" for p in check_command(argv, box)]
        problems += _check_healthcheck(spec.get("healthcheck"), box, where)
        problems += _check_depends(svc, spec, services, where)
        problems += _check_misc(spec, where)
    return list(dict.fromkeys(problems))  # each once, in order (several services share the image)


def _install_needs(image: ProjectImage) -> list[str]:
    """What ``pip install .`` needs and the image does not have."""
    if not image.df.pip_dirs:
        return []
    where = image.df.pip_dirs[0]
    needs = []
    readme = image.pyproject.get("project", {}).get("readme")
    for rel in ("pyproject.toml", readme if isinstance(readme, str) else None):
        if rel and image.file(_abs(rel, where)) is None:
            needs.append(f"`pip install .` in {where} needs {rel}, which is not copied there")
    for pattern in image.packages():
        for pkg in sorted(p.name for p in image.context.glob(pattern) if (p / "__init__.py").is_file()):
            if image.file(_abs(f"{pkg}/__init__.py", where)) is None:
                needs.append(f"`pip install .` in {where} needs the package {pkg}/, which is not copied there")
    return needs


def _binds(
    spec: dict[str, Any], base: pathlib.Path, volumes: dict[str, Any], where: str, problems: list[str]
) -> dict[str, pathlib.Path]:
    """Bind mounts (container path → host path); checks that bind sources exist and named volumes are declared."""
    binds: dict[str, pathlib.Path] = {}
    for entry in spec.get("volumes") or []:
        if isinstance(entry, dict):
            source, target, kind = str(entry.get("source", "")), str(entry.get("target", "")), entry.get("type", "volume")
        else:
            parts = str(entry).split(":")
            if len(parts) == 1:
                continue  # an anonymous volume
            source, target = parts[0], parts[1]
            kind = "bind" if source.startswith((".", "/", "~")) else "volume"
        if kind == "bind":
            host = (base / source).resolve() if not source.startswith("/") else pathlib.Path(source)
            if not host.exists():
                problems.append(f"{where}: bind-mounted {source!r} does not exist ({host})")
            binds[_abs(target, "/")] = host
        elif kind == "volume" and source and source not in volumes:
            problems.append(f"{where}: volume {source!r} is not declared under the top-level volumes")
    return binds


def _check_healthcheck(check: Any, box: Container, where: str) -> list[str]:
    if check is None:
        return []
    if not isinstance(check, dict):
        return [f"{where}: healthcheck must be a mapping"]
    problems = []
    test = check.get("test")
    if isinstance(test, str):
        test = ["CMD-SHELL", test]
    if not isinstance(test, list) or not test or not all(isinstance(t, str) for t in test):
        problems.append(f"{where}: healthcheck test must be a list (CMD …, CMD-SHELL …) or a string")
    elif test[0] == "CMD":
        problems += [f"{where}: healthcheck: {p}" for p in check_command(test[1:], box)]
    elif test[0] == "CMD-SHELL":
        if len(test) != 2:
            problems.append(f"{where}: healthcheck CMD-SHELL takes one string")
        else:
            problems += [f"{where}: healthcheck: {p}" for p in _check_shell_script(test[1], box)]
    elif test[0] != "NONE":
        problems.append(f"{where}: healthcheck test must start with CMD, CMD-SHELL or NONE")
    for key in ("interval", "timeout", "start_period", "start_interval"):
        if key in check and not DURATION.match(str(check[key])):
            problems.append(f"{where}: healthcheck {key} {check[key]!r} is not a duration such as 5s")
    if "retries" in check and not (isinstance(check["retries"], int) and check["retries"] >= 0):
        problems.append(f"{where}: healthcheck retries must be a whole number")
    return problems


def _profiles(spec: dict[str, Any]) -> set[str]:
    return {str(p) for p in spec.get("profiles") or []}


def _check_depends(svc: str, spec: dict[str, Any], services: dict[str, Any], where: str) -> list[str]:
    problems = []
    mine = _profiles(spec)
    for dep, condition in _depends_on(spec.get("depends_on")).items():
        target = services.get(dep)
        if not isinstance(target, dict):
            problems.append(f"{where}: depends on {dep!r}, which is not a service")
            continue
        if condition not in CONDITIONS:
            problems.append(f"{where}: depends_on {dep!r}: unknown condition {condition!r}")
        if condition == "service_healthy" and not target.get("healthcheck"):
            problems.append(f"{where}: waits for {dep!r} to be healthy, but {dep!r} has no healthcheck")
        theirs = _profiles(target)
        if theirs and (not mine or not mine <= theirs):
            problems.append(f"{where}: depends on {dep!r}, which is not enabled whenever {svc!r} is (profiles)")
    if svc in _depends_on(spec.get("depends_on")):
        problems.append(f"{where}: depends on itself")
    return problems


def _check_misc(spec: dict[str, Any], where: str) -> list[str]:
    problems = []
    if "restart" in spec and not RESTART.match(str(spec["restart"])):
        problems.append(f"{where}: restart {spec['restart']!r} is not no, always, unless-stopped or on-failure")
    replicas = (spec.get("deploy") or {}).get("replicas", 1) if isinstance(spec.get("deploy") or {}, dict) else 1
    if not isinstance(replicas, int) or replicas < 0:
        problems.append(f"{where}: deploy.replicas must be a whole number")
    elif replicas > 1 and spec.get("container_name"):
        problems.append(f"{where}: container_name cannot be used with {replicas} replicas")
    if "stop_grace_period" in spec and not DURATION.match(str(spec["stop_grace_period"])):
        problems.append(f"{where}: stop_grace_period {spec['stop_grace_period']!r} is not a duration")
    env = spec.get("environment")
    if env is not None and not isinstance(env, dict | list):
        problems.append(f"{where}: environment must be a mapping or a list")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compose_check.py", description="check a compose file and its Dockerfile without Docker")
    p.add_argument("compose", nargs="?", default=str(DEFAULT_COMPOSE))
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
