"""``run``'s context-window preflight: the seed's prompt and tools with the largest task's context
and tools must fit the agent model's window, or nothing starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.tasks import Benchmark, Check, Task
from harnessevolve.harness.load import load_harness
from harnessevolve.pipeline.preflight import check_context_window


def test_a_task_whose_context_overflows_the_window_stops_the_run_before_it_starts(
    harness_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_N_CTX", "1024")
    harness = load_harness(harness_dir)
    check = (Check(type="answer", expected="x"),)
    fits = Task("fits", "hi", "train", check, context="Be polite.")
    huge = Task("huge", "hi", "train", check, context="Refunds need a receipt. " * 300)
    check_context_window(harness, Benchmark("b", tmp_path, (fits,)), "local/smollm2-135m")
    check_context_window(harness, Benchmark("b", tmp_path, (fits, huge)), "scripted/x")  # window unknown
    with pytest.raises(BenchmarkError) as caught:
        check_context_window(harness, Benchmark("b", tmp_path, (fits, huge)), "local/smollm2-135m")
    assert "the seed's prompt overflows the model's window" in caught.value.message
    assert "of task huge's context and tools" in caught.value.message
    assert caught.value.field == "context" and "HARNESSEVOLVE_LOCAL_N_CTX" in (caught.value.hint or "")


def test_a_local_model_is_measured_on_the_tools_prompt_it_reads_not_the_json_an_api_gets(
    harness_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The embedded provider lists tools as one signature line each; BFCL's tasks (long JSON
    schemas) were refused against 4096 tokens at about twice the ~2200 tokens their first model
    call really took, so a 1.5B evolve run on BFCL could not start."""
    from harnessevolve.core.task_tools import TaskTool
    from harnessevolve.gate.quality import rendered_window

    monkeypatch.setenv("HARNESSEVOLVE_LOCAL_N_CTX", "1024")
    harness = load_harness(harness_dir)
    verbose = {
        "type": "object",
        "properties": {
            f"field_{i}": {
                "type": "string",
                "description": "A value the caller must give, as a plain string.",
            }
            for i in range(6)
        },
        "required": [f"field_{i}" for i in range(6)],
    }
    tools = tuple(TaskTool(f"op_{i}", "Does one thing.", verbose, python="m:f") for i in range(6))
    task = Task("tools", "hi", "train", (Check(type="answer", expected="x"),), tools=tools)
    local = rendered_window(harness, "local/smollm2-135m", [task])
    api = rendered_window(harness, "gpt-4o-mini", [task])
    assert local.task_tokens < api.task_tokens / 3  # signature lines, not JSON schemas
    check_context_window(harness, Benchmark("b", tmp_path, (task,)), "local/smollm2-135m")
    # what a task adds is counted with the tools prompt it joins: within a few tokens of the whole
    whole = rendered_window(harness, "local/smollm2-135m", [])
    assert local.task_tokens > 6 * 8 and whole.task_tokens == 0
