"""Did an accepted edit fire? Whether the trajectories after it show the behaviour it was made for.

An accepted edit is *watched* from its generation on. Every later trajectory of the harness that
carries it (later batches, and the validation runs of the harness that is current) is read for two
kinds of evidence, both stated in terms of trajectories, never of a benchmark:

- **targeted step**: for each task the edit targeted (``Candidate.target_tasks``) the failed run's
  first divergence at acceptance time is remembered (cause and the action there). When that task
  runs again, the step is **gone** (the run passed), **changed** (another cause or another action at
  the divergence) or **unchanged**;
- **pattern reused**: the code-like fragments the edit *added* (backticked spans, the string
  values of JSON in added text -- a rule's command, a demonstration's call) are looked for in the
  later agent actions (tool names, arguments, submitted answers). It counts when the share of
  later trajectories showing one is above the share of the trajectories the edit was made from
  (so a fragment the agent already used everywhere is no evidence).

- **loop setting acted**: for an edit that turns on a loop setting whose action shows in a
  trajectory (``loop.final_submit``: the loop's last ask to submit; ``loop.answer_from``: an answer
  taken from a call; ``loop.answer_check``: a submit turned back; ``loop.stop_on_repeat``: a run
  ended for repeating), the later runs where
  the loop did so. Such an action cannot show before the setting is on, so one run is enough.

An edit **fired** at the first generation with a gone/changed targeted step, a reused pattern or a
loop setting that acted;
``EditFired`` goes to the ledger then (``fired: true`` with the evidence). At the end of the run,
every watched edit that never fired gets ``EditFired`` with ``fired: false`` and the number of later
trajectories that were read (0: nothing ran after it, so it could not be observed).

``FiringRecorder`` is what the generation loop holds: each event goes to the ledger and, as
``Fired:`` / ``Fired-Evidence:`` trailers, to the accepted commit's git note (``git log
--notes=harnessevolve``; a note, so history is never rewritten). The watch is kept in the run
folder (``firing.json``, rewritten after each change), so a resumed run goes on watching the edits
accepted before the kill: a generation is read once per edit, an edit fires once (a verdict already
in the ledger is not given again).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from harnessevolve.core.atif import Trajectory
from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.enums import StopReason
from harnessevolve.core.errors import HarnessGitError
from harnessevolve.core.files import atomic_write_json
from harnessevolve.core.signals import ErrorSignal
from harnessevolve.core.text import folded
from harnessevolve.harness.git import HarnessRepo
from harnessevolve.harness.model import FINAL_SUBMIT_ASK, Harness
from harnessevolve.runs.events import CandidateCommitted, EditFired
from harnessevolve.runs.ledger import Ledger, read_ledger
from harnessevolve.scoring.scorer import TaskResult

WATCH_FILE = "firing.json"
WATCH_VERSION = 1

_BACKTICKS = re.compile(r"`([^`\n]{2,200})`")
_JSON_STRING = re.compile(
    r'"(?:command|cmd|answer|code|query|path|arguments)"\s*:\s*"((?:[^"\\]|\\.){2,200})"'
)
MIN_MARKER_CHARS = 3


def added_text(before: dict[str, str], after: dict[str, str | None]) -> str:
    """The lines the edit inserted or replaced, over every file it changed."""
    out: list[str] = []
    for path, text in after.items():
        if text is None:
            continue
        old = before.get(path, "").splitlines()
        for tag, _, _, j1, j2 in difflib.SequenceMatcher(None, old, text.splitlines()).get_opcodes():
            if tag in ("insert", "replace"):
                out += text.splitlines()[j1:j2]
    return "\n".join(out)


def markers_of(text: str) -> tuple[str, ...]:
    """Code-like fragments of added text: backticked spans and JSON string values of calls."""
    found = [m.group(1) for m in _BACKTICKS.finditer(text)]
    for m in _JSON_STRING.finditer(text):
        try:
            found.append(json.loads(f'"{m.group(1)}"'))
        except ValueError:
            found.append(m.group(1))
    kept = [folded(f) for f in found if len(folded(f)) >= MIN_MARKER_CHARS]
    return tuple(dict.fromkeys(kept))


def action_texts(trajectory: Trajectory) -> list[str]:
    """Each agent call as ``tool {json arguments}`` (normalised), and the submitted answer."""
    texts = [
        folded(f"{c.function_name} {json.dumps(c.arguments, ensure_ascii=False)}")
        + " "
        + " ".join(folded(v) for v in c.arguments.values() if isinstance(v, str))
        for s in trajectory.agent_steps
        for c in s.tool_calls
    ]
    answer = trajectory.extra.get("answer")
    if answer:
        texts.append(folded(answer))
    return texts


def shows_marker(trajectory: Trajectory, markers: Sequence[str]) -> bool:
    texts = action_texts(trajectory)
    return any(m in t for m in markers for t in texts)


HARNESS_FILE = "harness.yaml"
LOOP_ACTIONS: dict[str, Callable[[Trajectory], bool]] = {
    "final_submit": lambda t: any(s.extra.get("nudge") == FINAL_SUBMIT_ASK for s in t.steps),
    "answer_from": lambda t: bool(t.extra.get("answer_from")),
    "answer_check": lambda t: bool(t.extra.get("answer_check")),
    "stop_on_repeat": lambda t: t.extra.get("stop_reason") == StopReason.REPEATED,
}
"""Loop settings whose action a trajectory shows, and how to see it there."""


def loop_settings_turned_on(before: dict[str, str], after: dict[str, str | None]) -> tuple[str, ...]:
    """The ``LOOP_ACTIONS`` settings the edit turned on or changed in ``harness.yaml``'s ``loop``."""
    if after.get(HARNESS_FILE) is None:
        return ()

    def loop_of(text: str | None) -> dict[str, Any]:
        try:
            doc = bounded_yaml(text or "")
        except yaml.YAMLError:  # DocumentRefused too
            return {}
        loop = doc.get("loop") if isinstance(doc, dict) else None
        return loop if isinstance(loop, dict) else {}

    old, new = loop_of(before.get(HARNESS_FILE)), loop_of(after[HARNESS_FILE])
    return tuple(k for k in LOOP_ACTIONS if new.get(k) and new.get(k) != old.get(k))


