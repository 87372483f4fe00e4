"""The GEPA arm of vs_gepa.py: GEPA 0.1.4's adapter API over a harnessevolve harness.

Candidate = the harness's editable text components; evaluation = the pipeline's scorer (the same
agent loop and checkers as harnessevolve); reflection = any litellm model through
``LiteLLMReflector`` (the package's ``local/`` and ``scripted/`` providers included).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness_arms import copy_harness, score_split  # noqa: E402

from harnessevolve.core.errors import HarnessEvolveError  # noqa: E402
from harnessevolve.core.tasks import Benchmark, Task  # noqa: E402
from harnessevolve.harness.load import load_harness  # noqa: E402
from harnessevolve.harness.model import Harness  # noqa: E402
from harnessevolve.scoring.scorer import Scorer, TaskResult, mean_score  # noqa: E402


def harness_components(harness_dir: Path) -> dict[str, str]:
    """The editable text of a harness as GEPA components: ``prompts/*.md`` whole, and the body
    (after the front matter) of each ``skills/<name>/SKILL.md``."""
    out = {
        p.relative_to(harness_dir).as_posix(): p.read_text() for p in sorted(harness_dir.glob("prompts/*.md"))
    }
    for skill in sorted(harness_dir.glob("skills/*/SKILL.md")):
        _head, body = split_front_matter(skill.read_text())
        out[skill.relative_to(harness_dir).as_posix()] = body
    return out


def split_front_matter(text: str) -> tuple[str, str]:
    if not text.startswith("---\n"):
        return "", text
    end = text.find("\n---", 4)
    if end < 0:
        return "", text
    cut = text.index("\n", end + 4) + 1 if "\n" in text[end + 4 :] else len(text)
    return text[:cut], text[cut:]


def write_components(seed_dir: Path, dest: Path, candidate: Mapping[str, str]) -> Path:
    """A copy of the seed harness with the candidate's texts written in (skills keep their front matter)."""
    copy_harness(seed_dir, dest)
    for rel, text in candidate.items():
        path = dest / rel
        if rel.startswith("skills/"):
            head, _ = split_front_matter(path.read_text())
            text = head + text
        path.write_text(text)
    return dest


def render_actions(result: TaskResult, limit: int = 300) -> str:
    lines = []
    for step in result.trajectory.agent_steps:
        obs = {o.source_call_id: o.content for o in step.observations}
        for call in step.tool_calls:
            seen = obs.get(call.tool_call_id, "").strip().replace("\n", " ")
            lines.append(f"{call.function_name}({json.dumps(call.arguments)}) -> {seen[:limit]}")
        if not step.tool_calls and step.message:
            lines.append(f"(no tool call) {step.message.strip()[:limit]}")
    return "\n".join(lines) or "(no actions)"


def feedback(result: TaskResult) -> str:
    stop = result.trajectory.extra.get("stop_reason", "")
    if result.passed:
        return f"Correct (the checker passed; the run ended with {stop})."
    text = f"Wrong (the checker failed; the run ended with {stop})."
    signal = result.signal
    if signal is not None:
        text += f" Cause: {signal.cause}. {signal.hint}"
        if signal.expected:
            text += f" A correct run did this instead: {json.dumps(signal.expected)}."
    return text


