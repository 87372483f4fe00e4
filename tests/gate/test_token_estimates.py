"""A tokenizer failure is an estimate marked as one in the quality gate's numbers, never silent."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessevolve.gate.config import QualityConfig
from harnessevolve.gate.quality import quality_gate
from harnessevolve.harness.load import load_harness
from harnessevolve.models import tokens


def test_counted_tokens_are_not_marked(harness_dir: Path) -> None:
    harness = load_harness(harness_dir)
    verdict = quality_gate(harness_dir, harness.files, harness.editable, QualityConfig())
    assert verdict.numbers["prompt_tokens_estimated"] is False


def test_a_failed_tokenizer_is_an_estimate_and_says_so(
    harness_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Broken:
        def token_counter(self, **_kwargs):
            raise RuntimeError("no tokenizer")

    monkeypatch.setattr(tokens, "litellm_module", lambda: Broken())
    harness = load_harness(harness_dir)
    measured = tokens.measure_tokens(harness.assembled_prompt(), harness.model)
    assert measured.estimated and measured.tokens == len(harness.assembled_prompt()) // 4
    verdict = quality_gate(harness_dir, harness.files, harness.editable, QualityConfig(max_prompt_tokens=1))
    assert verdict.numbers["prompt_tokens_estimated"] is True
    assert not verdict.passed and "(estimated: no tokenizer for this model)" in verdict.reason
