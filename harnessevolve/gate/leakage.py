"""Leakage gate: an edit must not embed the instruction or the answer of a task it is judged on.

Only the text an edit *adds* is read: per file, the lines of ``after`` that a line diff against
``before`` marks inserted or replaced. Text is compared as lower-case words (``\\w+``), so quoting,
JSON escaping and punctuation do not hide a copy. Each task gets a score in [0, 1], the larger
of its instruction's and its answers':

* **instruction**: the share of the instruction's word n-grams (``ngram``, default 8) found in
  the added text; an instruction shorter than ``ngram`` words (but at least 4) is one n-gram,
  found whole or not;
* **answer** (``answer`` and the expected values of answer/file checks), scored the same way, so
  a short answer counts when found as whole words; answers shorter than ``min_answer_chars``
  ('12', 'yes') or made only of common words are never matched — they would block every edit.

With ``allow_train_demonstrations`` (the default), text the edit may carry honestly — train
tasks' instructions, answers, files and gold calls — is no evidence: only the n-grams of a
protected task that this public text lacks are counted. Benchmarks built from templates need
this: 'items.txt has one entry per line. How many entries are there?' (train) shares 4 of its
5 8-grams with 'list.txt has one entry per line. ...' (validation), and a demonstration of the
first must not count as leaking the second. A protected text made only of public n-grams (an
answer 'coral' that is also a train task's answer) cannot be told from a legitimate copy and
scores at most 0.5.

A task's ``context`` (its system context, e.g. a policy) is the benchmark's, rendered by the task
itself: an edit that copies any paragraph of it (scored like an instruction, any split) is refused
as touching the task context, since the copy would be editable and count twice in the prompt.
A task opened by its simulated user is scored on that user's scenario (``Task.opening_text``).

The edit is rejected when a *protected* task
scores ``>= threshold`` (default 0.8, HarnessEvolve's). Validation and test tasks are always
protected. Train tasks are protected only with ``allow_train_demonstrations: false``: by default
the ``demo`` proposer may add a train task's reference run ('Task: <instruction>' and its tool
calls) as an example, and the verdict lists those tasks under ``train_demonstrations``.

Optional LLM judge (``judge_model``): after the n-gram check passes, the model sees the added
text and the most similar protected tasks and scores leakage 0-1 (paraphrases, hints); the edit
is rejected at the same threshold. A judge that fails or gives no score rejects the edit (the
gate fails closed). ``aleakage_gate`` is the coroutine for callers inside an event loop;
``leakage_gate`` runs it to completion from synchronous code.
"""

from __future__ import annotations

import asyncio
import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harnessevolve.core.tasks import Task
from harnessevolve.gate.config import LeakageConfig
from harnessevolve.gate.verdict import GateVerdict

WORD = re.compile(r"\w+")
MIN_INSTRUCTION_WORDS = 4
AMBIGUOUS_SCORE = 0.5
JUDGE_TEXT_CHARS = 6000
PROTECTED_SPLITS = ("validation", "test")

# Answers made only of these words are never matched (with short answers, they would match anything).
_COMMON = """
    a about above after again all also an and any are as at be because been before being below
    between both but by can could did do does doing done down during each else error false few
    file files first for from further had has have having he her here hers him his how however i
    if in into is it its just last line lines more most much must my need next no none nor not
    now null number of off ok okay on once one only or other our out over own same she should so
    some such than that the their them then there these they this those through to too true two
    under until up very was we were what when where which while who why will with word words
    would yes you your
"""
COMMON_WORDS = frozenset(WORD.findall(_COMMON))


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def added_chunks(before: str, after: str) -> list[list[str]]:
    """The words of each block of lines ``after`` adds to ``before`` (inserted or replaced)."""
    old, new = before.splitlines(), after.splitlines()
    matcher = difflib.SequenceMatcher(None, old, new, autojunk=False)
    return [
        words("\n".join(new[j1:j2]))
        for tag, _i1, _i2, j1, j2 in matcher.get_opcodes()
        if tag in ("insert", "replace")
    ]


