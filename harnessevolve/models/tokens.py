"""Counting prompt tokens the way the model's provider would (litellm's tokenizers, offline)."""

from __future__ import annotations

from dataclasses import dataclass

from harnessevolve.models.registry import litellm_module


@dataclass(frozen=True)
class TokenCount:
    tokens: int
    estimated: bool = False
    """True when no tokenizer could count: ``tokens`` is then len(text) / 4, an estimate."""


def measure_tokens(text: str, model: str) -> TokenCount:
    """Tokens of ``text`` for ``model`` (litellm's default tokenizer for models it does not know);
    when the tokenizer fails, an estimate marked as one, never a silent stand-in."""
    try:
        return TokenCount(int(litellm_module().token_counter(model=model, text=text)))
    except Exception:  # noqa: BLE001 - a tokenizer problem must not fail a gate: estimate, and say so
        return TokenCount(max(1, len(text) // 4), estimated=True)


def count_tokens(text: str, model: str) -> int:
    """``measure_tokens(text, model).tokens``, for callers that show the count as a guide only."""
    return measure_tokens(text, model).tokens
