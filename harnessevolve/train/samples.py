"""A trajectory -> one token sequence and a loss mask (1 exactly on the tokens the model generated).

Two ways to get the tokens, tried in this order:

1. **Recorded ids** (token-exact): when every model turn of the trajectory carries the ids the
   provider returned (``extra.prompt_token_ids`` / ``extra.completion_token_ids`` on agent steps;
   the ``local/torch:`` backend returns them), the sequence is stitched from them: the first turn's
   prompt (mask 0), its sampled completion (mask 1), then for each later turn only the new part of
   its prompt — the user turn after the previous reply (tool observations, nudges) and the opening
   of the next assistant turn with its prefill — exactly as the model saw them (mask 0), then that
   turn's sampled ids (mask 1). Nothing the model generated is re-tokenised. The one place the
   sequence differs from what the model conditioned on is its own earlier replies: the provider
   showed them re-rendered (the tool call as canonical JSON), the sequence keeps the raw samples.
   Where a reply did not end with ``<|im_end|>`` (stopped after a complete call), the closing
   ``<|im_end|>\\n`` is inserted with mask 0.
2. **Chat-template fallback** (references, llama.cpp or API rollouts, scripted runs): the chat is
   replayed as the agent loop sent it (system, task, assistant tool calls, tool results, nudges:
   ``core.transcript``, the loop's own mapping, from what the trajectory recorded),
   turned into plain turns as the local provider does (:func:`to_plain_messages`, with the
   harness's tools prompt), and tokenised turn by turn in ChatML — SmolLM2's chat template and the
   format both local backends render. In an assistant turn the opening ``<|im_start|>assistant\\n``
   and the tool-call prefill (``{"tool": "``, put in the model's mouth by the provider) are prompt
   (mask 0); the reply and its ``<|im_end|>`` are generated (mask 1). Tokenising the prefill apart
   from the reply is what the provider does too (the prompt ends with the prefill).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from harnessevolve.core.atif import Step, Trajectory
from harnessevolve.core.transcript import Transcript
from harnessevolve.models.local import IM_END, IM_START, chatml_turn
from harnessevolve.models.tool_text import call_prefill, to_plain_messages

if TYPE_CHECKING:
    from harnessevolve.harness.model import Harness

TOKEN_FIELDS = ("prompt_token_ids", "completion_token_ids")
RECORDED, CHAT_TEMPLATE = "recorded", "chat_template"


@dataclass(frozen=True)
class PromptStyle:
    """How the chat-template fallback renders a trajectory (what the local provider would show)."""

    tools: tuple[Mapping[str, Any], ...] = ()
    """OpenAI tool specs the harness offers; their tools prompt is appended to the system turn."""
    system_prompt: str | None = None
    """Replaces the trajectory's own system message (render references under the current harness)."""
    observation_note: str = ""
    """The harness's ``loop.observation_note``, appended to each tool result as the agent loop does."""
    prefill: bool = True
    """Tool-call replies start with the provider's prefill, which is prompt, not generated."""

    @classmethod
    def for_harness(cls, harness: Harness, *, use_its_system_prompt: bool = True) -> PromptStyle:
        return cls(
            tools=tuple(t.openai_schema() for t in harness.tools),
            system_prompt=harness.assembled_prompt() if use_its_system_prompt else None,
            observation_note=harness.loop.observation_note or "",
        )


@dataclass(frozen=True)
class Sample:
    """One training sequence."""

    task_id: str
    input_ids: tuple[int, ...]
    loss_mask: tuple[int, ...]
    """1 on tokens the model generated (trained on), 0 on everything else."""
    reward: float
    passed: bool = False
    """Its evaluation passed (or it is a reference): what RFT keeps."""
    origin: str = "rollout"
    """``rollout`` (from a run) or ``reference`` (a benchmark's reference trajectory)."""
    tokenised: str = RECORDED
    """``recorded`` (the rollout's own ids) or ``chat_template`` (the fallback)."""
    advantage: float = 1.0
    """Weight of its log-likelihood in the loss: 1 for RFT, the normalised advantage for GRPO."""

    @property
    def trained_tokens(self) -> int:
        return sum(self.loss_mask)


def reward_of(trajectory: Trajectory) -> float:
    """The evaluation's score (``extra.score``), else 1/0 from ``extra.passed``; references get 1."""
    extra = trajectory.extra
    if extra.get("reference"):
        return 1.0
    if isinstance(extra.get("score"), int | float):
        return float(extra["score"])
    return 1.0 if extra.get("passed") else 0.0


def is_success(trajectory: Trajectory) -> bool:
    """Its evaluation passed, or it is a reference trajectory."""
    return bool(trajectory.extra.get("passed") or trajectory.extra.get("reference"))


def _model_steps(trajectory: Trajectory) -> list[Step]:
    """Agent steps that hold a model reply (a provider failure ends the list)."""
    out = []
    for step in trajectory.agent_steps:
        if str(step.extra.get("error", "")).startswith("model_error"):
            break
        out.append(step)
    return out


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False))


