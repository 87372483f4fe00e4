"""How often first-divergence alignment names the right step and cause, on labelled perturbations.

Every reference trajectory of the built-in benchmarks (``trajectories/shell-basics``,
``trajectories/shell-onecall``) is perturbed in each way an agent goes wrong, and each perturbed
run is labelled with the step where it first leaves the reference and the cause from the shared
taxonomy (``harnessevolve.core.signals.Cause``):

    kind          what changes at action k                              label at k
    drop          action k is left out                                  skipped_step (premature_finish
                                                                          when the next action is submit)
    insert        an unneeded action is made before action k            extra_step
    reorder       actions k and k+1 (neither a submit) swap places      skipped_step
    change_arg    one argument of action k is altered (a file name,     wrong_argument
                  number or word; a wrong submitted answer)
    swap_tool     action k's intent, done with another tool             wrong_tool
    stop_early    submit instead of action k                            premature_finish
    break_format  a turn with no tool call (extra.error parse_error)    format_error
                  before action k; the agent then recovers

Each perturbation comes clean and, when it keeps any reference action, again with benign surface
noise on those actions (extra spaces, a trailing newline, ``./`` before a path, the answer's case),
which must not count as a divergence. Labels follow from the perturbation alone, never from what
the aligner answers. A perturbation
that would make the run's action coincide with another reference action (so the run is really a
different kind of mistake) is not emitted. Prints step and cause accuracy overall and per kind.

Then the same on the **external** labelled set (``external_set.py``: failed runs made from BFCL's
multi-turn gold calls by ``make_external_set.py``, every cause of the taxonomy, benign variations
before the divergence) and its **held-out** parts (other BFCL categories and seed; NL2Bash gold
commands as imported OpenAI chat conversations), per cause and per source, with reference-step
accuracy too. Targets (>= 95% step, >= 90% cause) apply to each set.

    .venv/bin/python benchmarks/perf/alignment_accuracy.py [--sets builtin,external,heldout,nl2bash] [--check]
        [--show-misses N]
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from harnessevolve.core import atif  # noqa: E402
from harnessevolve.core.atif import ObservationResult, Step, ToolCall, Trajectory  # noqa: E402
from harnessevolve.core.signals import Cause  # noqa: E402

BENCHMARKS = ("shell-basics", "shell-onecall")
TARGET_STEP, TARGET_CAUSE = 0.95, 0.90
KINDS = ("drop", "insert", "reorder", "change_arg", "swap_tool", "stop_early", "break_format")

# Unneeded but plausible actions an agent inserts (looking around before acting).
EXTRA_ACTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("bash", {"command": "ls -la"}),
    ("bash", {"command": "pwd"}),
    ("read_file", {"path": "README.md"}),
    ("bash", {"command": "find . -type f"}),
)
OTHER_NAMES = ("notes", "data", "output", "backup", "index", "summary", "report", "draft")
OTHER_WORDS = ("amber", "cobalt", "saffron", "granite", "juniper", "harbor", "pebble", "thistle")


@dataclass(frozen=True)
class Labelled:
    kind: str
    task_id: str
    run: Trajectory
    reference: Trajectory
    step: int
    """ATIF step_id of the run's first divergent step."""
    cause: Cause
    note: str = field(default="", compare=False)
    noisy: bool = False
    """True when the actions copied from the reference are spelled differently (same effect)."""


Call = tuple[str, dict[str, Any]]


def _calls(reference: Trajectory) -> list[Call]:
    return [(c.function_name, dict(c.arguments)) for s in reference.agent_steps for c in s.tool_calls]


def _rng(*parts: object) -> random.Random:
    return random.Random(int(hashlib.sha256("/".join(map(str, parts)).encode()).hexdigest()[:12], 16))


def _observation(reference: Trajectory, call: Call) -> str:
    for step in reference.agent_steps:
        for c, o in zip(step.tool_calls, step.observations, strict=False):
            if (c.function_name, c.arguments) == call:
                return o.content
    return "submitted" if call[0] == "submit" else ""


def benign_noise(call: Call) -> Call:
    """The same action as an agent might spell it differently: the same effect, other text."""
    name, arguments = call
    if name == "submit":
        return name, {"answer": f" {str(arguments.get('answer', '')).upper()} "}
    noisy: dict[str, Any] = {}
    for key, value in arguments.items():
        if key == "path":
            noisy[key] = f"./{value}"
        elif key == "command":
            noisy[key] = str(value).replace(" ", "  ", 1) + "\n"
        else:
            noisy[key] = value
    return name, noisy


