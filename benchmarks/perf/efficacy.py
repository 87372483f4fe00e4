"""Efficacy on an external benchmark (issue 21): harnessevolve vs GEPA vs best-of-k vs the seed.

One invocation; every arm gets the same agent model (default local/qwen2.5-coder-0.5b, fetched
with ``harnessevolve models fetch``), the same seed harness (the ``shell-agent`` template), the
same tasks and splits (default NL2Bash from icalfa, optionally cut to a fixed subset), the same
agent loop and checkers (``scoring.scorer.Scorer``) and the same rollout budget B. Arms, per seed:

  seed harness        the template unchanged, temperature 0 (no budget; the same on every seed).
  harnessevolve       ``harnessevolve run`` with the default offline proposers (auto: ablate,
                      behaviour, tools, loop, demo, rules; no model), gates/default.yaml,
                      --generations G, --batch-size M. Its rollouts are the budget B of the arms below.
  harnessevolve (python-agent)
                      the same run on the ``python-agent`` template (agent.kind: command, its loop in
                      agent.py, editable): code edits (unified diffs on agent.py) are edit targets.
                      Its gain is against that template's own seed score (row ``seed (python-agent)``).
  harnessevolve+rule  the same run with proposers llm-rule,ablate,demo,rules: the small-model rule
                      proposer first (--optimizer-model = --reflector), the offline ones after it.
                      Its rollouts are reported (G generations, like the default arm); its
                      proposal / acceptance / refusal / leakage-rejection counts come from the ledger.
  GEPA                gepa 0.1.4 through its adapter API, max_metric_calls = B, reflection model =
                      --reflector (default local/qwen2.5-coder-1.5b), candidate = prompts/*.md and
                      the skills' SKILL.md bodies.
  best-of-k           the seed harness at --temperature, k = round(B / |test|) samples per test task:
                      ``sc`` picks one sample per task without the checker (self-consistency over the
                      runs that submitted) and is deployable; ``pass@k`` (any sample passes) is an
                      oracle bound.

Every arm's final harness is scored once on the test split at temperature 0. Cells are mean ± sd
over seeds. Targets: harnessevolve's test gain >= +15 points with a 0.5B agent model, +10 with any
other (--target-gain sets it); >= GEPA's gain with <= half GEPA's
rollouts (rollouts harnessevolve needed to reach GEPA's best validation score); above best-of-k (sc).

The JSON (--json) holds ``command`` (the exact command line, with HARNESSEVOLVE_LOCAL_THREADS when
set), ``seeds`` (one object per seed: arm -> its numbers), ``summary``, ``wall_min`` and the
machine's load average at the start and the end. --smoke runs the whole table on scripted models
(shell-basics, 2 validation / 2 test tasks, 3 seeds; a few minutes, its rollouts are real sandboxed
runs): a check that every arm runs and is scored, not a measurement.

Examples:
    .venv/bin/python benchmarks/perf/efficacy.py --seeds 3 --jobs 3 --threads 1 --json out.json
    .venv/bin/python benchmarks/perf/efficacy.py --smoke --json /tmp/smoke.json
    .venv/bin/python benchmarks/perf/efficacy.py --seeds 1 --generations 1 --validation 12 --test 16
    .venv/bin/python benchmarks/perf/efficacy.py --from-json out.json   # re-print a saved table

--budget B fixes the budget of GEPA and best-of-k instead of taking the harnessevolve arm's spend;
with --jobs > 1 every (seed, arm) pair then runs in its own process at once (the harnessevolve arms
spend what their --generations take; the table shows each arm's real rollouts).
--validation/--test N keep N tasks of that split (a fixed, seeded choice; 0 = all). The benchmark
may be any --benchmark spec (a folder, harbor:PATH, nl2bash:5, an installed adapter's). The table
is followed by the total wall time. docs/compare.md holds the measured tables.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from efficacy_table import ARMS, print_table, summarize, target_gain  # noqa: E402
from gepa_arm import harness_components  # noqa: E402
from harness_arms import (  # noqa: E402
    ProgressLine,
    evolve,
    init_harness,
    make_scorer,
    score_split,
    set_local_threads,
    unevolved_row,
)
from proposer_counts import proposer_counts  # noqa: E402
from task_subset import SUBSET  # noqa: E402  (importing it registers the efficacy-subset: adapter)
from vs_gepa import gepa_arm  # noqa: E402

from harnessevolve.adapters import load_benchmark_spec  # noqa: E402
from harnessevolve.harness.load import load_harness  # noqa: E402
from harnessevolve.scoring.best_of_k import best_of_k, sampling_harness  # noqa: E402
from harnessevolve.scoring.scorer import mean_score  # noqa: E402
from harnessevolve.scoring.sequential import RepeatedScorer  # noqa: E402

RULE_PROPOSERS = ("llm-rule", "ablate", "demo", "rules")
AGENT_PROPOSERS = ("agent", "ablate", "demo", "rules")
"""The agent arm: the coding-agent optimizer (``--proposer agent``, model --reflector) first, the
offline proposers after it when it gives no valid candidate."""
AGENT_PROPOSER_TOKENS = 400_000
"""The agent arm's separate proposer budget (``--max-proposer-tokens``) per run."""
CODE_TEMPLATE = "python-agent"
ARM_CHOICES = ("code", "rule", "agent", "gepa", "bestofk")
REPO = Path(__file__).resolve().parents[2]
__all__ = ["ARMS", "main"]