def _action_key(action: dict[str, Any] | None) -> str:
    return json.dumps(action or {}, sort_keys=True, default=str)


@dataclass
class WatchedEdit:
    sha: str
    generation: int
    summary: str
    markers: tuple[str, ...]
    targets: dict[str, tuple[str, str]]
    """task id -> (cause, action key) at the first divergence the edit was made from."""
    before_rate: float
    """Share of the trajectories the edit was made from that already showed a marker."""
    runs: int = 0
    marker_runs: int = 0
    gone: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    fired: bool = False
    last_observed: int = 0
    """The last generation whose runs were read for this edit (a resumed generation is not read twice)."""
    settings: tuple[str, ...] = ()
    """The ``LOOP_ACTIONS`` settings the edit turned on."""
    setting_runs: int = 0
    """Later runs in which one of them acted."""

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["markers"] = list(self.markers)
        doc["settings"] = list(self.settings)
        doc["targets"] = {task: list(pair) for task, pair in self.targets.items()}
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> WatchedEdit:
        targets = {str(t): (str(p[0]), str(p[1])) for t, p in dict(doc.get("targets") or {}).items()}
        markers, settings = tuple(doc.get("markers") or ()), tuple(doc.get("settings") or ())
        return cls(**{**doc, "markers": markers, "settings": settings, "targets": targets})

    def evidence(self) -> list[str]:
        out = []
        if self.gone:
            out.append(f"targeted step gone (the run passed) on {', '.join(sorted(set(self.gone)))}")
        if self.changed:
            out.append(f"targeted step changed on {', '.join(sorted(set(self.changed)))}")
        if self.unchanged:
            out.append(f"targeted step unchanged on {', '.join(sorted(set(self.unchanged)))}")
        if self.markers and self.runs:
            out.append(
                f"added pattern used in {self.marker_runs} of {self.runs} later runs "
                f"(before the edit: {self.before_rate:.0%})"
            )
        if self.settings and self.runs:
            out.append(
                f"loop setting {', '.join(self.settings)} acted in {self.setting_runs} of "
                f"{self.runs} later runs"
            )
        return out

    def acted(self) -> bool:
        """A loop setting the edit turned on did what it is for in a later run."""
        return self.setting_runs > 0

    def reused(self) -> bool:
        return bool(self.markers) and self.runs > 0 and self.marker_runs / self.runs > self.before_rate

    def event(self, observed: int | None) -> EditFired:
        return EditFired(
            generation=self.generation,
            sha=self.sha,
            fired=self.fired,
            observed_generation=observed,
            runs=self.runs,
            marker_runs=self.marker_runs,
            gone=len(set(self.gone)),
            changed=len(set(self.changed)),
            unchanged=len(set(self.unchanged)),
            evidence=self.evidence() or ["no later trajectory ran with this edit"],
        )