def build_run(reference: Trajectory, turns: list[Call | str], kind: str) -> Trajectory:
    """The reference's system and user steps, then one agent step per turn: a call, or a reply
    that is not a tool call (a string, recorded with ``extra.error = parse_error: ...``)."""
    steps = [s for s in reference.steps if s.source != "agent"][:2]
    answer = None
    for turn in turns:
        step_id = len(steps) + 1
        if isinstance(turn, str):
            steps.append(
                Step(step_id, "agent", turn, extra={"error": "parse_error: Expecting ',' delimiter: line 1"})
            )
            continue
        name, arguments = turn
        call = ToolCall(f"call-{step_id}", name, arguments)
        result = ObservationResult(call.tool_call_id, _observation(reference, turn))
        steps.append(Step(step_id, "agent", "", tool_calls=(call,), observations=(result,)))
        if name == "submit":
            answer = str(arguments.get("answer", ""))
            break
    extra = {"task_id": reference.task_id, "stop_reason": "submitted" if answer is not None else "step_limit"}
    if answer is not None:
        extra["answer"] = answer
    return Trajectory(f"perturbed-{kind}", "perturb", "0", "perturb", tuple(steps), extra=extra)


def _tokens(text: str) -> list[str]:
    return re.findall(r"[A-Za-z0-9_./-]+", text)


def _change_token(token: str, rng: random.Random) -> str:
    if token.isdigit():
        return str(int(token) + rng.randint(1, 3))
    stem, dot, suffix = token.rpartition(".")
    if dot and stem and not stem.startswith("-"):
        return f"{rng.choice([n for n in OTHER_NAMES if n != stem])}.{suffix}"
    return rng.choice([w for w in OTHER_WORDS if w != token])


def change_argument(call: Call, rng: random.Random) -> Call | None:
    """The call with one argument altered the way agents get them wrong; None when not applicable."""
    name, arguments = call
    if name == "submit":
        answer = str(arguments.get("answer", ""))
        if answer == "done":  # nothing to get wrong: the checker reads the workspace
            return None
        return name, {"answer": _change_token(answer, rng) if answer else "unknown"}
    key = sorted(arguments)[rng.randrange(len(arguments))] if arguments else None
    if key is None:
        return None
    value = str(arguments[key])
    words = _tokens(value)
    # the command's program name (first word) and flags stay; an operand changes
    candidates = [
        w for i, w in enumerate(words) if not (key == "command" and i == 0) and not w.startswith("-")
    ]
    if not candidates:
        return None
    old = rng.choice(candidates)
    new = _change_token(old, rng)
    changed = re.sub(rf"(?<![A-Za-z0-9_./-]){re.escape(old)}(?![A-Za-z0-9_./-])", new, value, count=1)
    return name, {**arguments, key: changed}


def _operand(command: str) -> str | None:
    files = [w for w in _tokens(command)[1:] if "." in w.strip("./") or "/" in w]
    words = [w for w in _tokens(command)[1:] if not w.startswith("-")]
    return (files or words or [None])[0]


def swap_tool(call: Call, others: list[Call]) -> Call | None:
    """The same intent through a different tool; None when every swap equals another reference call."""
    name, arguments = call
    options: list[Call] = []
    if name == "bash":
        target = _operand(str(arguments.get("command", "")))
        if target:
            options = [("read_file", {"path": target}), ("write_file", {"path": target, "content": ""})]
    elif name == "read_file":
        options = [("bash", {"command": f"cat {arguments.get('path', '')}"})]
    elif name == "write_file":
        content = str(arguments.get("content", "")).replace("'", "")
        options = [("bash", {"command": f"printf '{content}' > {arguments.get('path', '')}"})]
    return next((o for o in options if o not in others), None)


def perturbations(reference: Trajectory) -> Iterator[Labelled]:
    """Every labelled perturbation of one reference, clean and with benign noise (deterministic)."""
    calls = _calls(reference)
    task_id = reference.task_id or "?"
    if not calls or calls[-1][0] != "submit":
        return
    for kind, turns, k, cause, note in _mistakes(calls, task_id):
        yield Labelled(kind, task_id, build_run(reference, turns, kind), reference, 3 + k, cause, note)
        # the same mistake with every action copied from the reference spelled differently
        noisy = [benign_noise(t) if not isinstance(t, str) and t in calls else t for t in turns]
        if noisy != turns:
            yield Labelled(
                kind, task_id, build_run(reference, noisy, kind), reference, 3 + k, cause, note, True
            )


Mistake = tuple[str, list[Call | str], int, Cause, str]


