"""``harnessevolve gate``'s report: the verdicts of one candidate revision against a baseline, as
JSON (``gate --json``), JUnit XML (``--junit``) and a Markdown summary (``--markdown``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from xml.etree import ElementTree as ET

from harnessevolve.gate.verdict import GateVerdict
from harnessevolve.runs.files import GATE_REPORT_VERSION


@dataclass(frozen=True)
class GateReport:
    baseline: str
    candidate: str
    verdicts: tuple[GateVerdict, ...]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "version": GATE_REPORT_VERSION,
            "baseline": self.baseline,
            "candidate": self.candidate,
            "passed": self.passed,
            "verdicts": [v.to_dict() for v in self.verdicts],
            **self.extra,
        }


def _pct(level: Any) -> str:
    return f"{100 * float(level):g}%"


def _ci(values: Any, level: Any) -> str:
    if not values:
        return ""
    return f" ({_pct(level)} CI {values[0]:+.3f} to {values[1]:+.3f})"


def verdict_headline(verdict: GateVerdict) -> str:
    """The numbers behind a verdict in one line, confidence intervals included."""
    n = verdict.numbers
    if verdict.gate == "quality" and "prompt_chars" in n:
        tokens = ""
        if "prompt_tokens" in n:
            estimate = " (estimated)" if n.get("prompt_tokens_estimated") else ""
            tokens = f"{n['prompt_tokens']}{estimate}/{n.get('max_prompt_tokens', '?')} tokens; "
        return (
            f"prompt {n['prompt_chars']}/{n['max_prompt_chars']} chars; {tokens}"
            f"{n['new_examples']}/{n['max_new_examples']} new examples; {len(n['changed'])} file(s) changed"
        )
    if verdict.gate == "leakage" and "max_score" in n:
        worst = f" ({n['max_task']})" if n.get("max_task") else ""
        text = (
            f"max score {n['max_score']:.2f}{worst}, threshold {n['threshold']}; "
            f"{n['added_words']} words added"
        )
        if n.get("train_demonstrations"):
            text += f"; train demonstrations: {', '.join(n['train_demonstrations'])}"
        if "judge_score" in n:
            text += f"; judge {n['judge_model']}: {n['judge_score']:.2f}"
        return text
    if verdict.gate == "performance" and "gain" in n:
        text = (
            f"{n['current']:.3f} -> {n['candidate']:.3f}, gain {n['gain']:+.3f}"
            f"{_ci(n.get('gain_ci'), n['confidence'])}; "
            f"wins {n['wins']}, losses {n['losses']}, ties {n['ties']}"
        )
        if n["mode"] == "sequential":
            text += (
                f"; {n['pairs']} pairs ({n['rollouts']} rollouts), log LR {n['llr']:.2f} "
                f"(accept >= {n['accept_at']:.2f}, reject <= {n['reject_at']:.2f})"
            )
        else:
            text += f"; one-sided McNemar p = {n['p_value']:.3g}"
        if n.get("recent_drops"):
            text += f"; recent drops {n['recent_drops']} (max {n['max_recent_drop']})"
        return text
    if verdict.gate == "heldout" and "drop" in n:
        return (
            f"{n['split']} {n['current']:.3f} -> {n['candidate']:.3f}, drop {n['drop']:+.3f}"
            f"{_ci(n.get('drop_ci'), n.get('confidence', 0.95))}, max {n['max_drop']}; {n['tasks']} tasks"
        )
    if verdict.gate == "control" and "sc" in n:
        level = n.get("confidence", 0.95)
        matched = (
            f"matched to {n['matched_to']} run rollouts"
            if n.get("matched_to") is not None
            else "k NOT matched"
        )
        sc_ci = f" ({_pct(level)} CI {n['sc_ci'][0]:.3f} to {n['sc_ci'][1]:.3f})" if n.get("sc_ci") else ""
        return (
            f"candidate {n['candidate']:.3f} vs baseline best-of-{n['k']} (sc) {n['sc']:.3f}{sc_ci}, "
            f"gain {n['evolved_minus_sc']:+.3f}{_ci(n.get('evolved_minus_sc_ci'), level)}; "
            f"pass@{n['k']} oracle {n['oracle']:.3f}; {matched}; "
            + ("required" if n.get("required") else "not required")
        )
    return ", ".join(f"{k} {v}" for k, v in n.items() if not isinstance(v, list | dict))


def _number_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def junit_xml(report: GateReport) -> str:
    suite = ET.Element(
        "testsuite",
        name="harnessevolve-gate",
        tests=str(len(report.verdicts)),
        failures=str(sum(not v.passed for v in report.verdicts)),
    )
    for verdict in report.verdicts:
        case = ET.SubElement(suite, "testcase", classname="harnessevolve.gate", name=verdict.gate)
        properties = ET.SubElement(case, "properties")
        for key, value in verdict.numbers.items():
            ET.SubElement(properties, "property", name=key, value=_number_text(value))
        if not verdict.passed:
            failure = ET.SubElement(case, "failure", message=verdict.reason)
            failure.text = "\n".join(f"{k}: {_number_text(v)}" for k, v in verdict.numbers.items())
        out = ET.SubElement(case, "system-out")
        out.text = f"{verdict.reason}\n{verdict_headline(verdict)}"
    return ET.tostring(suite, encoding="unicode", xml_declaration=True) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_summary(report: GateReport) -> str:
    status = "passed" if report.passed else "FAILED"
    where = f" on `{report.extra['benchmark']}`" if "benchmark" in report.extra else ""
    lines = [
        f"### harnessevolve gate: {status}",
        "",
        f"Baseline `{report.baseline[:8]}` vs candidate `{report.candidate[:8]}`{where}",
        "",
        "| gate | verdict | reason | numbers |",
        "|---|---|---|---|",
    ]
    lines += [
        f"| {v.gate} | {'pass' if v.passed else 'FAIL'} | {_cell(v.reason)} | {_cell(verdict_headline(v))} |"
        for v in report.verdicts
    ]
    lines += ["", "<details><summary>All gate numbers</summary>", ""]
    for v in report.verdicts:
        lines.append(
            f"- **{v.gate}**: " + ", ".join(f"{k} `{_number_text(x)}`" for k, x in v.numbers.items())
        )
    lines += ["", "</details>"]
    return "\n".join(lines) + "\n"
