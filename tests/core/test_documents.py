"""Every YAML/JSON document is read bounded: an alias bomb, too deep a nesting, an oversized file or
a duplicate key is an error naming the file (and line), in milliseconds, never a hang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessevolve.cli.app import app
from harnessevolve.core.documents import (
    MAX_ALIAS_NODES,
    MAX_DEPTH,
    bounded_yaml,
    load_json_text,
    load_yaml_text,
    read_json_file,
)
from harnessevolve.core.errors import SchemaError
from harnessevolve.core.files import read_text


def alias_bomb(levels: int = 9, key: str = "lol") -> str:
    """A "billion laughs": ~1 KB that expands to 9**levels nodes."""
    lines = [f'{key}0: &{key}0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for i in range(1, levels):
        lines.append(f"{key}{i}: &{key}{i} [{', '.join([f'*{key}{i - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def refused(text: str) -> SchemaError:
    with pytest.raises(SchemaError) as caught:
        load_yaml_text(text, file="doc.yaml")
    return caught.value


def test_an_alias_bomb_is_refused_naming_the_file() -> None:
    error = refused(alias_bomb())
    assert error.file == "doc.yaml" and "aliases expand it" in error.message


def test_a_few_aliases_are_fine_and_merge_keys_still_work() -> None:
    doc = bounded_yaml("base: &b {a: 1, c: 2}\nx: {<<: *b, a: 3}\ny: *b\n")
    assert doc == {"base": {"a": 1, "c": 2}, "x": {"a": 3, "c": 2}, "y": {"a": 1, "c": 2}}
    wide = "a: &a [" + ", ".join(["1"] * 100) + "]\nb: [" + ", ".join(["*a"] * 50) + "]\n"
    assert len(bounded_yaml(wide)["b"]) == 50  # 5,000 extra nodes: under the cap
    assert MAX_ALIAS_NODES >= 5_000


def test_a_duplicate_key_names_both_lines() -> None:
    error = refused("name: a\nmodel: m\nname: b\n")
    assert error.field == "line 3" and "duplicate key 'name' at lines 1 and 3" in error.message
    assert "lines 1 and 1" in refused("{a: 1, a: 2}").message
    assert "duplicate key 1" in refused("1: a\n01: b\n").message  # the same key, spelled twice
    nested = refused("loop:\n  max_steps: 3\n  temperature: 0\n  max_steps: 4\n")
    assert "lines 2 and 4" in nested.message


def test_cycles_depth_and_long_numbers_are_errors() -> None:
    assert "its own anchor" in refused("a: &a [1, *a]\n").message
    assert f"deeper than {MAX_DEPTH}" in refused("[" * (MAX_DEPTH + 5) + "]" * (MAX_DEPTH + 5)).message
    assert "cannot be read" in refused("a: " + "1" * 5000 + "\n").message
    assert load_yaml_text("[" * 50 + "]" * 50, file="ok.yaml") is not None  # 50 levels read fine


def test_an_oversized_file_is_refused_unread(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * 5000 + "\n")
    with pytest.raises(SchemaError, match="larger than") as caught:
        read_text(big, max_bytes=1000)
    assert caught.value.file == str(big)


def test_json_is_bounded_too(tmp_path: Path) -> None:
    with pytest.raises(SchemaError, match="nested too deeply"):
        load_json_text("[" * 100_000 + "]" * 100_000, file="deep.json")
    with pytest.raises(SchemaError, match="invalid JSON"):
        load_json_text('{"n": ' + "1" * 5000 + "}", file="n.json")
    with pytest.raises(SchemaError, match="larger than"):
        load_json_text("[1]" * 10, file="x.json", max_bytes=5)
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"ok": [1, 2]}))
    assert read_json_file(path) == {"ok": [1, 2]}


# --- through the CLI: every reader of a user's YAML ------------------------------------------------


def one_line_error(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("Error:")]


def test_validate_refuses_an_alias_bomb_in_harness_yaml(harness_dir: Path, cli) -> None:
    text = (harness_dir / "harness.yaml").read_text()
    (harness_dir / "harness.yaml").write_text(text + alias_bomb(key="x_bomb"))
    result = cli.invoke(app, ["validate", str(harness_dir)])
    assert result.exit_code == 2, result.output
    assert "harness.yaml" in result.output and "aliases" in result.output
    assert "Traceback" not in result.output


def test_validate_names_both_lines_of_a_duplicate_key_in_harness_yaml(harness_dir: Path, cli) -> None:
    path = harness_dir / "harness.yaml"
    path.write_text(path.read_text() + "model: scripted/other\n")
    lines = path.read_text().splitlines()
    first = next(i for i, line in enumerate(lines, 1) if line.startswith("model:"))
    result = cli.invoke(app, ["validate", str(harness_dir)])
    assert result.exit_code == 2, result.output
    assert f"duplicate key 'model' at lines {first} and {len(lines)}" in " ".join(result.output.split())


def test_a_tool_with_an_alias_bomb_under_x_keys_is_refused(harness_dir: Path, cli) -> None:
    tool = harness_dir / "tools" / "bash.yaml"
    bomb = alias_bomb(key="b").replace("\n", "\n    ")
    tool.write_text(tool.read_text().replace("parameters:\n", f"parameters:\n  x-extra:\n    {bomb}\n", 1))
    result = cli.invoke(app, ["validate", str(harness_dir)])
    assert result.exit_code == 2, result.output
    assert "tools/bash.yaml" in result.output and "aliases" in result.output


def test_a_gates_file_and_a_task_with_an_alias_bomb_are_refused(
    tmp_path: Path, harness_dir: Path, cli
) -> None:
    gates = tmp_path / "gates.yaml"
    gates.write_text("version: 1\n" + alias_bomb())
    result = cli.invoke(
        app, ["run", "-H", str(harness_dir), "-b", "shell-basics", "-n", "1", "--gates", str(gates)]
    )
    assert result.exit_code == 2, result.output
    assert "gates.yaml" in result.output and "aliases" in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()

    bench = tmp_path / "bench"
    (bench / "tasks").mkdir(parents=True)
    (bench / "benchmark.yaml").write_text("version: 1\nname: bench\n")
    args = alias_bomb(key="a").replace("\n", "\n      ")
    (bench / "tasks" / "t.yaml").write_text(
        "version: 1\nid: t\nsplit: train\ninstruction: x\nchecker:\n"
        f"  - type: python\n    python: checks:ok\n    args:\n      {args}\n"
    )
    result = cli.invoke(app, ["validate", str(bench)])
    assert result.exit_code == 2, result.output
    assert "t.yaml" in result.output and "aliases" in result.output
