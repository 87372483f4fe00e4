"""Build the external labelled set for first-divergence accuracy from BFCL's multi-turn gold calls.

Nobody on this project wrote these trajectories: each reference is a BFCL v4 multi-turn task (its
user turns, its gold function calls per turn, its function docs as tool definitions) with every
call executed against BFCL's own tool implementations (``bfcl_source.py``). Each failed run is the
reference changed in one known way, labelled with the step and cause the change implies:

    kind              the change at reference call k                      label
    drop              call k left out (not the last)                     skipped_step, the step after the
                                                                           last call the run got right
    reorder           calls k and k+1 of one turn swapped                skipped_step, at the run's call k
    insert            an unneeded state-changing call before call k      extra_step, at the inserted call
    change_arg        one argument of call k another valid value         wrong_argument
    swap_tool         call k made with another offered tool              wrong_tool
    hallucinate       call k to a tool no definition offers              unknown_tool
    drop_argument     a required argument of call k left out             missing_argument
    stop_early        a final message instead of call k (run ends)       premature_finish
    garble            call k first sent unreadable (non-JSON arguments   format_error, at the unreadable
                      or the call as text), then sent right               step
    loop              call k repeated until the step limit               step_limit, at the first repeat
    ignore_error      call k's observation is an error, the run goes on  tool_error_ignored, at call k+1
    provider_down     the run stops before call k (stop_reason           model_error, at its last call
                      model_error)
    no_setup          the run has no agent step (stop_reason             setup_error, no step
                      setup_error)

Every change is emitted clean and again with 1-3 *benign* variations made before the divergence,
which must not count: reordered argument keys, ``5`` written ``5.0``, whitespace around string
values, an extra harmless read-only call, a narration message between calls, a call that failed
and was retried right. Styles vary by task like agents do: tool definitions in ATIF v1.5
``agent.tool_definitions`` or in ``agent.extra.tool_definitions`` (v1.4); a final message ending
each turn, or none (with or without the runner's ``stop_reason: completed``).

Labels follow from the change alone, never from what the aligner answers. Deterministic for a
given ``--seed`` (the script runs itself with ``PYTHONHASHSEED=0``: some BFCL messages print
sets). The held-out file uses other BFCL categories (``long_context``, ``miss_param``) and
another seed, and is not used to tune the aligner; a third file, also held out, comes from
another benchmark in another shape (``nl2bash_runs.py``: NL2Bash gold commands as OpenAI chat
conversations imported to ATIF).

    .venv/bin/pip download --no-deps bfcl-eval -d /tmp/bfcl && unzip -q /tmp/bfcl/*.whl -d /tmp/bfcl/whl
    .venv/bin/python benchmarks/perf/make_external_set.py --bfcl /tmp/bfcl/whl
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import os
import random
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import nl2bash_runs  # noqa: E402
from bfcl_source import load_tasks, package_root, tool_definitions  # noqa: E402
from external_set import FORMAT_VERSION, HELD_OUT, NL2BASH, TUNE  # noqa: E402
from perturb_runs import Perturber  # noqa: E402

NL2BASH_LICENSE = "NL2Bash tasks from icalfa (InterCode-ALFA, MIT); queries and gold commands"
LICENSE = "BFCL (bfcl-eval, Apache-2.0, https://github.com/ShishirPatil/gorilla); tasks, gold calls, docs"


def rng_for(*parts: object) -> random.Random:
    return random.Random(int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:12], 16))


def build(root: Path, categories: tuple[str, ...], tasks_per: int, seed: int) -> dict[str, Any]:
    tools: dict[str, list[dict[str, Any]]] = {}
    references: dict[str, Any] = {}
    items: list[dict[str, Any]] = []
    for category in categories:
        tasks = load_tasks(root, category)
        chosen = sorted(rng_for(seed, category).sample(tasks, min(tasks_per, len(tasks))), key=lambda t: t.id)
        for task in chosen:
            for cls in task.classes:
                tools.setdefault(cls, tool_definitions(root, cls))
            definitions = [
                d for c in task.classes for d in tools[c] if d["function"]["name"] not in task.excluded
            ]
            perturber = Perturber(task, definitions, rng_for(seed, task.id, "style"))
            references[task.id] = {
                "classes": list(task.classes),
                "placement": perturber.placement,
                "atif": perturber.reference_doc(),
            }
            for item in perturber.items(lambda *p, tid=task.id: rng_for(seed, tid, *p)):
                items.append({"task_id": task.id, **item})
    return {
        "version": FORMAT_VERSION,
        "source": "bfcl:" + "+".join(categories),
        "seed": seed,
        "license": LICENSE,
        "tools": tools,
        "references": references,
        "items": items,
    }


def write(doc: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as handle:
        handle.write(data)
    tmp.replace(path)


def main() -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":  # BFCL's messages print sets: fix their order
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--bfcl", type=Path, default=None, help="folder holding bfcl_eval/ (an unzipped wheel)"
    )
    parser.add_argument("--tasks", type=int, default=60, help="tasks per category (default 60)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the tuning set (held-out: seed + 1000)")
    parser.add_argument("--out-tune", type=Path, default=TUNE)
    parser.add_argument("--out-heldout", type=Path, default=HELD_OUT)
    parser.add_argument("--out-nl2bash", type=Path, default=NL2BASH)
    parser.add_argument(
        "--smoke", action="store_true", help="2 tasks per category, written to a temporary folder"
    )
    args = parser.parse_args()
    if args.smoke:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="he-make-external-") as tmp:
            args.tasks = 2
            args.out_tune, args.out_heldout, args.out_nl2bash = (
                Path(tmp) / name for name in ("tune.json.gz", "heldout.json.gz", "nl2bash.json.gz")
            )
            return build_all(args)
    return build_all(args)


def build_all(args: argparse.Namespace) -> int:
    root = package_root(args.bfcl)
    icalfa = importlib.util.find_spec("icalfa")
    if icalfa is None or not icalfa.submodule_search_locations:
        raise SystemExit("icalfa is not installed (make install installs it)")
    doc = nl2bash_runs.build_set(
        Path(next(iter(icalfa.submodule_search_locations))), args.tasks, args.seed + 2000, rng_for
    )
    doc = {
        "version": FORMAT_VERSION,
        "source": "nl2bash",
        "seed": args.seed + 2000,
        "license": NL2BASH_LICENSE,
        **doc,
    }
    write(doc, args.out_nl2bash)
    print(
        f"{args.out_nl2bash}: {len(doc['items'])} labelled runs from {len(doc['references'])} tasks (nl2bash)"
    )
    for categories, seed, out in (
        (("base",), args.seed, args.out_tune),
        (("long_context", "miss_param"), args.seed + 1000, args.out_heldout),
    ):
        doc = build(root, categories, args.tasks if len(categories) == 1 else args.tasks // 2, seed)
        write(doc, out)
        print(
            f"{out}: {len(doc['items'])} labelled runs from {len(doc['references'])} tasks ({doc['source']})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
