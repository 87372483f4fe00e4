"""A benchmark folder written for a test: ``benchmark.yaml`` and one ``tasks/<id>.yaml`` a task
document; ``answer_task`` is the document of a train task checked by its answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def answer_task(task_id: str, instruction: str, expected: str, **fields: Any) -> dict[str, Any]:
    """A train task's document whose one check is the answer ``expected``; ``fields`` add or override."""
    return {
        "version": 1,
        "id": task_id,
        "split": "train",
        "instruction": instruction,
        "checker": [{"type": "answer", "expected": expected}],
        **fields,
    }


def write_suite(root: Path, name: str, *tasks: dict[str, Any]) -> Path:
    """The benchmark ``name`` at ``root`` with ``tasks`` (documents), each in the file of its id."""
    (root / "tasks").mkdir(parents=True)
    (root / "benchmark.yaml").write_text(f"version: 1\nname: {name}\n")
    for task in tasks:
        (root / "tasks" / f"{task['id']}.yaml").write_text(yaml.safe_dump(task))
    return root
