"""Build hook: the wheel carries the repository's top-level data folders inside the package.

``harnesses/`` (init templates), ``gates/`` (gate configs), the built-in ``benchmarks/`` (not
``benchmarks/perf``, the measurement scripts) and ``trajectories/`` (their references) stay where
they are in the checkout; ``build_py`` copies them to ``harnessevolve/_bundled/<folder>/`` in the
build, which is where ``harnessevolve.core.paths`` looks first at run time. Everything else is in
pyproject.toml.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA_FOLDERS = ("harnesses", "gates", "benchmarks", "trajectories")
SKIPPED = {"__pycache__", ".pytest_cache", ".harnessevolve", "perf"}
"""Never bundled: caches, run state, and benchmarks/perf (measurement scripts, not a suite)."""


def _ignore(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n in SKIPPED or n.endswith((".pyc", ".pyo"))]


class BuildPyWithData(build_py):
    def run(self) -> None:
        super().run()
        if self.editable_mode:  # an editable install reads the checkout's folders directly
            return
        target = Path(self.build_lib) / "harnessevolve" / "_bundled"
        for folder in DATA_FOLDERS:
            source = ROOT / folder
            if source.is_dir():
                shutil.rmtree(target / folder, ignore_errors=True)
                shutil.copytree(source, target / folder, ignore=_ignore, symlinks=False)


setup(cmdclass={"build_py": BuildPyWithData})
