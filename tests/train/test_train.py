"""A tiny model trains on CPU, its loss falls, and its checkpoint serves completions through litellm."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.models import torch_backend
from harnessevolve.train.checkpoint import METADATA_FILE, read_metadata
from harnessevolve.train.config import TrainConfig
from harnessevolve.train.errors import TrainError
from harnessevolve.train.session import train_from_trajectories

HARNESS = Path(__file__).resolve().parents[2] / "harnesses" / "shell-agent"


def serve(checkpoint: Path) -> Any:
    from harnessevolve.models.registry import litellm_module

    litellm = litellm_module()
    messages = [{"role": "system", "content": "You are an agent."}, {"role": "user", "content": "make a dir"}]
    try:
        return asyncio.run(
            litellm.acompletion(
                model=f"local/torch:{checkpoint}", messages=messages, max_tokens=6, temperature=0
            )
        )
    finally:
        torch_backend.release_models()


def test_rft_lowers_the_loss_and_the_checkpoint_serves(
    tiny_base: Path, trajectory_folder: Path, tmp_path
) -> None:
    out = tmp_path / "ckpt"
    losses: list[float] = []
    result = train_from_trajectories(
        trajectory_folder,
        TrainConfig.tiny(steps=8),
        base_model=str(tiny_base),
        out_dir=out,
        harness_dir=HARNESS,
        on_step=lambda _step, loss: losses.append(loss),
    )
    assert result.mode == "rft" and result.model == f"local/torch:{out.resolve()}"
    assert result.samples == 4  # the four references; the failed copies are not fine-tuned on
    assert result.data["chat_template"] == 4 and result.data["recorded_token_ids"] == 0
    assert result.loss_after < result.loss_before - 0.1, (result.loss_before, result.loss_after)
    assert len(losses) == 8 and result.tokens > 0 and result.tokens_per_s > 0

    metadata = read_metadata(out)
    assert metadata["config"]["mode"] == "rft" and metadata["base_model"] == str(tiny_base)
    assert metadata["fit"]["loss_curve"] == [round(v, 5) for v in losses]
    assert metadata["data"]["samples"] == 4 and metadata["source"] == str(trajectory_folder)
    assert (out / "config.json").is_file() and (out / METADATA_FILE).is_file()

    response = serve(out)
    message = response.choices[0].message
    assert isinstance(message.content, str) and response.usage.completion_tokens >= 1
    assert message.provider_specific_fields["completion_token_ids"]


def test_lora_adapters_are_merged_into_a_plain_checkpoint(
    tiny_base: Path, trajectory_folder: Path, tmp_path
) -> None:
    pytest.importorskip("peft")
    out = tmp_path / "lora"
    result = train_from_trajectories(
        trajectory_folder,
        TrainConfig.tiny(lora=True, lora_r=4, lr=1e-2, steps=6),
        base_model=str(tiny_base),
        out_dir=out,
        harness_dir=HARNESS,
    )
    assert result.loss_after < result.loss_before
    assert not (out / "adapter_config.json").exists() and read_metadata(out)["lora_merged"] is True
    assert serve(out).usage.completion_tokens >= 1


def test_grpo_pushes_up_the_better_rollouts(tiny_base: Path, trajectory_folder: Path, tmp_path) -> None:
    result = train_from_trajectories(
        trajectory_folder,
        TrainConfig.tiny(mode="grpo", steps=6),
        base_model=str(tiny_base),
        out_dir=tmp_path / "grpo",
        harness_dir=HARNESS,
    )
    # each task: its reference (reward 1) and a failed copy (reward 0) -> advantages +1 / -1
    assert result.samples == 8 and result.data["tasks"] == 4
    assert result.loss_after < result.loss_before


def test_nothing_to_learn_from_is_a_clear_error(tiny_base: Path, trajectory_folder: Path, tmp_path) -> None:
    for path in (trajectory_folder / "refs").iterdir():
        path.unlink()
    with pytest.raises(TrainError, match="no successful trajectory"):
        train_from_trajectories(
            trajectory_folder, TrainConfig.tiny(), base_model=str(tiny_base), out_dir=tmp_path / "x"
        )
    assert not (tmp_path / "x").exists()


def test_log_probs_at_trained_positions_match_the_full_logits(tiny_base: Path, tokenizer: Any) -> None:
    import torch
    import transformers

    from harnessevolve.train.policy import collate, token_logprobs
    from harnessevolve.train.samples import Sample

    model = transformers.AutoModelForCausalLM.from_pretrained(str(tiny_base)).eval()
    samples = [
        Sample("a", (5, 6, 7, 8, 9, 10), (0, 0, 1, 1, 0, 1), 1.0),
        Sample("b", (11, 12, 13), (0, 1, 1), 1.0),
    ]
    batch = collate(samples, tokenizer.pad_token_id, "cpu")
    with torch.no_grad():
        logp, mask = token_logprobs(model, batch)
        full = torch.log_softmax(model(input_ids=batch["input_ids"]).logits[:, :-1], -1)
    expected = full.gather(-1, batch["input_ids"][:, 1:, None])[..., 0] * mask
    assert mask.tolist() == [[0, 1, 1, 0, 1], [1, 1, 0, 0, 0]]
    assert torch.allclose(logp, expected, atol=1e-5)


@pytest.mark.slow
def test_smollm2_from_its_gguf_trains_and_its_checkpoint_serves(trajectory_folder: Path, tmp_path) -> None:
    """The real base model: GGUF -> float32 torch model -> one step -> plain checkpoint -> served."""
    out = tmp_path / "smollm2"
    result = train_from_trajectories(
        trajectory_folder,
        TrainConfig(steps=1, batch_size=1, max_len=512, eval_samples=1, device="cpu"),
        base_model="smollm2-135m",
        out_dir=out,
        harness_dir=HARNESS,
    )
    assert result.samples == 4 and read_metadata(out)["base_model"] == "smollm2-135m"
    assert serve(out).usage.completion_tokens >= 1
