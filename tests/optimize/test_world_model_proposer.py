"""The ``world_model`` proposer: lines from the batch's largest forecast mismatches of train runs,
under the world model's cap; silent where the world model is off or not editable."""

from __future__ import annotations

import asyncio

import pytest

from harnessevolve.optimize.proposal import ProposalContext
from harnessevolve.optimize.world_model_proposer import SECTION, WorldModelProposer

HARNESS = "version: 1\nname: h\nsystem_prompt: p.md\ntools: [submit]\nworld_model: {max_chars: 400}\n"
TEXT = "Tools return what they found.\n"


def miss(tool: str, share: float, observed: str = "total: 6.25 for 3 items") -> dict:
    return {
        "tools": [tool],
        "expected": "a list of files",
        "observed": observed,
        "share": share,
        "match": False,
    }


def context(misses: dict, splits: dict | None = None, **kwargs: object) -> ProposalContext:
    base: dict[str, object] = {
        "files": {"harness.yaml": HARNESS, "world_model.md": TEXT, "p.md": "x"},
        "editable": ("world_model.md",),
        "system_prompt_path": "p.md",
        "examples_path": None,
        "clusters": (),
        "forecast_misses": misses,
        "splits": splits or {"t1": "train", "t2": "train", "v1": "validation"},
    }
    base.update(kwargs)
    return ProposalContext(**base)  # type: ignore[arg-type]


def propose(ctx: ProposalContext):  # noqa: ANN201
    return asyncio.run(WorldModelProposer().propose(ctx))


def test_the_largest_train_mismatches_become_lines_of_the_world_model() -> None:
    ctx = context({"t1": (miss("listCart", 0.4), miss("addItem", 0.0)), "v1": (miss("secret", 0.0),)})
    candidate = propose(ctx)
    text = candidate.changes["world_model.md"]
    assert text.startswith(TEXT.rstrip()) and SECTION in text
    body = text.split(SECTION)[1].strip().splitlines()
    assert [line.split("`")[1] for line in body] == ["addItem", "listCart"]  # smallest overlap first
    assert "secret" not in text  # validation runs never feed it
    again = propose(context({"t2": (miss("addItem", 0.0),)}, files={**ctx.files, "world_model.md": text}))
    assert again is None  # addItem is described already


def test_the_cap_drops_the_oldest_observed_lines() -> None:
    ctx = context({"t1": tuple(miss(f"tool{i}", i / 10, "x" * 150) for i in range(3))})
    text = propose(ctx).changes["world_model.md"]
    assert len(text) <= 400 and "tool2" in text and "tool0" not in text


@pytest.mark.parametrize(
    "overrides",
    [
        {"editable": ("prompts/*.md",)},
        {"files": {"harness.yaml": HARNESS.split("world_model")[0], "p.md": "x"}},
    ],
    ids=["not editable", "off"],
)
def test_it_stays_silent_where_the_world_model_is_off_or_not_editable(overrides: dict) -> None:
    assert propose(context({"t1": (miss("listCart", 0.0),)}, **overrides)) is None
