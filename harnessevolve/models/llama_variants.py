"""Which build of llama.cpp's CPU backend runs the embedded model, chosen on the machine that runs.

``make install`` builds llama-cpp-python with llama.cpp's CPU backend as loadable modules, one per
instruction-set level (``libggml-cpu-<variant>.so`` beside ``libggml.so``; see
``tools/build_llama_cpp.py``). Each module reports a score for the CPU it is loaded on: 0 when the
CPU lacks an instruction the module was built for, else higher the more of its features it uses.
Before the first model loads, :func:`ensure_cpu_backend` loads the best-scoring module (or the one
``HARNESSEVOLVE_LLAMA_CPU_VARIANT`` names), so one installation runs AVX-512 kernels on a CPU that
has them and AVX2 ones on a CPU that does not, never an instruction the CPU lacks.

llama-cpp-python 0.3.36 has no binding for this (its ``llama_backend_init`` searches only the
Python executable's and the current folder), so the loader calls ``libggml``'s registry through
ctypes. A llama-cpp-python built the usual way (one CPU backend linked in) is reported as
``built-in`` and used as it is.
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from harnessevolve.core.errors import ModelError

VARIANT_ENV = "HARNESSEVOLVE_LLAMA_CPU_VARIANT"
BUILT_IN = "built-in"
PREFIX, SUFFIX = "libggml-cpu-", ".so"


class CpuVariantError(ModelError):
    """The CPU backend variant asked for cannot run here (absent, or the CPU lacks its instructions)."""

    default_hint = f"unset {VARIANT_ENV} to load the best variant this CPU supports"


@dataclass(frozen=True)
class Variant:
    """One CPU backend module and its score on this CPU (0: this CPU cannot run it)."""

    name: str
    path: Path
    score: int

    @property
    def supported(self) -> bool:
        return self.score > 0


@dataclass
class CpuBackend:
    """What runs: the variant loaded (``built-in`` for a single-backend build), the variants the
    installation has, and the CPU backend's own feature list (``AVX2: 1``, ``REPACK: 1``...)."""

    variant: str
    variants: list[Variant] = field(default_factory=list)
    features: dict[str, str] = field(default_factory=dict)
    forced: bool = False

    def to_json(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "forced": self.forced,
            "variants": [{"name": v.name, "score": v.score, "supported": v.supported} for v in self.variants],
            "features": self.features,
        }


def lib_dir() -> Path | None:
    """llama-cpp-python's folder of shared libraries (None when it is not installed)."""
    spec = importlib.util.find_spec("llama_cpp")
    if spec is None or not spec.submodule_search_locations:
        return None
    for folder in spec.submodule_search_locations:
        if (Path(folder) / "lib").is_dir():
            return Path(folder) / "lib"
    return None


def module_score(path: Path) -> int:
    """The module's ``ggml_backend_score()`` on this CPU (loading a module runs none of its kernels)."""
    try:
        module = ctypes.CDLL(str(path))
        score = module.ggml_backend_score
    except (OSError, AttributeError):
        return 0
    score.restype, score.argtypes = ctypes.c_int, []
    return int(score())


def find_variants(folder: Path, score: Callable[[Path], int] = module_score) -> list[Variant]:
    """The CPU backend modules in ``folder``, best score first (unsupported ones last, score 0)."""
    found = [
        Variant(path.name.removeprefix(PREFIX).removesuffix(SUFFIX), path, score(path))
        for path in sorted(folder.glob(f"{PREFIX}*{SUFFIX}"))
        if not path.is_symlink()
    ]
    return sorted(found, key=lambda v: (-v.score, v.name))