def benchmark_spec(args: argparse.Namespace) -> str:
    limits = [f"{s}={n}" for s, n in (("validation", args.validation), ("test", args.test)) if n]
    return f"{SUBSET}:{','.join(limits)}@{args.benchmark}" if limits else args.benchmark


# ---------------------------------------------------------------- one seed


def init_template(dest: Path, template: str | None) -> Path:
    """``harnessevolve init DEST [--template T]``: a template in its own git repository."""
    if template is None:
        return init_harness(dest)
    cli = [sys.executable, "-m", "harnessevolve.cli", "init", str(dest), "--template", template]
    subprocess.run(cli, check=True, capture_output=True, cwd=REPO)
    return dest


def run_optimizer(
    args: argparse.Namespace, seed: int, tmp: Path, arm: str, ctx: dict[str, Any]
) -> dict[str, Any]:
    started = time.monotonic()
    name = arm.replace(" ", "").replace("+", "-").replace("(", "").replace(")", "")
    code = arm == "harnessevolve (python-agent)"
    directory = init_template(tmp / f"{name}-{seed}", CODE_TEMPLATE if code else None)
    with_rule = arm == "harnessevolve + llm-rule"
    with_agent = arm == "harnessevolve + agent"
    proposers = RULE_PROPOSERS if with_rule else AGENT_PROPOSERS if with_agent else ("auto",)
    outcome = evolve(
        directory,
        benchmark=ctx["spec"],
        generations=args.generations,
        batch_size=args.batch_size,
        seed=seed,
        model=ctx["model"],
        gates=args.gates,
        log=lambda m: print(f"  [seed {seed}] {arm}: {m}", flush=True),
        progress=ProgressLine(f"seed {seed} {arm}"),
        proposers=proposers,
        optimizer_model=args.reflector if with_rule or with_agent else None,
        max_proposer_tokens=AGENT_PROPOSER_TOKENS if with_agent else None,
    )
    test = mean_score(score_split(ctx["evalscorer"], load_harness(directory), ctx["test"], f"test: {arm}"))
    row = {
        "rollouts": outcome.rollouts,
        "tokens": outcome.tokens,
        "wall_min": (time.monotonic() - started) / 60,
        "validation": outcome.best_validation,
        "test": test,
        "to_best": outcome.rollouts_to_best,
        "accepted": outcome.accepted,
        "curve": list(outcome.validation_curve),
        "run_id": outcome.run_id,
        "prompt": (directory / "prompts" / "system.md").read_text(),
    }
    if code:
        row["agent_py_changed"] = (directory / "agent.py").read_text() != ctx["code_seed_agent"]
    if with_rule:
        row["llm_rule"] = proposer_counts(directory, outcome.run_id, "llm-rule")
    if with_agent:
        row["agent"] = proposer_counts(directory, outcome.run_id, "agent")
    print(f"  [seed {seed}] {arm}: {outcome.rollouts} rollouts, {outcome.accepted} accepted, test {test:.3f}")
    return row


