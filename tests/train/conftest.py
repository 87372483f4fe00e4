"""Fixtures for the policy trainer: a tiny random Llama checkpoint with a small BPE tokenizer trained
here (no downloads), the shell-agent harness, and a folder of shell-onecall trajectories."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tiny_models import bpe_tokenizer, tiny_llama
from train_data import HARNESS, TASKS, failed_copy, reference

from harnessevolve.core import atif
from harnessevolve.harness.load import load_harness
from harnessevolve.harness.model import Harness
from harnessevolve.models.tool_text import render_tools_prompt

NEEDS = "needs torch and transformers (pip install 'harnessevolve[train]')"


@pytest.fixture(scope="session")
def harness() -> Harness:
    return load_harness(HARNESS)


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory: pytest.TempPathFactory, harness: Harness) -> Path:
    """A 2-layer, hidden-32 random Llama and its tokenizer, saved with save_pretrained."""
    torch = pytest.importorskip("torch", reason=NEEDS)
    transformers = pytest.importorskip("transformers", reason=NEEDS)
    corpus = [render_tools_prompt([t.openai_schema() for t in harness.tools]), harness.assembled_prompt()]
    corpus += [json.dumps(reference(t).to_dict()) for t in TASKS]
    fast = bpe_tokenizer(transformers, corpus * 2, vocab_size=600)
    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("tiny-base")
    tiny_llama(transformers, fast, max_positions=2048).save_pretrained(folder)
    fast.save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def tokenizer(tiny_base: Path) -> Any:
    import transformers

    return transformers.AutoTokenizer.from_pretrained(str(tiny_base))


@pytest.fixture
def trajectory_folder(tmp_path: Path) -> Path:
    """References of TASKS (successes) and a failed copy of each."""
    folder = tmp_path / "trajectories"
    for task_id in TASKS:
        ref = reference(task_id)
        atif.save(ref, folder / "refs" / f"{task_id}.json")
        atif.save(failed_copy(ref), folder / "failed" / f"{task_id}.json")
    return folder
