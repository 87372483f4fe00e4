"""The resource layer around every model call: retries, per-model limits, usage metering.

Provider faults are simulated by scripted policies that raise litellm's own exceptions; no test
sleeps for a backoff (the retry policy's ``sleep`` is a recorder)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harnessevolve.core import paths
from harnessevolve.core.tasks import Check, Task
from harnessevolve.execute.agent import run_agent
from harnessevolve.harness.load import load_harness
from harnessevolve.models import (
    ModelLimits,
    RetryPolicy,
    UsageMeter,
    acomplete,
    clear_limits,
    configure_limits,
    limits_for,
    usage_scope,
)
from harnessevolve.models.limits import RateLimiter
from harnessevolve.models.registry import litellm_module
from harnessevolve.models.retry import is_retryable, retry_after_s
from harnessevolve.models.scripted import register_script, unregister_script

litellm = litellm_module()  # the offline price map; importing litellm directly would fetch it
USER = [{"role": "user", "content": "hello"}]


class Sleeps:
    """A retry policy's ``sleep``: records each wait instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def policy(sleeps: Sleeps) -> RetryPolicy:
    return RetryPolicy(max_attempts=4, initial_s=1.0, max_wait_s=30.0, sleep=sleeps)


@pytest.fixture
def name() -> Iterator[str]:
    value = f"resources-{uuid.uuid4().hex[:8]}"
    yield value
    unregister_script(value)
    clear_limits()


def rate_limited(retry_after: str | None = None) -> litellm.RateLimitError:
    headers = {"retry-after": retry_after} if retry_after else None
    return litellm.RateLimitError("slow down", llm_provider="scripted", model="m", headers=headers)


def faulty(*faults: Exception, reply: Any = "ok") -> Any:
    """A policy raising ``faults`` one per call, then answering ``reply``."""
    pending = list(faults)

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        if pending:
            raise pending.pop(0)
        return reply

    return policy


def ask(model: str, policy: RetryPolicy) -> Any:
    return asyncio.run(acomplete(model, USER, retry=policy))


def test_rate_limit_then_success_is_retried_and_recorded(
    name: str, policy: RetryPolicy, sleeps: Sleeps
) -> None:
    script = register_script(
        name, faulty(rate_limited(), litellm.InternalServerError("down", "scripted", "m"))
    )
    reply = ask(f"scripted/{name}", policy)
    assert reply.content == "ok"
    assert script.calls == 3
    retries = reply.extra["retries"]
    assert [r["attempt"] for r in retries] == [1, 2]
    assert retries[0]["error"].startswith("RateLimitError:")
    assert retries[1]["error"].startswith("InternalServerError:")
    # full jitter: uniform in [0, initial * 2**(n-1)]
    assert 0 <= sleeps.waits[0] <= 1.0 and 0 <= sleeps.waits[1] <= 2.0
    assert [r["wait_s"] for r in retries] == [round(w, 3) for w in sleeps.waits]


def test_retry_after_header_sets_the_wait_and_is_capped(name: str, sleeps: Sleeps) -> None:
    policy = RetryPolicy(max_attempts=3, initial_s=0.001, max_wait_s=5.0, sleep=sleeps)
    register_script(name, faulty(rate_limited("3"), rate_limited("120")))
    reply = ask(f"scripted/{name}", policy)
    assert sleeps.waits == [3.0, 5.0]
    assert [r["wait_s"] for r in reply.extra["retries"]] == [3.0, 5.0]


def test_a_reply_without_faults_has_no_retries(name: str, policy: RetryPolicy, sleeps: Sleeps) -> None:
    register_script(name, ["fine"])
    assert "retries" not in ask(f"scripted/{name}", policy).extra
    assert sleeps.waits == []


