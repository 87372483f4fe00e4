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


def context_window(model: str) -> int | None:
    """The model's context window in tokens: the embedded model's ``n_ctx`` for ``local/...``,
    litellm's ``max_input_tokens`` (else ``max_tokens``) for a model it knows, else None."""
    if model.startswith("local/"):
        from harnessevolve.models.local_env import default_n_ctx

        return default_n_ctx()
    if model.startswith("scripted/"):
        return None
    try:
        info = litellm_module().get_model_info(model)
    except Exception:  # noqa: BLE001 - an unknown model has no known window: the check is skipped
        return None
    window = info.get("max_input_tokens") or info.get("max_tokens")
    return int(window) if isinstance(window, int) and window > 0 else None
