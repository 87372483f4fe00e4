"""A gepa cell: GEPA (the ``gepa`` package, an optional extra) optimizing the seed harness's texts.

GEPA's adapter API over a harness: a *candidate* is the harness's editable texts (``prompts/*.md``
whole, each ``skills/<name>/SKILL.md``'s body after its front matter); ``evaluate`` writes a
candidate into a copy of the seed harness and scores it with the scorer every arm gets (the same
agent loop and checks); the reflective dataset shows the reflection model each rollout's actions
and the checker's verdict (cause, hint, the reference action at the first divergence). GEPA runs on
the train split, Pareto-tracked on validation; its best candidate is what the cell scores on test.

Budget: GEPA's own count, one metric call per (candidate, task) evaluated, so ``max_metric_calls``
= B means B rollouts; the scorer memoises a (harness, task) pair, so the cell's rollouts (what it
really ran) are at most GEPA's count.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError
from harnessevolve.core.interrupts import run_async
from harnessevolve.core.tasks import Benchmark, Task
from harnessevolve.harness.load import IGNORED_PARTS, load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.scoring.scorer import Scorer, TaskResult, mean_score

GEPA_PACKAGE = "gepa"
INSTALL_HINT = "pip install 'harnessevolve[gepa]' (the gepa package), or leave the gepa arm out"
DEFAULT_REFLECTION_TOKENS = 512


def gepa_available() -> bool:
    import importlib.util

    return importlib.util.find_spec(GEPA_PACKAGE) is not None


def gepa_module() -> Any:
    """The ``gepa`` package (an optional extra; untyped here: its API is used as documented)."""
    import importlib

    return importlib.import_module(GEPA_PACKAGE)


def copy_harness(source: Path, dest: Path) -> Path:
    """A plain copy of the harness files (no git, no run state)."""
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(*IGNORED_PARTS))
    return dest


def harness_components(harness_dir: Path) -> dict[str, str]:
    """The editable texts of a harness as GEPA components: ``prompts/*.md`` whole, and the body
    (after the front matter) of each ``skills/<name>/SKILL.md``."""
    out = {
        p.relative_to(harness_dir).as_posix(): p.read_text() for p in sorted(harness_dir.glob("prompts/*.md"))
    }
    for skill in sorted(harness_dir.glob("skills/*/SKILL.md")):
        _head, body = split_front_matter(skill.read_text())
        out[skill.relative_to(harness_dir).as_posix()] = body
    return out


def split_front_matter(text: str) -> tuple[str, str]:
    """``(front matter with its fences, body)``; ``("", text)`` when there is none."""
    if not text.startswith("---\n"):
        return "", text
    end = text.find("\n---", 4)
    if end < 0:
        return "", text
    cut = text.index("\n", end + 4) + 1 if "\n" in text[end + 4 :] else len(text)
    return text[:cut], text[cut:]


def write_components(
    seed_dir: Path, dest: Path, candidate: Mapping[str, str], known: Collection[str] | None = None
) -> Path:
    """A copy of the seed harness with the candidate's texts written in (skills keep their front
    matter). Only the seed's own component files (``known``: read from the seed when not given)
    are written: a name GEPA made up is ignored."""
    known = harness_components(seed_dir) if known is None else known
    copy_harness(seed_dir, dest)
    for rel, text in candidate.items():
        if rel not in known:
            continue
        path = dest / rel
        if rel.startswith("skills/"):
            head, _ = split_front_matter(path.read_text())
            text = head + text
        path.write_text(text)
    return dest


def render_actions(result: TaskResult, limit: int = 300) -> str:
    lines = []
    for step in result.trajectory.agent_steps:
        seen_by_call = {o.source_call_id: o.content for o in step.observations}
        for call in step.tool_calls:
            seen = seen_by_call.get(call.tool_call_id, "").strip().replace("\n", " ")
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


