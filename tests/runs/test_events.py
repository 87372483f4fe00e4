"""The event catalog is the one list of ledger events: every writer uses it, the report renders all of it."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.runs import events as ev
from harnessevolve.runs.ledger import Ledger, read_lines

PACKAGE = Path(__file__).resolve().parents[2] / "harnessevolve"

# One plausible instance of every catalog event (a new event must be added here to be tested).
SAMPLES: dict[str, dict] = {
    "run_started": {
        "run_id": "r1",
        "harness": "/h",
        "rev": "a" * 40,
        "benchmark": "shell-basics",
        "options": {"generations": 2, "model": None},
        "gates": None,
    },
    "run_resumed": {
        "run_id": "r1",
        "rev": "a" * 40,
        "next_generation": 2,
        "recovered": [],
        "stale_lock": None,
    },
    "stale_lock_removed": {"owner": {"pid": 1, "run_id": "r0"}},
    "run_finished": {"accepted": [], "reverted": [], "rev": "a" * 40},
    "budget_exhausted": {"generation": 1, "stage": "execute", "limit": "tokens", "spent": 60, "cap": 50},
    "run_interrupted": {"generation": 1, "stage": "gate", "error": "KeyboardInterrupt()"},
    "run_failed": {"generation": 1, "stage": "gate", "error": "RuntimeError('x')"},
    "baseline": {"split": "validation", "rev": "a" * 40, "harness_hash": "h", "score": 0.5, "tasks": 4},
    "generation_started": {"generation": 1, "rev": "a" * 40},
    "batch_evaluated": {
        "generation": 1,
        "harness_hash": "h",
        "tasks": ["t1"],
        "score": 0.0,
        "failed": 1,
        "clusters": [],
    },
    "no_proposal": {"generation": 1, "proposer": "demo"},
    "proposal_failed": {"generation": 1, "proposer": "llm", "errors": ["bad reply"]},
    "generation_finished": {"generation": 1, "outcome": "accepted", "rev": "b" * 40},
    "epoch_restoring": {"epoch": 1, "generation": 1, "best": "b" * 40, "rev": "c" * 40},
    "epoch_finished": {
        "epoch": 1,
        "generation": 1,
        "best": "b" * 40,
        "best_validation": 0.75,
        "snapshots": 2,
        "restored": None,
        "rev": "b" * 40,
    },
    "candidate_proposed": {"generation": 1, "candidate": 1, "summary": "add a skill"},
    "candidate_revised": {"generation": 1, "candidate": 1, "reason": "too long", "rejected_summary": "x"},
    "revision_failed": {"generation": 1, "candidate": 1, "proposer": "llm", "errors": ["x"]},
    "revision_limit": {"generation": 1, "candidate": 1, "revisions": 3},
    "performance_increment": {"generation": 1, "mode": "sequential", "pairs": 8},
    "gate_verdicts": {"generation": 1, "candidate": 1, "verdicts": []},
    "candidate_rejected": {"generation": 1, "candidate": 2, "of": 2, "file": "candidates/x.json"},
    "committing": {
        "generation": 1,
        "paths": ["prompts/system.md"],
        "verdict": "accepted",
        "summary": "s",
        "harness_hash": None,
        "validation": None,
    },
    "candidate_committed": {"generation": 1, "sha": "b" * 40, "verdict": "accepted", "summary": "s"},
    "candidate_accepted": {"generation": 1, "sha": "b" * 40, "harness_hash": "h", "validation": 0.75},
    "candidate_reverted": {
        "generation": 1,
        "sha": "b" * 40,
        "revert_sha": "c" * 40,
        "gate": "x",
        "reason": "r",
    },
    "policy_trained": {
        "generation": 2,
        "mode": "rft",
        "base_model": "b",
        "model": "local/torch:/c",
        "checkpoint": "/c",
        "samples": 4,
        "trained_tokens": 100,
        "tokens": 120,
        "loss_before": 2.0,
        "loss_after": 1.5,
        "train_s": 1.0,
        "seconds": 1.5,
        "tokens_per_s": 100.0,
    },
    "policy_training_skipped": {"generation": 2, "model": "scripted/x", "skipped": "no successful rollout"},
    "agent_model_changed": {"generation": 2, "model": "local/torch:/c", "validation": 0.8},
    "test_evaluated": {"tasks": 4, "revisions": {"seed": "a", "evolved": "b"}, "scores": {"seed": 0.5}},
    "infra_failure": {
        "task": "make-dir-01",
        "harness_hash": "h1",
        "reason": "sandbox_start",
        "detail": "sandbox_error: bwrap: setting up uid map: Permission denied",
        "retry": True,
    },
    "edit_fired": {
        "generation": 1,
        "sha": "0123456789abcdef0123456789abcdef01234567",
        "fired": True,
        "observed_generation": 2,
        "runs": 3,
        "gone": 1,
    },
    "floor_checked": {
        "tasks": 8,
        "share": 0.125,
        "max_share": 0.25,
        "passed": {"make-dir-01": ["do-nothing"]},
        "refused": False,
        "score": 0.2,
    },
    "task_generated": {
        "generation": 1,
        "task": "make-dir-01.chain-abc123",
        "parent": "make-dir-01",
        "maker": "chain",
        "difficulty": {"steps": 2, "level": 2},
        "kept": False,
        "reason": "the current harness already passes it",
    },
    "environment_status": {
        "generation": 1,
        "pool": 2,
        "in_batch": 1,
        "passed_in_batch": 0,
        "mean_level": 2.0,
        "triggered": ["make-dir"],
    },
}


def _catalog_class_names() -> set[str]:
    return {cls.__name__ for cls in ev.CATALOG.values()}


def _written_events(path: Path) -> list[tuple[int, str]]:
    """``(line, what)`` for every ``*ledger.append(X...)`` in ``path``; ``what`` is the catalog class
    or name it writes, or ``?...`` when it is neither."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "harnessevolve.runs.events":
            aliases.update({a.asname or a.name: a.name for a in node.names})
    built: dict[str, str] = {}  # ``record = Cls(...)``: the variable holds a Cls
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name)
        ):
            built[node.targets[0].id] = aliases.get(node.value.func.id, f"?{node.value.func.id}")
    for node in ast.walk(tree):  # ``def f(record: Cls)``: the parameter holds a Cls
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for arg in node.args.args + node.args.kwonlyargs:
                if isinstance(arg.annotation, ast.Name) and arg.annotation.id in aliases:
                    built[arg.arg] = aliases[arg.annotation.id]
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        owner = node.func.value
        owner_name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
        if node.func.attr != "append" or not owner_name.endswith("ledger") or not node.args:
            continue
        arg = node.args[0]
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            found.append((node.lineno, arg.value if arg.value in ev.CATALOG else f"?{arg.value}"))
            continue
        if isinstance(arg, ast.Name):
            found.append((node.lineno, built.get(arg.id, f"?{arg.id}")))
            continue
        func = arg.func if isinstance(arg, ast.Call) else None
        choices = [func.body, func.orelse] if isinstance(func, ast.IfExp) else [func]
        for choice in choices:
            if isinstance(choice, ast.Name):
                found.append((node.lineno, aliases.get(choice.id, f"?{choice.id}")))
            elif isinstance(choice, ast.Attribute) and isinstance(choice.value, ast.Name):
                found.append((node.lineno, choice.attr if choice.value.id == "ev" else f"?{choice.attr}"))
            else:
                found.append((node.lineno, f"?{ast.unparse(arg)[:40]}"))
    return found


