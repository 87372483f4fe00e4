"""Deterministic proposers that edit tool specs and loop settings (no model needed; opt-in by name).

* ``tools``: a ``missing_argument`` cluster makes the argument the reference passed and the run left
  out required, with a sentence in the tool's description; a ``wrong_tool`` cluster sharpens the
  description of the tool the reference used, naming the tool the runs used instead. A tool the
  task brings (no harness file) that the runs called wrongly or not at all gets a harness file of
  its own (``tools/<name>.yaml``, no implementation: it replaces the task's description): the
  task's description plus one example call from a train reference, of another task where there
  is one;
* ``loop``: a ``step_limit`` cluster whose runs repeat a call turns on ``stop_on_repeat`` (or, with
  it already on, gives the agent two more steps, within the schema's bounds). An agent whose step
  limit lives in its own config (mini-swe-agent's ``agent.step_limit``, ``ProposalContext.step_limit_path``)
  has no ``stop_on_repeat``: it gets the two more steps, written into that config.

Both answer with ``edit_tool`` / ``set_loop`` operations (or the config change), so they only act
where ``tools/*.yaml``, ``harness.yaml`` or the agent's config is editable; a revision is never
possible (ProposalFailed).
"""

from __future__ import annotations

from typing import Any

from harnessevolve.core.documents import bounded_yaml
from harnessevolve.core.schema import all_errors as schema_errors
from harnessevolve.core.signals import Cause, Cluster, ErrorSignal
from harnessevolve.optimize.proposal import Candidate, ProposalContext, ProposalFailed

MAX_STEPS_CAP = 200
EXTRA_STEPS = 2


def _edit_candidate(
    name: str,
    context: ProposalContext,
    cluster: Cluster,
    edits: list[dict[str, Any]],
    summary: str,
    why: str,
    written: dict[str, str | None] | None = None,
) -> Candidate | None:
    """``written``: the change itself, where no edit operation can say it (a key of a config file)."""
    if written is not None:
        changes = None if summary in context.rejected else written
    else:
        changes = context.fresh_changes(edits, summary)
    if changes is None:
        return None
    return Candidate(
        changes=changes,
        summary=summary,
        rationale=f"{cluster.size} failed run(s) share cause {cluster.cause.value}; {why}",
        targets=(cluster.cause.value,),
        target_tasks=cluster.task_ids,
        proposer=name,
        edits=tuple(edits),
        evidence=tuple(s.hint for s in cluster.signals[:3]),
    )


def _tool_doc(context: ProposalContext, tool: str) -> dict[str, Any] | None:
    import yaml

    text = context.files.get(f"tools/{tool}.yaml")
    try:
        doc = bounded_yaml(text) if text else None
    except yaml.YAMLError:
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("parameters"), dict) else None


def _call(signal: ErrorSignal, which: str) -> tuple[str, dict[str, Any]]:
    call = (signal.expected if which == "expected" else signal.actual) or {}
    arguments = call.get("arguments")
    return str(call.get("tool") or ""), arguments if isinstance(arguments, dict) else {}


class ToolSpecProposer:
    """Makes a left-out argument required, or sharpens the description of the tool that fits."""

    name = "tools"
    parts = "tool definitions (tools/*.yaml)"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def reaches(self, context: ProposalContext) -> bool:
        """It edits tool definitions: one of ``tools/*.yaml`` must be editable."""
        return bool(context.editable_files("tools/*.yaml"))

    async def propose(self, context: ProposalContext) -> Candidate | None:
        for cluster in context.clusters:
            for signal in cluster.signals:
                candidate = self._for_signal(context, cluster, signal)
                if candidate is not None:
                    return candidate
        return None

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        raise ProposalFailed(self.name, [f"cannot revise a tool-spec edit ({reason})"])

    def _for_signal(
        self, context: ProposalContext, cluster: Cluster, signal: ErrorSignal
    ) -> Candidate | None:
        expected_tool, expected_args = _call(signal, "expected")
        actual_tool, actual_args = _call(signal, "actual")
        if expected_tool in context.task_tools and f"tools/{expected_tool}.yaml" not in context.files:
            return self._example_call(context, cluster, expected_tool)
        doc = _tool_doc(context, expected_tool)
        if doc is None or expected_tool == "submit":
            return None
        description = str(doc.get("description", "")).rstrip()
        if cluster.cause == Cause.MISSING_ARGUMENT and actual_tool == expected_tool:
            params = doc["parameters"]
            missing = [a for a in expected_args if a not in actual_args and a in params.get("properties", {})]
            if not missing:
                return None
            arg = missing[0]
            new_params = {**params, "required": sorted({*params.get("required", []), arg})}
            sentence = f"Always pass {arg}."
            edit: dict[str, Any] = {"op": "edit_tool", "name": expected_tool, "parameters": new_params}
            if sentence not in description:
                edit["description"] = f"{description} {sentence}"
            summary = f"require argument {arg} of tool {expected_tool}"
            why = f"runs called {expected_tool} without {arg}, which the reference passed."
            return _edit_candidate(self.name, context, cluster, [edit], summary, why)
        if cluster.cause == Cause.WRONG_TOOL and actual_tool and actual_tool != expected_tool:
            sentence = f"Use {expected_tool}, not {actual_tool}, for this kind of step."
            if sentence in description:
                return None
            edit = {"op": "edit_tool", "name": expected_tool, "description": f"{description} {sentence}"}
            summary = f"say when to use {expected_tool} instead of {actual_tool}"
            why = f"runs called {actual_tool} where the reference called {expected_tool}."
            return _edit_candidate(self.name, context, cluster, [edit], summary, why)
        return None

    def _example_call(self, context: ProposalContext, cluster: Cluster, tool: str) -> Candidate | None:
        """A task's tool that the runs called wrongly (or not, or in place of another) gets a harness
        description of its own: the task's, plus one call of it from a train reference, of another
        task than the failed ones where there is one (``tools/<tool>.yaml``, no implementation)."""
        import json

        import yaml

        path = f"tools/{tool}.yaml"
        if cluster.cause not in EXAMPLE_CAUSES or not context.may_edit(path):
            return None
        calls = [c for c in context.train_calls.get(tool, ()) if c[1]]
        others = [c for c in calls if c[0] not in cluster.task_ids]
        shown = [
            json.dumps({"tool": tool, "arguments": args}, ensure_ascii=False) for _, args in others or calls
        ]
        example = next((text for text in shown if len(text) <= MAX_EXAMPLE_CHARS), None)
        if example is None:
            return None
        task_tool = context.task_tools[tool]
        description = f"{str(task_tool['description']).rstrip()} Example call: {example}"
        doc = {"version": 1, "name": tool, "description": description, "parameters": task_tool["parameters"]}
        if schema_errors(doc, "tool"):  # a task schema a harness tool file cannot hold: no edit
            return None
        text = f"# {tool}: the task's tool, described with an example call\n" + yaml.safe_dump(
            doc, sort_keys=False, allow_unicode=True, width=100
        )
        summary = f"show an example call of {tool}"
        source = "another train task's reference" if others else "a train reference of a failed task"
        why = f"runs called {tool} wrongly or not at all; its description now shows a call from {source}."
        return _edit_candidate(self.name, context, cluster, [], summary, why, written={path: text})


