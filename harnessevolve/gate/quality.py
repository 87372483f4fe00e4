"""Quality gate: the candidate harness is valid, loads, stays inside its editable paths and is not bloated."""

from __future__ import annotations

import re
from fnmatch import fnmatch
from pathlib import Path

from harnessevolve.gate.config import QualityConfig
from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.harness.load import load_harness, validate_harness
from harnessevolve.models.tokens import measure_tokens

EXAMPLE_HEADING = re.compile(r"^## Example\b", re.MULTILINE)


def changed_paths(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def count_examples(text: str) -> int:
    return len(EXAMPLE_HEADING.findall(text))


ESTIMATE_NOTE = " (estimated: no tokenizer for this model)"


def quality_gate(
    candidate_dir: Path,
    before: dict[str, str],
    editable: tuple[str, ...],
    config: QualityConfig,
    *,
    model: str | None = None,
) -> GateVerdict:
    """``model``: the agent model whose tokenizer counts the prompt (default: the harness's)."""
    problems = validate_harness(candidate_dir)
    if problems:
        return GateVerdict("quality", False, f"invalid harness: {problems[0]}", {"problems": len(problems)})
    harness = load_harness(candidate_dir)
    changed = changed_paths(before, harness.files)
    forbidden = [p for p in changed if not any(fnmatch(p, pattern) for pattern in editable)]
    prompt_chars = len(harness.assembled_prompt())
    measured = measure_tokens(harness.assembled_prompt(), model or harness.model)
    prompt_tokens = measured.tokens
    examples_before = sum(count_examples(t) for p, t in before.items() if p.endswith(".md"))
    examples_after = sum(count_examples(t) for p, t in harness.files.items() if p.endswith(".md"))
    numbers = {
        "changed": changed,
        "prompt_chars": prompt_chars,
        "max_prompt_chars": config.max_prompt_chars,
        "prompt_tokens": prompt_tokens,
        "max_prompt_tokens": config.max_prompt_tokens,
        "prompt_tokens_estimated": measured.estimated,
        "new_examples": examples_after - examples_before,
        "max_new_examples": config.max_new_examples,
    }
    if forbidden:
        return GateVerdict("quality", False, f"edits a path that is not editable: {forbidden[0]}", numbers)
    if prompt_chars > config.max_prompt_chars:
        return GateVerdict(
            "quality", False, f"prompt bloat: {prompt_chars} chars > cap {config.max_prompt_chars}", numbers
        )
    if prompt_tokens > config.max_prompt_tokens:
        return GateVerdict(
            "quality",
            False,
            f"prompt bloat: {prompt_tokens} tokens{ESTIMATE_NOTE if measured.estimated else ''}"
            f" > cap {config.max_prompt_tokens}",
            numbers,
        )
    if examples_after - examples_before > config.max_new_examples:
        return GateVerdict(
            "quality",
            False,
            f"adds {examples_after - examples_before} examples > {config.max_new_examples}",
            numbers,
        )
    return GateVerdict("quality", True, "valid, loads, editable paths only, within size caps", numbers)
