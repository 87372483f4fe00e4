"""The leakage gate: n-gram and answer matching on an edit's added text, train demonstrations, the judge."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from harnessevolve.cli.app import app
from harnessevolve.core.tasks import Benchmark, Check, Task, load_benchmark
from harnessevolve.gate.config import LeakageConfig
from harnessevolve.gate.leakage import added_chunks, aleakage_gate, leakage_gate, parse_judge_reply
from harnessevolve.models.scripted import register_script, unregister_script
from harnessevolve.optimize.proposal import ReferenceAction
from harnessevolve.optimize.reference_diff import render_demonstration
from harnessevolve.proposing.context import reference_actions
from harnessevolve.scoring.references import load_references

CONFIG = LeakageConfig()
EXAMPLES = "prompts/examples.md"


def task(task_id: str, instruction: str, split: str = "validation", answer: str | None = None) -> Task:
    checks = (Check("answer", expected=answer),) if answer else ()
    return Task(task_id, instruction, split, checks, answer=answer)  # type: ignore[arg-type]


def edit(added: str, before: str = "# Examples\n") -> tuple[dict[str, str], dict[str, str]]:
    return {EXAMPLES: before}, {EXAMPLES: before + added}


# 16 words, so 9 distinct 8-grams
LONG = "Open the ledger file called accounts and report the total of the amount column right now"
TASKS = (
    task("v1", LONG, answer="4711.25"),
    task("v2", "What word is written in note.txt? Answer with just that word.", answer="zebra"),
    task("t1", "How many lines are in entries.txt?", split="test", answer="13"),
    task("tr1", "Read password.txt and tell me the word inside it.", split="train", answer="iris"),
    task("v3", "Move draft.txt into a folder named old, then submit done.", answer="done"),
)


def test_an_edit_without_task_text_passes() -> None:
    verdict = leakage_gate(*edit("Always read the file before answering.\n"), TASKS, CONFIG)
    assert verdict.passed and verdict.gate == "leakage"
    assert verdict.numbers["max_score"] == 0.0 and verdict.numbers["max_task"] is None
    assert verdict.numbers["added_words"] == 6
    assert verdict.numbers["protected_tasks"] == 4  # train task tr1 is not protected


def test_a_validation_instruction_copied_whole_fails() -> None:
    verdict = leakage_gate(*edit(f"## Example\nTask: {LONG}\n"), TASKS, CONFIG)
    assert not verdict.passed
    assert verdict.reason == "embeds validation task v1: instruction scores 1.00 >= 0.80"
    assert verdict.numbers["top"][0] == {
        "task": "v1",
        "split": "validation",
        "score": 1.0,
        "via": "instruction",
    }


def test_case_punctuation_and_json_escaping_do_not_hide_a_copy() -> None:
    hidden = json.dumps({"note": LONG.upper().replace(" ", ",  ")})
    assert not leakage_gate(*edit(hidden + "\n"), TASKS, CONFIG).passed


def test_a_short_test_instruction_counts_when_found_whole() -> None:
    verdict = leakage_gate(*edit("Q: how many lines are in entries.txt? A: 13\n"), TASKS, CONFIG)
    assert not verdict.passed and "test task t1" in verdict.reason


@pytest.mark.parametrize(("kept", "score"), [(16, 1.0), (12, 5 / 9), (8, 1 / 9), (7, 0.0)])
def test_the_instruction_score_is_the_share_of_its_ngrams_found(kept: int, score: float) -> None:
    prefix = " ".join(LONG.split()[:kept])
    verdict = leakage_gate(*edit(prefix + "\n"), TASKS, CONFIG)
    assert verdict.numbers["max_score"] == pytest.approx(score, abs=1e-3)
    assert verdict.passed is (score < 0.8)


def test_the_threshold_and_ngram_come_from_the_config() -> None:
    prefix = " ".join(LONG.split()[:14]) + "\n"  # 7 of 9 8-grams, 11 of 13 4-grams
    assert leakage_gate(*edit(prefix), TASKS, CONFIG).passed
    assert not leakage_gate(*edit(prefix), TASKS, replace(CONFIG, threshold=0.75)).passed
    assert not leakage_gate(*edit(prefix), TASKS, replace(CONFIG, ngram=4)).passed


def test_a_distinctive_answer_fails_alone() -> None:
    verdict = leakage_gate(*edit("If a task mentions note.txt, the answer is zebra.\n"), TASKS, CONFIG)
    assert not verdict.passed
    assert verdict.reason == "embeds validation task v2: answer 'zebra' scores 1.00 >= 0.80"


def test_a_numeric_answer_of_four_characters_or_more_counts() -> None:
    assert not leakage_gate(*edit("The total is 4711.25 as usual.\n"), TASKS, CONFIG).passed


@pytest.mark.parametrize("text", ["Count to 13 and submit done.", "Submit done when finished."])
def test_short_and_common_answers_never_block(text: str) -> None:
    verdict = leakage_gate(*edit(text + "\n"), TASKS, CONFIG)
    assert verdict.passed, verdict.reason
    assert verdict.numbers["max_score"] == 0.0


def test_answers_match_whole_words_only() -> None:
    assert leakage_gate(*edit("zebras and zebrafish are animals\n"), TASKS, CONFIG).passed


def test_min_answer_chars_is_configurable() -> None:
    strict = replace(CONFIG, min_answer_chars=2)
    assert not leakage_gate(*edit("Count to 13.\n"), TASKS, strict).passed


def test_only_added_text_counts() -> None:
    before = f"# Examples\nTask: {LONG}\n"  # an old leak is not this edit's doing
    verdict = leakage_gate({EXAMPLES: before}, {EXAMPLES: before + "Be brief.\n"}, TASKS, CONFIG)
    assert verdict.passed and verdict.numbers["added_words"] == 2


def test_a_new_file_counts_whole_and_a_deleted_file_adds_nothing() -> None:
    assert not leakage_gate({}, {"skills/x/SKILL.md": f"Task: {LONG}\n"}, TASKS, CONFIG).passed
    assert leakage_gate({"old.md": f"Task: {LONG}\n"}, {}, TASKS, CONFIG).passed


def test_added_chunks_are_the_inserted_and_replaced_lines() -> None:
    assert added_chunks("a\nb\nc\n", "a\nB x\nc\nd\n") == [["b", "x"], ["d"]]


def test_a_train_demonstration_is_allowed_and_reported() -> None:
    demo = "## Example\nTask: Read password.txt and tell me the word inside it.\nResult: iris\n"
    verdict = leakage_gate(*edit(demo), TASKS, CONFIG)
    assert verdict.passed, verdict.reason
    assert verdict.numbers["train_demonstrations"] == ["tr1"]
    assert "allowed by allow_train_demonstrations" in verdict.reason
    strict = leakage_gate(*edit(demo), TASKS, replace(CONFIG, allow_train_demonstrations=False))
    assert not strict.passed and "train task tr1" in strict.reason


TEMPLATED = (
    task("train-a", "items.txt has one entry per line. How many entries are there?", "train", "23"),
    task("train-b", "Which word in list.txt comes first? The file lists coral and fjord.", "train", "coral"),
    task("val-a", "list.txt has one entry per line. How many entries are there?", "validation", "6"),
    task("val-b", "Which word in words.txt comes first in alphabetical order?", "validation", "coral"),
)


def test_template_text_shared_with_train_tasks_is_no_evidence() -> None:
    demo = "Task: items.txt has one entry per line. How many entries are there?\n"
    verdict = leakage_gate(*edit(demo), TEMPLATED, CONFIG)
    assert verdict.passed, verdict.reason  # 4 of val-a's 5 8-grams are train text
    copied = leakage_gate(*edit(demo.replace("items.txt", "list.txt")), TEMPLATED, CONFIG)
    assert not copied.passed and "val-a" in copied.reason


def test_an_answer_that_train_text_also_holds_is_ambiguous() -> None:
    verdict = leakage_gate(*edit("The answer is coral.\n"), TEMPLATED, CONFIG)
    assert verdict.passed
    assert verdict.numbers["top"][0] == {
        "task": "val-b",
        "split": "validation",
        "score": 0.5,
        "via": "answer 'coral'",
    }
    strict = replace(CONFIG, allow_train_demonstrations=False)
    assert not leakage_gate(*edit("The answer is coral.\n"), TEMPLATED, strict).passed


# --- the built-in benchmarks: the demo proposer's demonstrations ---------------------------------


def demonstration(t: Task, benchmark: Benchmark) -> str:
    references = load_references(benchmark)
    if t.id in references:
        steps = reference_actions(references[t.id])
    else:  # held-out tasks have no reference run: show their gold calls
        steps = tuple(
            ReferenceAction(g.tool, dict(g.arguments), t.setup_files.get(g.arguments.get("path", ""), ""))
            for g in t.gold
        )
    return render_demonstration(t.instruction, steps)


@pytest.mark.parametrize("name", ["shell-basics", "shell-onecall"])
def test_every_train_demonstration_passes_and_every_held_out_one_fails(name: str) -> None:
    benchmark = load_benchmark(name)
    wrong = []
    for t in benchmark.tasks:
        verdict = leakage_gate(*edit(demonstration(t, benchmark)), benchmark.tasks, CONFIG)
        if verdict.passed is not (t.split == "train"):
            wrong.append(f"{t.id} ({t.split}): {verdict.reason}")
        elif t.split != "train" and f"task {t.id}:" not in verdict.reason:
            wrong.append(f"{t.id}: blamed {verdict.reason}")
    assert wrong == []


# --- the LLM judge ----------------------------------------------------------------------------------


@pytest.fixture
def judge():
    seen: list[list[dict]] = []
    replies: list[str] = []

    def policy(messages, _tools):
        seen.append(messages)
        return replies.pop(0)

    register_script("leak-judge", policy)
    yield replies, seen
    unregister_script("leak-judge")


JUDGED = replace(CONFIG, judge_model="scripted/leak-judge")
HINT = "When a task asks about the ledger, the sum you want ends in .25.\n"


def test_the_judge_rejects_at_the_threshold(judge) -> None:
    replies, seen = judge
    replies.append('{"score": 0.85, "task_id": "v1", "reason": "hints at the total"}')
    verdict = leakage_gate(*edit(HINT), TASKS, JUDGED)
    assert not verdict.passed
    assert verdict.reason == "judge scripted/leak-judge scores leakage 0.85 >= 0.80 (v1)"
    assert verdict.numbers["judge_score"] == 0.85 and verdict.numbers["judge_task"] == "v1"
    prompt = seen[0][1]["content"]
    assert "ledger" in prompt and "id: v1" in prompt and "4711.25" in prompt
    assert "id: tr1" not in prompt  # train tasks may be demonstrated: the judge does not guard them


def test_the_judge_passes_a_low_score(judge) -> None:
    replies, _ = judge
    replies.append('Sure. {"score": 0.1, "task_id": "", "reason": "generic advice"}')
    verdict = leakage_gate(*edit(HINT), TASKS, JUDGED)
    assert verdict.passed and verdict.reason.endswith("; judge scores 0.10")
    assert verdict.numbers["judge_score"] == 0.1


def test_a_judge_without_a_score_rejects(judge) -> None:
    replies, _ = judge
    replies.append("I cannot tell.")
    verdict = leakage_gate(*edit(HINT), TASKS, JUDGED)
    assert not verdict.passed and verdict.reason.startswith("leakage judge failed: no score")


def test_the_judge_is_not_asked_when_ngrams_already_reject(judge) -> None:
    _, seen = judge
    assert not leakage_gate(*edit(f"Task: {LONG}\n"), TASKS, JUDGED).passed
    assert seen == []


def test_inside_an_event_loop_await_aleakage_gate(judge) -> None:
    replies, _ = judge
    replies.append('{"score": 0.2}')

    async def inside() -> bool:
        with pytest.raises(RuntimeError, match="aleakage_gate"):
            leakage_gate(*edit(HINT), TASKS, JUDGED)
        return (await aleakage_gate(*edit(HINT), TASKS, JUDGED)).passed

    assert asyncio.run(inside())


@pytest.mark.parametrize(
    ("reply", "parsed"),
    [
        ('{"score": 0.7, "task_id": "v2", "reason": "r"}', (0.7, "v2", "r")),
        ('{"score": 3}', (1.0, "", "")),
        ("score: 0.35", (0.35, "", "")),
    ],
)
def test_parse_judge_reply(reply: str, parsed: tuple) -> None:
    assert parse_judge_reply(reply) == parsed


# --- every channel into a prompt, at load time ----------------------------------------------------


def test_a_seed_harness_holding_a_validation_answer_in_its_memory_is_refused(cli, harness_dir: Path) -> None:
    from harnessevolve.core.tasks import load_benchmark

    task = next(
        t for t in load_benchmark("shell-basics").split("validation") if len(t.instruction.split()) >= 8
    )
    memory = harness_dir / "memory"
    memory.mkdir(exist_ok=True)
    (memory / "note.yaml").write_text(
        f"version: 1\ntask: {task.instruction!r}\nlesson: remember it\noutcome: success\n"
    )
    import git

    repo = git.Repo(harness_dir)
    repo.git.add(A=True)
    repo.index.commit("a memory entry")
    result = cli.invoke(app, ["run", "-H", str(harness_dir), "-b", "shell-basics", "-m", "scripted/x"])
    assert result.exit_code == 2, result.output
    assert "memory/note.yaml" in result.output and task.id in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()


def test_harness_leak_names_the_file_and_passes_a_clean_harness() -> None:
    from harnessevolve.core.tasks import load_benchmark
    from harnessevolve.gate.config import LeakageConfig
    from harnessevolve.gate.leakage import harness_leak

    bench = load_benchmark("shell-basics")
    task = next(t for t in bench.split("test") if len(t.instruction.split()) >= 8)
    config = LeakageConfig()
    clean = {"prompts/system.md": "You are a careful shell agent.", "tools/bash.yaml": "name: bash\n"}
    assert harness_leak(clean, bench.tasks, config) is None
    found = harness_leak({**clean, "world_model/model.md": f"Hint: {task.instruction}"}, bench.tasks, config)
    assert found is not None and found[0] == "world_model/model.md" and task.id in found[1].reason


def test_a_context_file_inside_tasks_is_refused(tmp_path: Path) -> None:
    import shutil

    from harnessevolve.core import paths
    from harnessevolve.core.errors import BenchmarkError
    from harnessevolve.core.tasks import load_benchmark

    suite = tmp_path / "suite"
    shutil.copytree(paths.builtin_dir("benchmarks") / "shell-basics", suite)
    task_file = next(p for p in sorted((suite / "tasks").glob("*.yaml")))
    held_out = next(p for p in sorted((suite / "tasks").glob("*.yaml")) if "split: test" in p.read_text())
    task_file.write_text(task_file.read_text() + f"context_file: tasks/{held_out.name}\n")
    with pytest.raises(BenchmarkError) as err:
        load_benchmark(str(suite))
    assert err.value.field == "context_file" and "tasks/" in err.value.message


# --- the comparisons pinned at their exact thresholds ---------------------------------------------

AT = 7 / 9
"""14 words of LONG hold 7 of its 9 8-grams: a score of exactly 7/9."""


@pytest.mark.parametrize(("threshold", "passes"), [(AT, False), (AT + 1e-6, True), (AT - 1e-6, False)])
def test_an_instruction_scoring_exactly_the_threshold_is_refused(threshold: float, passes: bool) -> None:
    prefix = " ".join(LONG.split()[:14]) + "\n"
    verdict = leakage_gate(*edit(prefix), TASKS, replace(CONFIG, threshold=threshold))
    assert verdict.numbers["max_score"] == pytest.approx(AT, abs=1e-3)
    assert verdict.passed is passes


@pytest.mark.parametrize(("threshold", "passes"), [(AT, False), (AT + 1e-6, True)])
def test_a_context_copy_scoring_exactly_the_threshold_is_refused(threshold: float, passes: bool) -> None:
    with_context = (replace(task("tr9", "Say done.", split="train"), context=LONG),)
    prefix = " ".join(LONG.split()[:14]) + "\n"
    verdict = leakage_gate(*edit(prefix), with_context, replace(CONFIG, threshold=threshold))
    assert verdict.numbers["context_copy"]["score"] == pytest.approx(AT, abs=1e-3)
    assert verdict.passed is passes
    if not passes:
        assert "context paragraph 1" in verdict.reason or "context" in verdict.reason
