"""The external labelled set: failed runs made from a public benchmark's gold actions, read back.

``make_external_set.py`` writes it (from BFCL's multi-turn gold function calls, executed against
BFCL's own tool implementations); this module reads it. A file is gzipped JSON:

    {"version": 1, "source": ..., "seed": ..., "license": ..., "tools": {class: [definitions]},
     "references": {task_id: {"classes": [...], "placement": "v1.5" | "extra", "atif": {...}}},
     "items": [{"task_id", "kind", "cause", "step", "reference_step", "benign": [...], "run": {...}}]}

Tool definitions are stored once per tool class and put back into every trajectory on reading,
where the task's ``placement`` says (ATIF v1.5 ``agent.tool_definitions``, or
``agent.extra.tool_definitions`` in a v1.4 file), so each trajectory read here is a complete ATIF
document with its tool definitions. ``step`` and ``reference_step`` are ATIF step_ids (the
convention of ``harnessevolve/evaluate/alignment.py``); ``benign`` lists the harmless variations
made before the divergence (``reordered_keys``, ``number_form``, ``whitespace``, ``read_only_call``,
``narration``, ``retried_error``).
"""

from __future__ import annotations

import copy
import gzip
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from harnessevolve.core import atif  # noqa: E402
from harnessevolve.core.atif import Trajectory  # noqa: E402
from harnessevolve.core.signals import Cause  # noqa: E402

FORMAT_VERSION = 1
DIR = Path(__file__).resolve().parent / "external"
TUNE, HELD_OUT = DIR / "bfcl-tune.json.gz", DIR / "bfcl-heldout.json.gz"
NL2BASH = DIR / "nl2bash-heldout.json.gz"


@dataclass(frozen=True)
class ExternalItem:
    source: str
    task_id: str
    kind: str
    cause: Cause
    step: int | None
    reference_step: int | None
    benign: tuple[str, ...]
    run: Trajectory
    reference: Trajectory

    @property
    def noisy(self) -> bool:
        return bool(self.benign)


def with_tools(doc: dict[str, Any], definitions: list[dict[str, Any]], placement: str) -> dict[str, Any]:
    """The ATIF document with its tool definitions where ``placement`` says."""
    out = copy.deepcopy(doc)
    if placement == "v1.5":
        out["schema_version"] = "ATIF-v1.5"
        out["agent"]["tool_definitions"] = definitions
    else:
        out["schema_version"] = "ATIF-v1.4"
        out["agent"].setdefault("extra", {})["tool_definitions"] = definitions
    return out


def read_set(path: Path) -> list[ExternalItem]:
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        doc = json.load(handle)
    if doc.get("version") != FORMAT_VERSION:
        raise ValueError(f"{path}: version {doc.get('version')} is not {FORMAT_VERSION}")
    references: dict[str, tuple[Trajectory, list[dict[str, Any]], str]] = {}
    for task_id, ref in doc["references"].items():
        definitions = [d for c in ref["classes"] for d in doc["tools"][c]]
        references[task_id] = (
            atif.from_dict(with_tools(ref["atif"], definitions, ref["placement"]), file=f"{path}:{task_id}"),
            definitions,
            ref["placement"],
        )
    items = []
    for n, item in enumerate(doc["items"]):
        reference, definitions, placement = references[item["task_id"]]
        run = atif.from_dict(with_tools(item["run"], definitions, placement), file=f"{path}:items[{n}]")
        items.append(
            ExternalItem(
                source=doc["source"],
                task_id=item["task_id"],
                kind=item["kind"],
                cause=Cause(item["cause"]),
                step=item["step"],
                reference_step=item["reference_step"],
                benign=tuple(item["benign"]),
                run=run,
                reference=reference,
            )
        )
    return items


def export(items: list[ExternalItem], out: Path) -> None:
    """Each item as two plain ATIF files (``<n>-run.json``, ``<n>-ref.json``) plus ``labels.json``."""
    out.mkdir(parents=True, exist_ok=True)
    labels = []
    for n, item in enumerate(items):
        atif.save(item.run, out / f"{n:04d}-run.json")
        atif.save(item.reference, out / f"{n:04d}-ref.json")
        labels.append(
            {
                "n": n,
                "task_id": item.task_id,
                "kind": item.kind,
                "cause": item.cause.value,
                "step": item.step,
                "reference_step": item.reference_step,
                "benign": list(item.benign),
            }
        )
    (out / "labels.json").write_text(json.dumps(labels, indent=1))


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(
        description="Write labelled runs of the external set as plain ATIF files."
    )
    parser.add_argument("--export", type=Path, default=None, metavar="DIR", help="folder to write into")
    parser.add_argument("--set", choices=("tune", "heldout"), default="tune")
    parser.add_argument("--kind", default=None, help="only this perturbation kind (drop, loop, ...)")
    parser.add_argument("--limit", type=int, default=None, help="at most this many runs")
    parser.add_argument("--smoke", action="store_true", help="export 3 runs into a temporary folder")
    args = parser.parse_args()
    if args.smoke:
        import tempfile

        with tempfile.TemporaryDirectory(prefix="he-external-set-") as tmp:
            args.export, args.limit = Path(tmp), 3
            return _export(args)
    if args.export is None:
        parser.error("--export DIR is required")
    return _export(args)


def _export(args: Any) -> int:
    items = read_set(TUNE if args.set == "tune" else HELD_OUT)
    items = [i for i in items if args.kind is None or i.kind == args.kind][: args.limit]
    export(items, args.export)
    print(f"{len(items)} runs (NNNN-run.json, NNNN-ref.json) and labels.json in {args.export}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