class WordIndex:
    """Word n-grams of a set of text chunks (n-grams never span two chunks), built lazily per n."""

    def __init__(self, chunks: Iterable[list[str]]) -> None:
        self.chunks = [c for c in chunks if c]
        self._grams: dict[int, set[tuple[str, ...]]] = {}

    @property
    def size(self) -> int:
        return sum(len(c) for c in self.chunks)

    def grams(self, n: int) -> set[tuple[str, ...]]:
        if n not in self._grams:
            self._grams[n] = {tuple(c[i : i + n]) for c in self.chunks for i in range(len(c) - n + 1)}
        return self._grams[n]

    def contains(self, gram: tuple[str, ...]) -> bool:
        return gram in self.grams(len(gram))


def gram_set(tokens: Sequence[str], n: int) -> set[tuple[str, ...]]:
    """The word n-grams of ``tokens``; a sequence shorter than n is one gram, matched whole."""
    if len(tokens) < n:
        return {tuple(tokens)} if tokens else set()
    return {tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1)}


def leak_score(tokens: Sequence[str], added: WordIndex, n: int, public: WordIndex | None) -> float:
    """Share of the text's n-grams found in the added text. With ``public`` (what the edit may carry
    honestly), only the n-grams public text lacks count as evidence; text made wholly of public
    n-grams cannot be told from a legitimate copy and scores at most AMBIGUOUS_SCORE."""
    grams = gram_set(tokens, n)
    if not grams:
        return 0.0
    distinctive = {g for g in grams if public is None or not public.contains(g)}
    if not distinctive:
        return min(AMBIGUOUS_SCORE, sum(added.contains(g) for g in grams) / len(grams))
    return sum(added.contains(g) for g in distinctive) / len(distinctive)


@dataclass(frozen=True)
class TaskLeak:
    task_id: str
    split: str
    score: float
    via: str  # "instruction", "answer 'x'", or "" when nothing matched

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task_id, "split": self.split, "score": round(self.score, 3), "via": self.via}


def task_answers(task: Task) -> list[str]:
    """The task's answer and the expected values of its answer and file checks, without repeats."""
    out: list[str] = []
    for value in [task.answer or "", *(c.expected for c in task.checks if c.type in ("answer", "file"))]:
        value = value.strip()
        if value and value not in out:
            out.append(value)
    return out


def matchable_answer(answer: str, config: LeakageConfig) -> bool:
    return len(answer) >= config.min_answer_chars and any(w not in COMMON_WORDS for w in words(answer))


def public_text(tasks: Iterable[Task]) -> WordIndex:
    """What an edit may carry honestly: train tasks' instructions, answers, files and gold calls."""
    chunks = []
    for task in tasks:
        chunks.append(words(task.opening_text))
        chunks += [words(a) for a in task_answers(task)]
        chunks += [words(text) for text in task.setup_files.values()]
        chunks += [words(json.dumps(g.arguments, ensure_ascii=False)) for g in task.gold]
    return WordIndex(chunks)


def score_task(task: Task, added: WordIndex, config: LeakageConfig, public: WordIndex | None) -> TaskLeak:
    best = TaskLeak(task.id, task.split, 0.0, "")
    instruction = words(task.opening_text)
    if len(instruction) >= MIN_INSTRUCTION_WORDS:
        found = leak_score(instruction, added, config.ngram, public)
        if found > 0:
            best = TaskLeak(task.id, task.split, found, "instruction")
    for answer in task_answers(task):
        if not matchable_answer(answer, config):
            continue
        found = leak_score(words(answer), added, config.ngram, public)
        if found > best.score:
            best = TaskLeak(task.id, task.split, found, f"answer {answer!r}")
    return best


def added_index(before: Mapping[str, str], after: Mapping[str, str]) -> WordIndex:
    chunks: list[list[str]] = []
    for path in sorted(after):
        if before.get(path) != after[path]:
            chunks += added_chunks(before.get(path, ""), after[path])
    return WordIndex(chunks)


def context_copy(tasks: Sequence[Task], added: WordIndex, config: LeakageConfig) -> TaskLeak | None:
    """The worst copy of a task context's paragraph in the added text (each distinct context once)."""
    worst: TaskLeak | None = None
    seen: set[str] = set()
    for task in tasks:
        if not task.context or task.context in seen:
            continue
        seen.add(task.context)
        for number, paragraph in enumerate(task.context.split("\n\n"), start=1):
            tokens = words(paragraph)
            if len(tokens) < config.ngram:
                continue
            found = leak_score(tokens, added, config.ngram, None)
            if found > 0 and (worst is None or found > worst.score):
                worst = TaskLeak(task.id, task.split, found, f"context paragraph {number}")
    return worst


