"""Performance, held-out and quality gates, and loading gate configurations."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from harnessevolve.core import paths
from harnessevolve.core.errors import GateConfigError
from harnessevolve.gate.config import (
    GateConfig,
    HeldoutConfig,
    LeakageConfig,
    PerformanceConfig,
    QualityConfig,
    load_gate_config,
)
from harnessevolve.gate.performance import heldout_gate, performance_gate
from harnessevolve.gate.quality import quality_gate
from harnessevolve.harness.load import read_files

PERF = PerformanceConfig(min_gain=0.0, max_recent_drop=0.25, recent_batches=2)


# --- performance ------------------------------------------------------------------------------------


def test_gain_at_or_above_min_gain_passes() -> None:
    verdict = performance_gate([0, 0, 1, 0], [1, 0, 1, 1], [], PerformanceConfig(min_gain=0.5))
    assert verdict.passed and verdict.gate == "performance"
    assert verdict.numbers["gain"] == 0.5
    assert verdict.numbers["current"] == 0.25 and verdict.numbers["candidate"] == 0.75
    assert verdict.numbers["tasks"] == 4


def test_gain_below_min_gain_fails() -> None:
    verdict = performance_gate([0, 0, 1, 0], [1, 0, 1, 0], [], PerformanceConfig(min_gain=0.5))
    assert not verdict.passed
    assert "batch gain +0.250 < +0.500" in verdict.reason


def test_a_tie_passes_with_min_gain_zero() -> None:
    assert performance_gate([1, 0, 1, 0], [0, 1, 0, 1], [], PERF).passed
    assert not performance_gate([1, 0, 1, 0], [0, 1, 0, 1], [], PerformanceConfig(min_gain=0.01)).passed


def test_a_loss_fails_with_min_gain_zero() -> None:
    verdict = performance_gate([1, 1, 1, 0], [1, 1, 0, 0], [], PERF)
    assert not verdict.passed and "-0.250" in verdict.reason


def test_a_tie_of_fractional_scores_passes_with_min_gain_zero() -> None:
    current = [1 / 3, 2 / 3, 1 / 2]
    candidate = [1 / 2, 2 / 3, 1 / 3]  # the same scores, on other tasks
    assert performance_gate(current, candidate, [], PERF).passed


def test_a_drop_on_a_recent_batch_beyond_max_recent_drop_fails() -> None:
    recent = [([1, 1], [1, 1]), ([1, 1, 1, 1], [1, 0, 0, 1])]  # second batch drops 0.5
    verdict = performance_gate([0, 0], [1, 1], recent, PERF)
    assert not verdict.passed
    assert "drop 0.500 on a previous batch > 0.250" in verdict.reason
    assert verdict.numbers["recent_drops"] == [0.0, 0.5]


def test_a_drop_equal_to_max_recent_drop_passes() -> None:
    recent = [([1, 1, 1, 1], [1, 1, 1, 0])]  # drop exactly 0.25
    verdict = performance_gate([0], [1], recent, PERF)
    assert verdict.passed
    assert verdict.numbers["recent_drops"] == [0.25]


def test_a_recent_gain_is_not_a_drop() -> None:
    assert performance_gate([0], [0], [([0, 0], [1, 1])], PERF).passed


@pytest.mark.parametrize(("recent_batches", "passed"), [(0, True), (1, True), (2, True), (3, False)])
def test_only_the_first_r_recent_batches_count(recent_batches: int, passed: bool) -> None:
    recent = [([1], [1]), ([0], [0]), ([1], [0])]  # newest first; only the oldest drops
    config = PerformanceConfig(min_gain=0.0, max_recent_drop=0.025, recent_batches=recent_batches)
    verdict = performance_gate([0], [0], recent, config)
    assert verdict.passed is passed
    assert len(verdict.numbers["recent_drops"]) == recent_batches


def test_gain_is_checked_before_recent_drops() -> None:
    verdict = performance_gate([1], [0], [([1], [0])], PERF)
    assert not verdict.passed and verdict.reason.startswith("batch gain")


# --- held-out -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("current", "candidate", "passed"),
    [
        ([1, 1, 1, 1], [1, 1, 1, 1], True),
        ([0, 0, 0, 0], [1, 1, 0, 0], True),
        ([1, 1, 1, 1], [1, 1, 1, 0], True),  # drop 0.25 == max_drop
        ([1, 1, 1, 1], [1, 1, 0, 0], False),  # drop 0.5
    ],
)
def test_heldout_gate(current: list[float], candidate: list[float], passed: bool) -> None:
    verdict = heldout_gate(current, candidate, HeldoutConfig(split="validation", max_drop=0.25))
    assert verdict.passed is passed
    assert verdict.gate == "heldout"
    assert verdict.numbers["split"] == "validation"
    assert verdict.numbers["drop"] == pytest.approx(sum(current) / 4 - sum(candidate) / 4)
    if not passed:
        assert "validation drop 0.500 > 0.250" in verdict.reason


def test_heldout_gate_default_epsilon_rejects_one_task_in_ten() -> None:
    assert not heldout_gate([1.0] * 10, [1.0] * 9 + [0.0], HeldoutConfig()).passed
    assert heldout_gate([1.0] * 50, [1.0] * 49 + [0.0], HeldoutConfig()).passed  # drop 0.02


EXACT_EPSILON_BUG = (
    "BUG: losing one task of 40 is a drop of exactly 0.025 (the default epsilon, on the default minibatch "
    "size), but 1.0 - 0.975 == 0.025000000000000022 in floats, so the gate says 'drop 0.025 > 0.025'"
)


def test_heldout_gate_accepts_a_drop_of_exactly_the_default_epsilon() -> None:
    assert heldout_gate([1.0] * 40, [1.0] * 39 + [0.0], HeldoutConfig()).passed


def test_performance_gate_accepts_a_recent_drop_of_exactly_the_default_epsilon() -> None:
    recent = [([1.0] * 40, [1.0] * 39 + [0.0])]
    assert performance_gate([0.0], [0.0], recent, PerformanceConfig()).passed


# --- quality --------------------------------------------------------------------------------------


@pytest.fixture
def harness_dir(tmp_path: Path) -> Path:
    dest = tmp_path / "shell-agent"
    shutil.copytree(paths.builtin_dir("harnesses") / "shell-agent", dest)
    return dest


EDITABLE = ("prompts/*.md", "skills/*/SKILL.md", "tools/*.yaml")


def test_quality_passes_an_unchanged_harness(harness_dir: Path) -> None:
    before = read_files(harness_dir)
    verdict = quality_gate(harness_dir, before, EDITABLE, QualityConfig())
    assert verdict.passed, verdict.reason
    assert verdict.numbers["changed"] == []
    assert verdict.numbers["new_examples"] == 0


def test_quality_passes_an_edit_of_an_editable_file(harness_dir: Path) -> None:
    before = read_files(harness_dir)
    (harness_dir / "prompts" / "system.md").write_text("Be careful.\n")
    verdict = quality_gate(harness_dir, before, EDITABLE, QualityConfig())
    assert verdict.passed, verdict.reason
    assert verdict.numbers["changed"] == ["prompts/system.md"]


def test_quality_fails_an_edit_of_a_non_editable_path(harness_dir: Path) -> None:
    before = read_files(harness_dir)
    yaml_path = harness_dir / "harness.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("max_steps: 5", "max_steps: 50"))
    verdict = quality_gate(harness_dir, before, EDITABLE, QualityConfig())
    assert not verdict.passed
    assert verdict.reason == "edits a path that is not editable: harness.yaml"


def test_quality_fails_a_new_file_outside_the_editable_paths(harness_dir: Path) -> None:
    before = read_files(harness_dir)
    (harness_dir / "notes.txt").write_text("hello\n")
    verdict = quality_gate(harness_dir, before, EDITABLE, QualityConfig())
    assert not verdict.passed and "notes.txt" in verdict.reason


def test_quality_fails_prompt_bloat(harness_dir: Path) -> None:
    before = read_files(harness_dir)
    verdict = quality_gate(harness_dir, before, EDITABLE, QualityConfig(max_prompt_chars=50))
    assert not verdict.passed
    assert verdict.reason.startswith("prompt bloat")
    assert verdict.numbers["prompt_chars"] > 50


def test_quality_counts_prompt_and_tool_definitions_against_the_models_window(
    harness_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = read_files(harness_dir)
    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_N_CTX", "4096")
    fits = quality_gate(harness_dir, before, EDITABLE, QualityConfig(), model="local/smollm2-135m")
    assert fits.passed, fits.reason
    assert fits.numbers["context_window"] == 4096 and fits.numbers["reply_tokens"] == 128
    prompt_only = fits.numbers["prompt_tokens"]
    assert fits.numbers["rendered_tokens"] > prompt_only  # the tool definitions count too
    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_N_CTX", "256")
    over = quality_gate(harness_dir, before, EDITABLE, QualityConfig(), model="local/smollm2-135m")
    assert not over.passed and over.reason.startswith("prompt overflows the model's window")
    assert "> 256 of local/smollm2-135m" in over.reason


def test_quality_counts_the_largest_tasks_context_and_tools_against_the_window(
    harness_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A task's context and the tools it adds ride on every call of its rollouts: they count too."""
    from harnessevolve.core.task_tools import TaskTool
    from harnessevolve.core.tasks import Check, Task

    before = read_files(harness_dir)
    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_N_CTX", "4096")
    check = (Check(type="answer", expected="x"),)
    small = Task("small", "hi", "train", check, context="Be polite.")
    tool = TaskTool("lookup_order", "Look an order up. " * 200, {"type": "object", "properties": {}})
    big = Task("big", "hi", "train", check, context="Refunds need a receipt. " * 600, tools=(tool,))
    alone = quality_gate(harness_dir, before, EDITABLE, QualityConfig(), model="local/smollm2-135m")
    assert alone.passed and alone.numbers["task_tokens"] == 0
    with_tasks = quality_gate(
        harness_dir, before, EDITABLE, QualityConfig(), model="local/smollm2-135m", tasks=[small, big]
    )
    assert not with_tasks.passed, with_tasks.numbers
    assert "of task big's context and tools" in with_tasks.reason
    assert with_tasks.numbers["largest_task"] == "big" and with_tasks.numbers["task_tokens"] > 3000
    # a harness tool of the same name is offered in the task tool's place (and counted with the harness)
    shadowed = TaskTool("bash", "Run it. " * 3000, {"type": "object", "properties": {}})
    small = Task("small", "hi", "train", check, context="Be polite.", tools=(shadowed,))
    fits = quality_gate(
        harness_dir, before, EDITABLE, QualityConfig(), model="local/smollm2-135m", tasks=[small]
    )
    assert fits.passed and 0 < fits.numbers["task_tokens"] < 20, fits.numbers