def gepa_rows(args: argparse.Namespace, seed: int, ctx: dict[str, Any], tmp: Path, budget: int) -> dict:
    gepa, best = gepa_arm(ctx, ctx["test"], args.reflector, args.reflection_max_tokens, seed, tmp, budget)
    print(
        f"  [seed {seed}] GEPA: {gepa['rollouts']} rollouts, {gepa['reflection_calls']} reflections, "
        f"test {gepa['test']:.3f}"
    )
    changed = {k: v for k, v in best.items() if v != ctx["seed_components"].get(k)}
    return {"GEPA": {**gepa, "budget": budget, "changed": changed}}


def best_of_k_rows(args: argparse.Namespace, seed: int, ctx: dict[str, Any], tmp: Path, budget: int) -> dict:
    started = time.monotonic()
    k = max(1, round(budget / len(ctx["test"])))
    sampler = sampling_harness(ctx["seed_dir"], tmp / f"bok-{seed}", args.temperature)
    repeated = RepeatedScorer(
        make_scorer(
            ctx["bench"], ctx["model"], seed=1_000 * (seed + 1), on_progress=ProgressLine(f"seed {seed} bok")
        )
    )
    # the package's best-of-k (report --final's matched-budget control): all k samples at --temperature
    on_test = asyncio.run(best_of_k(repeated, sampler, ctx["test"], k, "best-of-k: test")).arms()
    print(f"  [seed {seed}] best-of-{k}: sc {on_test['sc']:.3f}, pass@k {on_test['pass@k']:.3f}")
    return {
        arm: {
            "rollouts": repeated.rollouts,
            "tokens": repeated.tokens,
            "wall_min": (time.monotonic() - started) / 60,
            "validation": float("nan"),
            "test": on_test[key],
            "to_best": repeated.rollouts,
            "k": k,
            "pass@1": on_test["pass@1"],
        }
        for arm, key in (("best-of-k (sc)", "sc"), ("best-of-k (pass@k oracle)", "pass@k"))
    }


def run_arm(
    args: argparse.Namespace, seed: int, arm: str, ctx: dict[str, Any], tmp: Path, budget: int | None
) -> dict[str, dict[str, Any]]:
    """One arm of one seed: its rows (best-of-k gives two). GEPA and best-of-k need ``budget``."""
    if arm == "he":
        return {"harnessevolve": run_optimizer(args, seed, tmp, "harnessevolve", ctx)}
    if arm == "rule":
        return {"harnessevolve + llm-rule": run_optimizer(args, seed, tmp, "harnessevolve + llm-rule", ctx)}
    if arm == "agent":
        return {"harnessevolve + agent": run_optimizer(args, seed, tmp, "harnessevolve + agent", ctx)}
    if arm == "code":
        name = "harnessevolve (python-agent)"
        return {name: run_optimizer(args, seed, tmp, name, ctx)}
    assert budget is not None
    return (gepa_rows if arm == "gepa" else best_of_k_rows)(args, seed, ctx, tmp, budget)


def finish_seed(
    rows: dict[str, dict[str, Any]], seed_row: dict[str, Any], code_seed_row: dict[str, Any] | None = None
) -> dict[str, dict[str, Any]]:
    """The seed rows first; each arm's gain against the seed it started from (the python-agent arm's
    against the python-agent template's score, every other arm's against the shell-agent seed's)."""
    seeds = {"seed harness": dict(seed_row)}
    if code_seed_row is not None and "harnessevolve (python-agent)" in rows:
        seeds["seed (python-agent)"] = dict(code_seed_row)
    rows = {**seeds, **rows}
    for arm, row in rows.items():
        base = code_seed_row if "python-agent" in arm and code_seed_row is not None else seed_row
        row["gain_pts"] = (row["test"] - base["test"]) * 100
    return rows


def run_seed(
    args: argparse.Namespace, seed: int, ctx: dict[str, Any], tmp: Path
) -> dict[str, dict[str, Any]]:
    """Every arm of one seed, one after the other; B = --budget, else the harnessevolve arm's rollouts."""
    rows = run_arm(args, seed, "he", ctx, tmp, None)
    budget = args.budget or rows["harnessevolve"]["rollouts"]
    save_partial(args, seed, rows)
    for arm in args.arms:
        rows.update(run_arm(args, seed, arm, ctx, tmp, budget))
        save_partial(args, seed, rows)
    return finish_seed(rows, ctx["seed_row"], ctx.get("code_seed_row"))


