"""A model call on an event loop of its own, without litellm's noise.

A caller outside any event loop (a ``judge`` check) runs each call in ``asyncio.run``. litellm keeps
process-wide state bound to the loop that used it last: its logging worker (a queue and a task) and
its cached HTTP clients (keyed by loop). A loop that ends with them in use leaves a logging
warning at every next call ("LoggingWorker: event loop changed; carried N pending ...") and
pending tasks that asyncio reports as "Task was destroyed but it is pending!".

:func:`settle_loop` ends such a loop cleanly: it waits (bounded) for litellm's logging callbacks
queued on it, stops the worker's tasks, and closes and forgets the HTTP clients cached for it.
:func:`quiet_litellm` keeps litellm's loggers at ERROR while the call runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import threading
from collections.abc import Iterator

LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy")
SETTLE_TIMEOUT_S = 5.0
"""How long :func:`settle_loop` waits for litellm's logging callbacks before cancelling them."""

_quiet_lock = threading.Lock()
_quiet_depth = 0
_saved_levels: dict[str, int] = {}


@contextlib.contextmanager
def quiet_litellm() -> Iterator[None]:
    """litellm's loggers at ERROR inside the block (nested and concurrent blocks included): its
    warnings say nothing a caller of ours can act on, errors still show."""
    global _quiet_depth
    with _quiet_lock:
        if _quiet_depth == 0:
            for name in LITELLM_LOGGERS:
                logger = logging.getLogger(name)
                _saved_levels[name] = logger.level
                logger.setLevel(max(logger.level, logging.ERROR))
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                for name, level in _saved_levels.items():
                    logging.getLogger(name).setLevel(level)
                _saved_levels.clear()


async def settle_loop(timeout_s: float = SETTLE_TIMEOUT_S) -> None:
    """Leave nothing of litellm's on the running loop before it ends (see the module docstring).
    Never raises: a failure here must not fail the call that came before."""
    with contextlib.suppress(Exception):
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), timeout_s)
        await GLOBAL_LOGGING_WORKER.stop(discard_pending=True, timeout=timeout_s)
    with contextlib.suppress(Exception):
        await close_loop_clients()


async def close_loop_clients() -> int:
    """Close the HTTP clients litellm cached for the running loop (their keys end in its token) and
    drop them from its cache; how many were closed."""
    import litellm
    from litellm.caching.evicted_client_closer import running_loop_token

    cache = getattr(litellm, "in_memory_llm_clients_cache", None)
    token = running_loop_token()
    entries = getattr(cache, "cache_dict", None)
    if token is None or not isinstance(entries, dict):
        return 0
    closed = 0
    for key in [k for k in list(entries) if isinstance(k, str) and k.endswith(f"-{token}")]:
        client = entries.pop(key, None)
        getattr(cache, "ttl_dict", {}).pop(key, None)
        close = getattr(client, "aclose", None) or getattr(client, "close", None)
        if close is None:
            continue
        with contextlib.suppress(Exception):
            result = close()
            if inspect.isawaitable(result):
                await result
            closed += 1
    return closed
