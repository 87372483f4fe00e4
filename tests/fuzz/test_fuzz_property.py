"""Property-based fuzzing (hypothesis) over what a model or a user could have planted: ledger lines
with fields of any JSON type, gate and harness YAML of any text, and an optimizer workspace holding
links, named pipes, huge and binary files. Each example asserts: the command exits 0 or 2 (2 with
one error line), never a traceback, nothing outside the scratch folder changes, and it is done
within a time bound (a hang fails the example)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from harnessevolve.cli.app import app
from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.gate.config import load_gate_config

FAST = settings(
    max_examples=40,
    deadline=None,  # the bound is asserted per example below (a CLI call, not a pure function)
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,  # the same examples every run: a failure reproduces
)
BOUND_S = 30.0
"""Seconds one example may take (the slowest, a report over a fuzzed ledger, takes about 1 s)."""

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**40), 2**40)
    | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def cli_contract(args: list[str], outside: Path | None = None) -> Any:
    """Run the CLI; assert exit 0 or 2, one error line on 2, no traceback, within ``BOUND_S``."""
    before = sorted(p.name for p in outside.iterdir()) if outside else None
    started = time.monotonic()
    result = CliRunner().invoke(app, args, catch_exceptions=True)
    took = time.monotonic() - started
    assert took < BOUND_S, f"{args}: {took:.1f} s"
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output, result.output
    assert result.exit_code in (0, 2), f"{args}: exit {result.exit_code}\n{result.output}"
    if result.exit_code == 2:
        heads = [line for line in result.output.splitlines() if line.startswith(("Error:", "invalid:"))]
        assert len(heads) == 1, result.output  # validate lists every problem under one "invalid:" line
    if outside is not None:
        assert sorted(p.name for p in outside.iterdir()) == before
    return result


# --- ledgers -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ledger-fuzz")
    harness = root / "h"
    assert CliRunner().invoke(app, ["init", str(harness)]).exit_code == 0
    result = CliRunner().invoke(
        app, ["run", "-H", str(harness), "-b", "shell-basics", "-n", "1", "--batch-size", "2",
              "-m", "scripted/policy:gives_up", "--unsafe-no-sandbox", "--floor-sample", "0"],
    )  # fmt: skip
    assert result.exit_code in (0, 1), result.output
    return harness


@FAST
@given(data=st.data())
def test_fuzz_ledger_fields_of_any_type_never_crash_readers(finished_run: Path, data: st.DataObject) -> None:
    ledger = next((finished_run / ".harnessevolve" / "runs").glob("*/ledger.jsonl"))
    original = ledger.read_bytes()
    lines = original.decode().splitlines()
    try:
        index = data.draw(st.integers(0, len(lines) - 1), label="line")
        record = json.loads(lines[index])
        field = data.draw(
            st.sampled_from(sorted(k for k in record if k not in ("v", "ts", "event"))), label="field"
        )
        record[field] = data.draw(json_values, label="value")
        lines[index] = json.dumps(record)
        ledger.write_text("\n".join(lines) + "\n")
        for command in (["status"], ["status", "--json"], ["log"], ["report"]):
            cli_contract([*command, "-H", str(finished_run)])
    finally:
        ledger.write_bytes(original)


@FAST
@given(garbage=st.binary(max_size=200))
def test_fuzz_a_garbage_ledger_line_is_a_located_error_or_skipped(finished_run: Path, garbage: bytes) -> None:
    ledger = next((finished_run / ".harnessevolve" / "runs").glob("*/ledger.jsonl"))
    original = ledger.read_bytes()
    try:
        lines = original.split(b"\n")
        ledger.write_bytes(b"\n".join([*lines[:3], garbage.replace(b"\n", b" "), *lines[3:]]))
        for command in (["status"], ["log"]):
            result = cli_contract([*command, "-H", str(finished_run)])
            if result.exit_code == 2:
                assert "ledger.jsonl" in result.output
    finally:
        ledger.write_bytes(original)


# --- YAML documents ------------------------------------------------------------------------------------

yaml_texts = st.one_of(
    st.text(max_size=300),
    st.builds(
        lambda key, value: f"version: 1\n{key}:\n  {value}\n",
        st.sampled_from(["quality", "performance", "leakage", "heldout", "loop", "agent", "tools"]),
        st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=60),
    ),
)


@FAST
@given(text=yaml_texts)
def test_fuzz_a_gates_file_loads_or_is_a_located_error(
    tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    path = tmp_path_factory.mktemp("gates") / "gates.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_gate_config(path)
    except HarnessEvolveError as exc:
        assert exc.exit_code == 2 and (exc.file and "gates.yaml" in exc.file), exc.one_line()


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("template") / "h"
    assert CliRunner().invoke(app, ["init", str(folder)]).exit_code == 0
    return folder


@FAST
@given(text=yaml_texts)
def test_fuzz_harness_yaml_validates_or_is_refused(
    template: Path, tmp_path_factory: pytest.TempPathFactory, text: str
) -> None:
    scratch = tmp_path_factory.mktemp("harness-fuzz")
    harness = scratch / "h"
    shutil.copytree(template, harness)
    (harness / "harness.yaml").write_text(text, encoding="utf-8")
    cli_contract(["validate", str(harness)], outside=scratch)


# --- the optimizer agent's workspace -------------------------------------------------------------------

ENTRY_KINDS = ("text", "binary", "huge", "fifo", "link-out", "link-in", "dir", "hard-link")


def plant(root: Path, rel: str, kind: str, outside: Path) -> None:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() or path.is_symlink():
        return
    if kind == "text":
        path.write_text("planted text\n")
    elif kind == "binary":
        path.write_bytes(b"\0\xff" * 64)
    elif kind == "huge":
        with path.open("wb") as handle:
            handle.truncate(3 * 2**20)
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "link-out":
        os.symlink(outside / "secret.txt", path)
    elif kind == "link-in":
        os.symlink("harness.yaml", path)
    elif kind == "dir":
        path.mkdir()
    elif kind == "hard-link":
        os.link(outside / "secret.txt", path)


@FAST
@given(
    entries=st.lists(
        st.tuples(
            st.sampled_from(["harness/prompts/x.md", "harness/x.yaml", "harness/tools/y.yaml", "evidence/e",
                             "history/h.md", "SUMMARY.txt", "harness/skills/s/SKILL.md", "TASK.md"]),
            st.sampled_from(ENTRY_KINDS),
        ),
        min_size=1,
        max_size=4,
    )
)  # fmt: skip
def test_fuzz_the_optimizer_workspace_is_read_safely(
    tmp_path_factory: pytest.TempPathFactory, entries: list[tuple[str, str]]
) -> None:
    from harnessevolve.proposing.agent_diff import EditRefused, check_protected, harness_changes, snapshot

    scratch = tmp_path_factory.mktemp("workspace-fuzz")
    outside = scratch / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("host secret\n")
    workspace = scratch / "ws"
    (workspace / "harness" / "prompts").mkdir(parents=True)
    (workspace / "evidence").mkdir()
    original = {"harness.yaml": "version: 1\nname: h\n", "prompts/system.md": "Be careful.\n"}
    for rel, text in original.items():
        (workspace / "harness" / rel).write_text(text)
    (workspace / "TASK.md").write_text("edit the harness\n")
    before = snapshot(workspace)
    for rel, kind in entries:
        plant(workspace, rel, kind, outside)
    started = time.monotonic()
    for check in (
        lambda: check_protected(workspace, before),
        lambda: harness_changes(workspace, original, ("prompts/",)),
    ):
        try:
            check()
        except EditRefused as refused:
            assert refused.reason
    assert time.monotonic() - started < BOUND_S
    assert (outside / "secret.txt").read_text() == "host secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]