class QuietLogger:
    """GEPA's logger: its lines kept, not printed."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def log(self, message: str) -> None:
        self.lines.append(message)


class HarnessGEPAAdapter:
    """``gepa.GEPAAdapter`` over a harness (see the module docstring). ``validation_log`` holds
    (real rollouts so far, score) each time a candidate is scored on the whole validation split."""

    propose_new_texts = None  # GEPA's default reflective proposer, with ``reflection_lm``

    def __init__(self, seed_dir: Path, work_dir: Path, scorer: Scorer, validation: Sequence[Task]) -> None:
        self.seed_dir = seed_dir
        self.work_dir = work_dir
        self.scorer = scorer
        self.validation_ids = {t.id for t in validation}
        self.validation_log: list[tuple[int, float]] = []
        self.components = tuple(harness_components(seed_dir))
        self.harnesses: dict[str, Harness] = {}
        self.broken = 0
        self.log = QuietLogger()

    def harness_for(self, candidate: Mapping[str, str]) -> Harness:
        key = json.dumps(dict(sorted(candidate.items())))
        if key not in self.harnesses:
            dest = self.work_dir / f"candidate-{len(self.harnesses):04d}"
            shutil.rmtree(dest, ignore_errors=True)
            self.harnesses[key] = load_harness(
                write_components(self.seed_dir, dest, candidate, self.components)
            )
        return self.harnesses[key]

    def evaluate(self, batch: list[Task], candidate: dict[str, str], capture_traces: bool = False) -> Any:
        evaluation_batch = gepa_module().EvaluationBatch
        try:
            harness = self.harness_for(candidate)
        except HarnessEvolveError as exc:  # a candidate that does not load scores 0 on every task
            self.broken += 1
            errors = [{"task_id": t.id, "error": str(exc)} for t in batch]
            return evaluation_batch(
                errors, [0.0] * len(batch), [None] * len(batch) if capture_traces else None
            )
        results = run_async(self.scorer.score(harness, batch, "gepa"))
        if {t.id for t in batch} == self.validation_ids:
            self.validation_log.append((self.scorer.rollouts, mean_score(results)))
        outputs: list[dict[str, Any]] = [
            {
                "task_id": r.task_id,
                "answer": r.trajectory.extra.get("answer"),
                "stop_reason": r.trajectory.extra.get("stop_reason"),
            }
            for r in results
        ]
        return evaluation_batch(
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
    """GEPA's ``reflection_lm`` (``str | messages -> str``) through the package's model call
    (``models.call.acomplete``: retries, the model's limits, the usage meter; ``local/`` and
    ``scripted/`` models work); counts calls, tokens and cost."""

    def __init__(
        self,
        model: str,
        *,
        max_tokens: int = DEFAULT_REFLECTION_TOKENS,
        temperature: float = 0.7,
        seed: int = 0,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.seed = seed
        # Small local models loop on one line at low temperature; a repetition penalty (a
        # llama.cpp option the local provider reads) keeps their proposals from degenerating.
        self.extra: dict[str, Any] = {"repeat_penalty": 1.15} if model.startswith("local/") else {}
        self.calls = 0
        self.tokens = 0
        self.cost_usd = 0.0

    def __call__(self, prompt: str | list[dict[str, Any]]) -> str:
        from harnessevolve.models.call import acomplete

        messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else prompt
        reply = run_async(
            acomplete(
                self.model,
                messages,
                temperature=self.temperature,
                max_tokens=self.max_tokens,
                seed=self.seed + self.calls,
                extra_params=self.extra,
            )
        )
        self.calls += 1
        self.tokens += reply.prompt_tokens + reply.completion_tokens
        self.cost_usd += reply.cost_usd
        return reply.content


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
    """``gepa.optimize`` on the train split, Pareto-tracked on validation; its best candidate."""
    gepa = gepa_module()
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


def evolve_with_gepa(
    seed_dir: Path,
    benchmark: Benchmark,
    scorer: Scorer,
    *,
    budget: int,
    reflection_model: str,
    max_tokens: int,
    seed: int,
    work: Path,
) -> tuple[Path, dict[str, Any]]:
    """A gepa cell's making: GEPA with ``budget`` metric calls; the best candidate's folder (under
    ``work``) and the cell's numbers (``rollouts`` and ``tokens``: what GEPA really spent)."""
    reflector = LiteLLMReflector(reflection_model, max_tokens=max_tokens, seed=seed * 10_000)
    shutil.rmtree(work / "gepa", ignore_errors=True)
    best, adapter = run_gepa(
        seed_dir, benchmark, scorer, budget=budget, reflector=reflector, seed=seed, work_dir=work / "gepa"
    )
    final = work / "best"
    shutil.rmtree(final, ignore_errors=True)
    write_components(seed_dir, final, best)
    seed_texts = harness_components(seed_dir)
    return final, {
        "rollouts": scorer.rollouts,
        "tokens": scorer.tokens + reflector.tokens,
        "budget": budget,
        "reflection_model": reflection_model,
        "reflection_calls": reflector.calls,
        "reflection_tokens": reflector.tokens,
        "reflection_cost_usd": round(reflector.cost_usd, 8),
        "candidates": len(adapter.harnesses),
        "broken_candidates": adapter.broken,
        "changed_components": sorted(k for k, v in best.items() if seed_texts.get(k) != v),
        "validation_curve": [list(point) for point in adapter.validation_log],
    }
