"""``models.quiet``: litellm's loggers quiet during a block, and a loop's litellm clients closed."""

from __future__ import annotations

import asyncio
import logging

from harnessevolve.models.quiet import close_loop_clients, quiet_litellm
from harnessevolve.models.registry import litellm_module


class FakeClient:
    def __init__(self) -> None:
        self.closed = False

    async def close(self) -> None:
        self.closed = True


def test_the_clients_cached_for_the_running_loop_are_closed_and_forgotten() -> None:
    litellm = litellm_module()
    from litellm.caching.llm_caching_handler import LLMClientCache

    cache = getattr(litellm, "in_memory_llm_clients_cache", None) or LLMClientCache()
    litellm.in_memory_llm_clients_cache = cache
    outside = FakeClient()
    cache.set_cache("quiet-test-outside", outside)  # no loop running: not bound to one

    async def on_a_loop() -> tuple[FakeClient, int]:
        mine = FakeClient()
        cache.set_cache("quiet-test-client", mine)
        assert cache.get_cache("quiet-test-client") is mine
        closed = await close_loop_clients()
        assert cache.get_cache("quiet-test-client") is None
        return mine, closed

    mine, closed = asyncio.run(on_a_loop())
    assert mine.closed and closed >= 1
    assert not outside.closed and cache.get_cache("quiet-test-outside") is outside


def test_quiet_litellm_nests_and_restores_the_levels() -> None:
    logger = logging.getLogger("LiteLLM")
    before = logger.level
    with quiet_litellm():
        assert logger.level >= logging.ERROR
        with quiet_litellm():
            assert logger.level >= logging.ERROR
        assert logger.level >= logging.ERROR
    assert logger.level == before