@pytest.mark.parametrize(
    "fault",
    [
        litellm.AuthenticationError("bad key", "scripted", "m"),
        litellm.BadRequestError("bad request", "m", "scripted"),
        litellm.NotFoundError("no such model", "m", "scripted"),
        litellm.ContextWindowExceededError("too long", "m", "scripted"),
    ],
    ids=["401", "400", "404", "context-window"],
)
def test_client_errors_are_not_retried(
    name: str, policy: RetryPolicy, sleeps: Sleeps, fault: Exception
) -> None:
    script = register_script(name, faulty(fault))
    with pytest.raises(type(fault)):
        ask(f"scripted/{name}", policy)
    assert script.calls == 1 and sleeps.waits == []


def test_errors_of_our_own_providers_are_not_retried(name: str, policy: RetryPolicy) -> None:
    script = register_script(name, [])  # runs out at once: ModelError, wrapped by litellm
    with pytest.raises(litellm.APIConnectionError, match="ran out"):
        ask(f"scripted/{name}", policy)
    assert script.calls == 1
    register_script(name, faulty(ValueError("a bug in a policy")))
    with pytest.raises(litellm.APIConnectionError):
        ask(f"scripted/{name}", policy)


def test_exhausted_attempts_raise_the_last_error_with_the_retries(
    name: str, policy: RetryPolicy, sleeps: Sleeps
) -> None:
    script = register_script(name, faulty(*[rate_limited() for _ in range(4)]))
    with pytest.raises(litellm.RateLimitError) as caught:
        ask(f"scripted/{name}", policy)
    assert script.calls == 4 and len(sleeps.waits) == 3
    assert [r["attempt"] for r in caught.value.harnessevolve_retries] == [1, 2, 3]


def test_backoff_bound_doubles_up_to_the_cap(
    name: str, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("random.uniform", lambda low, high: high)  # the top of each jitter range
    policy = RetryPolicy(max_attempts=6, initial_s=1.0, max_wait_s=10.0, sleep=sleeps)
    register_script(name, faulty(*[litellm.Timeout("slow", "m", "scripted") for _ in range(5)]))
    ask(f"scripted/{name}", policy)
    assert sleeps.waits == [1.0, 2.0, 4.0, 8.0, 10.0]


def test_agent_loop_turns_exhausted_retries_into_a_model_error_step(
    name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sleeps: Sleeps
) -> None:
    monkeypatch.setattr(
        "harnessevolve.models.retry._default_policy", RetryPolicy(max_attempts=2, sleep=sleeps)
    )
    register_script(name, faulty(*[rate_limited() for _ in range(2)]))
    harness = load_harness(paths.builtin_dir("harnesses") / "shell-agent")
    task = Task(id="t", instruction="say hi", split="train", checks=(Check(type="answer", expected="hi"),))
    trajectory = asyncio.run(run_agent(harness, task, tmp_path, model=f"scripted/{name}", seed=0))
    assert trajectory.extra["stop_reason"] == "model_error"
    assert trajectory.steps[-1].extra["error"].startswith("model_error: RateLimitError")
    assert len(sleeps.waits) == 1


def test_retryable_classification_of_plain_exceptions() -> None:
    assert is_retryable(TimeoutError()) and is_retryable(ConnectionResetError())
    assert not is_retryable(ValueError()) and not is_retryable(asyncio.CancelledError())
    assert is_retryable(litellm.ServiceUnavailableError("busy", "scripted", "m"))
    assert is_retryable(litellm.APIError(502, "bad gateway", "scripted", "m"))
    assert not is_retryable(litellm.APIError(418, "teapot", "scripted", "m"))


def test_retry_after_reads_milliseconds_and_dates() -> None:
    exc = litellm.RateLimitError("x", "scripted", "m", headers={"Retry-After-Ms": "250"})
    assert retry_after_s(exc) == 0.25
    later = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 20))
    assert 15 < retry_after_s(rate_limited(later)) <= 20
    assert retry_after_s(rate_limited()) is None


# ---- limits ---------------------------------------------------------------------------------


