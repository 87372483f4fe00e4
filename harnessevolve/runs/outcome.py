"""What became of a generation's candidate, as one typed value: made once where the loop decides,
written in its two text forms (the commit's ``Verdict:`` trailer and ``committing.verdict``:
``accepted`` / ``rejected by <gate>``; a generation's row and ``generation_finished.outcome``:
``accepted``, ``accepted (tie)``, ``reverted by <gate>``, ``none of K kept``) and read back typed by
resume, the run summary, the report and the optimizer agent's history (``parse`` / ``from_verdict``).
"""

from __future__ import annotations

from dataclasses import dataclass

_ACCEPTED, _TIE, _REJECTED, _REVERTED = "accepted", "accepted (tie)", "rejected by ", "reverted by "


@dataclass(frozen=True)
class Outcome:
    """``accepted`` (``tie``: it gained nothing on its batch), or not kept: refused by ``gate``, or
    (``of`` > 1 candidates judged at once) none of them kept."""

    accepted: bool
    gate: str | None = None
    """The gate that refused it (None when accepted, or when K > 1 candidates all lost)."""
    tie: bool = False
    of: int = 1

    @classmethod
    def kept(cls, *, tie: bool = False, of: int = 1) -> Outcome:
        return cls(True, tie=tie, of=of)

    @classmethod
    def refused(cls, gate: str | None, *, of: int = 1) -> Outcome:
        return cls(False, gate=gate, of=of)

    def verdict(self) -> str:
        """The commit trailer's and ``committing.verdict``'s form: ``accepted`` / ``rejected by <gate>``."""
        return _ACCEPTED if self.accepted else f"{_REJECTED}{self.gate or 'a gate'}"

    def text(self) -> str:
        """A generation's row form (``generation_finished.outcome``, the run's table)."""
        if self.accepted:
            return _TIE if self.tie else _ACCEPTED
        if self.of > 1:
            return f"none of {self.of} kept"
        return f"{_REVERTED}{self.gate or 'a gate'}"

    @classmethod
    def from_verdict(cls, text: str) -> Outcome | None:
        """A ``Verdict:`` trailer read back; None for text that is neither form (not ours)."""
        if text == _ACCEPTED:
            return cls.kept()
        if text.startswith(_REJECTED) and text != _REJECTED:
            return cls.refused(text.removeprefix(_REJECTED))
        return None

    @classmethod
    def parse(cls, text: str) -> Outcome | None:
        """A row's outcome read back (``generation_finished.outcome``; a ``(recovered)`` mark is
        ignored); None for the outcomes of generations with no judged candidate ("proposer had
        nothing new", "no failures to learn from", ...)."""
        text = text.removesuffix(" (recovered)")
        if text in (_ACCEPTED, _TIE):
            return cls.kept(tie=text == _TIE)
        if text.startswith(_REVERTED) and text != _REVERTED:
            return cls.refused(text.removeprefix(_REVERTED))
        if text.startswith("none of ") and text.endswith(" kept"):
            count = text.removeprefix("none of ").removesuffix(" kept")
            if count.isdigit():
                return cls.refused(None, of=int(count))
        return cls.from_verdict(text)
