"""Fuzz: bad gate files, benchmarks and run options. ``run`` refuses each with exit 2 and one line
naming the file (or option) and the field, a hint, and writes nothing: no run folder, no lock, no
commit, nothing in $TMPDIR."""

from __future__ import annotations

import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from refusal import refused  # noqa: E402

from harnessevolve.core import paths  # noqa: E402

MODEL = "scripted/policy:learner"


def run(harness: Path, *extra: str, benchmark: str | Path = "shell-basics") -> list[str]:
    return ["run", "-H", str(harness), "-b", str(benchmark), "-n", "1", "--model", MODEL, *extra]


GATE_CASES: list[tuple[str, str | bytes | None, str]] = [
    ("confidence-nan", "version: 1\nperformance:\n  confidence: .nan\n", "performance.confidence"),
    ("min-gain-inf", "version: 1\nperformance:\n  min_gain: .inf\n", "performance.min_gain"),
    ("recent-drop-minus-inf", "version: 1\nperformance:\n  max_recent_drop: -.inf\n", "max_recent_drop"),
    ("power-nan", "version: 1\nperformance:\n  mode: sequential\n  power: .nan\n", "performance.power"),
    ("leakage-threshold-nan", "version: 1\nleakage:\n  threshold: .nan\n", "leakage.threshold"),
    ("heldout-max-drop-inf", "version: 1\nheldout:\n  max_drop: .inf\n", "heldout.max_drop"),
    ("prompt-cap-inf", "version: 1\nquality:\n  max_prompt_chars: .inf\n", "quality.max_prompt_chars"),
    ("unknown-key", "version: 1\nquality:\n  max_prompt_chars: 10\n  colour: blue\n", "colour"),
    ("not-utf8", b"version: 1\nquality: \xff\xfe\n", ""),
    ("a-list", "- 1\n- 2\n", "(top level)"),
    ("bad-yaml", "version: [1\n", "line"),
    ("deep", "[" * 5000 + "]" * 5000, ""),
    ("a-folder", None, ""),
]  # fmt: skip


@pytest.mark.parametrize(("content", "field"), [c[1:] for c in GATE_CASES], ids=[c[0] for c in GATE_CASES])
def test_bad_gates_file(harness_dir: Path, tmp_path: Path, content, field: str) -> None:
    gates = tmp_path / "gates.yaml"
    if content is None:
        gates.mkdir()
    elif isinstance(content, bytes):
        gates.write_bytes(content)
    else:
        gates.write_text(content)
    refused(tmp_path, run(harness_dir, "--gates", str(gates)), file="gates.yaml", field=field or None)


def test_missing_gates_file(harness_dir: Path, tmp_path: Path) -> None:
    refused(tmp_path, run(harness_dir, "--gates", str(tmp_path / "nope.yaml")), file="nope.yaml", field=None)


def copy_bench(tmp_path: Path) -> Path:
    source = paths.builtin_dir("benchmarks") / "shell-basics"
    target = tmp_path / "bench"
    shutil.copytree(source, target)
    shutil.copytree(paths.builtin_dir("trajectories") / "shell-basics", target / "trajectories")
    return target


def every_split(to: str) -> Callable[[Path], None]:
    def change(bench: Path) -> None:
        for task in (bench / "tasks").glob("*.yaml"):
            task.write_text(re.sub(r"^split: \w+$", f"split: {to}", task.read_text(), flags=re.M))

    return change


def first_task(change: Callable[[str], str | bytes]) -> Callable[[Path], None]:
    def apply(bench: Path) -> None:
        task = bench / "tasks" / "count-lines-01.yaml"
        new = change(task.read_text())
        task.write_bytes(new) if isinstance(new, bytes) else task.write_text(new)

    return apply


def bad_regex(text: str) -> str:
    return text.replace("  match: number\n", "  match: regex\n", 1).replace(
        "expected: '11'", "expected: '(11'", 1
    )


BENCH_CASES: list[tuple[str, Callable[[Path], None], str, str | None]] = [
    ("no-validation-tasks", every_split("train"), "bench", "split"),
    ("no-train-tasks", every_split("validation"), "bench", "split"),
    ("regex-does-not-compile", first_task(bad_regex), "count-lines-01.yaml", "checker[0].expected"),
    ("task-not-utf8", first_task(lambda t: t.encode() + b"\xff\xfe"), "count-lines-01.yaml", None),
    ("task-split-unknown", first_task(lambda t: t.replace("split: train", "split: training")),
     "count-lines-01.yaml", "split"),
    ("task-deep-yaml", first_task(lambda t: "[" * 5000 + "]" * 5000), "count-lines-01.yaml", None),
    ("task-is-a-list", first_task(lambda t: "- 1\n"), "count-lines-01.yaml", None),
]  # fmt: skip


@pytest.mark.parametrize(
    ("mutate", "file", "field"), [c[1:] for c in BENCH_CASES], ids=[c[0] for c in BENCH_CASES]
)
def test_bad_benchmark(harness_dir: Path, tmp_path: Path, mutate, file: str, field: str | None) -> None:
    bench = copy_bench(tmp_path)
    mutate(bench)
    refused(tmp_path, run(harness_dir, benchmark=bench), file=file, field=field)


