"""Trajectory -> token sequence + loss mask: 1 exactly on what the model generated."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from train_data import reference

from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.harness.model import Harness
from harnessevolve.models.local import IM_END, IM_START, chatml_turn
from harnessevolve.models.tool_text import TOOL_RESULT_TEMPLATE, call_prefill, render_tools_prompt
from harnessevolve.train.samples import (
    CHAT_TEMPLATE,
    RECORDED,
    PromptStyle,
    chat_template_tokens,
    recorded_tokens,
    trajectory_sample,
)


def encode(tokenizer: Any, text: str) -> list[int]:
    return tokenizer.encode(text, add_special_tokens=False)


def spans(mask: list[int] | tuple[int, ...]) -> list[tuple[int, int]]:
    """The [start, end) runs of 1s."""
    out, start = [], None
    for i, bit in enumerate([*mask, 0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            out.append((start, i))
            start = None
    return out


def test_chat_template_fallback_masks_exactly_the_replies(tokenizer: Any, harness: Harness) -> None:
    trajectory = reference("append-line-01")
    style = PromptStyle.for_harness(harness, use_its_system_prompt=False)
    ids, mask = chat_template_tokens(trajectory, tokenizer, style)
    assert len(ids) == len(mask)

    system = trajectory.steps[0].message.rstrip() + "\n\n" + render_tools_prompt(list(style.tools))
    prefill = call_prefill()
    reply_1 = '{"tool": "bash", "arguments": {"command": "echo \'lizard tulip\' >> summary.md"}}'
    reply_2 = '{"tool": "submit", "arguments": {"answer": "done"}}'
    observation = TOOL_RESULT_TEMPLATE.format(name="bash", content="")
    # the sequence, piece by piece: (text, generated?)
    pieces = [
        (chatml_turn("system", system) + chatml_turn("user", trajectory.steps[1].message), 0),
        (f"{IM_START}assistant\n{prefill}", 0),
        (reply_1.removeprefix(prefill) + IM_END, 1),
        ("\n" + chatml_turn("user", observation) + f"{IM_START}assistant\n{prefill}", 0),
        (reply_2.removeprefix(prefill) + IM_END, 1),
        ("\n", 0),
    ]
    expected_ids, expected_spans, at = [], [], 0
    for text, generated in pieces:
        piece = encode(tokenizer, text)
        if generated:
            expected_spans.append((at, at + len(piece)))
        expected_ids += piece
        at += len(piece)
    assert ids == expected_ids
    assert spans(mask) == expected_spans
    generated = "".join(tokenizer.decode(ids[a:b]) for a, b in spans(mask))
    assert generated == reply_1.removeprefix(prefill) + IM_END + reply_2.removeprefix(prefill) + IM_END
    # nothing the model was shown is trained on: system, task, observations, prefill
    for start, end in spans(mask):
        text = tokenizer.decode(ids[start:end])
        assert "Result of" not in text and "summary.md, keeping" not in text and IM_START not in text


def test_fallback_replays_nudges_after_unreadable_replies(tokenizer: Any) -> None:
    base = reference("make-dir-01")
    bad = Step(3, "agent", "I will make it", extra={"error": "no_tool_call"}, metrics={"prompt_tokens": 1})
    later = [replace(s, step_id=s.step_id + 1) for s in base.steps[2:]]
    trajectory = replace(base, steps=(*base.steps[:2], bad, *later))
    ids, mask = chat_template_tokens(trajectory, tokenizer, PromptStyle())
    masked = [tokenizer.decode(ids[a:b]) for a, b in spans(mask)]
    assert masked[0] == "I will make it" + IM_END
    shown = tokenizer.decode([i for i, m in zip(ids, mask, strict=True) if not m])
    assert "You did not call a tool" in shown and "You did not call a tool" not in "".join(masked)


def rollout_with_ids(tokenizer: Any, ended: bool) -> tuple[Trajectory, list[int], list[list[int]]]:
    """A two-turn rollout as the torch backend records it, and the pieces the sequence must hold."""
    prefill = call_prefill()
    system, task = chatml_turn("system", "sys prompt"), chatml_turn("user", "make a folder notes")
    prompt_1 = encode(tokenizer, system + task + f"{IM_START}assistant\n{prefill}")
    completion_1 = encode(tokenizer, 'bash", "arguments": {"command": "mkdir notes"}}')
    if ended:
        completion_1 += [tokenizer.convert_tokens_to_ids(IM_END)]
    # the provider re-renders the first reply (canonical JSON: other spacing) in the next prompt
    rerendered = chatml_turn("assistant", '{"tool": "bash", "arguments": {"command":"mkdir notes"}}')
    observation = chatml_turn("user", "Result of bash:\n(no output)")
    opening = f"{IM_START}assistant\n{prefill}"
    prompt_2 = encode(tokenizer, system + task + rerendered + observation + opening)
    completion_2 = encode(tokenizer, 'submit", "arguments": {"answer": "done"}}') + [
        tokenizer.convert_tokens_to_ids(IM_END)
    ]
    steps = (
        Step(1, "system", "sys prompt"),
        Step(2, "user", "make a folder notes"),
        Step(3, "agent", "", extra={"prompt_token_ids": prompt_1, "completion_token_ids": completion_1}),
        Step(4, "agent", "", extra={"prompt_token_ids": prompt_2, "completion_token_ids": completion_2}),
    )
    trajectory = Trajectory("s", "harnessevolve", "0", "local/torch:x", steps, extra={"task_id": "t"})
    glue = encode(tokenizer, "\n" if ended else IM_END + "\n")
    between = glue + encode(tokenizer, observation + opening)
    return trajectory, prompt_1, [completion_1, between, completion_2]


@pytest.mark.parametrize("ended", [False, True], ids=["stopped-after-call", "ended-with-im_end"])
def test_recorded_ids_are_stitched_token_exact(tokenizer: Any, ended: bool) -> None:
    trajectory, prompt_1, (completion_1, between, completion_2) = rollout_with_ids(tokenizer, ended)
    stitched = recorded_tokens(trajectory, tokenizer)
    assert stitched is not None
    ids, mask = stitched
    assert ids == prompt_1 + completion_1 + between + completion_2
    first = len(prompt_1)
    second = first + len(completion_1) + len(between)
    assert spans(mask) == [(first, first + len(completion_1)), (second, second + len(completion_2))]
    sample = trajectory_sample(trajectory, tokenizer, max_len=10_000)
    assert sample is not None and sample.tokenised == RECORDED and list(sample.input_ids) == ids


def test_a_turn_without_ids_falls_back_to_the_chat_template(tokenizer: Any) -> None:
    trajectory, *_ = rollout_with_ids(tokenizer, ended=False)
    steps = list(trajectory.steps)
    steps[3] = replace(steps[3], extra={}, tool_calls=())
    sample = trajectory_sample(replace(trajectory, steps=tuple(steps)), tokenizer, max_len=10_000)
    assert sample is not None and sample.tokenised == CHAT_TEMPLATE


def test_max_len_cuts_the_end_and_drops_samples_with_nothing_generated(tokenizer: Any) -> None:
    trajectory = reference("copy-file-01")
    full = trajectory_sample(trajectory, tokenizer, max_len=100_000)
    assert full is not None
    first_generated = full.loss_mask.index(1)
    cut = trajectory_sample(trajectory, tokenizer, max_len=first_generated + 3)
    assert cut is not None and len(cut.input_ids) == first_generated + 3 and cut.trained_tokens == 3
    assert trajectory_sample(trajectory, tokenizer, max_len=first_generated) is None
