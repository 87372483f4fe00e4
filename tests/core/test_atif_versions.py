"""ATIF v1.5 is read (tool definitions at agent.tool_definitions) and written when a trajectory has
them; v1.4 and older still read; newer versions refused with a clear message (exit 2 in the CLI)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harnessevolve.cli.app import app
from harnessevolve.core import atif
from harnessevolve.core.errors import TrajectoryError

TOOLS = [{"type": "function", "function": {"name": "lookup", "parameters": {"type": "object"}}}]


def doc(version: str, **agent: object) -> dict:
    return {
        "schema_version": version,
        "session_id": "s",
        "agent": {"name": "a", "version": "1", **agent},
        "steps": [{"step_id": 1, "source": "user", "message": "hi"}],
    }


def test_v1_5_tool_definitions_are_read_and_written_back(tmp_path: Path) -> None:
    trajectory = atif.from_dict(doc("ATIF-v1.5", tool_definitions=TOOLS))
    assert trajectory.tool_definitions == tuple(TOOLS)
    atif.save(trajectory, tmp_path / "t.json")
    again = json.loads((tmp_path / "t.json").read_text())
    assert again["schema_version"] == "ATIF-v1.5" and again["agent"]["tool_definitions"] == TOOLS
    assert atif.load(tmp_path / "t.json") == trajectory


@pytest.mark.parametrize("version", ["ATIF-v1.0", "ATIF-v1.3", "ATIF-v1.4"])
def test_older_versions_still_read_and_are_written_as_v1_4(version: str) -> None:
    trajectory = atif.from_dict(doc(version))
    assert trajectory.to_dict()["schema_version"] == "ATIF-v1.4"


@pytest.mark.parametrize("version", ["ATIF-v2.0", "ATIF-v3.1", "ATIF-v1.6"])
def test_newer_versions_are_refused_as_newer_than_supported(version: str, cli, tmp_path: Path) -> None:
    with pytest.raises(TrajectoryError, match="newer than supported"):
        atif.from_dict(doc(version))
    path = tmp_path / "new.json"
    path.write_text(json.dumps(doc(version)))
    result = cli.invoke(app, ["diff", str(path), str(path)])
    assert result.exit_code == 2
    assert result.output.startswith(f"Error: {path}: schema_version: {version} is newer than supported")
    assert "Traceback" not in result.output