EXAMPLE_CAUSES = (Cause.WRONG_ARGUMENT, Cause.MISSING_ARGUMENT, Cause.WRONG_TOOL, Cause.SKIPPED_STEP)
"""Failures an example call can show the way out of: the call's arguments, or which tool to call."""
MAX_EXAMPLE_CHARS = 300
"""A longer call (a file's contents as an argument) is not shown."""


class LoopSettingsProposer:
    """Stops runs that repeat a call (``stop_on_repeat``) or gives step-limited runs more steps."""

    name = "loop"
    parts = "the step limit"
    """What it edits (named when ``run`` refuses a harness none of its proposers reaches)."""

    def reaches(self, context: ProposalContext) -> bool:
        """It sets the step limit (and, in harness.yaml, ``stop_on_repeat``): that must be editable."""
        return context.may_edit_at(context.step_limit_path)

    async def propose(self, context: ProposalContext) -> Candidate | None:
        import yaml

        if not context.step_limit_path.startswith("harness.yaml#"):
            return self._own_step_limit(context)
        try:
            doc = bounded_yaml(context.files.get("harness.yaml", "")) or {}
        except yaml.YAMLError:
            return None
        found = doc.get("loop") if isinstance(doc, dict) else None
        loop: dict[str, Any] = found if isinstance(found, dict) else {}
        for cluster in context.clusters:
            if cluster.cause != Cause.STEP_LIMIT:
                continue
            repeated = any("repeat" in s.hint.lower() for s in cluster.signals)
            if repeated and not loop.get("stop_on_repeat"):
                edits = [{"op": "set_loop", "setting": "stop_on_repeat", "value": 2}]
                summary = "stop runs that repeat the same call twice"
                why = "the runs repeated one call until the step limit."
            else:
                steps = int(loop.get("max_steps", 8))
                if steps + EXTRA_STEPS > MAX_STEPS_CAP:
                    continue
                edits = [{"op": "set_loop", "setting": "max_steps", "value": steps + EXTRA_STEPS}]
                summary = f"allow {steps + EXTRA_STEPS} agent steps"
                why = f"the runs were stopped at {steps} steps before finishing."
            candidate = _edit_candidate(self.name, context, cluster, edits, summary, why)
            if candidate is not None:
                return candidate
        return None

    def _own_step_limit(self, context: ProposalContext) -> Candidate | None:
        """Two more steps, written at the agent's own step limit (a positive integer; 0 or none there
        means no limit, so nothing to raise)."""
        location = context.step_limit_path
        steps = context.value_at(location)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            return None
        for cluster in context.clusters:
            if cluster.cause != Cause.STEP_LIMIT:
                continue
            summary = f"allow {steps + EXTRA_STEPS} agent steps"
            written = context.changes_at(location, steps + EXTRA_STEPS)
            if written is None:
                return None
            why = f"the runs were stopped at {steps} steps before finishing ({location})."
            return _edit_candidate(self.name, context, cluster, [], summary, why, written)
        return None

    async def revise(self, context: ProposalContext, candidate: Candidate, reason: str) -> Candidate:
        raise ProposalFailed(self.name, [f"cannot revise a loop-setting edit ({reason})"])