def recorded_tokens(trajectory: Trajectory, tokenizer: Any) -> tuple[list[int], list[int]] | None:
    """Ids and mask stitched from the recorded token ids; None when a turn lacks them or its prompt
    does not have the expected ChatML shape."""
    steps = _model_steps(trajectory)
    if not steps or not all(all(f in s.extra for f in TOKEN_FIELDS) for s in steps):
        return None
    im_start = tokenizer.convert_tokens_to_ids(IM_START)
    im_end = tokenizer.convert_tokens_to_ids(IM_END)
    ids: list[int] = []
    mask: list[int] = []
    for k, step in enumerate(steps):
        prompt = [int(i) for i in step.extra["prompt_token_ids"]]
        completion = [int(i) for i in step.extra["completion_token_ids"]]
        if k == 0:
            ids, mask = list(prompt), [0] * len(prompt)
        else:
            starts = [i for i, token in enumerate(prompt) if token == im_start]
            if len(starts) < 2:
                return None
            tail = prompt[starts[-2] :]
            if not tokenizer.decode(tail[:3], skip_special_tokens=False).startswith(f"{IM_START}user"):
                return None
            glue = _encode(tokenizer, "\n" if ids and ids[-1] == im_end else f"{IM_END}\n")
            ids += glue + tail
            mask += [0] * (len(glue) + len(tail))
        ids += completion
        mask += [1] * len(completion)
    return ids, mask


def chat_messages(trajectory: Trajectory, style: PromptStyle) -> list[dict[str, Any]]:
    """The OpenAI messages the agent loop sent and received, replayed from the trajectory by the
    one chat<->ATIF mapping (``core.transcript``): the nudges the loop recorded on its steps and
    the observation note it recorded on the trajectory. ``style`` renders it under another
    harness (its system prompt and note) or fills in what an older trajectory did not record."""
    recorded = trajectory.extra.get("observation_note")
    own_note = style.system_prompt is None and isinstance(recorded, str)
    note = str(recorded) if own_note else style.observation_note
    agent_steps = _model_steps(trajectory)
    cut = agent_steps[-1].step_id if agent_steps else 0
    first_agent = next((s.step_id for s in trajectory.agent_steps), None)
    steps = [
        s
        for s in trajectory.steps
        if s.step_id <= cut or (s.source != "agent" and (first_agent is None or s.step_id < first_agent))
    ]
    replay = Transcript.from_steps(
        steps, observation_note=note, nudges=True, system_prompt=style.system_prompt
    )
    return replay.messages()


def chat_template_tokens(
    trajectory: Trajectory, tokenizer: Any, style: PromptStyle
) -> tuple[list[int], list[int]]:
    """Ids and mask from the rebuilt chat, tokenised turn by turn in ChatML (see the module doc)."""
    turns = to_plain_messages(chat_messages(trajectory, style), list(style.tools))
    last_reply = max((i for i, t in enumerate(turns) if t["role"] == "assistant"), default=-1)
    turns = turns[: last_reply + 1]  # what follows the last reply (its observation) teaches nothing
    prefill = call_prefill() if style.prefill and style.tools else ""
    ids: list[int] = []
    mask: list[int] = []

    def add(text: str, trained: int) -> None:
        piece = _encode(tokenizer, text)
        ids.extend(piece)
        mask.extend([trained] * len(piece))

    for turn in turns:
        if turn["role"] != "assistant":
            add(chatml_turn(turn["role"], turn["content"]), 0)
            continue
        opening, reply = f"{IM_START}assistant\n", turn["content"]
        if prefill and reply.startswith(prefill):
            opening, reply = opening + prefill, reply[len(prefill) :]
        add(opening, 0)
        add(reply + IM_END, 1)
        add("\n", 0)
    return ids, mask


def trajectory_sample(
    trajectory: Trajectory,
    tokenizer: Any,
    style: PromptStyle = PromptStyle(),
    *,
    max_len: int,
    origin: str = "rollout",
    use_recorded: bool = True,
) -> Sample | None:
    """The trajectory as one training sequence (cut to ``max_len``); None when nothing generated is left."""
    recorded = recorded_tokens(trajectory, tokenizer) if use_recorded else None
    ids, mask = recorded or chat_template_tokens(trajectory, tokenizer, style)
    ids, mask = ids[:max_len], mask[:max_len]
    if not any(mask):
        return None
    return Sample(
        task_id=str(trajectory.task_id or trajectory.session_id),
        input_ids=tuple(ids),
        loss_mask=tuple(mask),
        reward=reward_of(trajectory),
        passed=is_success(trajectory),
        origin=origin,
        tokenised=RECORDED if recorded else CHAT_TEMPLATE,
    )


def build_samples(
    trajectories: Sequence[Trajectory], tokenizer: Any, style: PromptStyle, *, max_len: int, origin: str
) -> list[Sample]:
    """Every trajectory that yields a sequence, in order."""
    out = []
    for trajectory in trajectories:
        sample = trajectory_sample(trajectory, tokenizer, style, max_len=max_len, origin=origin)
        if sample is not None:
            out.append(sample)
    return out
