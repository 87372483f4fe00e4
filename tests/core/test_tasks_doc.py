"""docs/tasks.md is a runnable suite: its `# file: PATH` blocks are written into a folder, which
`validate` accepts, and every task's gold solution passes its own checks when replayed (`refs
import`), one task per check kind. The page's shown output is this suite's real output."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from harnessevolve.cli.app import app

DOC = Path(__file__).parents[2] / "docs" / "tasks.md"
BLOCK = re.compile(r"^```(yaml|python)\n# file: (\S+)\n(.*?)^```", re.DOTALL | re.MULTILINE)


def write_suite(root: Path) -> Path:
    suite = root / "docs-example"
    for _lang, name, body in BLOCK.findall(DOC.read_text(encoding="utf-8")):
        path = suite / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# file: {name}\n{body}")
    return suite


def test_the_page_is_a_valid_suite_with_every_check_kind(tmp_path: Path, monkeypatch) -> None:
    suite = write_suite(tmp_path)
    kinds = {m for f in (suite / "tasks").glob("*.yaml") for m in re.findall(r"type: (\w+)", f.read_text())}
    assert {"answer", "file", "command", "effect", "python"} <= kinds
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate", "docs-example"])
    assert result.exit_code == 0, result.output
    shown = DOC.read_text(encoding="utf-8")
    for line in result.output.strip().splitlines():
        assert line in shown, f"docs/tasks.md does not show: {line}"


def test_every_gold_solution_passes_its_checks(tmp_path: Path) -> None:
    suite = write_suite(tmp_path)
    result = CliRunner().invoke(app, ["refs", "import", "-b", str(suite), "--split", "all"])
    assert result.exit_code == 0, result.output
    written = sorted(p.stem for p in (suite / "trajectories").glob("*.json"))
    assert written == sorted(p.stem for p in (suite / "tasks").glob("*.yaml"))


def test_a_typo_is_named_by_file_and_key(tmp_path: Path) -> None:
    suite = write_suite(tmp_path)
    greet = suite / "tasks" / "greet.yaml"
    greet.write_text(greet.read_text().replace('expected: "hello, ada"', 'expcted: "hello, ada"'))
    result = CliRunner().invoke(app, ["validate", str(suite)])
    assert result.exit_code == 2
    assert "tasks/greet.yaml: checker[0].expcted: unknown key 'expcted'" in result.output


def test_every_key_of_the_schemas_is_documented() -> None:
    from harnessevolve.core.schema import load_schema

    doc = DOC.read_text(encoding="utf-8")
    task = load_schema("task")
    keys = set(task["properties"]) | set(load_schema("benchmark")["properties"])
    keys |= {f"setup.{k}" for k in task["properties"]["setup"]["properties"]} - {"setup"}
    kinds = [b["properties"]["type"]["const"] for b in task["properties"]["checker"]["items"]["oneOf"]]
    missing = sorted(k for k in keys - {"setup"} if f"`{k}`" not in doc)
    missing += [f"check {k}" for k in kinds if f"### {k}:" not in doc]
    assert not missing, f"docs/tasks.md does not document: {missing}"