def test_every_event_written_anywhere_is_in_the_catalog() -> None:
    known = _catalog_class_names() | set(ev.CATALOG)
    writes = {(p, line, what) for p in PACKAGE.rglob("*.py") for line, what in _written_events(p)}
    assert len(writes) > 20  # the scan does see the writers
    unknown = sorted(
        (str(p.relative_to(PACKAGE)), line, what) for p, line, what in writes if what not in known
    )
    assert not unknown, f"ledger writes outside the catalog: {unknown}"
    written = {what for _, _, what in writes}
    for name in ("AgentModelChanged", "BudgetExhausted", "PolicyTrained", "PolicyTrainingSkipped"):
        assert name in written or any(a.endswith(name) or name in a for a in written), (
            f"{name} is in the catalog but nothing writes it"
        )


def test_the_samples_cover_the_catalog_and_fit_their_records() -> None:
    assert set(SAMPLES) == set(ev.CATALOG)
    for name, data in SAMPLES.items():
        record = ev.build_event(name, data)
        assert name == record.NAME and ev.parse_event({"event": name, **record.fields()}) == record


def test_names_are_unique_and_every_record_is_frozen() -> None:
    classes = list(ev.CATALOG.values())
    assert len({c.NAME for c in classes}) == len(classes)
    for cls in classes:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen  # type: ignore[attr-defined]


def test_a_write_outside_the_catalog_fails_at_the_write(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    with pytest.raises(ev.UnknownEventError, match="not in harnessevolve/runs/events.py"):
        ledger.append("model_error", error="x")
    with pytest.raises(ev.UnknownEventError, match="no field"):
        ledger.append("no_proposal", generation=1, proposer="demo", mood="sad")
    with pytest.raises(ev.UnknownEventError, match="proposer"):
        ledger.append("no_proposal", generation=1)
    ledger.close()
    assert read_lines(tmp_path / "ledger.jsonl") == []


def test_optional_fields_left_unset_are_not_written_required_ones_always_are(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append(ev.EpochFinished(**SAMPLES["epoch_finished"]))
    ledger.append(ev.GenerationFinished(generation=1, outcome="accepted", rev="b"))
    ledger.close()
    epoch, gen = read_lines(tmp_path / "ledger.jsonl")
    assert "restored" in epoch and epoch["restored"] is None
    assert set(gen) == {"v", "ts", "event", "generation", "outcome", "rev"}


def test_every_catalog_event_is_rendered_by_the_report(tmp_path: Path) -> None:
    run_dir = tmp_path / "harness" / ".harnessevolve" / "runs" / "r1"
    ledger = Ledger(run_dir / "ledger.jsonl")
    for name, data in sorted(SAMPLES.items(), key=lambda item: item[0] == "run_finished"):  # it ends a run
        ledger.append(name, **data)
    ledger.close()
    out = tmp_path / "report.html"
    result = CliRunner().invoke(app, ["report", str(run_dir), "--html", str(out)])
    assert result.exit_code == 0, result.output
    html = out.read_text(encoding="utf-8")
    assert "Events this version does not know" not in html
    for name in ev.CATALOG:
        assert name in html, f"{name} is not rendered"