def arm_in_process(args: argparse.Namespace, seed: int, arm: str, tmp: Path) -> dict[str, dict[str, Any]]:
    """One (seed, arm) in a --jobs worker (with a fixed --budget every arm runs at once)."""
    rows = run_arm(args, seed, arm, prepare(args, tmp), tmp, args.budget)
    save_partial(args, seed, rows, suffix=f".{arm}")
    return rows


def save_partial(args: argparse.Namespace, seed: int, rows: dict[str, Any], suffix: str = "") -> None:
    """Each seed's (or arm's) numbers so far, beside ``--json``: they survive a later failure or a kill."""
    if args.json:
        args.json.with_suffix(f".seed{seed}{suffix}.json").write_text(json.dumps(rows, indent=2, default=str))


# ---------------------------------------------------------------- main


def prepare(args: argparse.Namespace, tmp: Path, seed_row: dict[str, Any] | None = None) -> dict[str, Any]:
    """Benchmark, seed harness and the final-scoring scorer of one process (main or a --jobs worker)."""
    if args.threads:
        os.environ["HARNESSEVOLVE_LOCAL_THREADS"] = str(args.threads)
        set_local_threads(args.threads)
    spec = benchmark_spec(args)
    bench = load_benchmark_spec(spec)
    seed_dir = init_harness(tmp / f"seed-{os.getpid()}-{time.monotonic_ns()}")
    code_seed = init_template(tmp / f"code-seed-{os.getpid()}-{time.monotonic_ns()}", CODE_TEMPLATE)
    return {
        "code_seed_dir": code_seed,
        "code_seed_agent": (code_seed / "agent.py").read_text(),
        "spec": spec,
        "bench": bench,
        "test": bench.split("test"),
        "model": args.model,
        "seed_dir": seed_dir,
        "seed_components": harness_components(seed_dir),
        "evalscorer": make_scorer(bench, args.model, on_progress=ProgressLine("final scoring")),
        "seed_row": seed_row,
    }


def seed_in_process(
    args: argparse.Namespace, seed: int, seed_rows: tuple[dict[str, Any], dict[str, Any] | None], tmp: Path
) -> dict:
    ctx = prepare(args, tmp, seed_rows[0])
    ctx["code_seed_row"] = seed_rows[1]
    return run_seed(args, seed, ctx, tmp)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--benchmark", default="nl2bash", help="benchmark spec (default nl2bash: icalfa NL2Bash)"
    )
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b", help="agent model of every arm")
    parser.add_argument(
        "--reflector", default="local/qwen2.5-coder-1.5b", help="GEPA's reflection model and llm-rule's model"
    )
    parser.add_argument(
        "--target-gain",
        type=float,
        default=None,
        help="the test-gain target in points (default: +15 for a 0.5B agent model, +10 otherwise)",
    )
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--generations", type=int, default=2, help="harnessevolve generations (sets B)")
    parser.add_argument("--batch-size", type=int, default=8, help="harnessevolve minibatch")
    parser.add_argument("--validation", type=int, default=16, help="validation tasks kept (0 = all)")
    parser.add_argument("--test", type=int, default=24, help="test tasks kept (0 = all)")
    parser.add_argument(
        "--gates", type=Path, default=None, help="gate thresholds (default gates/default.yaml)"
    )
    parser.add_argument(
        "--arms",
        default="code,gepa,bestofk",
        help="arms besides the seed and harnessevolve (always run): code (harnessevolve on the "
        "python-agent template), rule (harnessevolve + llm-rule), agent (harnessevolve with the "
        "coding-agent optimizer, --proposer agent, model --reflector), gepa, bestofk (comma list)",
    )
    parser.add_argument(
        "--smoke",
        action="store_true",
        help="every arm on scripted models, 3 seeds, tiny shell-basics splits: minutes, no real model",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="fixed rollout budget B of GEPA and best-of-k (default: what the harnessevolve arm spent); "
        "with --jobs > 1 it lets every (seed, arm) run at once",
    )
    parser.add_argument("--reflection-max-tokens", type=int, default=320)
    parser.add_argument("--temperature", type=float, default=0.7, help="best-of-k sampling temperature")
    parser.add_argument("--jobs", type=int, default=1, help="seeds run at once, one process each")
    parser.add_argument(
        "--threads", type=int, default=None, help="llama.cpp threads per process (1 on a busy machine)"
    )
    parser.add_argument(
        "--json", type=Path, default=None, help="write every number here (and per seed beside it)"
    )
    parser.add_argument("--from-json", type=Path, default=None, help="print a saved run's table; run nothing")
    parser.add_argument(
        "--first-seed",
        type=int,
        default=0,
        help="run seeds FIRST..SEEDS-1 only (the rest ran elsewhere; --merge joins the parts)",
    )
    parser.add_argument(
        "--merge",
        type=Path,
        nargs="+",
        default=None,
        help="join saved parts (whole --json files, or a killed run's per-seed .seedN.json) into one "
        "result, written to --json; the seed harness rows come from a whole part",
    )
    args = parser.parse_args(argv)
    if args.smoke:
        smoke_arguments(args)
    args.arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    unknown = set(args.arms) - set(ARM_CHOICES)
    if unknown:
        parser.error(f"unknown arm(s): {', '.join(sorted(unknown))}")
    return args


