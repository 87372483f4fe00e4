"""benchmarks/perf/efficacy.py, a wrapper over ``harnessevolve compare``: its options become the
plan(s) it writes (the committed NL2Bash plan among them), the options compare cannot express are
refused with exit 2, and a run with --jobs makes one ``compare run --cells seed=S`` folder per seed
and joins them with ``compare merge``; --smoke runs every arm on scripted models. No real model:
the shipped scripted policy ``policy:learner`` plays the agent (it solves a family once the prompt
demonstrates it, which the evolve arm's demo proposer can give it)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from bench_subset import shell_basics_subset
from test_vs_gepa import PERF, load_script

from harnessevolve.compare.plan import load_plan
from harnessevolve.compare.results import read_result

efficacy = load_script("efficacy")
LEARNER = "scripted/policy:learner"


def args_of(*argv: str, out: Path | None = None) -> Any:
    return efficacy.parse_args([*argv, "--out", str(out or Path("unused"))])


def test_the_default_options_write_the_committed_nl2bash_plan() -> None:
    """--arms bestofk --validation 8 --test 0 is the plan of benchmarks/perf/plans/nl2bash-0.5b.yaml,
    field for field: its cells merge with the committed ones."""
    written = efficacy.plans(args_of("--arms", "bestofk", "--validation", "8", "--test", "0"))
    committed = yaml.safe_load((PERF / "plans" / "nl2bash-0.5b.yaml").read_text())
    assert set(written) == {"shell-agent"}
    assert written["shell-agent"] == committed


def test_every_arm_becomes_a_plan_compare_accepts(tmp_path: Path) -> None:
    """Each arm's translation loads as a plan (every field checked, as `compare run` checks it):
    the rule and agent arms are evolve arms with their proposers, --budget fixes GEPA's metric calls
    and best-of-k's k, the code arm is a second plan on the python-agent template."""
    argv = ["--model", LEARNER, "--reflector", LEARNER, "--benchmark", "shell-onecall", "--seeds", "2"]
    argv += ["--first-seed", "1", "--validation", "2", "--test", "3", "--budget", "6", "--temperature", "0.5"]
    argv += [
        "--arms",
        "code,rule,agent,gepa,bestofk",
        "--gates",
        str(PERF.parents[1] / "gates" / "default.yaml"),
    ]
    args = args_of(*argv, out=tmp_path / "out")
    written = efficacy.write_plans(args)
    assert set(written) == {"shell-agent", "python-agent"}
    shell, code = load_plan(written["shell-agent"]), load_plan(written["python-agent"])
    assert shell.seeds == code.seeds == (1,)
    assert shell.benchmark == "subset:validation=2,test=3,salt=efficacy-subset@shell-onecall"
    assert [len(shell.suite.split(s)) for s in ("validation", "test")] == [2, 3]
    assert [a.name for a in shell.arms] == [
        "seed",
        "evolve",
        "evolve-llm-rule",
        "evolve-agent",
        "gepa",
        "best-of-k",
    ]
    rule, agent = shell.arm("evolve-llm-rule").run_options, shell.arm("evolve-agent").run_options
    assert rule["proposers"] == ("llm-rule", "ablate", "demo", "rules") and rule["optimizer_model"] == LEARNER
    assert agent["proposers"][0] == "agent" and agent["max_proposer_tokens"] == 400_000
    assert shell.arm("evolve").run_options["gates_file"].name == "default.yaml"
    assert shell.arm("gepa").budget == 6 and shell.arm("gepa").matched_to is None
    best = shell.arm("best-of-k")
    assert best.k == 2 and best.matched_to is None and best.temperature == 0.5  # round(6 / 3 test tasks)
    assert code.harness.template == "python-agent" and [a.name for a in code.arms] == ["seed", "evolve"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--from-json", "old.json"], "compare merge"),
        (["--merge", "a.json", "b.json"], "compare merge DIR"),
        (["--target-gain", "15"], "paired gain"),
    ],
)
def test_what_compare_cannot_express_is_refused_with_exit_2(
    argv: list[str], said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        efficacy.main([*argv, "--out", str(tmp_path / "out")])
    assert done.value.code == 2
    error = capsys.readouterr().err
    assert argv[0] in error and said in error
    assert not (tmp_path / "out").exists()  # no plan written, nothing run


def test_an_unknown_arm_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        efficacy.main(["--arms", "bestofk,sampling"])
    assert done.value.code == 2 and "unknown arm(s): sampling" in capsys.readouterr().err


@pytest.fixture(scope="module")
def jobs_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two seeds at once (--jobs 2): seed, evolve and matched best-of-k on one shell-basics family."""
    root = tmp_path_factory.mktemp("efficacy-jobs")
    bench = shell_basics_subset(root / "bench", ("count-lines",))
    out, table = root / "out", root / "table.json"
    argv = ["--model", LEARNER, "--benchmark", str(bench), "--validation", "0", "--test", "0"]
    argv += ["--seeds", "2", "--jobs", "2", "--generations", "1", "--batch-size", "2", "--arms", "bestofk"]
    argv += ["--out", str(out), "--json", str(table)]
    with pytest.MonkeyPatch.context() as patch:
        for role in ("AUTHOR", "COMMITTER"):
            patch.setenv(f"GIT_{role}_NAME", "harnessevolve tests")
            patch.setenv(f"GIT_{role}_EMAIL", "tests@harnessevolve.invalid")
        patch.setenv("HARNESSEVOLVE_REFERENCES", str(root / "user-references"))
        code = efficacy.main(argv)
    return {
        "code": code,
        "argv": argv,
        "out": out,
        "doc": json.loads(table.read_text()) if code == 0 else None,
    }


def test_jobs_run_one_compare_per_seed_and_merge_them(jobs_run: dict[str, Any]) -> None:
    assert jobs_run["code"] == 0
    out, doc = jobs_run["out"], jobs_run["doc"]
    for seed in (0, 1):
        folder = out / "shell-agent" / f"seed-{seed}"
        results = [read_result(p) for p in sorted(folder.glob("cells/*/*/result.json"))]
        assert sorted(r.cell_id for r in results) == [
            f"{a}/seed-{seed}" for a in ("best-of-k", "evolve", "seed")
        ]
        assert all(r.command.endswith(f"--cells seed={seed}") for r in results)
        assert (folder / "plan.yaml").read_text() == (out / "shell-agent.yaml").read_text()
    table = doc["tables"]["shell-agent"]
    rows = {row["label"].split(" k=")[0]: row for row in table["rows"]}
    assert set(rows) == {"seed", "evolve", "best-of-k (sc)", "best-of-k (pass@k oracle)"}
    assert all(set(row["per_seed"]) == {"0", "1"} for row in rows.values())
    assert rows["seed"]["mean"] == 0.0  # the learner fails every task of the seed harness
    evolve, best = rows["evolve"], rows["best-of-k (sc)"]
    assert best["rollouts"] != {} and evolve["vs_seed"]["points"] == evolve["mean"]
    assert doc["compare_commands"] == [
        f"harnessevolve compare run {out / 'shell-agent.yaml'} --out {out / 'shell-agent' / f'seed-{s}'} "
        f"--cells seed={s}"
        for s in (0, 1)
    ]
    assert doc["command"].endswith("benchmarks/perf/efficacy.py " + " ".join(jobs_run["argv"]))


def test_a_used_folder_needs_resume_and_resume_keeps_its_cells(
    jobs_run: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    argv = jobs_run["argv"][:-2]  # without --json FILE
    assert argv[-2:] == ["--out", str(jobs_run["out"])]
    capsys.readouterr()
    assert efficacy.main(argv) == 2  # compare refuses a folder holding cells without --resume
    assert "--resume" in capsys.readouterr().out
    assert efficacy.main([*argv, "--resume"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("3 cell(s) had finished before: kept") == 2
    assert "merged from 2 folder(s)" in printed


def test_help_documents_the_arms(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        efficacy.main(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    for word in (
        "kind: seed",
        "kind: evolve",
        "kind: gepa",
        "kind: best-of-k",
        "python-agent",
        "--jobs",
        "Dropped",
    ):
        assert word in text


@pytest.mark.slow  # a minute or two: 3 seeds x 7 arms of real (sandboxed) rollouts on scripted models
def test_smoke_mode_runs_every_arm_on_three_seeds(tmp_path: Path) -> None:
    """--smoke: the scripted agent submits only when the loop or the submit tool makes it, so the
    behaviour edits (agent code on python-agent, the submit tool on shell-agent) can gain where a
    batch shows the failure; prompts (GEPA, llm-rule's rules) and sampling cannot."""
    out, table = tmp_path / "out", tmp_path / "smoke.json"
    assert efficacy.main(["--smoke", "--out", str(out), "--json", str(table)]) == 0
    doc = json.loads(table.read_text())
    assert doc["smoke"] is True and set(doc["tables"]) == {"shell-agent", "python-agent"}
    shell = {row["arm"]: row for row in doc["tables"]["shell-agent"]["rows"] if "oracle" not in row["label"]}
    assert set(shell) == {"seed", "evolve", "evolve-llm-rule", "evolve-agent", "gepa", "best-of-k"}
    assert all(len(row["per_seed"]) == 3 for row in shell.values())
    for arm in ("seed", "evolve-llm-rule", "gepa", "best-of-k"):
        assert shell[arm]["mean"] == 0.0, arm
    for arm in ("evolve", "evolve-agent"):
        assert set(shell[arm]["per_seed"].values()) <= {0.0, 100.0}
    code = {row["arm"]: row for row in doc["tables"]["python-agent"]["rows"]}
    assert code["seed"]["mean"] == 0.0 and set(code["evolve"]["per_seed"].values()) <= {0.0, 100.0}
