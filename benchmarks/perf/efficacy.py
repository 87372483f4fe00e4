"""Efficacy on an external benchmark (issues 21 and 56): a thin wrapper over ``harnessevolve compare``.

It turns the options this script has always taken into a comparison plan, writes the plan into the
output folder, runs ``harnessevolve compare run`` on it and prints compare's table; every figure is
compare's, from its cells' result files (``OUT/<plan>/cells/<arm>/seed-N/result.json``), so a
figure made here can be committed under ``benchmarks/perf/results/<table>/`` and quoted like any
other compare table (``compare_tables.py``). Arms (every one with the same agent model, seed harness,
tasks, splits, agent loop and checkers: those of the plan):

  seed               ``kind: seed``: the shell-agent template unchanged (always run).
  evolve             ``kind: evolve``: ``harnessevolve run`` with the default offline proposers,
                     --generations G, --batch-size M (and --gates) (always run).
  rule               ``kind: evolve`` named ``evolve-llm-rule``: proposers llm-rule,ablate,demo,rules,
                     optimizer model --reflector.
  agent              ``kind: evolve`` named ``evolve-agent``: proposers agent,ablate,demo,rules (the
                     coding-agent optimizer first), optimizer model --reflector, 400,000 proposer tokens.
  code               the python-agent template (its loop in agent.py, editable): a second plan,
                     ``python-agent.yaml``, with its own seed and evolve arms, since a plan has one
                     seed harness for all its arms; its table is printed apart (compare merges only
                     cells of one seed harness).
  gepa               ``kind: gepa``: reflection model --reflector (max tokens
                     --reflection-max-tokens), matched to the evolve arm's rollouts, or --budget.
  bestofk            ``kind: best-of-k``: k matched to the evolve arm's rollouts, or round(--budget /
                     test tasks); at --temperature when given (compare's default otherwise: the
                     seed's own, 0.7 for a greedy seed). Its table rows: sc (deployable) and the
                     pass@k oracle.

The benchmark is --benchmark cut to --validation / --test tasks (``subset:...,salt=efficacy-subset@SPEC``:
the fixed, seeded slice this script has always drawn; 0 keeps a whole split). So
``efficacy.py --arms bestofk --validation 8 --test 0`` writes the plan of
``benchmarks/perf/plans/nl2bash-0.5b.yaml`` and makes cells that merge with the committed ones.

--jobs N: each (plan, seed) runs as its own ``compare run --cells seed=S`` process into its own
folder (``OUT/<plan>/seed-S``), N at once, then ``harnessevolve compare merge`` joins the folders
into one table. --jobs 1: one ``compare run`` per plan into ``OUT/<plan>``. --resume goes on in a
folder that holds cells (compare's --resume). --json FILE writes compare's table JSON (per plan),
with the command lines that made it. --threads T sets HARNESSEVOLVE_LOCAL_THREADS for the runs.

--smoke: scripted agent and reflector (``efficacy_smoke.py``), every arm, shell-basics cut to
2 validation / 2 test tasks, 1 generation, batch 2, 3 seeds: seconds to minutes, its rollouts are
real sandboxed runs; a check that every arm runs and is scored, not a measurement.

Dropped when the script became a wrapper (each refused with exit 2 and a hint):
--from-json and --merge (the old one-process JSON; ``harnessevolve compare merge DIR...`` re-prints
and joins compare's folders) and --target-gain (compare's table shows gains with their intervals,
not the issue's targets). The old JSON's per-arm validation curves, rollouts-to-best, prompts and
proposer counts are not in compare's result files; each evolve cell's run (its ledger) is kept
under ``OUT/<plan>/.../cells/<arm>/seed-N/work/harness``. The measurements that script made before
compare existed are in docs/compare.md ("Earlier measurements with efficacy.py").

Examples:
    .venv/bin/python benchmarks/perf/efficacy.py --smoke --out /tmp/efficacy-smoke
    HARNESSEVOLVE_LOCAL_THREADS=1 .venv/bin/python benchmarks/perf/efficacy.py --seeds 3 --jobs 2 \\
        --arms bestofk --validation 8 --test 0 --out /tmp/nl2bash-0.5b --json /tmp/nl2bash-0.5b.json
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

PERF = Path(__file__).resolve().parent
REPO = PERF.parents[1]
SUBSET_SALT = "efficacy-subset"
"""The salt of this script's fixed slices (task_subset.py's ``efficacy-subset:`` adapter is the same cut)."""
RULE_PROPOSERS = ("llm-rule", "ablate", "demo", "rules")
AGENT_PROPOSERS = ("agent", "ablate", "demo", "rules")
AGENT_PROPOSER_TOKENS = 400_000
"""The agent arm's separate proposer budget (``max_proposer_tokens``) per run."""
ARM_CHOICES = ("code", "rule", "agent", "gepa", "bestofk")
SHELL, CODE = "shell-agent", "python-agent"
"""The seed harness templates, and the names of their plans and output folders."""
DROPPED = {
    "--from-json": "the old one-process JSON is gone: `harnessevolve compare merge OUT/shell-agent` "
    "re-prints a table from compare's folders",
    "--merge": "join compare's folders with `harnessevolve compare merge DIR...` (cells made on other "
    "machines or days included)",
    "--target-gain": "compare's table shows each arm's paired gain with its interval; read the "
    "target off it (the issue's: +15 points for a 0.5B agent, +10 otherwise)",
}
EXIT_BAD_INPUT = 2
__all__ = ["ARM_CHOICES", "benchmark_spec", "main", "plans"]