def score_seed_harness(ctx: dict[str, Any], key: str = "seed_dir") -> dict[str, Any]:
    """A seed harness (``key``: the shell-agent seed, or ``code_seed_dir``) on validation and test
    (temperature 0: one pass serves every seed)."""
    started = time.monotonic()
    harness = load_harness(ctx[key])
    seed_val = mean_score(
        score_split(ctx["evalscorer"], harness, ctx["bench"].split("validation"), "seed: val")
    )
    seed_test = mean_score(score_split(ctx["evalscorer"], harness, ctx["test"], "seed: test"))
    print(f"seed {harness.name}: validation {seed_val:.3f}, test {seed_test:.3f}", flush=True)
    return unevolved_row(seed_val, seed_test, started)


def score_seeds(args: argparse.Namespace, ctx: dict[str, Any]) -> None:
    ctx["seed_row"] = score_seed_harness(ctx)
    ctx["code_seed_row"] = score_seed_harness(ctx, "code_seed_dir") if "code" in args.arms else None


def command_line(argv: Sequence[str]) -> str:
    """The exact command that ran this script (the thread setting included when it was set)."""
    python = os.path.relpath(sys.executable, REPO) if sys.executable.startswith(str(REPO)) else sys.executable
    script = os.path.relpath(Path(__file__).resolve(), REPO)
    threads = os.environ.get("HARNESSEVOLVE_LOCAL_THREADS")
    prefix = f"HARNESSEVOLVE_LOCAL_THREADS={threads} " if threads else ""
    return prefix + shlex.join([python, script, *argv])