class HarnessGEPAAdapter:
    """``gepa.GEPAAdapter`` over a harness: ``evaluate`` writes the candidate into a copy of the
    seed harness and runs the pipeline's scorer (the same agent loop and checkers as
    harnessevolve); ``make_reflective_dataset`` shows the reflection model each run's actions and
    the evaluator's verdict (cause, hint, the reference action at the first divergence).

    Budget: GEPA's own count, one metric call per (candidate, task) evaluated, so
    ``max_metric_calls`` = B means B rollouts. The scorer memoises a (harness, task) pair, so a
    re-evaluation GEPA counts may cost nothing here: real rollouts (``scorer.rollouts``) are <= its
    count (reporting GEPA's real spend rather than its count keeps the comparison honest; counting
    only real rollouts would let an all-memoised iteration cost 0 and GEPA loop forever).
    ``validation_log`` holds (real rollouts so far, score) each time a candidate is scored on the
    whole validation split.
    """

    propose_new_texts = None  # GEPA's default reflective proposer, with ``reflection_lm``

    def __init__(self, seed_dir: Path, work_dir: Path, scorer: Scorer, validation: Sequence[Task]) -> None:
        self.seed_dir = seed_dir
        self.work_dir = work_dir
        self.scorer = scorer
        self.validation_ids = {t.id for t in validation}
        self.validation_log: list[tuple[int, float]] = []
        self.harnesses: dict[str, Harness] = {}
        self.broken = 0
        self.log = QuietLogger()

    def harness_for(self, candidate: Mapping[str, str]) -> Harness:
        key = json.dumps(dict(sorted(candidate.items())))
        if key not in self.harnesses:
            dest = self.work_dir / f"candidate-{len(self.harnesses):04d}"
            self.harnesses[key] = load_harness(write_components(self.seed_dir, dest, candidate))
        return self.harnesses[key]

    def evaluate(self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        from gepa import EvaluationBatch

        try:
            harness = self.harness_for(candidate)
        except HarnessEvolveError as exc:  # a candidate that does not load scores 0 on every task
            self.broken += 1
            outputs = [{"task_id": t.id, "error": str(exc)} for t in batch]
            return EvaluationBatch(
                outputs,
                [0.0] * len(batch),
                [None] * len(batch) if capture_traces else None,
            )
        results = score_split(self.scorer, harness, batch, "gepa")
        if {t.id for t in batch} == self.validation_ids:
            self.validation_log.append((self.scorer.rollouts, mean_score(results)))
        outputs = [
            {
                "task_id": r.task_id,
                "answer": r.trajectory.extra.get("answer"),
                "stop_reason": r.trajectory.extra.get("stop_reason"),
            }
            for r in results
        ]
        return EvaluationBatch(
            outputs=outputs,
            scores=[r.score for r in results],
            trajectories=[(t, r) for t, r in zip(batch, results, strict=True)] if capture_traces else None,
        )

    def make_reflective_dataset(
        self, candidate: dict[str, str], eval_batch: Any, components_to_update: list[str]
    ) -> dict[str, list[dict[str, Any]]]:
        records = []
        for item in eval_batch.trajectories or []:
            if item is None:
                continue
            task, result = item
            records.append(
                {
                    "Inputs": {"task": task.instruction},
                    "Generated Outputs": render_actions(result),
                    "Feedback": feedback(result),
                }
            )
        return {name: records for name in components_to_update}


class LiteLLMReflector:
    """GEPA's ``reflection_lm`` (``str | messages -> str``) through litellm, with the package's own
    providers registered (so ``local/smollm2-135m`` and ``scripted/...`` work); counts tokens."""

    def __init__(self, model: str, *, max_tokens: int = 256, temperature: float = 0.7, seed: int = 0) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        # The embedded 135M model loops on one line at low temperature; a repetition penalty
        # (a llama.cpp option the local provider reads) keeps its proposals from degenerating.
        self.extra: dict[str, Any] = {"repeat_penalty": 1.15} if model.startswith("local/") else {}
        self.calls = 0
        self.tokens = 0

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        from harnessevolve.models.registry import litellm_module

        litellm = litellm_module()
        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        response = litellm.completion(
            model=self.model,
            messages=messages,
            max_tokens=self.max_tokens,
            temperature=self.temperature,
            seed=self.seed + self.calls,
            **self.extra,
        )
        self.calls += 1
        usage = getattr(response, "usage", None)
        if usage is not None:
            self.tokens += int(usage.prompt_tokens or 0) + int(usage.completion_tokens or 0)
        return response.choices[0].message.content or ""


class QuietLogger:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(message)


def run_gepa(
    seed_dir: Path,
    benchmark: Benchmark,
    scorer: Scorer,
    *,
    budget: int,
    reflector: Any,
    seed: int,
    work_dir: Path,
) -> tuple[dict[str, str], HarnessGEPAAdapter]:
    """``gepa.optimize`` on the train split, Pareto-tracked on validation; returns its best candidate."""
    try:
        import gepa
    except ImportError as exc:  # pragma: no cover - the dev extra installs it
        raise SystemExit("this script needs gepa: pip install gepa==0.1.4") from exc
    adapter = HarnessGEPAAdapter(seed_dir, work_dir, scorer, benchmark.split("validation"))
    result = gepa.optimize(
        seed_candidate=harness_components(seed_dir),
        trainset=list(benchmark.split("train")),
        valset=list(benchmark.split("validation")),
        adapter=adapter,
        reflection_lm=reflector,
        max_metric_calls=budget,
        seed=seed,
        logger=adapter.log,
        display_progress_bar=False,
    )
    return dict(result.best_candidate), adapter