def _mistakes(calls: list[Call], task_id: str) -> Iterator[Mistake]:
    """(kind, the run's turns, index k of the divergent turn, cause, note) for each perturbation."""
    last = len(calls) - 1  # index of the submit
    answer = str(calls[-1][1].get("answer", ""))
    for k in range(last):
        cause = Cause.PREMATURE_FINISH if k + 1 == last else Cause.SKIPPED_STEP
        yield "drop", calls[:k] + calls[k + 1 :], k, cause, ""
    for k in range(len(calls)):
        rng = _rng(task_id, "insert", k)
        options = [a for a in EXTRA_ACTIONS if a not in calls]
        yield "insert", [*calls[:k], rng.choice(options), *calls[k:]], k, Cause.EXTRA_STEP, ""
    for k in range(last - 1):
        swapped = [*calls[:k], calls[k + 1], calls[k], *calls[k + 2 :]]
        yield "reorder", swapped, k, Cause.SKIPPED_STEP, ""
    for k in range(len(calls)):
        changed = change_argument(calls[k], _rng(task_id, "change", k))
        if changed is not None and changed not in calls:
            yield "change_arg", [*calls[:k], changed, *calls[k + 1 :]], k, Cause.WRONG_ARGUMENT, str(changed)
    for k in range(last):
        other = swap_tool(calls[k], calls)
        if other is not None:
            yield "swap_tool", [*calls[:k], other, *calls[k + 1 :]], k, Cause.WRONG_TOOL, str(other)
    for k in range(last):
        guess = answer if answer == "done" else "unknown"
        yield "stop_early", [*calls[:k], ("submit", {"answer": guess})], k, Cause.PREMATURE_FINISH, ""
    for k in range(len(calls)):
        name, arguments = calls[k]
        pairs = ", ".join(f'"{a}" "{v}"' for a, v in arguments.items())
        garbled = f'{{"name": "{name}", "arguments": {{{pairs}'  # missing ':' and closing braces
        yield "break_format", [*calls[:k], garbled, *calls[k:]], k, Cause.FORMAT_ERROR, ""


def reference_paths() -> list[Path]:
    return [p for name in BENCHMARKS for p in sorted((ROOT / "trajectories" / name).glob("*.json"))]


def build_set(paths: Iterable[Path]) -> list[Labelled]:
    return [item for path in paths for item in perturbations(atif.load(path))]


@dataclass(frozen=True)
class Outcome:
    item: Labelled
    step: int | None
    cause: Cause

    @property
    def step_ok(self) -> bool:
        return self.step == self.item.step

    @property
    def cause_ok(self) -> bool:
        return self.cause == self.item.cause


def score(items: Iterable[Labelled]) -> list[Outcome]:
    from harnessevolve.evaluate.alignment import first_divergence

    outcomes = []
    for item in items:
        signal = first_divergence(item.run, item.reference)
        outcomes.append(Outcome(item, signal.step, signal.cause))
    return outcomes


def _row(label: str, group: list[Outcome]) -> tuple[str, str, str, str]:
    n = len(group)
    step = sum(o.step_ok for o in group) / n
    cause = sum(o.cause_ok for o in group) / n
    return label, str(n), f"{step:.1%}", f"{cause:.1%}"


