"""Counting prompt tokens the way the model's provider would (litellm's tokenizers, offline)."""

from __future__ import annotations

from harnessevolve.models.registry import litellm_module


def count_tokens(text: str, model: str) -> int:
    """Tokens of ``text`` for ``model``; litellm's default tokenizer for models it does not know."""
    try:
        return int(litellm_module().token_counter(model=model, text=text))
    except Exception:  # noqa: BLE001 - a tokenizer problem must not fail a gate: estimate instead
        return max(1, len(text) // 4)
