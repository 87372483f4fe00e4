"""The `harnessevolve run` command line the tests build, in one place."""

from __future__ import annotations

from pathlib import Path


def run_args(
    harness_dir: Path,
    model: str | None,
    *extra: str,
    benchmark: str | Path = "shell-basics",
    generations: int = 2,
    batch_size: int = 8,
) -> list[str]:
    args = ["run", "--harness", str(harness_dir), "--benchmark", str(benchmark)]
    args += ["-n", str(generations), "--batch-size", str(batch_size)]
    return args + (["--model", model] if model else []) + list(extra)
