"""Registering the package's own providers with litellm, once per process, on first use."""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.Lock()
_registered = False


def litellm_module() -> Any:
    """Import litellm (lazily: it costs seconds) with the offline cost map, providers registered."""
    global _registered
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    with _lock:
        if not _registered:
            litellm.suppress_debug_info = True
            litellm.telemetry = False
            ours = [
                {"provider": "scripted", "custom_handler": _scripted_handler()},
                {"provider": "local", "custom_handler": _local_handler()},
            ]
            names = {p["provider"] for p in ours}
            existing = [p for p in (litellm.custom_provider_map or []) if p.get("provider") not in names]
            litellm.custom_provider_map = existing + ours  # type: ignore[operator]  # litellm types it narrowly
            from litellm.utils import custom_llm_setup

            custom_llm_setup()
            from harnessevolve.core.interrupts import at_loop_end
            from harnessevolve.models.quiet import settle_loop

            at_loop_end(settle_loop)  # no "LoggingWorker: event loop changed" at the next loop's calls
            _registered = True
    return litellm


def _scripted_handler() -> Any:
    from harnessevolve.models.scripted import make_scripted_handler

    return make_scripted_handler()


def _local_handler() -> Any:
    from harnessevolve.models.local import make_local_handler

    return make_local_handler()
