"""``report --final``'s tables: seed, evolved and the matched-budget control on the test split,
held-out variants, and machine failures counted apart."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from harnessevolve.cli.ui import console
from harnessevolve.report.final_text import beats_line
from harnessevolve.report.final_text import interval_text as ci_text


def control_label(control: dict[str, Any]) -> str:
    if control.get("matched_to") is not None:
        k, tasks, spent = control["k"], control["tasks"], control["matched_to"]
        return f"matched: k={k} x {tasks} tasks ~ the run's {spent} rollouts"
    return f"k={control['k']} given by --control-k: NOT matched to the run's rollouts"


def print_final(doc: dict[str, Any]) -> None:
    control = doc.get("control")
    table = Table(
        "harness",
        "revision",
        "test score",
        "95% CI",
        "what it is",
        title=f"test split ({doc['tasks']} tasks)",
    )
    intervals = doc.get("intervals") or {}
    for name, what in (("seed", "the harness the run started from"), ("evolved", "the run's final harness")):
        table.add_row(
            name, doc["revisions"][name][:8], f"{doc['scores'][name]:.3f}", ci_text(intervals.get(name)), what
        )
    if control:
        k = control["k"]
        table.add_row(
            f"control: seed best-of-{k} (sc)",
            doc["revisions"]["seed"][:8],
            f"{control['sc']:.3f}",
            ci_text(control.get("sc_ci")),
            f"self-consistency pick, no checker; {control_label(control)}",
        )
        table.add_row(
            f"control: seed pass@{k} (oracle)",
            doc["revisions"]["seed"][:8],
            f"{control['oracle']:.3f}",
            ci_text(control.get("oracle_ci")),
            "ORACLE: any of k samples passes (picks with the checker; not deployable)",
        )
    console.print(table)
    gain = doc["scores"]["evolved"] - doc["scores"]["seed"]
    console.print(f"test-split gain (evolved - seed): {gain * 100:+.1f} points")
    if control:
        console.print(beats_line(control), markup=False)
        console.print(
            f"control cost: {control['new_rollouts']} new rollouts for {control['samples']} samples "
            f"(the seed's own test rollouts and cached ones reused; temperature {control['temperature']:g})",
            markup=False,
        )
    variants = doc.get("variants")
    if variants:
        if variants.get("variants"):
            vt = Table(
                "harness",
                "original",
                "variant",
                "drop",
                title=f"held-out variants ({variants['variants']} of {variants['parents']} test tasks)",
            )
            for name in ("seed", "evolved"):
                row = variants.get(name)
                if row:
                    vt.add_row(name, f"{row['original']:.3f}", f"{row['variant']:.3f}", f"{row['drop']:+.3f}")
            console.print(vt)
        else:
            console.print("held-out variants: no maker applies to these test tasks", markup=False)
        for parent, why in sorted((variants.get("skipped") or {}).items())[:5]:
            console.print(f"  no variant of {parent}: {why}", markup=False)
    infra = doc.get("infra")
    if infra:
        console.print(
            f"infra failures in this scoring (the machine, not the agent): {infra['failures']} of "
            f"{infra['rollouts']} rollouts {infra['reasons']}, scored 0; {infra['retried']} retried once",
            style="yellow",
            markup=False,
        )