def smoke_arguments(args: argparse.Namespace) -> None:
    """--smoke: scripted agent and reflector (efficacy_smoke.py), every arm, tiny splits, 3 seeds."""
    from efficacy_smoke import register_smoke_models

    args.model, args.reflector = register_smoke_models()
    args.benchmark, args.validation, args.test = "shell-basics", 2, 2
    args.generations, args.batch_size, args.arms = 1, 2, ",".join(ARM_CHOICES)
    args.seeds, args.jobs, args.threads = 3, 1, None


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    load_start = os.getloadavg()
    if args.from_json:
        saved = json.loads(args.from_json.read_text())
        model = (saved.get("args") or {}).get("model")
        print_table(saved["seeds"], summarize(saved["seeds"], _target(args, model)))
        return 0
    if args.merge:
        return merge(args.merge, args.json, _target(args, args.model))
    total = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="he-efficacy-") as tmp_name:
        tmp = Path(tmp_name)
        ctx = prepare(args, tmp)
        bench = ctx["bench"]
        print(
            f"{bench.name}: {len(bench.split('train'))} train / {len(bench.split('validation'))} "
            f"validation / {len(ctx['test'])} test tasks; agent {args.model}; reflector {args.reflector}",
            flush=True,
        )
        if args.jobs > 1:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            context = multiprocessing.get_context("spawn")  # llama.cpp and asyncio do not survive fork
            with ProcessPoolExecutor(max_workers=args.jobs, mp_context=context) as pool:
                if args.budget:  # every (seed, arm) at once; the seed harness here meanwhile
                    jobs = {
                        (s, arm): pool.submit(arm_in_process, args, s, arm, tmp)
                        for s in range(args.first_seed, args.seeds)
                        for arm in ("he", *args.arms)
                    }
                    score_seeds(args, ctx)
                    per_seed = []
                    for s in range(args.first_seed, args.seeds):
                        rows: dict[str, dict[str, Any]] = {}
                        for arm in ("he", *args.arms):
                            rows.update(jobs[(s, arm)].result())
                        per_seed.append(finish_seed(rows, ctx["seed_row"], ctx["code_seed_row"]))
                else:
                    score_seeds(args, ctx)
                    rows_of_seeds = (ctx["seed_row"], ctx["code_seed_row"])
                    futures = [
                        pool.submit(seed_in_process, args, s, rows_of_seeds, tmp)
                        for s in range(args.first_seed, args.seeds)
                    ]
                    per_seed = [f.result() for f in futures]
        else:
            score_seeds(args, ctx)
            per_seed = [run_seed(args, s, ctx, tmp) for s in range(args.first_seed, args.seeds)]
    summary = summarize(per_seed, _target(args, args.model))
    print_table(per_seed, summary)
    wall = (time.monotonic() - total) / 60
    print(f"total wall time {wall:.1f} min")
    if args.json:
        doc = {
            "command": command_line(argv),
            "smoke": args.smoke,
            "args": {k: str(v) for k, v in vars(args).items()},
            "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
            "cpus": os.cpu_count(),
            "wall_min": wall,
            "seed_ids": list(range(args.first_seed, args.seeds)),
            "seed_rows": {"shell-agent": ctx["seed_row"], "python-agent": ctx.get("code_seed_row")},
            "seeds": per_seed,
            "summary": summary,
        }
        args.json.write_text(json.dumps(doc, indent=2, default=str))
    return 0


def _target(args: argparse.Namespace, model: str | None) -> float:
    return args.target_gain if args.target_gain is not None else target_gain(model)


def merge(parts: Sequence[Path], out: Path | None, target: float) -> int:
    """Join the parts of one configuration run in several invocations (``--first-seed``): whole
    documents as they are, a killed run's per-seed file finished with a whole part's seed rows
    (the seed harnesses score the same at temperature 0). Prints the joined table."""
    docs = [json.loads(p.read_text()) for p in parts]
    with_rows = [d for d in docs if "seed_rows" in d]
    if not with_rows:
        raise SystemExit(
            '--merge needs a whole --json document, or a file {"seed_rows": ...} of the seed harness rows'
        )
    rows = with_rows[0]["seed_rows"]
    whole = [d for d in docs if "seeds" in d] or with_rows
    per_seed, commands, pieces = [], [], []
    for path, doc in zip(parts, docs, strict=True):
        if "seeds" not in doc and "seed_rows" in doc:  # the seed harness rows alone
            commands += [doc["command"]] if "command" in doc else []
            pieces.append({"seed_rows_file": path.name, "note": doc.get("note", "")})
        elif "seeds" in doc:
            per_seed += doc["seeds"]
            commands.append(doc["command"])
            pieces.append({k: doc.get(k) for k in ("command", "seed_ids", "load_average", "wall_min")})
        else:
            per_seed.append(finish_seed(doc, rows["shell-agent"], rows["python-agent"]))
            pieces.append({"per_seed_file": path.name, "note": "a killed run's finished seed"})
    summary = summarize(per_seed, target)
    print_table(per_seed, summary)
    if out:
        merged = {
            "command": " && ".join(commands),
            "merged_from": pieces,
            "seed_rows": rows,
            "args": whole[0].get("args"),
            "cpus": os.cpu_count(),
            "seeds": per_seed,
            "summary": summary,
        }
        out.write_text(json.dumps(merged, indent=2, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
