"""The GEPA arm of vs_gepa.py and efficacy.py: the package's gepa cell (``harnessevolve compare``'s
``kind: gepa`` arm, ``harnessevolve/compare/gepa_cell.py``), re-exported under the names these
scripts use."""

from __future__ import annotations

from harnessevolve.compare.gepa_cell import (
    HarnessGEPAAdapter,
    LiteLLMReflector,
    QuietLogger,
    feedback,
    harness_components,
    render_actions,
    run_gepa,
    split_front_matter,
    write_components,
)

__all__ = [
    "HarnessGEPAAdapter",
    "LiteLLMReflector",
    "QuietLogger",
    "feedback",
    "harness_components",
    "render_actions",
    "run_gepa",
    "split_front_matter",
    "write_components",
]