def example(i: int) -> str:
    return f'## Example\nTask: task {i}\nStep 1: call submit {{"answer": "{i}"}}\n'


@pytest.mark.parametrize(("added", "passed"), [(5, True), (6, False)])
def test_quality_limits_new_examples(harness_dir: Path, added: int, passed: bool) -> None:
    examples = harness_dir / "prompts" / "examples.md"
    examples.write_text(example(0))
    before = read_files(harness_dir)
    examples.write_text("\n".join(example(i) for i in range(added + 1)))
    verdict = quality_gate(harness_dir, before, EDITABLE, QualityConfig(max_new_examples=5))
    assert verdict.passed is passed, verdict.reason
    assert verdict.numbers["new_examples"] == added
    if not passed:
        assert verdict.reason == "adds 6 examples > 5"


def test_quality_does_not_count_example_headings_mid_line(harness_dir: Path) -> None:
    before = read_files(harness_dir)
    (harness_dir / "prompts" / "examples.md").write_text("see ## Example below\n" * 9)
    verdict = quality_gate(harness_dir, before, EDITABLE, QualityConfig(max_new_examples=0))
    assert verdict.passed, verdict.reason


def test_quality_fails_an_invalid_harness_yaml(harness_dir: Path) -> None:
    before = read_files(harness_dir)
    yaml_path = harness_dir / "harness.yaml"
    yaml_path.write_text(yaml_path.read_text().replace("max_steps: 5", "max_steps: 0"))
    verdict = quality_gate(harness_dir, before, EDITABLE + ("harness.yaml",), QualityConfig())
    assert not verdict.passed
    assert verdict.reason.startswith("invalid harness:")
    assert "loop.max_steps" in verdict.reason


