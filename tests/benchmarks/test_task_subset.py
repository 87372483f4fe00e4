"""benchmarks/perf/task_subset.py: the subset's reference folder holds exactly the kept tasks'
references as shipped now, whatever an earlier run left in it."""

from __future__ import annotations

from pathlib import Path

from test_vs_gepa import load_script

task_subset = load_script("task_subset")


def test_subset_references_are_fresh_copies_of_the_kept_tasks(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(task_subset.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    shipped = tmp_path / "refs"
    shipped.mkdir()
    for name in ("a", "b", "c"):
        (shipped / f"{name}.json").write_text(f'{{"v": "{name}1"}}')
    first = task_subset.subset_references(shipped, {"a", "b", "c"}, "spec")
    assert sorted(p.name for p in first.glob("*.json")) == ["a.json", "b.json", "c.json"]
    (shipped / "a.json").write_text('{"v": "a2"}')  # a reference changed
    (shipped / "c.json").unlink()  # a task left the benchmark (its reference with it)
    again = task_subset.subset_references(shipped, {"a", "c"}, "spec")
    assert again == first
    assert sorted(p.name for p in again.glob("*.json")) == ["a.json"]  # b not kept, c not shipped
    assert (again / "a.json").read_text() == '{"v": "a2"}'
