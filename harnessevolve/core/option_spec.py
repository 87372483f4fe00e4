"""One declaration per option: a configuration field says how the command line spells it, what its
``--help`` says and which values it takes; the CLI builds its options from these declarations and
the configuration loader enforces the same bounds, so a value refused on the command line is refused
in a recorded or hand-written configuration too.

A field declares itself with ``field(default=..., metadata=option("help", ...))``; ``declared``
reads the declaration back, ``check_value`` enforces it.
"""

from __future__ import annotations

import math
from dataclasses import Field, dataclass
from typing import Any

from harnessevolve.core.errors import HarnessEvolveError

OPTION_KEY = "harnessevolve.option"


class OptionValueError(HarnessEvolveError):
    """A configuration value outside what its option takes (exit 2)."""


@dataclass(frozen=True)
class Option:
    """How one configuration field is given on the command line, and the values it takes."""

    help: str
    """The ``--help`` text (what a user reads)."""
    flags: tuple[str, ...] = ()
    """The option's spellings, e.g. ``("--candidates", "-k")``; empty: ``--<field-name>``, and for a
    boolean ``--<name>/--no-<name>``. A boolean given one spelling is a flag that only turns it on."""
    min: float | None = None
    """Smallest value taken (numbers; inclusive)."""
    max: float | None = None
    """Largest value taken (numbers; inclusive). Every count a user can raise has one, so a typo of
    ``--control-k 100000`` is refused rather than run."""
    cli_name: str | None = None
    """The command's parameter name when it is not the field's (``proposer`` for ``proposers``)."""

    def flag(self, name: str) -> str:
        """The option's main spelling (what an error names)."""
        return self.flags[0] if self.flags else "--" + name.replace("_", "-")


def option(
    help: str,
    *flags: str,
    min: float | None = None,
    max: float | None = None,
    cli_name: str | None = None,
) -> dict[str, Option]:
    """``field(metadata=option(...))``: the field's command-line declaration."""
    return {OPTION_KEY: Option(help, tuple(flags), min, max, cli_name)}


def declared(f: Field[Any]) -> Option | None:
    """The declaration of a dataclass field, if it has one."""
    found = f.metadata.get(OPTION_KEY)
    return found if isinstance(found, Option) else None


def check_value(name: str, value: Any, spec: Option, *, where: str = "") -> None:
    """Refuse ``value`` when its option does not take it (a bool where a number belongs, NaN, out of
    bounds). ``where`` names the file or source for the message (empty: the command line)."""
    if value is None or (spec.min is None and spec.max is None):
        return
    flag = spec.flag(name)
    place = f"{where}: " if where else ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise OptionValueError(
            f"{place}{name} must be a number, not {type(value).__name__}", field=flag, hint=_range(spec)
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise OptionValueError(f"{place}{name} is not a finite number", field=flag, hint=_range(spec))
    if (spec.min is not None and value < spec.min) or (spec.max is not None and value > spec.max):
        raise OptionValueError(f"{place}{name} {value:g} is out of range", field=flag, hint=_range(spec))


def _range(spec: Option) -> str:
    low = "" if spec.min is None else f"{spec.min:g}"
    high = "" if spec.max is None else f"{spec.max:g}"
    if low and high:
        return f"give a value from {low} to {high}"
    return f"give a value of at least {low}" if low else f"give a value of at most {high}"
