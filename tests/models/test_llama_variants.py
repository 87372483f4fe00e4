"""The CPU backend variant of llama.cpp is chosen on the machine that runs: the best one this CPU
supports, or the one HARNESSEVOLVE_LLAMA_CPU_VARIANT names when this CPU can run it, never one it
cannot (a one-line error naming the variable instead)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harnessevolve.models.llama_variants import (
    VARIANT_ENV,
    CpuVariantError,
    Variant,
    choose,
    find_variants,
    lib_dir,
)

REPO = Path(__file__).resolve().parents[2]


def variants(**scores: int) -> list[Variant]:
    return [Variant(name, Path(f"/lib/libggml-cpu-{name}.so"), score) for name, score in scores.items()]


def test_the_best_supported_variant_is_chosen() -> None:
    found = variants(x64=1, haswell=7, skylakex=0, zen4=0)
    assert choose(found, None).name == "haswell"


def test_a_cpu_lacking_the_top_levels_falls_back_to_the_next_lower_one() -> None:
    # as on a CPU without AVX2: haswell and above score 0, sandybridge is the best left
    found = variants(x64=1, sse42=3, sandybridge=5, haswell=0, icelake=0)
    assert choose(found, None).name == "sandybridge"


def test_a_forced_variant_this_cpu_runs_is_taken() -> None:
    assert choose(variants(x64=1, haswell=7), "x64").name == "x64"


@pytest.mark.parametrize(
    ("wanted", "says"), [("zen4", "lacks instructions"), ("nosuch", "no such CPU backend variant")]
)
def test_a_forced_variant_that_cannot_run_is_refused_naming_the_variable(wanted: str, says: str) -> None:
    with pytest.raises(CpuVariantError) as info:
        choose(variants(x64=1, haswell=7, zen4=0), wanted)
    assert info.value.field == VARIANT_ENV and says in info.value.message
    assert "this CPU can run: haswell, x64" in info.value.message


def test_no_supported_variant_is_an_error_with_a_hint() -> None:
    with pytest.raises(CpuVariantError, match="no CPU backend variant"):
        choose(variants(zen4=0), None)


def test_variants_are_found_best_first_links_skipped(tmp_path: Path) -> None:
    for name in ("x64", "haswell", "zen4"):
        (tmp_path / f"libggml-cpu-{name}.so").write_bytes(b"")
    (tmp_path / "libggml-cpu-evil.so").symlink_to(tmp_path / "libggml-cpu-x64.so")
    (tmp_path / "libggml-base.so").write_bytes(b"")
    scores = {"x64": 1, "haswell": 7, "zen4": 0}
    found = find_variants(tmp_path, score=lambda p: scores[p.name[len("libggml-cpu-") : -3]])
    assert [(v.name, v.supported) for v in found] == [("haswell", True), ("x64", True), ("zen4", False)]


def _variant_build() -> list[str]:
    folder = lib_dir()
    return sorted(p.name for p in folder.glob("libggml-cpu-*.so")) if folder else []


HAVE_VARIANTS = bool(_variant_build())
CHILD = """
import json, os
from harnessevolve.models.llama_variants import ensure_cpu_backend
from harnessevolve.models.local import LocalModelConfig, generate
turns = [{"role": "user", "content": "Say hello."}]
out = generate("local/smollm2-135m", turns, max_tokens=6, temperature=0.0, seed=1,
               config=LocalModelConfig(n_threads=1, n_ctx=512))
print(json.dumps({"variant": ensure_cpu_backend().variant, "text": out.text,
                  "tokens": out.completion_tokens}))
"""


def _child(variant: str | None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != VARIANT_ENV}
    if variant:
        env[VARIANT_ENV] = variant
    return subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, cwd=REPO)


@pytest.mark.slow
@pytest.mark.skipif(not HAVE_VARIANTS, reason="llama-cpp-python built without CPU variants (make install)")
def test_the_fallback_variant_forced_still_completes_a_generation() -> None:
    best, lowest = _child(None), _child("x64")
    assert best.returncode == 0 and lowest.returncode == 0, (best.stderr[-800:], lowest.stderr[-800:])
    chosen, forced = json.loads(best.stdout.splitlines()[-1]), json.loads(lowest.stdout.splitlines()[-1])
    assert chosen["variant"] != "x64" and forced["variant"] == "x64"
    assert forced["tokens"] > 0 and forced["text"].strip()


@pytest.mark.skipif(not HAVE_VARIANTS, reason="llama-cpp-python built without CPU variants (make install)")
@pytest.mark.parametrize(("wanted", "says"), [("nosuch", "no such CPU backend variant"), ("x64", None)])
def test_models_info_names_the_variant_or_refuses_in_one_line(wanted: str, says: str | None) -> None:
    env = {**os.environ, VARIANT_ENV: wanted}
    done = subprocess.run(
        [sys.executable, "-m", "harnessevolve", "models", "info", "--json"],
        env=env,
        capture_output=True,
        text=True,
        cwd=REPO,
    )
    if says is None:
        assert done.returncode == 0, done.stderr[-800:]
        found = json.loads(done.stdout)
        assert (
            found["variant"] == "x64" and found["forced"] is True and "loaded CPU backend" not in done.stderr
        )
        return
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert f"{VARIANT_ENV}: {wanted}: {says}" in done.stderr
