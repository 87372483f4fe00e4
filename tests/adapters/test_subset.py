"""``subset:SPLIT=N,...@SPEC``: a fixed slice of any benchmark, its references, its errors."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from harnessevolve.adapters import load_benchmark_spec
from harnessevolve.adapters.subset import cut_benchmark
from harnessevolve.adapters.validate import validate_spec
from harnessevolve.cli.app import app
from harnessevolve.core import paths
from harnessevolve.core.errors import BenchmarkError
from harnessevolve.scoring.references import load_references, user_references_dir


def ids(tasks) -> list[str]:
    return [t.id for t in tasks]


def test_a_slice_keeps_n_tasks_of_each_named_split_the_same_every_time() -> None:
    full = load_benchmark_spec("shell-basics")
    cut = load_benchmark_spec("subset:validation=2,test=3@shell-basics")
    assert len(cut.split("validation")) == 2 and len(cut.split("test")) == 3
    assert cut.split("train") == full.split("train")  # a split not named stays whole
    kept = set(ids(cut.tasks))
    assert ids(cut.tasks) == [t for t in ids(full.tasks) if t in kept]  # the benchmark's order
    again = load_benchmark_spec("subset:test=3,validation=2@shell-basics")
    assert again.tasks == cut.tasks
    assert cut.source == "subset:validation=2,test=3@shell-basics"
    wider = load_benchmark_spec("subset:validation=4@shell-basics")
    assert set(ids(cut.split("validation"))) <= set(ids(wider.split("validation")))  # one order
    assert wider.split("test") == full.split("test")
    salted = cut_benchmark(full, {"validation": 2}, source="x", salt="another")
    assert len(salted.split("validation")) == 2  # another salt: a seeded choice of its own
    assert set(ids(salted.split("validation"))) != set(ids(cut.split("validation")))
    bigger = load_benchmark_spec("subset:validation=999@shell-basics")
    assert bigger.tasks == full.tasks  # a limit above the split's size keeps it whole


def test_a_slice_is_the_same_benchmark_to_the_cache_and_the_reference_folders() -> None:
    full = load_benchmark_spec("nl2bash")
    cut = load_benchmark_spec("subset:test=3@nl2bash")
    assert cut.adapter == full.adapter != ""  # part of the rollout cache key: shared rollouts
    assert cut.name == full.name and cut.references_dir == full.references_dir
    assert user_references_dir(cut) == user_references_dir(full)  # refs import/generate write there
    refs = load_references(cut)
    assert refs and set(refs) <= set(ids(cut.tasks))  # the others' files are skipped, not errors
    nested = load_benchmark_spec("subset:test=2@subset:test=3@nl2bash")
    assert set(ids(nested.split("test"))) <= set(ids(cut.split("test")))


def test_a_slice_of_a_folder_suite_reads_its_trajectories_folder(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    shutil.copytree(paths.builtin_dir("benchmarks") / "shell-basics", suite)
    shutil.copytree(paths.builtin_dir("trajectories") / "shell-basics", suite / "trajectories")
    full = load_benchmark_spec(str(suite))
    cut = load_benchmark_spec(f"subset:validation=1,test=1,train=2@{suite}")
    assert len(cut.tasks) == 4
    assert set(load_references(cut)) == set(ids(cut.tasks)) & set(load_references(full))
    assert user_references_dir(cut) == user_references_dir(full)  # not ".../trajectories"


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("subset:validation=2", "no benchmark after '@'"),
        ("subset:validation=2@ ", "no benchmark after '@'"),
        ("subset:valid=2@shell-basics", "bad limit 'valid=2'"),
        ("subset:test=0@shell-basics", "bad limit 'test=0'"),
        ("subset:test=x@shell-basics", "bad limit 'test=x'"),
        ("subset:test=-1@shell-basics", "bad limit 'test=-1'"),
        ("subset:test=\u0663@shell-basics", "bad limit 'test=\u0663'"),  # an Arabic-Indic 3
        ("subset:@shell-basics", "bad limit ''"),
        ("subset:test=2,test=3@shell-basics", "bad limit 'test=3' (named twice)"),
    ],
)
def test_a_bad_slice_names_the_option_and_how_to_write_it(spec: str, said: str) -> None:
    with pytest.raises(BenchmarkError) as err:
        load_benchmark_spec(spec)
    assert said in err.value.message and err.value.field == "--benchmark"
    assert "subset:validation=8,test=12@nl2bash" in err.value.hint


def test_an_unknown_inner_benchmark_is_named() -> None:
    with pytest.raises(BenchmarkError, match="unknown benchmark 'nope'"):
        load_benchmark_spec("subset:test=2@nope")


def test_adapter_options_reach_the_sliced_benchmark(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "my_adapter.py").write_text(
        textwrap.dedent(
            """
            from dataclasses import replace
            from harnessevolve.core.tasks import load_benchmark

            class Mine:
                name = "mine"
                version = "7"

                def detect(self, spec):
                    return False

                def load(self, spec):
                    return replace(load_benchmark("shell-basics"), name="mine-" + spec)
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cut = load_benchmark_spec("subset:test=2@mine:x", adapters=("my_adapter:Mine",))
    assert cut.name == "mine-x" and len(cut.split("test")) == 2
    assert cut.adapter == "mine@7"


def test_validate_a_slice_and_an_adapter_subset_without_unknown_reference_problems() -> None:
    for spec in ("nl2bash:5", "subset:test=2@nl2bash"):
        report = validate_spec(spec)
        assert report is not None
        assert not [p for p in report.problems if "unknown task" in p.message], spec


def test_the_cli_refuses_a_bad_slice_with_exit_2(cli, tmp_path: Path) -> None:
    assert cli.invoke(app, ["init", str(tmp_path / "h")]).exit_code == 0
    result = cli.invoke(
        app, ["run", "-H", str(tmp_path / "h"), "-b", "subset:test=x@shell-basics", "-n", "1"]
    )
    assert result.exit_code == 2 and "bad limit 'test=x'" in result.output
    assert "Traceback" not in result.output


def test_a_salt_among_the_limits_draws_the_tasks_the_measurement_scripts_draw(tmp_path: Path) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "perf"))
    import task_subset  # noqa: F401  (registers efficacy-subset:)

    salted = load_benchmark_spec("subset:validation=3,salt=efficacy-subset@shell-basics")
    scripts = load_benchmark_spec("efficacy-subset:validation=3@shell-basics")
    plain = load_benchmark_spec("subset:validation=3@shell-basics")
    ids = lambda b: [t.id for t in b.split("validation")]  # noqa: E731
    assert ids(salted) == ids(scripts)
    assert ids(salted) != ids(plain)
    assert len(salted.split("test")) == len(plain.split("test"))


@pytest.mark.parametrize(
    "spec", ["subset:salt=a,salt=b,test=2@shell-basics", "subset:test=2,salt=@shell-basics"]
)
def test_a_bad_salt_is_refused_naming_the_field(spec: str) -> None:
    with pytest.raises(BenchmarkError, match="bad salt"):
        load_benchmark_spec(spec)
