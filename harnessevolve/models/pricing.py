"""What a model call costs: litellm's price data, or a price the user gave (``--price-per-mtok``).

A model with no price data would cost 0 a call, so a cost budget (``--max-cost-usd``) could never
stop a run that uses it. ``check_cost_budget`` refuses such a run before anything is written unless
a price is given; models that are free by construction (``local/``, ``scripted/``) need none.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from harnessevolve.core.errors import ModelError

FREE_PROVIDERS = ("local/", "scripted/")
"""Models that run here (the embedded model, scripted replies): they cost nothing, truly."""


@dataclass(frozen=True)
class Price:
    """USD per million prompt (input) and completion (output) tokens."""

    input_per_mtok: float
    output_per_mtok: float

    def cost(self, prompt_tokens: int, completion_tokens: int) -> float:
        return (prompt_tokens * self.input_per_mtok + completion_tokens * self.output_per_mtok) / 1_000_000

    def text(self) -> str:
        return f"{self.input_per_mtok:g},{self.output_per_mtok:g}"


def parse_price(text: str, *, option: str = "--price-per-mtok") -> Price:
    """``IN,OUT`` (USD per million input and output tokens, e.g. ``3,15``) as a Price."""
    parts = [p.strip() for p in text.split(",")]
    try:
        values = [float(p) for p in parts]
    except ValueError:
        values = []
    if len(values) != 2 or any(v < 0 or v != v or v == float("inf") for v in values):
        raise ModelError(
            f"{text!r} is not a price: expected IN,OUT (USD per million input and output tokens)",
            field=option,
            hint="e.g. --price-per-mtok 3,15",
        )
    return Price(values[0], values[1])


_GIVEN: dict[str, Price] = {}
"""Prices given for models litellm has no price data for (model name -> price)."""


def set_price(model: str, price: Price | None) -> None:
    """Use ``price`` for ``model``'s calls from now on (None: forget it)."""
    if price is None:
        _GIVEN.pop(model, None)
    else:
        _GIVEN[model] = price


def given_price(model: str) -> Price | None:
    return _GIVEN.get(model)


def is_free(model: str) -> bool:
    return model.startswith(FREE_PROVIDERS)


def has_price_data(model: str) -> bool:
    """Whether litellm's (offline) price map knows ``model``."""
    from harnessevolve.models.registry import litellm_module

    try:
        info = litellm_module().get_model_info(model)
    except Exception:  # noqa: BLE001 - litellm raises its own errors for an unmapped model
        return False
    return info.get("input_cost_per_token") is not None and info.get("output_cost_per_token") is not None


def check_cost_budget(
    models: Iterable[str | None], *, max_cost_usd: float | None, price: Price | None
) -> list[str]:
    """The run's models that litellm has no price for are charged at ``price`` (registered here;
    returned). Under a cost budget every model must have a price: ModelError names the first
    unpriced one when no price is given."""
    unpriced = sorted({m for m in models if m and not is_free(m) and not has_price_data(m)})
    if unpriced and price is None and max_cost_usd is not None:
        raise ModelError(
            f"litellm has no price for {unpriced[0]!r}: its calls would cost 0 and --max-cost-usd "
            "would never stop the run",
            field="--max-cost-usd",
            hint="give its price with --price-per-mtok IN,OUT (USD per million input and output tokens), "
            "or budget with --max-tokens instead",
        )
    if price is None:
        return []
    for model in unpriced:
        set_price(model, price)
    return unpriced