def choose(variants: Iterable[Variant], wanted: str | None) -> Variant:
    """The variant to load: ``wanted`` when named (refused when absent or unsupported here), else the
    best supported one; the lowest level (``x64``) supports every x86-64 CPU, so one always is."""
    variants = sorted(variants, key=lambda v: (-v.score, v.name))
    supported = [v for v in variants if v.supported]
    names = ", ".join(v.name for v in supported) or "none"
    if wanted:
        match = next((v for v in variants if v.name == wanted), None)
        if match is None:
            raise CpuVariantError(
                f"{wanted}: no such CPU backend variant in this llama-cpp-python (this CPU can run: {names})",
                field=VARIANT_ENV,
            )
        if not match.supported:
            raise CpuVariantError(
                f"{wanted}: this CPU lacks instructions that variant needs (this CPU can run: {names})",
                field=VARIANT_ENV,
            )
        return match
    if not supported:
        raise CpuVariantError(
            "no CPU backend variant of llama-cpp-python runs on this CPU",
            hint="rebuild it: make install (or pip install llama-cpp-python from source)",
        )
    return supported[0]


_lock = threading.Lock()
_loaded: CpuBackend | None = None


def ensure_cpu_backend() -> CpuBackend:
    """Load the CPU backend once per process, before the first model (see the module's doc)."""
    global _loaded
    with _lock:
        if _loaded is None:
            _loaded = _load()
        return _loaded


def _ggml() -> ctypes.CDLL | None:
    folder = lib_dir()
    if folder is None:
        return None
    import llama_cpp  # noqa: F401  (loads libllama and, through it, this same libggml)

    for name in ("libggml.so.0", "libggml.so"):
        if (folder / name).exists():
            ggml = ctypes.CDLL(str(folder / name))
            ggml.ggml_backend_reg_count.restype = ctypes.c_size_t
            ggml.ggml_backend_load.restype = ctypes.c_void_p
            ggml.ggml_backend_load.argtypes = [ctypes.c_char_p]
            ggml.ggml_backend_reg_get.restype = ctypes.c_void_p
            ggml.ggml_backend_reg_get.argtypes = [ctypes.c_size_t]
            ggml.ggml_backend_reg_name.restype = ctypes.c_char_p
            ggml.ggml_backend_reg_name.argtypes = [ctypes.c_void_p]
            ggml.ggml_backend_reg_get_proc_address.restype = ctypes.c_void_p
            ggml.ggml_backend_reg_get_proc_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
            return ggml
    return None


class _Feature(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("value", ctypes.c_char_p)]


def _features(ggml: ctypes.CDLL) -> dict[str, str]:
    """The registered CPU backend's feature list (empty when it has none)."""
    for index in range(int(ggml.ggml_backend_reg_count())):
        reg = ggml.ggml_backend_reg_get(index)
        if (ggml.ggml_backend_reg_name(reg) or b"").decode() != "CPU":
            continue
        address = ggml.ggml_backend_reg_get_proc_address(reg, b"ggml_backend_get_features")
        if not address:
            return {}
        get = ctypes.CFUNCTYPE(ctypes.POINTER(_Feature), ctypes.c_void_p)(address)
        features, found = get(reg), {}
        for i in range(256):
            if not features[i].name:
                break
            found[features[i].name.decode()] = (features[i].value or b"").decode()
        return found
    return {}


def _load() -> CpuBackend:
    ggml = _ggml()
    if ggml is None:
        return CpuBackend(variant=BUILT_IN)
    folder = lib_dir()
    assert folder is not None
    variants = find_variants(folder)
    wanted = os.environ.get(VARIANT_ENV, "").strip() or None
    if ggml.ggml_backend_reg_count() > 0 or not variants:  # a CPU backend linked in (or already loaded)
        if wanted and variants:
            raise CpuVariantError(
                f"{wanted}: the CPU backend was loaded before it could be chosen",
                field=VARIANT_ENV,
            )
        return CpuBackend(variant=BUILT_IN, variants=variants, features=_features(ggml))
    chosen = choose(variants, wanted)
    from llama_cpp._utils import suppress_stdout_stderr

    with suppress_stdout_stderr(disable=False):  # ggml logs "loaded CPU backend from ..." to stderr
        loaded = ggml.ggml_backend_load(str(chosen.path).encode())
    if not loaded:
        raise CpuVariantError(f"llama.cpp could not load its CPU backend {chosen.path}", field=VARIANT_ENV)
    return CpuBackend(variant=chosen.name, variants=variants, features=_features(ggml), forced=bool(wanted))