def test_quality_fails_a_harness_that_does_not_load(harness_dir: Path) -> None:
    before = read_files(harness_dir)
    (harness_dir / "tools" / "bash.yaml").unlink()
    verdict = quality_gate(harness_dir, before, EDITABLE, QualityConfig())
    assert not verdict.passed and "tools/bash.yaml" in verdict.reason


# --- config ---------------------------------------------------------------------------------------


def test_load_gate_config_defaults() -> None:
    config = load_gate_config()
    assert config.source.endswith("default.yaml")
    assert config.quality == QualityConfig(max_prompt_chars=16000, max_new_examples=5)
    assert config.performance == PerformanceConfig(min_gain=0.0, max_recent_drop=0.025, recent_batches=2)
    assert config.heldout == HeldoutConfig(split="validation", max_drop=0.025)
    assert dataclasses_equal_ignoring_source(config, GateConfig())


def dataclasses_equal_ignoring_source(a: GateConfig, b: GateConfig) -> bool:
    return (a.quality, a.performance, a.heldout) == (b.quality, b.performance, b.heldout)


def test_load_gate_config_partial_file_keeps_other_defaults(tmp_path: Path) -> None:
    path = tmp_path / "strict.yaml"
    path.write_text("version: 1\nperformance:\n  mode: fixed\n  min_gain: 0.05\n  recent_batches: 4\n")
    config = load_gate_config(path)
    assert config.source == str(path)
    assert config.performance == PerformanceConfig(
        mode="fixed", min_gain=0.05, max_recent_drop=0.025, recent_batches=4
    )
    assert config.quality == QualityConfig()


