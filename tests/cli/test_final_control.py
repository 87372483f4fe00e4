"""The matched-budget control in ``report --final`` and ``gate --split test``: the seed's best-of-k
at the run's own rollout count, the self-consistency pick and the pass@k oracle with intervals,
``--require-control`` failing a candidate that does not beat it, JUnit and Markdown carrying it."""

from __future__ import annotations

import json
from pathlib import Path

import git
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.runs.ledger import read_lines
from harnessevolve.scoring.best_of_k import matched_k


def only_run(harness_dir: Path) -> Path:
    [run] = list((harness_dir / ".harnessevolve" / "runs").iterdir())
    return run


def test_report_final_prints_the_matched_control_and_logs_it(harness_dir: Path, cli, learner) -> None:
    assert cli.invoke(app, run_args(harness_dir, learner)).exit_code == 0
    ledger = only_run(harness_dir) / "ledger.jsonl"
    finished = next(line for line in read_lines(ledger) if line["event"] == "run_finished")
    spent = finished["rollouts"] + finished["cached_rollouts"]

    result = cli.invoke(app, ["report", "--harness", str(harness_dir), "--final", "--model", learner])
    assert result.exit_code == 0, result.output
    [logged] = [line for line in read_lines(ledger) if line["event"] == "test_evaluated"]
    control = logged["control"]
    tests = logged["tasks"]
    assert control["k"] == matched_k(spent, tests) and control["matched_to"] == spent
    assert control["samples"] == control["k"] * tests
    # the first sample is the seed's own test rollout: at most k - 1 new test passes
    assert control["new_rollouts"] <= (control["k"] - 1) * tests
    assert control["oracle"] >= control["sc"]
    assert control["sc_ci"][0] <= control["sc"] <= control["sc_ci"][1]
    assert set(logged["intervals"]) == {"seed", "evolved"}
    assert f"control: seed best-of-{control['k']} (sc)" in result.output
    assert f"pass@{control['k']} (oracle)" in result.output and "ORACLE" in result.output
    assert f"~ the run's {spent} rollouts" in result.output
    gain = logged["scores"]["evolved"] - control["sc"]
    assert control["evolved_minus_sc"] == round(gain, 4)
    low = control["evolved_minus_sc_ci"][0]
    said = "does NOT beat" if gain <= 0 else "beats the control" if low > 0 else "not shown to beat"
    assert said in result.output

    # again: every sample comes from the rollout cache
    again = cli.invoke(
        app, ["report", "--harness", str(harness_dir), "--final", "--model", learner, "--json"]
    )
    assert again.exit_code == 0, again.output
    assert json.loads(again.output)["test"]["control"]["new_rollouts"] == 0

    by_hand = cli.invoke(
        app, ["report", "--harness", str(harness_dir), "--final", "--model", learner, "--control-k", "2"]
    )
    assert by_hand.exit_code == 0, by_hand.output
    assert "NOT matched" in by_hand.output and "best-of-2" in by_hand.output


def test_report_help_names_the_control(cli) -> None:
    result = cli.invoke(app, ["report", "--help"], env={"COLUMNS": "250"})
    assert "matched-budget" in result.output and "best-of-k" in result.output
    assert "--variants" in result.output


def test_gate_require_control_fails_a_candidate_that_does_not_beat_the_control(
    tmp_path: Path, harness_dir: Path, cli, learner
) -> None:
    assert cli.invoke(app, run_args(harness_dir, learner)).exit_code == 0
    repo = git.Repo(harness_dir)
    seed = next(c.hexsha for c in repo.iter_commits() if not c.parents)
    head = repo.head.commit.hexsha
    junit, markdown = tmp_path / "gate.xml", tmp_path / "gate.md"
    base = [
        "gate",
        "--harness",
        str(harness_dir),
        "-b",
        "shell-basics",
        "--model",
        learner,
        "--split",
        "test",
    ]
    base += ["--batch-size", "8"]
    better = cli.invoke(
        app,
        [
            *base,
            "--baseline",
            seed,
            "--candidate",
            head,
            "--require-control",
            "--junit",
            str(junit),
            "--json",
        ],
    )
    doc = json.loads(better.output)
    control = next(v for v in doc["verdicts"] if v["gate"] == "control")
    assert control["numbers"]["required"] and control["numbers"]["matched_to"] is not None
    beats = control["numbers"]["evolved_minus_sc"] > 0
    assert control["passed"] == beats
    assert 'name="control"' in junit.read_text()

    # the evolved harness against itself: a gain of 0 over its own best-of-k never beats it
    same = cli.invoke(
        app,
        [*base, "--baseline", head, "--candidate", head, "--require-control", "--markdown", str(markdown)],
    )
    assert same.exit_code == 1, same.output
    text = markdown.read_text()
    assert "| control | FAIL |" in text and "does not beat" in text
    # without --require-control the control is reported, not enforced
    told = cli.invoke(app, [*base, "--baseline", head, "--candidate", head, "--json"])
    numbers = next(v for v in json.loads(told.output)["verdicts"] if v["gate"] == "control")
    assert numbers["passed"] and "not required" in numbers["reason"]


