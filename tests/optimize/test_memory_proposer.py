"""The ``memory`` proposer (add / merge / delete entries from train runs only) and the
``set_recovery`` edit operation, through the public proposer and edit APIs."""

from __future__ import annotations

import asyncio

import pytest
from reference_actions import then_submit

from harnessevolve.core.errors import EditError
from harnessevolve.core.signals import Cause, ErrorSignal
from harnessevolve.evaluate.clustering import cluster_signals
from harnessevolve.harness.runtime import memory_entry
from harnessevolve.optimize.edits import apply_edits
from harnessevolve.optimize.memory_proposer import MemoryProposer, masked
from harnessevolve.optimize.proposal import ProposalContext
from harnessevolve.optimize.registry import DEFAULT_PROPOSERS

HARNESS = "version: 1\nname: h\nsystem_prompt: prompts/system.md\ntools: [submit]\nmemory: {top_k: 2}\n"
READ = then_submit("read_file", {"path": "a.txt"}, "maple", "maple", submitted="")
COUNT = then_submit("bash", {"command": "wc -l a.txt"}, "3", "3", submitted="")


def context(files: dict[str, str] | None = None, **kwargs: object) -> ProposalContext:
    base: dict[str, object] = {
        "files": {"harness.yaml": HARNESS, "prompts/system.md": "Solve it.\n", **(files or {})},
        "editable": ("prompts/*.md", "memory/*.yaml"),
        "system_prompt_path": "prompts/system.md",
        "examples_path": None,
        "clusters": (),
        "instructions": {"t-read": "What word is in 'a.txt'?", "t-val": "What word is in b.txt?"},
        "splits": {"t-read": "train", "t-val": "validation", "t-count": "train"},
    }
    base.update(kwargs)
    return ProposalContext(**base)  # type: ignore[arg-type]


def propose(ctx: ProposalContext):  # noqa: ANN201
    return asyncio.run(MemoryProposer().propose(ctx))


def test_a_passed_train_run_becomes_an_entry_without_its_values() -> None:
    candidate = propose(context(passed_runs={"t-read": READ, "t-val": READ}))
    assert candidate is not None and candidate.summary == "memory: add 1, merge 0, delete 0 entries"
    [(path, text)] = candidate.changes.items()
    entry = memory_entry(path, text or "")
    assert entry.outcome == "success" and entry.sources == ("t-read",)  # never the validation task
    assert entry.lesson == "Calls that solved it, in order: read_file(path); then submit the answer."
    assert "maple" not in text and entry.task == "What word is in '...'?"


def test_validation_runs_alone_never_feed_memory() -> None:
    assert propose(context(passed_runs={"t-val": READ})) is None


def test_the_same_calls_merge_into_one_entry_and_a_failed_source_deletes_it() -> None:
    first = propose(context(passed_runs={"t-read": READ}))
    assert first is not None
    files = {p: t for p, t in first.changes.items() if t is not None}
    merged = propose(context(files, passed_runs={"t-count": READ}))
    assert merged is not None and merged.summary == "memory: add 0, merge 1, delete 0 entries"
    [(path, text)] = merged.changes.items()
    assert path in files and memory_entry(path, text or "").sources == ("t-read", "t-count")
    stale = propose(context(files, failed_runs={"t-read": COUNT}))
    assert stale is not None and stale.changes == {path: None} and "delete 1" in stale.summary


def test_a_failed_train_run_with_a_signal_becomes_a_warning() -> None:
    signal = ErrorSignal("t-count", Cause.WRONG_TOOL, 0.8, "used bash where the reference read the file")
    candidate = propose(context(failed_runs={"t-count": COUNT}, clusters=tuple(cluster_signals([signal]))))
    assert candidate is not None
    [text] = candidate.changes.values()
    entry = memory_entry("memory/x.yaml", text or "")
    assert entry.outcome == "failure" and "wrong_tool" in entry.lesson and "reference read" in entry.lesson


@pytest.mark.parametrize(
    "ctx",
    [
        context(passed_runs={"t-read": READ}, editable=("prompts/*.md",)),
        context({"harness.yaml": HARNESS.replace("memory: {top_k: 2}\n", "")}, passed_runs={"t-read": READ}),
    ],
    ids=["memory not editable", "memory off"],
)
def test_it_stays_silent_where_memory_is_off_or_not_editable(ctx: ProposalContext) -> None:
    assert propose(ctx) is None


def test_it_is_in_the_default_chain_before_the_prompt_proposers() -> None:
    assert DEFAULT_PROPOSERS.index("memory") < DEFAULT_PROPOSERS.index("demo")


def test_masked_hides_numbers_and_quoted_text() -> None:
    assert masked('Sum 12 and 3.5 in "data.csv"') == "Sum N and N in '...'"


def test_set_recovery_replaces_the_rules_and_checks_them() -> None:
    files = {"harness.yaml": "# mine\n" + HARNESS}
    rule = {"event": "repeated_call", "action": "note", "note": "Change the call."}
    changes = apply_edits(files, [{"op": "set_recovery", "rules": [rule]}], ("harness.yaml",))
    assert changes["harness.yaml"].startswith("# mine\n")
    assert "event: repeated_call" in changes["harness.yaml"]
    with pytest.raises(EditError, match="recovery.rules"):
        apply_edits(
            files, [{"op": "set_recovery", "rules": [{"event": "sunrise", "action": "note"}]}], ("*",)
        )