def is_protected(task: Task, config: LeakageConfig) -> bool:
    return task.split in PROTECTED_SPLITS or not config.allow_train_demonstrations


def ngram_verdict(
    before: Mapping[str, str], after: Mapping[str, str], tasks: Sequence[Task], config: LeakageConfig
) -> GateVerdict:
    """The n-gram part of the gate (no model call)."""
    added = added_index(before, after)
    public = (
        public_text(t for t in tasks if t.split == "train") if config.allow_train_demonstrations else None
    )
    # public text is no evidence against protected tasks; unprotected (train) ones are scored raw
    leaks = (
        [(t, score_task(t, added, config, public if is_protected(t, config) else None)) for t in tasks]
        if added.size
        else []
    )
    protected = sorted(
        (x for t, x in leaks if is_protected(t, config) and x.score > 0), key=lambda x: (-x.score, x.task_id)
    )
    demonstrated = sorted(
        x.task_id for t, x in leaks if not is_protected(t, config) and x.score >= config.threshold
    )
    worst = protected[0] if protected else None
    numbers: dict[str, Any] = {
        "threshold": config.threshold,
        "ngram": config.ngram,
        "added_words": added.size,
        "protected_tasks": sum(is_protected(t, config) for t in tasks),
        "max_score": round(worst.score, 3) if worst else 0.0,
        "max_task": worst.task_id if worst else None,
        "top": [x.to_dict() for x in protected[:3]],
        "allow_train_demonstrations": config.allow_train_demonstrations,
        "train_demonstrations": demonstrated,
    }
    copied = context_copy(tasks, added, config) if added.size else None
    if copied is not None:
        numbers["context_copy"] = copied.to_dict()
    if copied is not None and copied.score >= config.threshold - 1e-9:
        return GateVerdict(
            "leakage",
            False,
            f"copies task {copied.task_id}'s {copied.via} (scores {copied.score:.2f}): a task's context is "
            "the benchmark's, rendered by the task itself, and not editable",
            numbers,
        )
    if worst is not None and worst.score >= config.threshold - 1e-9:  # 4/5 of the n-grams is 0.8
        return GateVerdict(
            "leakage",
            False,
            f"embeds {worst.split} task {worst.task_id}: {worst.via} scores {worst.score:.2f} "
            f">= {config.threshold:.2f}",
            numbers,
        )
    splits = "validation/test" if config.allow_train_demonstrations else "any"
    reason = f"no {splits} task embedded (max score {numbers['max_score']:.2f} < {config.threshold:.2f})"
    if demonstrated:
        reason += f"; demonstrates {len(demonstrated)} train task(s), allowed by allow_train_demonstrations"
    return GateVerdict("leakage", True, reason, numbers)


def harness_leak(
    files: Mapping[str, str], tasks: Sequence[Task], config: LeakageConfig
) -> tuple[str, GateVerdict] | None:
    """The first file of a harness (every channel into a prompt: prompts, demonstrations, skills,
    tool descriptions, memory entries, world-model and recovery files, loop settings) whose whole
    text embeds a protected task at the gate's threshold, with the verdict; None when none does.
    What the gate checks of an edit's added lines, checked of what the harness already holds."""
    if ngram_verdict({}, files, tasks, config).passed:  # all files at once; then which one
        return None
    for path in sorted(files):
        verdict = ngram_verdict({}, {path: files[path]}, tasks, config)
        if not verdict.passed:
            return path, verdict
    return None


JUDGE_SYSTEM = (
    "You audit an edit to an AI agent's prompts for benchmark leakage. Leakage means the edit gives "
    "away a listed task: it copies or paraphrases the task's question, states its answer, or hints "
    "at the answer closely enough that the agent could solve that task without working it out. "
    "General advice, and examples of other tasks, are not leakage. Reply with one JSON object only: "
    '{"score": <0.0 to 1.0, how surely the edit leaks a listed task>, "task_id": "<the task, or empty>", '
    '"reason": "<one short sentence>"}'
)


class JudgeError(Exception):
    """The judge model gave no usable score."""