def test_gate_require_control_needs_the_test_split(harness_dir: Path, cli) -> None:
    result = cli.invoke(
        app, ["gate", "--harness", str(harness_dir), "-b", "shell-basics", "--require-control"]
    )
    assert result.exit_code == 2
    assert "--split test" in result.output


def write_chainable_suite(root: Path) -> Path:
    """Two tasks per split, each writing its own file (so chained tasks never collide)."""
    (root / "tasks").mkdir(parents=True)
    (root / "benchmark.yaml").write_text("version: 1\nname: chain-probe\n")
    for i in (1, 2, 3):
        for split in ("train", "validation", "test"):
            task_id = f"{split}-{i}"
            (root / "tasks" / f"{task_id}.yaml").write_text(
                f"version: 1\nid: {task_id}\nsplit: {split}\ntags: [w{i}-{split}]\n"
                f"instruction: Write the text ok{i} into out{i}.txt, then submit done.\n"
                f'checker:\n  - {{type: file, path: out{i}.txt, expected: "ok{i}"}}\n'
                "gold:\n"
                f'  - {{tool: write_file, arguments: {{path: out{i}.txt, content: "ok{i}"}}}}\n'
                "  - {tool: submit, arguments: {answer: done}}\n"
            )
    return root


def solves_single_tasks(messages, tools) -> dict:
    """Writes the file a one-step instruction names, then submits; a chained (numbered) one defeats it."""
    import re

    found = re.fullmatch(
        r"Write the text (ok\d) into (out\d\.txt), then submit done\.", messages[1]["content"]
    )
    if found and not any(m["role"] == "assistant" for m in messages):
        return {"tool_calls": [{"name": "write_file", "arguments": {"path": found[2], "content": found[1]}}]}
    return {"tool_calls": [{"name": "submit", "arguments": {"answer": "done"}}]}


def test_report_final_variants_scores_both_harnesses_on_sound_variants_of_the_test_tasks(
    tmp_path: Path, harness_dir: Path, cli, scripts
) -> None:
    suite = write_chainable_suite(tmp_path / "suite")
    model = scripts("single-steps", solves_single_tasks)
    run = cli.invoke(app, run_args(harness_dir, model, benchmark=suite, generations=1, batch_size=3))
    assert run.exit_code in (0, 1), run.output
    result = cli.invoke(
        app, ["report", "--harness", str(harness_dir), "--final", "--variants", "2", "--model", model]
    )
    assert result.exit_code == 0, result.output
    ledger = only_run(harness_dir) / "ledger.jsonl"
    [logged] = [line for line in read_lines(ledger) if line["event"] == "test_evaluated"]
    variants = logged["variants"]
    assert (
        variants["variants"] >= 3
        and variants["parents"] == 3
        and variants["makers"] == {"chain": variants["variants"]}
    )
    # the agent solves every single test task and no chained one: the drop is the whole score
    for name in ("seed", "evolved"):
        assert variants[name] == {"original": 1.0, "variant": 0.0, "drop": 1.0}
    assert "held-out variants" in result.output
    written = list((only_run(harness_dir) / "final" / "variants" / "tasks").glob("*.yaml"))
    assert len(written) == variants["variants"]  # only sound variants (gold passes) are kept