@pytest.mark.parametrize("key", ["min_gain: 0.05", "max_recent_drop: 0.1", "accept_ties: true"])
def test_a_fixed_rule_key_under_the_pooled_default_is_an_error_not_ignored(tmp_path: Path, key: str) -> None:
    """A file without ``mode`` is pooled (the default): a fixed-rule threshold there would do
    nothing, so it is refused, naming the key and how to keep the fixed rule."""
    path = tmp_path / "strict.yaml"
    path.write_text(f"version: 1\nperformance:\n  {key}\n")
    with pytest.raises(GateConfigError) as raised:
        load_gate_config(path)
    name = key.split(":")[0]
    assert raised.value.field == f"performance.{name}" and "mode pooled" in str(raised.value)
    assert "mode: fixed" in raised.value.hint


@pytest.mark.parametrize(
    ("text", "field", "words"),
    [
        ("version: 1\nperformance:\n  min_gian: 0.1\n", "performance.min_gian", ["min_gian", "unknown key"]),
        ("version: 1\nqualty: {}\n", "qualty", ["qualty", "unknown key"]),
        ("version: 1\nperformance:\n  min_gain: high\n", "performance.min_gain", ["number"]),
        ("version: 1\nquality:\n  max_new_examples: 2.5\n", "quality.max_new_examples", ["integer"]),
        ("version: 1\nheldout:\n  split: test\n", "heldout.split", ["validation"]),
        ("quality: {}\n", "version", ["version", "missing"]),
    ],
)
def test_load_gate_config_errors_name_the_field(
    tmp_path: Path, text: str, field: str, words: list[str]
) -> None:
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    with pytest.raises(GateConfigError) as info:
        load_gate_config(path)
    assert info.value.file == str(path)
    assert info.value.field == field
    for word in words:
        assert word in info.value.message
    assert info.value.exit_code == 2


def test_load_gate_config_yaml_syntax_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "gate.yaml"
    path.write_text("version: 1\nquality:\n  max_prompt_chars: [1, 2\n")
    with pytest.raises(GateConfigError) as info:
        load_gate_config(path)
    assert info.value.field is not None and info.value.field.startswith("line ")


