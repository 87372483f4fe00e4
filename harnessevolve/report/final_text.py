"""How ``report --final``'s numbers read, in the terminal (``cli/final_view.py``) and the HTML report
alike: a confidence interval, and the evolved harness against the matched-budget control."""

from __future__ import annotations

from typing import Any


def interval_text(ci: Any) -> str:
    """A confidence interval as ``0.250 - 0.750``; ``-`` when none was recorded."""
    return f"{ci[0]:.3f} - {ci[1]:.3f}" if ci else "-"


def beats_line(control: dict[str, Any]) -> str:
    """``evolved - control (sc): +12.5 points (95% CI +2.0 to +31.2): beats the control``; one verdict:
    it beats the control when the gain is above 0 and so is its interval's lower end, it is ahead
    within noise when only the gain is, and it does not beat the control otherwise."""
    gain, ci = control["evolved_minus_sc"], control.get("evolved_minus_sc_ci")
    verdict = "beats the control" if gain > 0 else "does NOT beat the control"
    where = f" ({100 * control['confidence']:g}% CI {ci[0] * 100:+.1f} to {ci[1] * 100:+.1f})" if ci else ""
    if gain > 0 and ci and ci[0] <= 0:
        verdict = "not shown to beat the control (ahead, but the interval reaches 0: within noise)"
    return f"evolved - control (sc): {gain * 100:+.1f} points{where}: {verdict}"
