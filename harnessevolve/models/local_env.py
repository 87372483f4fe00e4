"""The embedded model's settings read from the environment (``HARNESSEVOLVE_LOCAL_*``), each checked
with a one-line error naming the variable."""

from __future__ import annotations

import os


def _error(message: str, variable: str, hint: str) -> Exception:
    from harnessevolve.models.local import LocalModelError  # local.py imports this module

    return LocalModelError(message, field=variable, hint=hint)


DEFAULT_N_CTX = 4096
MAX_N_CTX = 131_072


def default_n_ctx() -> int:
    """``HARNESSEVOLVE_LOCAL_N_CTX`` (256 to 131072 tokens) if set, else 4096. A larger window costs
    memory (the KV cache grows with it) and is only useful up to what the model was trained on."""
    value = os.environ.get("HARNESSEVOLVE_LOCAL_N_CTX", "").strip()
    if not value:
        return DEFAULT_N_CTX
    if not value.isdigit() or not 256 <= int(value) <= MAX_N_CTX:
        raise _error(
            f"HARNESSEVOLVE_LOCAL_N_CTX must be a whole number from 256 to {MAX_N_CTX}, not {value!r}",
            "HARNESSEVOLVE_LOCAL_N_CTX",
            "e.g. HARNESSEVOLVE_LOCAL_N_CTX=8192 for long conversations",
        )
    return int(value)


def default_threads() -> int:
    """``HARNESSEVOLVE_LOCAL_THREADS`` if set; else 2, or 1 when the machine is busy (1-minute load
    average within half a core of the core count). Measured on 2 shared cores at load 9-12 with
    Qwen2.5-Coder-0.5B: 7.5 generated tokens/s with 1 thread, 0.6 with 2 (threads that wait for
    each other's cores)."""
    value = os.environ.get("HARNESSEVOLVE_LOCAL_THREADS", "").strip()
    if not value:
        cores = os.cpu_count() or 1
        try:
            busy = os.getloadavg()[0] >= cores - 0.5
        except OSError:  # no load average on this platform
            busy = False
        return 1 if busy or cores < 2 else 2
    if not value.isdigit() or int(value) < 1:
        raise _error(
            f"HARNESSEVOLVE_LOCAL_THREADS must be a whole number >= 1, not {value!r}",
            "HARNESSEVOLVE_LOCAL_THREADS",
            "e.g. HARNESSEVOLVE_LOCAL_THREADS=1 on a busy machine",
        )
    return int(value)


MAX_LOOKUP = 64


def default_lookup() -> int:
    """``HARNESSEVOLVE_LOCAL_LOOKUP``: how many tokens prompt-lookup decoding drafts from n-grams of
    the prompt for the model to check in one batch (0 or unset: off). Greedy decoding keeps its
    tokens up to floating-point differences between a batched and a one-token evaluation."""
    value = os.environ.get("HARNESSEVOLVE_LOCAL_LOOKUP", "").strip()
    if not value:
        return 0
    if not value.isdigit() or int(value) > MAX_LOOKUP:
        raise _error(
            f"HARNESSEVOLVE_LOCAL_LOOKUP must be a whole number from 0 to {MAX_LOOKUP}, not {value!r}",
            "HARNESSEVOLVE_LOCAL_LOOKUP",
            "e.g. HARNESSEVOLVE_LOCAL_LOOKUP=10, or 0 for plain decoding",
        )
    return int(value)