def judge_candidates(added: WordIndex, tasks: Sequence[Task], limit: int) -> list[Task]:
    """The protected tasks whose distinctive words the added text covers best."""
    vocabulary = set(added.grams(1))

    def coverage(task: Task) -> float:
        text = " ".join([task.opening_text, *task_answers(task)])
        distinct = {(w,) for w in words(text) if w not in COMMON_WORDS}
        return len(distinct & vocabulary) / len(distinct) if distinct else 0.0

    return sorted(tasks, key=lambda t: (-coverage(t), t.id))[:limit]


def judge_messages(added_text: str, tasks: Sequence[Task]) -> list[dict[str, str]]:
    listed = "\n".join(
        f"- id: {t.id}\n  question: {t.opening_text.strip()}\n"
        f"  answer: {', '.join(task_answers(t)) or '(none)'}"
        for t in tasks
    )
    user = f"Tasks the edit must not leak:\n{listed}\n\nText the edit adds:\n<<<\n{added_text}\n>>>"
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def parse_judge_reply(content: str) -> tuple[float, str, str]:
    """``(score, task_id, reason)`` from the judge's reply; raises JudgeError when there is no score."""
    match = re.search(r"\{.*\}", content, re.DOTALL)
    if match:
        try:
            doc = json.loads(match.group(0))
            score = float(doc["score"])
        except (ValueError, KeyError, TypeError):
            pass
        else:
            return min(1.0, max(0.0, score)), str(doc.get("task_id") or ""), str(doc.get("reason") or "")
    number = re.search(r"\b(?:0(?:\.\d+)?|1(?:\.0+)?)\b", content)
    if number is None:
        raise JudgeError(f"no score in the judge's reply: {content[:120]!r}")
    return float(number.group(0)), "", ""


async def judge_leakage(
    model: str, before: Mapping[str, str], after: Mapping[str, str], tasks: Sequence[Task], limit: int
) -> tuple[float, str, str]:
    from harnessevolve.models import acomplete

    added = added_index(before, after)
    text = "\n...\n".join(" ".join(c) for c in added.chunks)[:JUDGE_TEXT_CHARS]
    reply = await acomplete(model, judge_messages(text, judge_candidates(added, tasks, limit)))
    return parse_judge_reply(reply.content)


async def aleakage_gate(
    before_files: Mapping[str, str],
    after_files: Mapping[str, str],
    tasks: Sequence[Task],
    config: LeakageConfig,
) -> GateVerdict:
    """The leakage gate: n-gram check, then the LLM judge when ``judge_model`` is set."""
    verdict = ngram_verdict(before_files, after_files, tasks, config)
    if not verdict.passed or config.judge_model is None or not verdict.numbers["added_words"]:
        return verdict
    protected = [t for t in tasks if is_protected(t, config)]
    numbers = {**verdict.numbers, "judge_model": config.judge_model}
    try:
        score, task_id, why = await judge_leakage(
            config.judge_model, before_files, after_files, protected, config.judge_max_tasks
        )
    except Exception as exc:  # noqa: BLE001 - any judge failure rejects: the gate fails closed
        return GateVerdict("leakage", False, f"leakage judge failed: {exc}", numbers)
    numbers.update(judge_score=round(score, 3), judge_task=task_id or None, judge_reason=why[:200])
    if score >= config.threshold:
        target = f" ({task_id})" if task_id else ""
        return GateVerdict(
            "leakage",
            False,
            f"judge {config.judge_model} scores leakage {score:.2f} >= {config.threshold:.2f}{target}",
            numbers,
        )
    return GateVerdict("leakage", True, f"{verdict.reason}; judge scores {score:.2f}", numbers)


def leakage_gate(
    before_files: Mapping[str, str],
    after_files: Mapping[str, str],
    tasks: Sequence[Task],
    config: LeakageConfig,
) -> GateVerdict:
    """Synchronous ``aleakage_gate``. Inside a running event loop with a judge configured, await
    ``aleakage_gate`` instead (this raises RuntimeError there)."""
    if config.judge_model is None:
        return ngram_verdict(before_files, after_files, tasks, config)
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(aleakage_gate(before_files, after_files, tasks, config))
    raise RuntimeError("leakage_gate with a judge_model inside an event loop: await aleakage_gate")
