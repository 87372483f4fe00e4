"""The model being trained: loading it (alias, GGUF or checkpoint folder), LoRA, and token log-probs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from harnessevolve.train.config import TrainConfig, resolve_device
from harnessevolve.train.errors import TrainError, require_train_stack
from harnessevolve.train.samples import Sample


@dataclass
class Policy:
    """A causal LM, its tokenizer and where it runs (mutable: the weights change while training)."""

    model: Any
    tokenizer: Any
    device: str
    base_model: str
    """The name it was loaded from (``smollm2-135m``, a .gguf path or a checkpoint folder)."""
    lora: bool = False

    def autocast(self, config: TrainConfig) -> Any:
        import contextlib

        import torch

        if self.device.startswith("cuda") and config.bf16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()


@contextlib.contextmanager
def quiet_progress() -> Iterator[None]:
    """No transformers progress bars (loading, GGUF conversion, writing shards): the CLI draws its own."""
    from harnessevolve.models.torch_backend import _no_progress_bars

    with _no_progress_bars(gguf=True):
        yield


def load_policy(base_model: str, config: TrainConfig) -> Policy:
    """Load ``base_model`` for training: ``[local/][torch:]<alias | .gguf | checkpoint folder>``.

    Same name resolution as the torch backend (:func:`~harnessevolve.models.torch_backend.resolve_source`),
    so what the backend serves is what gets trained. Weights are float32 (master weights); with
    ``config.lora`` the model is wrapped in peft LoRA adapters.
    """
    require_train_stack(lora=config.lora)
    import torch
    import transformers

    from harnessevolve.models.local import LocalModelError
    from harnessevolve.models.torch_backend import resolve_source

    name = base_model.removeprefix("local/").strip()
    name = name if name.startswith("torch:") else f"torch:{name}"
    try:
        source = resolve_source(name)
    except LocalModelError as exc:
        raise TrainError(exc.message, field="--base-model", hint=exc.hint) from exc
    device = resolve_device(config.device)
    options: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file:
        options["gguf_file"] = source.gguf_file
    try:
        with quiet_progress():
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(source.folder), **options)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(source.folder), dtype=torch.float32, **options
            )
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise TrainError(f"could not load {source.key}: {exc}", field="--base-model") from exc
    if source.gguf_file:
        # transformers dequantised the GGUF into plain float32 modules but still marks the model as
        # "quantized with gguf", which save_pretrained refuses; from here on it is a plain model
        model.hf_quantizer = None
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.to(device)
    if config.lora:
        import peft

        targets = [t for t in config.lora_targets if any(n.endswith(t) for n, _ in model.named_modules())]
        if not targets:
            raise TrainError(
                f"no module named {', '.join(config.lora_targets)} to adapt", field="lora_targets"
            )
        lora = peft.LoraConfig(
            r=config.lora_r, lora_alpha=config.lora_alpha, target_modules=targets, task_type="CAUSAL_LM"
        )
        model = peft.get_peft_model(model, lora)
    return Policy(model, tokenizer, device, base_model, config.lora)


def collate(samples: Sequence[Sample], pad_id: int, device: str) -> dict[str, Any]:
    """Right-padded ``input_ids``, ``attention_mask`` and ``loss_mask`` tensors."""
    import torch

    width = max(len(s.input_ids) for s in samples)
    ids = torch.full((len(samples), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(samples), width), dtype=torch.long)
    loss = torch.zeros((len(samples), width), dtype=torch.float32)
    for row, sample in enumerate(samples):
        n = len(sample.input_ids)
        ids[row, :n] = torch.tensor(sample.input_ids)
        attention[row, :n] = 1
        loss[row, :n] = torch.tensor(sample.loss_mask, dtype=torch.float32)
    return {"input_ids": ids.to(device), "attention_mask": attention.to(device), "loss_mask": loss.to(device)}


def token_logprobs(model: Any, batch: dict[str, Any]) -> tuple[Any, Any]:
    """``(logp, mask)``: each next token's log-probability under ``model`` and whether it is trained
    on (shifted by one: position t predicts token t+1); ``logp`` is 0 where the mask is.

    The vocabulary projection runs only at the trained positions (a small share of a trajectory:
    prompts and observations dominate), which saves about a quarter of the compute for SmolLM2's
    49k-token head. Models whose head does more than a linear layer (logit scaling or soft-capping)
    take the plain path through the full logits.
    """
    import torch

    mask = batch["loss_mask"][:, 1:]
    targets = batch["input_ids"][:, 1:]
    core = model.get_base_model() if hasattr(model, "get_base_model") else model
    config = getattr(core, "config", None)
    plain_head = not any(getattr(config, k, None) for k in ("final_logit_softcapping", "logit_scale"))
    if plain_head and hasattr(core, "get_decoder") and core.get_output_embeddings() is not None:
        decoder = core.get_decoder()
        hidden = decoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"])
        hidden = hidden.last_hidden_state[:, :-1]
        chosen = mask > 0
        logits = core.get_output_embeddings()(hidden[chosen])
        picked = -torch.nn.functional.cross_entropy(logits.float(), targets[chosen], reduction="none")
        logp = torch.zeros(mask.shape, dtype=picked.dtype, device=picked.device)
        return logp.masked_scatter(chosen, picked), mask
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    logp = -torch.nn.functional.cross_entropy(
        logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none"
    ).view(targets.shape)
    return logp * mask, mask
