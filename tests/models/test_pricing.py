"""Money never falls back silently: unpriced models under a cost budget are refused unless priced."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from run_args import run_args

from harnessevolve.cli.app import app
from harnessevolve.core.errors import ModelError
from harnessevolve.models import call
from harnessevolve.models.pricing import Price, check_cost_budget, given_price, parse_price, set_price

UNPRICED = "hosted_vllm/my-finetune"  # a provider litellm knows, a model its price map does not


def test_prices_parse_and_bad_ones_name_the_option() -> None:
    assert parse_price("3,15") == Price(3.0, 15.0)
    assert parse_price(" 0.5 , 1 ").cost(2_000_000, 1_000_000) == pytest.approx(2.0)
    for bad in ("3", "a,b", "-1,2", "1,2,3", "nan,1"):
        with pytest.raises(ModelError, match="not a price") as caught:
            parse_price(bad)
        assert caught.value.field == "--price-per-mtok"


def test_an_unpriced_model_under_a_cost_budget_needs_a_price() -> None:
    with pytest.raises(ModelError, match="no price for 'hosted_vllm/my-finetune'") as caught:
        check_cost_budget([UNPRICED, "scripted/x", None], max_cost_usd=1.0, price=None)
    assert "--price-per-mtok" in caught.value.hint
    assert (
        check_cost_budget(["openai/gpt-4o-mini", "local/smollm2", "scripted/x"], max_cost_usd=1.0, price=None)
        == []
    )
    assert check_cost_budget([UNPRICED], max_cost_usd=None, price=None) == []  # no budget: nothing to stop
    try:
        assert check_cost_budget([UNPRICED], max_cost_usd=1.0, price=Price(1, 2)) == [UNPRICED]
        assert given_price(UNPRICED) == Price(1, 2)
    finally:
        set_price(UNPRICED, None)


def test_a_given_price_is_what_a_call_costs() -> None:
    response = SimpleNamespace(
        choices=[SimpleNamespace(message=SimpleNamespace(content="hi", tool_calls=None))],
        usage=SimpleNamespace(prompt_tokens=1000, completion_tokens=500),
    )
    set_price(UNPRICED, Price(3, 15))
    try:
        reply = call._to_reply(None, response, UNPRICED)
    finally:
        set_price(UNPRICED, None)
    assert reply.cost_usd == pytest.approx((1000 * 3 + 500 * 15) / 1e6)


def test_run_refuses_an_unpriced_model_under_a_cost_budget_before_writing(harness_dir: Path, cli) -> None:
    result = cli.invoke(app, run_args(harness_dir, UNPRICED, "-n", "1", "--max-cost-usd", "1"))
    assert result.exit_code == 2, result.output
    assert "no price for" in result.output and "--price-per-mtok" in result.output
    assert not (harness_dir / ".harnessevolve" / "runs").exists()
    bad = cli.invoke(
        app, run_args(harness_dir, UNPRICED, "-n", "1", "--max-cost-usd", "1", "--price-per-mtok", "x")
    )
    assert bad.exit_code == 2 and "not a price" in bad.output