def test_load_gate_config_missing_file_is_an_error_not_defaults(tmp_path: Path) -> None:
    with pytest.raises(GateConfigError, match="file not found"):
        load_gate_config(tmp_path / "nope.yaml")


# --- leakage and noise-aware performance settings ---------------------------------------------------


def test_default_gate_config_has_leakage_and_the_pooled_performance_mode() -> None:
    config = load_gate_config()
    assert config.leakage == LeakageConfig()
    assert config.leakage.threshold == 0.8 and config.leakage.allow_train_demonstrations is True
    assert config.leakage.judge_model is None
    assert config.performance == PerformanceConfig()
    assert config.performance.mode == "pooled" and config.performance.accept_unopposed
    fixed = load_gate_config(Path("fixed")).performance
    assert (fixed.mode, fixed.min_gain, fixed.max_recent_drop, fixed.accept_ties) == (
        "fixed",
        0.0,
        0.025,
        False,
    )


def test_load_gate_config_sequential_mode(tmp_path: Path) -> None:
    path = tmp_path / "noise.yaml"
    path.write_text(
        "version: 1\nperformance:\n  mode: sequential\n  confidence: 0.9\n  power: 0.85\n"
        "  effect: 0.2\n  increment: 4\n  max_rollouts_per_task: 3\n"
        "leakage:\n  judge_model: openai/gpt-4o-mini\n  allow_train_demonstrations: false\n"
    )
    config = load_gate_config(path)
    assert config.performance == PerformanceConfig(
        mode="sequential", confidence=0.9, power=0.85, effect=0.2, increment=4, max_rollouts_per_task=3
    )
    assert config.leakage == LeakageConfig(judge_model="openai/gpt-4o-mini", allow_train_demonstrations=False)


@pytest.mark.parametrize(
    ("text", "field", "word"),
    [
        ("performance:\n  mode: bayes\n", "performance.mode", "bayes"),
        ("performance:\n  confidence: 1.0\n", "performance.confidence", "1.0"),
        ("performance:\n  max_rollouts_per_task: 0\n", "performance.max_rollouts_per_task", "0"),
        ("performance:\n  sequential: true\n", "performance.sequential", "unknown key"),
        ("leakage:\n  threshhold: 0.5\n", "leakage.threshhold", "unknown key"),
        ("leakage:\n  threshold: 0\n", "leakage.threshold", "0"),
        ("leakage:\n  ngram: 1\n", "leakage.ngram", "1"),
        ("performance:\n  confidence: 0.9\n  power: 0.05\n", "performance.power", "must exceed"),
    ],
)
def test_noise_and_leakage_settings_are_checked(tmp_path: Path, text: str, field: str, word: str) -> None:
    path = tmp_path / "gate.yaml"
    path.write_text("version: 1\n" + text)
    with pytest.raises(GateConfigError) as info:
        load_gate_config(path)
    assert info.value.field == field
    assert word in info.value.message


def test_quality_gate_caps_prompt_tokens(tmp_path) -> None:
    import shutil
    from pathlib import Path

    from harnessevolve.gate.config import QualityConfig
    from harnessevolve.gate.quality import quality_gate
    from harnessevolve.harness.load import load_harness

    target = tmp_path / "h"
    shutil.copytree(Path(__file__).parents[2] / "harnesses" / "shell-agent", target)
    before = load_harness(target).files
    (target / "prompts" / "system.md").write_text("Use the tools carefully. " * 200)
    tight = QualityConfig(max_prompt_chars=100_000, max_prompt_tokens=300)
    verdict = quality_gate(target, before, ("prompts/*.md",), tight, model="gpt-4o-mini")
    assert not verdict.passed and "tokens > cap 300" in verdict.reason
    assert verdict.numbers["prompt_tokens"] > 300
    roomy = QualityConfig(max_prompt_chars=100_000, max_prompt_tokens=10_000)
    assert quality_gate(target, before, ("prompts/*.md",), roomy, model="gpt-4o-mini").passed
