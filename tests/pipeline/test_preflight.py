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