def benchmark_spec(benchmark: str, validation: int, test: int) -> str:
    """``benchmark`` cut to ``validation`` / ``test`` tasks of those splits (0 = the whole split)."""
    beside = Path(benchmark)
    if (beside / "benchmark.yaml").is_file():
        benchmark = str(beside.resolve())
    limits = [f"{s}={n}" for s, n in (("validation", validation), ("test", test)) if n]
    return f"subset:{','.join([*limits, f'salt={SUBSET_SALT}'])}@{benchmark}" if limits else benchmark


def count_test_tasks(spec: str) -> int:
    from harnessevolve.adapters import load_benchmark_spec

    return len(load_benchmark_spec(spec).split("test"))


def evolve_options(args: argparse.Namespace, **more: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"generations": args.generations, "batch_size": args.batch_size}
    if args.gates is not None:
        options["gates"] = str(args.gates.resolve())
    return {**options, **more}


def plans(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """The comparison plans (as YAML documents) the options ask for: ``shell-agent`` always,
    ``python-agent`` with the code arm. See the module docstring for each arm."""
    spec = benchmark_spec(args.benchmark, args.validation, args.test)
    arms: list[dict[str, Any]] = [
        {"kind": "seed"},
        {"name": "evolve", "kind": "evolve", "options": evolve_options(args)},
    ]
    if "rule" in args.arms:
        options = evolve_options(args, proposers=list(RULE_PROPOSERS), optimizer_model=args.reflector)
        arms.append({"name": "evolve-llm-rule", "kind": "evolve", "options": options})
    if "agent" in args.arms:
        options = evolve_options(
            args,
            proposers=list(AGENT_PROPOSERS),
            optimizer_model=args.reflector,
            max_proposer_tokens=AGENT_PROPOSER_TOKENS,
        )
        arms.append({"name": "evolve-agent", "kind": "evolve", "options": options})
    if "gepa" in args.arms:
        budget = {"budget": args.budget} if args.budget else {"matched_to": "evolve"}
        gepa = {"kind": "gepa", "reflection_model": args.reflector, **budget}
        if args.reflection_max_tokens is not None:
            gepa["max_tokens"] = args.reflection_max_tokens
        arms.append(gepa)
    if "bestofk" in args.arms:
        k = (
            {"k": max(1, round(args.budget / count_test_tasks(spec)))}
            if args.budget
            else {"matched_to": "evolve"}
        )
        best: dict[str, Any] = {"kind": "best-of-k", **k}
        if args.temperature is not None:
            best["temperature"] = args.temperature
        arms.append(best)
    common = {"version": 1, "model": args.model, "benchmark": spec}
    seeds = list(range(args.first_seed, args.seeds))
    out = {SHELL: {**common, "harness": {"template": SHELL}, "seeds": seeds, "arms": arms}}
    if "code" in args.arms:
        code_arms = [{"kind": "seed"}, {"name": "evolve", "kind": "evolve", "options": evolve_options(args)}]
        out[CODE] = {**common, "harness": {"template": CODE}, "seeds": seeds, "arms": code_arms}
    return out


def write_plans(args: argparse.Namespace) -> dict[str, Path]:
    args.out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, doc in plans(args).items():
        path = args.out / f"{name}.yaml"
        header = f"# written by benchmarks/perf/efficacy.py: {command_line(args.argv)}\n"
        path.write_text(header + yaml.safe_dump(doc, sort_keys=False))
        written[name] = path
    return written


# ---------------------------------------------------------------- running compare


def cli() -> list[str]:
    return [sys.executable, "-m", "harnessevolve.cli"]


def child_env(args: argparse.Namespace) -> dict[str, str]:
    """This process's environment, with --threads, and this folder importable (the scripted smoke
    models are ``scripted/efficacy_smoke:...``)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PERF), env.get("PYTHONPATH", "")) if p)
    if args.threads:
        env["HARNESSEVOLVE_LOCAL_THREADS"] = str(args.threads)
    return env


_print_lock = threading.Lock()


def run_child(words: list[str], env: dict[str, str], prefix: str = "") -> int:
    """Run ``harnessevolve WORDS...``, its output shown as it comes (each line after ``prefix``)."""
    with _print_lock:
        print(f"{prefix}$ harnessevolve {shlex.join(words)}", flush=True)
    child = subprocess.Popen(
        [*cli(), *words], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    assert child.stdout is not None
    for line in child.stdout:
        with _print_lock:
            print(f"{prefix}{line}", end="", flush=True)
    return child.wait()


def compare_runs(
    args: argparse.Namespace, written: dict[str, Path]
) -> tuple[dict[str, list[Path]], list[str], int]:
    """Every ``compare run`` the options ask for: per plan its output folders, the command lines,
    and the first non-zero exit status (0 when every run finished)."""
    jobs: list[tuple[str, Path, list[str]]] = []
    folders: dict[str, list[Path]] = {}
    resume = ["--resume"] if args.resume else []
    for name, plan in written.items():
        if args.jobs <= 1:
            out = args.out / name
            jobs.append((name, out, ["compare", "run", str(plan), "--out", str(out), *resume]))
            folders[name] = [out]
            continue
        for seed in range(args.first_seed, args.seeds):
            out = args.out / name / f"seed-{seed}"
            words = ["compare", "run", str(plan), "--out", str(out), "--cells", f"seed={seed}", *resume]
            jobs.append((f"{name} seed {seed}", out, words))
            folders.setdefault(name, []).append(out)
    env = child_env(args)
    if args.jobs <= 1:
        codes = [run_child(words, env) for _label, _out, words in jobs]
    else:
        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            codes = list(pool.map(lambda job: run_child(job[2], env, f"[{job[0]}] "), jobs))
    failed = next((c for c in codes if c != 0), 0)
    return folders, [shlex.join(["harnessevolve", *words]) for _l, _o, words in jobs], failed


def merged_table(folders: list[Path], env: dict[str, str]) -> dict[str, Any]:
    """``harnessevolve compare merge FOLDERS --json``: compare's table as JSON."""
    done = subprocess.run(
        [*cli(), "compare", "merge", *map(str, folders), "--json"],
        env=env,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"compare merge failed ({done.returncode}):\n{done.stdout}{done.stderr}")
    return json.loads(done.stdout)["table"]


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--benchmark", default="nl2bash", help="benchmark spec (default nl2bash: icalfa NL2Bash)"
    )
    parser.add_argument("--model", default="local/qwen2.5-coder-0.5b", help="agent model of every arm")
    parser.add_argument(
        "--reflector",
        default="local/qwen2.5-coder-1.5b",
        help="GEPA's reflection model, llm-rule's model and the coding-agent optimizer's",
    )
    parser.add_argument("--seeds", type=int, default=3, help="run seeds FIRST-SEED..SEEDS-1")
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--generations", type=int, default=2, help="evolve arms' generations")
    parser.add_argument("--batch-size", type=int, default=8, help="evolve arms' minibatch")
    parser.add_argument("--validation", type=int, default=16, help="validation tasks kept (0 = all)")
    parser.add_argument("--test", type=int, default=24, help="test tasks kept (0 = all)")
    parser.add_argument(
        "--gates", type=Path, default=None, help="gate thresholds (default gates/default.yaml)"
    )
    parser.add_argument(
        "--arms",
        default="code,gepa,bestofk",
        help="arms besides the seed and evolve (always run), a comma list: code (evolve on the "
        "python-agent template, a second plan), rule (evolve + llm-rule), agent (evolve with the "
        "coding-agent optimizer), gepa, bestofk",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=None,
        help="fixed rollout budget B: GEPA's metric calls, best-of-k's k = round(B / test tasks) "
        "(default: matched to what the evolve arm spent)",
    )
    parser.add_argument(
        "--reflection-max-tokens", type=int, default=None, help="GEPA's reflection max tokens"
    )
    parser.add_argument(
        "--temperature", type=float, default=None, help="best-of-k sampling temperature (compare's default)"
    )
    parser.add_argument("--jobs", type=int, default=1, help="compare run processes at once, one per seed")
    parser.add_argument("--threads", type=int, default=None, help="llama.cpp threads per process")
    parser.add_argument("--out", type=Path, default=Path("efficacy-out"), help="plans and compare's folders")
    parser.add_argument("--resume", action="store_true", help="go on in --out (compare run --resume)")
    parser.add_argument("--json", type=Path, default=None, help="write compare's table JSON here")
    parser.add_argument("--smoke", action="store_true", help="every arm on scripted models (seconds-minutes)")
    for flag in DROPPED:
        parser.add_argument(flag, nargs="*", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for flag, hint in DROPPED.items():
        if getattr(args, flag[2:].replace("-", "_")) is not None:
            print(
                f"efficacy.py: {flag} is gone since the script wraps `harnessevolve compare`: {hint}",
                file=sys.stderr,
            )
            raise SystemExit(EXIT_BAD_INPUT)
    if args.smoke:
        smoke_arguments(args)
    args.arms = tuple(a.strip() for a in args.arms.split(",") if a.strip())
    unknown = set(args.arms) - set(ARM_CHOICES)
    if unknown:
        parser.error(f"unknown arm(s): {', '.join(sorted(unknown))} (arms: {', '.join(ARM_CHOICES)})")
    if not 0 <= args.first_seed < args.seeds:
        parser.error(f"--first-seed {args.first_seed} runs no seed below --seeds {args.seeds}")
    args.argv = list(argv)
    return args


def smoke_arguments(args: argparse.Namespace) -> None:
    """--smoke: scripted agent and reflector (efficacy_smoke.py), every arm, tiny splits, 3 seeds."""
    from efficacy_smoke import AGENT_MODEL, REFLECTOR_MODEL

    from harnessevolve.compare.gepa_cell import gepa_available

    args.model, args.reflector = AGENT_MODEL, REFLECTOR_MODEL
    args.benchmark, args.validation, args.test = "shell-basics", 2, 2
    arms = ARM_CHOICES if gepa_available() else tuple(a for a in ARM_CHOICES if a != "gepa")
    if not gepa_available():
        print("--smoke: the gepa package is not installed; the gepa arm is left out", file=sys.stderr)
    args.generations, args.batch_size, args.arms = 1, 2, ",".join(arms)
    args.seeds, args.first_seed, args.threads = 3, 0, None


def command_line(argv: Sequence[str]) -> str:
    """The exact command that ran this script (the thread setting included when it was set)."""
    python = os.path.relpath(sys.executable, REPO) if sys.executable.startswith(str(REPO)) else sys.executable
    script = os.path.relpath(Path(__file__).resolve(), REPO)
    threads = os.environ.get("HARNESSEVOLVE_LOCAL_THREADS")
    prefix = f"HARNESSEVOLVE_LOCAL_THREADS={threads} " if threads else ""
    return prefix + shlex.join([python, script, *argv])


def main(argv: Sequence[str] | None = None) -> int:
    sys.path.insert(0, str(PERF))
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    load_start = os.getloadavg()
    started = time.monotonic()
    written = write_plans(args)
    for name, path in written.items():
        print(f"plan {name}: {path}", flush=True)
    folders, commands, failed = compare_runs(args, written)
    if failed:
        print(f"efficacy.py: a `compare run` exited {failed}; its cells so far are kept (--resume goes on)")
        return failed
    env = child_env(args)
    if args.jobs > 1:  # compare run printed each folder's part; the joined table:
        for name, dirs in folders.items():
            print(f"\n{name}: the table of {len(dirs)} folder(s)", flush=True)
            code = run_child(["compare", "merge", *map(str, dirs)], env)
            if code:
                return code
    wall = (time.monotonic() - started) / 60
    print(f"total wall time {wall:.1f} min")
    if args.json:
        doc = {
            "command": command_line(args.argv),
            "smoke": args.smoke,
            "plans": {name: str(path) for name, path in written.items()},
            "compare_commands": commands,
            "folders": {name: [str(d) for d in dirs] for name, dirs in folders.items()},
            "load_average": {"start": list(load_start), "end": list(os.getloadavg())},
            "cpus": os.cpu_count(),
            "wall_min": wall,
            "tables": {name: merged_table(dirs, env) for name, dirs in folders.items()},
        }
        args.json.write_text(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