class FiringWatch:
    """The accepted edits of one run and the evidence that they fired (see the module docstring)."""

    def __init__(self) -> None:
        self.edits: list[WatchedEdit] = []

    def watch(
        self,
        *,
        sha: str,
        generation: int,
        summary: str,
        before: dict[str, str],
        changes: dict[str, str | None],
        target_tasks: Iterable[str],
        signals: Iterable[ErrorSignal],
        made_from: Sequence[Trajectory],
    ) -> WatchedEdit:
        """Start watching an accepted edit; ``signals``: the batch's failure signals,
        ``made_from``: the batch's trajectories (the harness before the edit)."""
        markers = markers_of(added_text(before, changes))
        wanted = set(target_tasks)
        targets = {s.task_id: (str(s.cause), _action_key(s.actual)) for s in signals if s.task_id in wanted}
        shown = sum(shows_marker(t, markers) for t in made_from) if markers else 0
        rate = shown / len(made_from) if made_from else 0.0
        edit = WatchedEdit(
            sha,
            generation,
            summary,
            markers,
            targets,
            rate,
            settings=loop_settings_turned_on(before, changes),
        )
        self.edits.append(edit)
        return edit

    def observe(
        self, generation: int, results: Iterable[tuple[str, bool, ErrorSignal | None, Trajectory]]
    ) -> list[EditFired]:
        """Read later runs of the current harness (task id, passed, signal, trajectory): every
        watched edit from an earlier generation is still in it (a revert ends the run's use of a
        commit only by a later accepted edit, which carries the earlier ones too). Returns the
        events of edits that fired now."""
        rows = list(results)
        fired_now: list[EditFired] = []
        for edit in self.edits:
            if (
                not edit.sha
                or edit.generation >= generation
                or edit.fired
                or generation <= edit.last_observed
            ):
                continue
            edit.last_observed = generation
            for task_id, passed, signal, trajectory in rows:
                edit.runs += 1
                edit.marker_runs += bool(edit.markers) and shows_marker(trajectory, edit.markers)
                edit.setting_runs += any(
                    LOOP_ACTIONS[k](trajectory) for k in edit.settings if k in LOOP_ACTIONS
                )
                if task_id in edit.targets:
                    cause, action = edit.targets[task_id]
                    if passed:
                        edit.gone.append(task_id)
                    elif signal is not None and (str(signal.cause), _action_key(signal.actual)) != (
                        cause,
                        action,
                    ):
                        edit.changed.append(task_id)
                    else:
                        edit.unchanged.append(task_id)
            if edit.gone or edit.changed or edit.reused() or edit.acted():
                edit.fired = True
                fired_now.append(edit.event(generation))
        return fired_now

    def never_fired(self) -> list[EditFired]:
        """At the end of the run: an ``EditFired`` with ``fired: false`` for each edit that never did."""
        return [edit.event(None) for edit in self.edits if edit.sha and not edit.fired]

    def save(self, path: Path) -> None:
        atomic_write_json(path, {"version": WATCH_VERSION, "edits": [e.to_json() for e in self.edits]})

    @classmethod
    def load(cls, path: Path) -> FiringWatch:
        """The watch a killed process kept; an empty one when there is none (or it is unreadable:
        the verdicts in the ledger stand, only later evidence for those edits is lost)."""
        watch = cls()
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
            if doc.get("version") == WATCH_VERSION:
                watch.edits = [WatchedEdit.from_json(e) for e in doc.get("edits") or []]
        except (OSError, ValueError, TypeError, AttributeError, KeyError):
            watch.edits = []
        return watch


