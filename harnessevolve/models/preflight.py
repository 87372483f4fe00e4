"""Checking a model name before a run writes anything: the name must resolve to a provider
(``scripted/`` to a registered or loadable script, ``local/`` to a model file here, anything else
to a litellm provider). Whether a key works or the network answers is only known at the call."""

from __future__ import annotations

from harnessevolve.core.errors import HarnessEvolveError, ModelError


def check_model_name(model: str, *, option: str) -> None:
    """Raise ``ModelError`` naming ``option`` when ``model`` names no provider or no model here."""
    hint = "a litellm name (openai/gpt-4o-mini, ollama/llama3, ...), local/<alias or .gguf> or scripted/..."
    if not model or not model.strip():
        raise ModelError("the model name is empty", field=option, hint=hint)
    provider, _, rest = model.partition("/")
    if provider == "scripted":
        from harnessevolve.models.scripted import resolve_script

        try:
            resolve_script(rest)
        except ModelError as exc:
            raise ModelError(exc.message, field=option, hint=exc.hint) from None
        return
    if provider == "local":
        if rest.strip().startswith("torch:"):
            return  # checkpoint folders are checked by the torch backend when it loads them
        from harnessevolve.models.local import resolve_model_path

        try:
            resolve_model_path(model)
        except HarnessEvolveError as exc:
            raise ModelError(
                exc.message, field=option, hint=exc.hint or "see `harnessevolve models list`"
            ) from None
        return
    from harnessevolve.models.registry import litellm_module

    litellm = litellm_module()
    try:
        litellm.get_llm_provider(model)
    except Exception:  # noqa: BLE001 - litellm raises its own BadRequestError family
        raise ModelError(
            f"unknown model {model!r}: litellm knows no provider for it",
            field=option,
            hint=hint,
        ) from None
