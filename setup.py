"""The build step of rocketredis's wheel and sdist (D123); the metadata is in pyproject.toml.

The RocketMQ endpoint (``mq proxy``) imports protobuf and gRPC modules that protoc generates from
``mq/proxy/protos``. They are generated here, at build time, with the ``grpcio-tools`` pinned in
pyproject.toml's build requirements, so an installed ``rocketredis[proxy]`` needs neither
``grpcio-tools`` nor a writable ``site-packages``:

- ``build_py`` writes them into the build tree, which becomes the wheel (never copied from a source
  checkout's ``mq/proxy/_pb``, which a different ``grpcio-tools`` may have made);
- ``sdist`` writes them into the release tree too, so the sdist carries what its wheel will carry;
  building a wheel from the sdist generates them again, offline, with the same pinned compiler;
- an editable install (``pip install -e``, ``make``) generates them into the checkout when they are
  missing or older than the ``.proto`` files.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
GENERATED = Path("mq", "proxy", "_pb")


def _generator() -> ModuleType:
    """``mq/proxy/generate.py`` loaded by its path: importing ``mq`` would need the package's
    dependencies, which the build environment does not have."""
    spec = importlib.util.spec_from_file_location("_rocketredis_generate", ROOT / "mq" / "proxy" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class BuildPy(build_py):
    """``build_py`` that also generates the endpoint's protobuf and gRPC modules."""

    def run(self) -> None:
        super().run()
        generator = _generator()
        if self.editable_mode:
            if not generator.up_to_date():
                generator.generate()
        else:
            generator.generate(Path(self.build_lib) / GENERATED)


class Sdist(sdist):
    """``sdist`` whose archive carries the generated modules beside the ``.proto`` files."""

    def make_release_tree(self, base_dir: str, files: list[str]) -> None:
        super().make_release_tree(base_dir, files)
        _generator().generate(Path(base_dir) / GENERATED)


setup(cmdclass={"build_py": BuildPy, "sdist": Sdist})
