"""Build and install llama-cpp-python with llama.cpp's CPU backend in several instruction-set
variants, the best one the running CPU supports picked when a model loads (issue 57).

llama-cpp-python has no wheel for this platform, and its default source build compiles for the
build machine's CPU (``GGML_NATIVE``): a wheel built on one host can crash on another (it did, on a
host with AMX). llama.cpp can instead build its CPU backend as loadable modules, one per
instruction-set level (``GGML_BACKEND_DL`` + ``GGML_CPU_ALL_VARIANTS``), each reporting a score for
the CPU it runs on; ``harnessevolve.models.llama_variants`` loads the best at run time, so one build
uses AVX-512 and VNNI where the CPU has them and AVX2 (or less) where it does not.

Two changes to llama-cpp-python 0.3.36's source, made here on a downloaded copy:

* its CMakeLists installs only ``ggml-cpu``; the variant modules (``ggml-cpu-<name>``) are added;
* llama.cpp builds 14 x86 variants (about a minute and a half each on 2 cores); ``VARIANTS`` keeps
  the levels that change the kernels the models use (SSE4.2, AVX, AVX2, AVX-512, AVX-512 VBMI/VNNI,
  AVX-512 BF16, AVX-VNNI). A CPU between two kept levels loads the lower one. ``sapphirerapids``
  (AMX) is left out: AMX is the instruction set the native build crashed with.

Usage: ``python tools/build_llama_cpp.py PYTHON`` (``make install`` runs it): downloads the source
release from PyPI into ``.cache/llama-cpp-python/`` once, builds a wheel there (once: a wheel
already there is installed again, ``--force`` rebuilds) and installs it into PYTHON's environment.
``--variants none`` builds the single AVX2 backend of before instead (the
comparison build of ``benchmarks/perf/local_model_speed.py --side-by-side --build``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

VERSION = "0.3.36"
ROOT = Path(__file__).resolve().parent.parent
CACHE = ROOT / ".cache" / "llama-cpp-python"

VARIANTS = ("x64", "sse42", "sandybridge", "haswell", "skylakex", "icelake", "zen4", "alderlake")
"""The x86 variants built (llama.cpp's names; each a CPU backend module ``libggml-cpu-<name>.so``)."""

SINGLE_BUILD_ARGS = (
    "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
)
"""The build before variants: AVX2-era flags, one CPU backend linked in."""
VARIANT_BUILD_ARGS = "-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON"


def fetch_source(python: str) -> Path:
    """The unpacked source release (downloaded once)."""
    unpacked = CACHE / f"llama_cpp_python-{VERSION}"
    if (unpacked / "CMakeLists.txt").is_file():
        return unpacked
    CACHE.mkdir(parents=True, exist_ok=True)
    archive = CACHE / f"llama_cpp_python-{VERSION}.tar.gz"
    if not archive.is_file():
        subprocess.run(
            [
                python,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"llama-cpp-python=={VERSION}",
                "-d",
                str(CACHE),
            ],
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    return unpacked


def patch_source(source: Path, variants: tuple[str, ...]) -> None:
    """Install the variant modules with the package; build only ``variants`` (idempotent)."""
    cmake = source / "CMakeLists.txt"
    text = cmake.read_text()
    marker = "# harnessevolve: CPU backend variants"
    if marker not in text:
        anchor = "    llama_cpp_python_install_target(ggml-cpu)\n"
        if anchor not in text:
            sys.exit(f"build_llama_cpp: {cmake} has no line {anchor.strip()!r} (another version?)")
        names = " ".join(
            f"ggml-cpu-{v}"
            for v in VARIANTS
            + ("ivybridge", "piledriver", "cannonlake", "cascadelake", "cooperlake", "sapphirerapids")
        )
        block = (
            f"    {marker}\n    foreach(variant {names})\n"
            "        llama_cpp_python_install_target(${variant})\n    endforeach()\n"
        )
        cmake.write_text(text.replace(anchor, anchor + block))
    ggml = source / "vendor" / "llama.cpp" / "ggml" / "src" / "CMakeLists.txt"
    lines = ggml.read_text().splitlines(keepends=True)
    pattern = re.compile(r"^(\s*)(#\s*)?ggml_add_cpu_backend_variant\((\w+)(\s|\))")
    x86 = False
    for index, line in enumerate(lines):
        if 'GGML_SYSTEM_ARCH STREQUAL "x86"' in line:
            x86 = True
        elif x86 and "GGML_SYSTEM_ARCH STREQUAL" in line:
            x86 = False
        found = pattern.match(line)
        if x86 and found:
            indent, name = found.group(1), found.group(3)
            body = line[len(indent) :].lstrip("#").lstrip()
            lines[index] = f"{indent}{body}" if name in variants else f"{indent}# {body}"
    ggml.write_text("".join(lines))


def build(
    python: str, variants: bool, jobs: int, install: bool = True, force: bool = False
) -> tuple[Path, float]:
    """Build the wheel (and install it into ``python``'s environment): the wheel, the build's seconds
    (0 when a wheel built before in this checkout is reused; ``force`` builds again)."""
    out = CACHE / ("wheel-variants" if variants else "wheel-single")
    built = sorted(out.glob("llama_cpp_python-*.whl"))
    if built and not force:  # built before in this checkout: install that wheel
        if install:
            _install(python, built[-1])
        return built[-1], 0.0
    source = fetch_source(python)
    patch_source(source, VARIANTS)
    shutil.rmtree(out, ignore_errors=True)
    env = {
        **os.environ,
        "CMAKE_ARGS": VARIANT_BUILD_ARGS if variants else SINGLE_BUILD_ARGS,
        "CMAKE_BUILD_PARALLEL_LEVEL": str(jobs),
    }
    started = time.monotonic()
    subprocess.run(
        [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-cache-dir", "-w", str(out), str(source)],
        check=True,
        env=env,
    )
    seconds = time.monotonic() - started
    wheel = sorted(out.glob("llama_cpp_python-*.whl"))[-1]
    if install:
        _install(python, wheel)
    return wheel, seconds


def _install(python: str, wheel: Path) -> None:
    subprocess.run(
        [python, "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps", str(wheel)], check=True
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", help="the Python of the environment to install into")
    parser.add_argument("--variants", choices=("all", "none"), default="all")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--no-install", action="store_true", help="build the wheel only")
    parser.add_argument("--force", action="store_true", help="build again even if a wheel is there")
    args = parser.parse_args(argv)
    variants = args.variants == "all"
    wheel, seconds = build(args.python, variants, args.jobs, install=not args.no_install, force=args.force)
    what = f"CPU variants {', '.join(VARIANTS)}" if args.variants == "all" else "one AVX2 CPU backend"
    done = f"built in {seconds:.0f} s" if seconds else "built before, reused"
    print(f"llama-cpp-python {VERSION} ({what}) {done}: {wheel}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
