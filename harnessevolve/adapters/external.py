"""Adapters named by reference, without installing them: ``--adapter module:attr`` and a
benchmark folder's ``adapter: module:attr`` (``benchmark.yaml``).

``module`` is imported from the current directory, then ``search`` (a benchmark folder's
``python_path``), then the installed packages; ``attr`` is an adapter instance or a class called
without arguments. This is the user's own loading code, run in harnessevolve's process like an
entry-point adapter; the tasks it loads still run their tools and checks only in the sandbox.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import os
import sys
from pathlib import Path

from harnessevolve.core.errors import BenchmarkError
from harnessevolve.core.python_refs import parse_attr_ref


def import_adapter(
    ref: str, *, search: tuple[str, ...] = (), field: str = "--adapter", file: str | None = None
) -> object:
    """The adapter ``ref`` names, checked to have ``name``, ``detect`` and ``load``."""
    parsed = parse_attr_ref(ref, file=file, field=field, form="module:attr (an adapter class or instance)")
    added = [p for p in (os.getcwd(), *search) if p not in sys.path]
    _forget_stale(parsed.module, [os.getcwd(), *search])
    sys.path[:0] = added
    try:
        module = importlib.import_module(parsed.module)
    except ImportError as exc:
        raise BenchmarkError(
            f"cannot import adapter module {parsed.module!r}: {exc}",
            file=file,
            field=field,
            hint="run from the folder that holds it, or put it on PYTHONPATH",
        ) from None
    except Exception as exc:  # the user's module failed while importing: name it, never crash
        raise BenchmarkError(
            f"adapter module {parsed.module!r} failed to import: {type(exc).__name__}: {exc}",
            file=file,
            field=field,
        ) from None
    finally:
        for path in added:
            if path in sys.path:
                sys.path.remove(path)
    if not hasattr(module, parsed.attribute):
        raise BenchmarkError(
            f"module {parsed.module!r} has no {parsed.attribute!r}",
            file=file,
            field=field,
            hint=f"names in it: {', '.join(n for n in dir(module) if not n.startswith('_'))[:200]}",
        )
    target = getattr(module, parsed.attribute)
    try:
        adapter = target() if isinstance(target, type) else target
    except Exception as exc:
        raise BenchmarkError(
            f"adapter {ref} failed to start: {type(exc).__name__}: {exc}", file=file, field=field
        ) from None
    from harnessevolve.adapters.protocol import BenchmarkAdapter

    if not isinstance(adapter, BenchmarkAdapter):  # runtime_checkable: has name, detect and load
        raise BenchmarkError(
            f"{ref} is not an adapter ({type(adapter).__name__} lacks name, detect or load)",
            file=file,
            field=field,
            hint="an adapter has name, detect(spec) and load(spec); see docs/adapters.md",
        )
    return adapter


def _forget_stale(module: str, folders: list[str]) -> None:
    """Drop a cached module of this name that came from another file than the one these folders
    hold: two benchmark folders may each have a ``loader.py``, and the second must get its own."""
    top = module.split(".")[0]
    cached = sys.modules.get(top)
    if cached is None:
        return
    spec = importlib.machinery.PathFinder.find_spec(top, folders)
    if spec is None or spec.origin is None:
        return
    if os.path.realpath(getattr(cached, "__file__", None) or "") == os.path.realpath(spec.origin):
        return
    for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
        del sys.modules[name]


def folder_adapter(root: Path, meta: dict, meta_file: str, search: tuple[str, ...]) -> object:
    """The adapter a benchmark folder's ``adapter:`` names."""
    return import_adapter(meta["adapter"], search=search, field="adapter", file=meta_file)