def trailers(event: EditFired) -> str:
    """The commit-note lines for one firing verdict."""
    verdict = "yes" if event.fired else "never"
    where = f" (generation {event.observed_generation})" if event.observed_generation is not None else ""
    lines = [f"Fired: {verdict}{where}"] + [f"Fired-Evidence: {e}" for e in event.evidence or []]
    return "\n".join(lines)


class FiringRecorder:
    """The loop's side: watch accepted edits, read later runs, record verdicts (ledger + note)."""

    def __init__(self, ledger: Ledger, repo: HarnessRepo, path: Path | None = None) -> None:
        self.ledger = ledger
        self.repo = repo
        self.path = path
        """Where the watch is kept across a kill (``firing.json`` in the run folder); None: memory only."""
        self.watch = FiringWatch.load(path) if path is not None else FiringWatch()
        self.given: set[str] = set()
        """Commits that already have their verdict in the ledger (from a killed process)."""
        self.committed: dict[int, list[str]] = {}
        """generation -> the shas a killed process committed in it (to bind a pending watch)."""
        if path is not None and self.watch.edits and ledger.path.is_file():
            for event in read_ledger(ledger.path):  # one read, only when a killed process left a watch
                if isinstance(event, EditFired):
                    self.given.add(event.sha)
                elif isinstance(event, CandidateCommitted):
                    self.committed.setdefault(event.generation, []).append(event.sha)
            for edit in self.watch.edits:
                edit.fired = edit.fired or edit.sha in self.given

    def keep(self, accepted: Sequence[str]) -> None:
        """After a resume: watch exactly the edits the run accepted. The watch of an edit is kept
        before its commit (``pending``, no sha yet): one whose generation committed an accepted
        sha is bound to it, one whose commit never came (or was not accepted) is dropped."""
        wanted = set(accepted)
        pending = [e for e in self.watch.edits if not e.sha]
        self.watch.edits = [e for e in self.watch.edits if e.sha in wanted]
        bound = {e.sha for e in self.watch.edits}
        for edit in pending:
            sha = next((c for c in self.committed.get(edit.generation, ()) if c in wanted - bound), None)
            if sha is not None:
                edit.sha, edit.fired = sha, edit.fired or sha in self.given
                self.watch.edits.append(edit)
        self.watch.edits.sort(key=lambda e: e.generation)
        self._save()

    def pending(
        self,
        generation: int,
        before: Harness,
        changes: dict[str, str | None],
        summary: str,
        target_tasks: Iterable[str],
        results: Sequence[TaskResult],
    ) -> None:
        """An edit is about to be committed as ``generation``'s accepted one; ``results``: the batch
        it was made from. Kept before the commit, so a kill after the commit loses no watch."""
        self.watch.edits = [e for e in self.watch.edits if e.sha or e.generation != generation]
        self.watch.watch(
            sha="",
            generation=generation,
            summary=summary,
            before=before.files,
            changes=changes,
            target_tasks=target_tasks,
            signals=[r.signal for r in results if r.signal is not None],
            made_from=[r.trajectory for r in results],
        )
        self._save()

    def accepted(self, generation: int, sha: str) -> None:
        """``generation``'s pending edit was committed as ``sha``."""
        for edit in self.watch.edits:
            if not edit.sha and edit.generation == generation:
                edit.sha = sha
        self._save()

    def observed(self, generation: int, results: Sequence[TaskResult]) -> None:
        """Runs of the current harness in ``generation`` (its batch)."""
        rows = [(r.task_id, r.passed, r.signal, r.trajectory) for r in results if r.infra is None]
        for event in self.watch.observe(generation, rows):
            self._record(event)
        self._save()

    def finished(self) -> None:
        for event in self.watch.never_fired():
            self._record(event)

    def _save(self) -> None:
        """Rewrite ``firing.json`` (not while nothing was ever watched: no file per generation)."""
        if self.path is not None and (self.watch.edits or self.path.exists()):
            self.watch.save(self.path)

    def _record(self, event: EditFired) -> None:
        if event.sha in self.given:
            return
        self.given.add(event.sha)
        self.ledger.append(event)
        with contextlib.suppress(HarnessGitError):  # the ledger has it; only the copy is lost
            self.repo.add_note(event.sha, trailers(event))
