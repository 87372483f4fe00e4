"""Set-up overhead of the agent proposer (``--proposer agent``) per proposal: workspace and sandbox.

One proposal of ``proposing.agent_proposer.AgentProposer`` with an optimizer agent that does no
work (a ``command`` agent that appends one character to the harness copy's system prompt and
exits, no model call), on shell-basics evidence (four failed runs with their references, the
shell-agent harness). What is timed is everything the proposer adds around the agent: writing the
workspace (harness copy, evidence, history, task statement), starting the sandbox, the model
endpoint and relay, the agent process, saving its trajectory, and reading the diff back with its
checks. Each figure is over ``--proposals`` proposals, every one in a fresh run folder.
Target: <= 2 s per proposal (median).

    .venv/bin/python benchmarks/perf/agent_proposer_overhead.py [--proposals 10] [--sandbox bwrap]
    .venv/bin/python benchmarks/perf/agent_proposer_overhead.py --smoke   # one proposal, a check
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from harnessevolve.core.signals import Cause, Cluster, ErrorSignal  # noqa: E402
from harnessevolve.core.tasks import load_benchmark  # noqa: E402
from harnessevolve.execute.workspace import create_workspace, remove_workspace  # noqa: E402
from harnessevolve.gate.config import GateConfig  # noqa: E402
from harnessevolve.harness.load import load_harness  # noqa: E402
from harnessevolve.optimize.proposal import ProposalContext  # noqa: E402
from harnessevolve.proposing.agent_proposer import AgentProposer, AgentRun  # noqa: E402
from harnessevolve.proposing.agent_workspace import Evidence, workspace_files  # noqa: E402
from harnessevolve.sandbox.base import make_sandbox  # noqa: E402
from harnessevolve.scoring.references import load_references  # noqa: E402

TARGET_S = 2.0
NOOP_AGENT = (
    "import pathlib; p = pathlib.Path('harness/prompts/system.md'); p.write_text(p.read_text() + 'x')"
)


def noop_optimizer(folder: Path) -> Path:
    """An optimizer folder whose agent makes a one-character edit and exits, with no model call."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "harness.yaml").write_text(
        "version: 1\nname: noop-optimizer\nmodel: scripted/none\n"
        f"agent:\n  kind: command\n  command: [python, -c, {json.dumps(NOOP_AGENT)}]\n  timeout_s: 60\n"
        "editable: []\n"
    )
    return folder


def setting(failed: int = 4):
    benchmark = load_benchmark("shell-basics")
    references = load_references(benchmark)
    train = [t for t in benchmark.split("train") if t.id in references][:failed]
    signals = tuple(
        ErrorSignal(t.id, Cause.PREMATURE_FINISH, 0.8, "submitted before reading the file", 2, 2)
        for t in train
    )
    harness = load_harness(ROOT / "harnesses" / "shell-agent")
    context = ProposalContext(
        files=dict(harness.files),
        editable=harness.editable,
        system_prompt_path="prompts/system.md",
        examples_path="prompts/examples.md",
        clusters=(Cluster(Cause.PREMATURE_FINISH, signals),),
        instructions={t.id: t.instruction for t in train},
    )
    return benchmark, references, context


async def one(proposer: AgentProposer, run: AgentRun, context: ProposalContext) -> dict[str, float]:
    evidence = Evidence(references={k: run.references[k] for k in context.instructions})
    started = time.perf_counter()
    from harnessevolve.core.tasks import Task

    task = Task("bench", "", "train", (), setup_files=workspace_files(context, evidence))
    workspace = await create_workspace(task, sandbox=run.sandbox)
    workspace_s = time.perf_counter() - started
    remove_workspace(workspace)
    proposer.bind(run)
    started = time.perf_counter()
    candidate = await proposer.propose(context)
    total_s = time.perf_counter() - started
    assert candidate is not None and list(candidate.changes) == ["prompts/system.md"], candidate
    return {"workspace_s": workspace_s, "proposal_s": total_s}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proposals", type=int, default=10)
    parser.add_argument("--sandbox", default="bwrap", help="bwrap (default) or none")
    parser.add_argument("--smoke", action="store_true", help="one proposal; checks it works, no target")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    n = 1 if args.smoke else max(1, args.proposals)
    benchmark, references, context = setting()
    sandbox = make_sandbox(args.sandbox, unsafe=args.sandbox == "none")
    rows = []
    with tempfile.TemporaryDirectory(prefix="he-agent-overhead-") as tmp:
        optimizer = load_harness(noop_optimizer(Path(tmp) / "optimizer"))
        for i in range(n):
            run_dir = Path(tmp) / f"run-{i}"
            run_dir.mkdir()
            run = AgentRun(run_dir, benchmark, references, GateConfig(), sandbox, None)
            proposer = AgentProposer(optimizer, "scripted/none")
            rows.append(asyncio.run(one(proposer, run, context)))
            proposer.close()
    median = statistics.median(r["proposal_s"] for r in rows)
    result = {
        "proposals": n,
        "sandbox": args.sandbox,
        "workspace_median_s": round(statistics.median(r["workspace_s"] for r in rows), 4),
        "proposal_median_s": round(median, 4),
        "proposal_max_s": round(max(r["proposal_s"] for r in rows), 4),
        "target_s": TARGET_S,
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"agent proposer set-up overhead over {n} proposal(s), sandbox {args.sandbox}: median "
            f"{result['proposal_median_s']:.3f} s per proposal (max {result['proposal_max_s']:.3f} s; "
            f"workspace alone {result['workspace_median_s']:.3f} s); target <= {TARGET_S:g} s; "
            f"load average {' '.join(str(x) for x in result['load_average'])}"
        )
    return 0 if args.smoke or median <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