def harbor_suite(tmp_path: Path, verifier: str) -> Path:
    suite = tmp_path / "suite"
    shutil.copytree(paths.builtin_dir("benchmarks") / "harbor-example", suite)
    toml = suite / "count-words" / "task.toml"
    toml.write_text(re.sub(r"(?ms)^\[verifier\]\n.*?\n\n", f"[verifier]\n{verifier}\n\n", toml.read_text()))
    return suite


HARBOR_CASES = [
    ("timeout-text", 'timeout_sec = "abc"'),
    ("timeout-negative", "timeout_sec = -5.0"),
    ("timeout-zero", "timeout_sec = 0"),
    ("timeout-nan", "timeout_sec = nan"),
    ("timeout-inf", "timeout_sec = inf"),
    ("timeout-bool", "timeout_sec = true"),
]


@pytest.mark.parametrize("verifier", [c[1] for c in HARBOR_CASES], ids=[c[0] for c in HARBOR_CASES])
def test_bad_harbor_timeout(harness_dir: Path, tmp_path: Path, verifier: str) -> None:
    suite = harbor_suite(tmp_path, verifier)
    refused(
        tmp_path,
        run(harness_dir, benchmark=f"harbor:{suite}"),
        file="task.toml",
        field="verifier.timeout_sec",
    )


def test_bad_harbor_toml(harness_dir: Path, tmp_path: Path) -> None:
    suite = harbor_suite(tmp_path, "timeout_sec = 20.0")
    (suite / "count-words" / "task.toml").write_text("[verifier\n")
    refused(tmp_path, run(harness_dir, benchmark=f"harbor:{suite}"), file="task.toml", field=None)


OPTION_CASES = [
    ("model-unknown-provider", ["--model", "bogus-model"], "--model", None),
    ("model-unknown-local", ["--model", "local/no-such-model"], "--model", None),
    ("model-unknown-script", ["--model", "scripted/no-such-script"], "--model", None),
    ("optimizer-model-unknown", ["--optimizer-model", "bogus-model"], "--optimizer-model", None),
    ("track-unknown", ["--track", "bogus"], "--track", None),
    ("sandbox-unknown", ["--sandbox", "bogus"], "--sandbox", None),
    ("sampling-unknown", ["--sampling", "weird"], "--sampling", None),
    ("executor-unknown", ["--executor", "warp"], "--executor", None),
    ("proposer-unknown", ["--proposer", "magic"], "magic", None),
    ("sandbox-limits-garbage", ["--sandbox-limits", "cpu_s=abc"], "--sandbox-limits", None),
    ("benchmark-unknown", ["-b", "no-such-benchmark"], "--benchmark", None),
    ("resume-unknown-run", ["--resume", "no-such-run"], "--resume", None),
]


@pytest.mark.parametrize(
    ("extra", "file", "field"), [c[1:] for c in OPTION_CASES], ids=[c[0] for c in OPTION_CASES]
)
def test_bad_run_option(
    harness_dir: Path, tmp_path: Path, extra: list[str], file: str, field: str | None
) -> None:
    refused(tmp_path, run(harness_dir, *extra), file=file, field=field)


def two_revisions(harness: Path) -> None:
    import git

    (harness / "prompts" / "system.md").write_text(
        (harness / "prompts" / "system.md").read_text() + "Be brief.\n"
    )
    git.Repo(harness).git.commit("-qam", "a candidate")


GATE_COMMAND_CASES = [
    ("model-unknown", ["--model", "bogus-model"], "--model", None),
    ("gates-nan", ["--gates", "NAN_GATES"], "gates.yaml", "performance.confidence"),
    ("benchmark-without-validation", ["-b", "NO_VALIDATION"], "bench", "split"),
    ("junit-onto-a-folder", ["--junit", "A_FOLDER"], "a-folder", "--junit"),
]


@pytest.mark.parametrize(
    ("extra", "file", "field"), [c[1:] for c in GATE_COMMAND_CASES], ids=[c[0] for c in GATE_COMMAND_CASES]
)
def test_bad_gate_command(
    harness_dir: Path, tmp_path: Path, extra: list[str], file: str, field: str | None
) -> None:
    two_revisions(harness_dir)
    (tmp_path / "gates.yaml").write_text("version: 1\nperformance:\n  confidence: .nan\n")
    (tmp_path / "a-folder").mkdir()
    bench = copy_bench(tmp_path)
    every_split("train")(bench)
    values = {
        "NAN_GATES": str(tmp_path / "gates.yaml"),
        "NO_VALIDATION": str(bench),
        "A_FOLDER": str(tmp_path / "a-folder"),
    }
    extra = [values.get(x, x) for x in extra]
    args = ["gate", "-H", str(harness_dir), "-b", "shell-basics", "--model", MODEL, *extra]
    refused(tmp_path, args, file=file, field=field)