def _table(title: str, groups: list[tuple[str, list[bool], list[bool], list[bool] | None]]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for column in ("group", "n", "step accuracy", "cause accuracy", "reference step"):
        table.add_column(column, justify="left" if column == "group" else "right")
    for label, steps, causes, refs in groups:
        n = len(steps)
        if n:
            ref = f"{sum(refs) / n:.1%}" if refs is not None else "-"
            style = "bold" if label == "overall" else None
            table.add_row(label, str(n), f"{sum(steps) / n:.1%}", f"{sum(causes) / n:.1%}", ref, style=style)
    return table


def _builtin(console: Any, show: int) -> tuple[float, float]:
    outcomes = score(build_set(reference_paths()))
    groups: list[tuple[str, list[bool], list[bool], list[bool] | None]] = []
    for kind in KINDS:
        group = [o for o in outcomes if o.item.kind == kind]
        groups.append((kind, [o.step_ok for o in group], [o.cause_ok for o in group], None))
    for noisy in (False, True):
        group = [o for o in outcomes if o.item.noisy == noisy]
        label = "(with noise)" if noisy else "(clean)"
        groups.append((label, [o.step_ok for o in group], [o.cause_ok for o in group], None))
    groups.append(("overall", [o.step_ok for o in outcomes], [o.cause_ok for o in outcomes], None))
    console.print(_table(f"built-in set: first divergence on {len(outcomes)} perturbed trajectories", groups))
    for o in [o for o in outcomes if not (o.step_ok and o.cause_ok)][:show]:
        console.print(
            f"  miss {o.item.kind} {o.item.task_id}: expected step {o.item.step} {o.item.cause.value}, "
            f"got step {o.step} {o.cause.value} {o.item.note}"
        )
    n = len(outcomes)
    return sum(o.step_ok for o in outcomes) / n, sum(o.cause_ok for o in outcomes) / n


def _external(
    console: Any,
    name: str,
    path: Path,
    show: int,
    judge: str | None = None,
    judge_limit: int = 0,
    judge_cache: Path | None = None,
) -> tuple[float, float]:
    from external_set import read_set

    from harnessevolve.evaluate.alignment import first_divergence
    from harnessevolve.evaluate.signal_judge import JudgeCache, agreement, judge_signal

    items = read_set(path)
    rows = []
    judged = []
    every = max(1, len(items) // judge_limit) if judge_limit > 0 else 0
    for n, item in enumerate(items):
        signal = first_divergence(item.run, item.reference)
        if judge and every and n % every == 0 and len(judged) < judge_limit:
            signal = judge_signal(
                signal, item.run, item.reference, model=judge, cache=JudgeCache(judge_cache)
            )
            judged.append((item, signal))
        rows.append((item, signal))
    if judged:
        share = agreement(s for _, s in judged)
        answered = [(i, s) for i, s in judged if s.judge is not None and "cause" in s.judge]
        right = sum(s.judge is not None and s.judge["cause"] == i.cause.value for i, s in answered)
        applied = sum(bool(s.judge and s.judge.get("applied")) for _, s in answered)
        console.print(
            f"{name}: judge {judge}: {len(answered)} of {len(judged)} signals answered; agrees with the "
            f"rules on {'-' if share is None else f'{share:.1%}'}; its own cause right on "
            f"{right}/{len(answered)}; applied (rules ambiguous) on {applied}"
        )
    groups: list[tuple[str, list[bool], list[bool], list[bool] | None]] = []

    def group(label: str, members: list[tuple[Any, Any]]) -> None:
        groups.append(
            (
                label,
                [s.step == i.step for i, s in members],
                [s.cause == i.cause for i, s in members],
                [s.reference_step == i.reference_step for i, s in members],
            )
        )

    for cause in Cause:
        group(cause.value, [r for r in rows if r[0].cause is cause])
    for source in sorted({i.source for i, _ in rows}):
        for noisy in (False, True):
            label = f"{source} ({'with benign variations' if noisy else 'clean'})"
            group(label, [r for r in rows if r[0].source == source and r[0].noisy == noisy])
    group("overall", rows)
    console.print(
        _table(f"{name} set ({path.name}): {len(rows)} labelled runs, per cause and per source", groups)
    )
    misses = [(i, s) for i, s in rows if not (s.step == i.step and s.cause == i.cause)]
    for i, s in misses[:show]:
        console.print(
            f"  miss {i.kind} {i.task_id} {list(i.benign)}: expected step {i.step} {i.cause.value}, "
            f"got step {s.step} {s.cause.value}"
        )
    n = len(rows)
    return sum(s.step == i.step for i, s in rows) / n, sum(s.cause == i.cause for i, s in rows) / n


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--show-misses", type=int, default=5, metavar="N", help="list up to N misses")
    parser.add_argument(
        "--judge-model", default=None, help="also ask this model (litellm name) to judge signals"
    )
    parser.add_argument(
        "--judge-limit", type=int, default=50, help="signals judged per external set, spread evenly"
    )
    parser.add_argument("--judge-cache", type=Path, default=None, help="judge answer cache folder")
    parser.add_argument(
        "--sets",
        default="builtin,external,heldout,nl2bash",
        help="comma-separated: builtin, external, heldout, nl2bash",
    )
    parser.add_argument("--smoke", action="store_true", help="the builtin set only, no target")
    args = parser.parse_args()
    if args.smoke:
        args.sets, args.check, args.judge_model = "builtin", False, None

    from rich.console import Console

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from external_set import HELD_OUT, NL2BASH, TUNE

    files = {"external": TUNE, "heldout": HELD_OUT, "nl2bash": NL2BASH}

    console = Console(highlight=False)
    results: dict[str, tuple[float, float]] = {}
    for name in [s.strip() for s in args.sets.split(",") if s.strip()]:
        if name == "builtin":
            results[name] = _builtin(console, args.show_misses)
        elif name in files:
            results[name] = _external(
                console,
                name,
                files[name],
                args.show_misses,
                args.judge_model,
                args.judge_limit,
                args.judge_cache,
            )
        else:
            parser.error(f"unknown set {name!r} (builtin, external, heldout, nl2bash)")
    missed = False
    for name, (step_acc, cause_acc) in results.items():
        missed |= step_acc < TARGET_STEP or cause_acc < TARGET_CAUSE
        console.print(
            f"{name}: step accuracy {step_acc:.1%} (target >= {TARGET_STEP:.0%}), "
            f"cause accuracy {cause_acc:.1%} (target >= {TARGET_CAUSE:.0%})"
        )
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
