"""The wheel is the product: built from the checkout, installed in a fresh virtual environment
outside it, it carries every template, gate config, built-in benchmark and reference it needs
(``init``, ``validate``, a scripted ``run``, ``gate`` and ``report --html`` all work there, with no
``HARNESSEVOLVE_HOME``), and ``refs import`` refuses to write into the installed package.

It takes about 15 s on an idle machine (building the wheel is most of it). It builds from a copy of
the sources, so nothing is written into the checkout. The fresh venv gets no network: the wheel
is installed with ``--no-deps``, and the dependencies come from this test's own environment
through a ``.pth`` line (which, unlike the editable install's finder, does not make the checkout
importable)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = (
    "pyproject.toml",
    "setup.py",
    "MANIFEST.in",
    "README.md",
    "harnessevolve",
    "harnesses",
    "gates",
    "benchmarks",
    "trajectories",
)
IGNORED = ("__pycache__", "*.pyc", ".harnessevolve", "*.egg-info")


def sh(*args: str | Path, cwd: Path, env: dict[str, str] | None = None, ok: tuple[int, ...] = (0,)) -> str:
    proc = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode in ok, f"{args} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout + proc.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    """(the venv's bin folder, the environment to run it in, a work folder outside the checkout)."""
    tmp = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HARNESSEVOLVE_HOME", "PYTHON"))}
    env |= {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    source = tmp / "src"  # a copy: the build writes build/ and *.egg-info, never into the checkout
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns(*IGNORED))
        else:
            source.mkdir(exist_ok=True)
            shutil.copy2(ROOT / name, source / name)
    sh(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        tmp / "dist",
        source,
        cwd=tmp,
        env=env,
    )
    (wheel,) = (tmp / "dist").glob("harnessevolve-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for needed in (
        "harnessevolve/_bundled/harnesses/shell-agent/harness.yaml",
        "harnessevolve/_bundled/gates/default.yaml",
        "harnessevolve/_bundled/benchmarks/shell-onecall/benchmark.yaml",
        "harnessevolve/_bundled/trajectories/shell-basics/lookup-key-01.json",
        "harnessevolve/models/policy.py",
        "harnessevolve/schemas/task.schema.json",
    ):
        assert needed in names, needed
    assert not any("/perf/" in n or "__pycache__" in n for n in names)
    venv = tmp / "venv"
    sh(sys.executable, "-m", "venv", "--without-pip", venv, cwd=tmp, env=env)
    site = Path(
        sh(
            venv / "bin" / "python",
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            cwd=tmp,
            env=env,
        ).strip()
    )
    # Installed before the dependencies are visible, so pip sees an empty venv.
    sh(
        sys.executable,
        "-m",
        "pip",
        "--python",
        venv / "bin" / "python",
        "install",
        "-q",
        "--no-deps",
        "--no-index",
        "--ignore-installed",
        wheel,
        cwd=tmp,
        env=env,
    )
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp / "work"
    work.mkdir()
    return venv / "bin", env, work


def test_the_installed_wheel_runs_the_whole_loop_outside_the_checkout(installed) -> None:
    bin_dir, env, work = installed
    he = bin_dir / "harnessevolve"
    where = sh(
        bin_dir / "python", "-c", "import harnessevolve; print(harnessevolve.__file__)", cwd=work, env=env
    )
    assert str(bin_dir.parent) in where and str(ROOT) not in where

    out = sh(he, "init", "h", cwd=work, env=env)
    assert "Created harness h from template shell-agent" in out
    assert "valid: shell-agent" in sh(he, "validate", "h", cwd=work, env=env)
    out = sh(he, "validate", "shell-onecall", cwd=work, env=env)
    assert "valid: benchmark shell-onecall (64 tasks" in out and "32 reference trajectories" in out

    on_basics = ("-H", "h", "-b", "shell-basics", "-m", "scripted/policy:learner", "--batch-size", "6")
    out = sh(he, "run", *on_basics, "-n", "2", cwd=work, env=env, ok=(0, 1))
    assert "accepted" in out and "ledger:" in out, out
    (run_dir,) = (work / "h" / ".harnessevolve" / "runs").iterdir()
    ledger = (run_dir / "ledger.jsonl").read_text()
    assert '"event": "run_finished"' in ledger and '"event": "candidate_accepted"' in ledger, out

    out = sh(he, "gate", *on_basics, "--baseline", "HEAD~1", cwd=work, env=env, ok=(0, 1))
    assert "quality" in out and "performance" in out, out

    out = sh(he, "report", "-H", "h", "--html", "report.html", cwd=work, env=env)
    html = (work / "report.html").read_text()
    assert "<html" in html and run_dir.name in html

    # An installed package's suites are read-only: references go to the user's reference folder.
    refs = work / "user-refs"
    out = sh(
        he,
        "refs",
        "import",
        "-b",
        "shell-basics",
        cwd=work,
        env={**env, "HARNESSEVOLVE_REFERENCES": str(refs)},
    )
    assert str(refs) in out and len(list((refs / "shell-basics").glob("*.json"))) >= 10