def test_limits_resolution_prefers_exact_then_longest_pattern() -> None:
    try:
        configure_limits("*", ModelLimits(max_concurrency=64))
        configure_limits("openai/*", ModelLimits(max_concurrency=8))
        configure_limits("openai/gpt-4o*", ModelLimits(max_concurrency=4))
        configure_limits("openai/gpt-4o-mini", ModelLimits(max_concurrency=2))
        assert limits_for("openai/gpt-4o-mini").max_concurrency == 2
        assert limits_for("openai/gpt-4o").max_concurrency == 4
        assert limits_for("openai/o3").max_concurrency == 8
        assert limits_for("anthropic/claude").max_concurrency == 64
    finally:
        clear_limits()
    assert limits_for("anthropic/claude") == ModelLimits()


def peak_counting_policy() -> tuple[dict[str, int], Any]:
    """An async scripted policy that takes 20 ms and counts how many of its calls overlap at most."""
    state = {"now": 0, "peak": 0}

    async def slow(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> str:
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        await asyncio.sleep(0.02)
        state["now"] -= 1
        return "done"

    return state, slow


def test_concurrency_limit_holds(name: str, policy: RetryPolicy) -> None:
    state, slow = peak_counting_policy()
    register_script(name, slow)
    configure_limits(f"scripted/{name}", ModelLimits(max_concurrency=3))

    async def many() -> list[Any]:
        return await asyncio.gather(*(acomplete(f"scripted/{name}", USER, retry=policy) for _ in range(12)))

    assert [r.content for r in asyncio.run(many())] == ["done"] * 12
    assert state["peak"] == 3
    asyncio.run(many())  # a second event loop gets its own semaphore
    assert state["peak"] == 3


def test_without_limits_calls_overlap(name: str, policy: RetryPolicy) -> None:
    state, slow = peak_counting_policy()
    register_script(name, slow)

    async def many() -> None:
        await asyncio.gather(*(acomplete(f"scripted/{name}", USER, retry=policy) for _ in range(8)))

    asyncio.run(many())
    assert state["peak"] == 8


def test_rate_limiter_spaces_calls_on_a_fake_clock() -> None:
    clock = {"t": 100.0}
    waits: list[float] = []

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        clock["t"] += seconds

    limiter = RateLimiter(rate_per_s=2.0, capacity=1, clock=lambda: clock["t"], sleep=sleep)

    async def five() -> None:
        for _ in range(5):
            await limiter.acquire()

    asyncio.run(five())
    assert waits == [0.5, 0.5, 0.5, 0.5]  # first immediately, then one every 0.5 s
    clock["t"] += 10  # idle: tokens do not pile up beyond the capacity
    assert limiter.reserve() == 0.0 and limiter.reserve() == 0.5


def test_rate_limiter_burst_lets_capacity_through_at_once() -> None:
    clock = {"t": 0.0}
    limiter = RateLimiter(rate_per_s=1.0, capacity=3, clock=lambda: clock["t"])
    assert [limiter.reserve() for _ in range(5)] == [0.0, 0.0, 0.0, 1.0, 2.0]


def test_rate_limiter_is_shared_across_threads() -> None:
    clock = {"t": 0.0}
    limiter = RateLimiter(rate_per_s=10.0, clock=lambda: clock["t"])
    delays: list[float] = []
    threads = [threading.Thread(target=lambda: delays.append(limiter.reserve())) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(round(d, 6) for d in delays) == [round(i * 0.1, 6) for i in range(20)]


def test_rpm_limit_spaces_real_calls(name: str, policy: RetryPolicy) -> None:
    register_script(name, lambda messages, tools: "ok")
    configure_limits(f"scripted/{name}", ModelLimits(requests_per_minute=1200))  # one per 50 ms

    async def four() -> None:
        await asyncio.gather(*(acomplete(f"scripted/{name}", USER, retry=policy) for _ in range(4)))

    started = time.monotonic()
    asyncio.run(four())
    assert time.monotonic() - started >= 0.14


def test_request_timeout_is_passed_to_litellm(
    name: str, policy: RetryPolicy, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: dict[str, Any] = {}
    real = litellm.acompletion

    async def spy(**kwargs: Any) -> Any:
        seen.update(kwargs)
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", spy)
    register_script(name, ["ok"])
    configure_limits("scripted/*", ModelLimits(request_timeout_s=7.5))
    ask(f"scripted/{name}", policy)
    assert seen["timeout"] == 7.5


def test_invalid_limits_are_refused() -> None:
    with pytest.raises(ValueError):
        ModelLimits(max_concurrency=0)
    with pytest.raises(ValueError):
        ModelLimits(requests_per_minute=-1)
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)


# ---- usage ----------------------------------------------------------------------------------


def test_usage_is_attributed_to_the_scope_of_each_concurrent_task(name: str, policy: RetryPolicy) -> None:
    async def answer(messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        await asyncio.sleep(0.001)
        tokens = 100 if "execute" in messages[0]["content"] else 7
        return {"content": "ok", "usage": {"prompt_tokens": tokens, "completion_tokens": 1}}

    register_script(name, answer)
    meter = UsageMeter()

    async def work(stage: str, proposer: str | None) -> None:
        with usage_scope(meter, stage=stage, proposer=proposer):
            inner = [
                asyncio.create_task(
                    acomplete(f"scripted/{name}", [{"role": "user", "content": stage}], retry=policy)
                )
                for _ in range(3)
            ]
            await asyncio.gather(*inner)

    async def both() -> None:
        await asyncio.gather(work("execute", None), work("optimize", "llm"), work("execute", None))

    asyncio.run(both())
    snapshot = meter.snapshot()
    assert snapshot["by_stage"]["execute"]["calls"] == 6
    assert snapshot["by_stage"]["execute"]["prompt_tokens"] == 600
    assert snapshot["by_stage"]["optimize"]["tokens"] == 3 * 8
    assert snapshot["by_proposer"] == {"llm": snapshot["by_stage"]["optimize"]}
    assert snapshot["by_model"][f"scripted/{name}"]["calls"] == 9
    totals = meter.totals()
    assert (totals.calls, totals.tokens, totals.failures) == (9, 6 * 101 + 3 * 8, 0)
    assert UsageMeter.from_snapshot(snapshot).snapshot() == snapshot


def test_usage_counts_failures_and_retries(name: str, policy: RetryPolicy) -> None:
    register_script(
        name,
        faulty(
            rate_limited(), reply={"content": "ok", "usage": {"prompt_tokens": 5, "completion_tokens": 2}}
        ),
    )
    meter = UsageMeter()
    with usage_scope(meter, stage="gate"):
        ask(f"scripted/{name}", policy)
        register_script(name, faulty(litellm.AuthenticationError("bad key", "scripted", "m")))
        with pytest.raises(litellm.AuthenticationError):
            ask(f"scripted/{name}", policy)
    gate = meter.snapshot()["by_stage"]["gate"]
    assert {k: gate[k] for k in ("calls", "failures", "retries", "tokens")} == {
        "calls": 2,
        "failures": 1,
        "retries": 1,
        "tokens": 7,
    }


def test_calls_outside_a_scope_are_not_metered(name: str, policy: RetryPolicy) -> None:
    register_script(name, ["a", "b"])
    meter = UsageMeter()
    ask(f"scripted/{name}", policy)
    with usage_scope(meter, stage="evaluate"):
        pass
    ask(f"scripted/{name}", policy)
    assert meter.totals().calls == 0


def test_meter_is_thread_safe() -> None:
    meter = UsageMeter()

    def spend() -> None:
        for _ in range(1000):
            meter.record(stage="execute", proposer=None, model="m", prompt_tokens=1, cost_usd=0.001)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    totals = meter.totals()
    assert (totals.calls, totals.tokens) == (8000, 8000)
    assert totals.cost_usd == pytest.approx(8.0)
