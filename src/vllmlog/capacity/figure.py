"""One number of the capacity plan, with where it came from and what it assumes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Where a figure came from, from most to least direct.
LOGGED = "logged"
"""A line of the log (or a trace span, a client record, a /metrics sample) states it."""
DERIVED = "derived"
"""Computed exactly from logged values (blocks × block size, usage × capacity ÷ Running)."""
ESTIMATED = "estimated"
"""Approximated from logged values (stats throughput integrated over intervals, 1-second timestamps)."""
MODEL = "model"
"""A prediction: a model of vLLM's scheduler over the observed numbers, with its assumptions stated."""
DEFAULT = "default"
"""vLLM's default for a value the log does not state."""
BASES = (LOGGED, DERIVED, ESTIMATED, MODEL, DEFAULT)


@dataclass(frozen=True)
class Figure:
    """A value with its unit, its basis (``logged``/``derived``/``estimated``/``model``/``default``), the
    evidence or formula it comes from, and the assumptions it rests on."""

    key: str
    """Stable name (JSON key)."""
    label: str
    """What it is, in words."""
    value: Any
    unit: str = ""
    basis: str = LOGGED
    source: str = ""
    """The line, the series or the formula behind it."""
    assumptions: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        out: dict[str, Any] = {"value": self.value, "unit": self.unit, "basis": self.basis, "source": self.source}
        if self.assumptions:
            out["assumptions"] = list(self.assumptions)
        return out

    def text(self) -> str:
        """The value with its unit, in the terminal's words."""
        return fmt_value(self.value, self.unit)


def fmt_value(v: Any, unit: str = "") -> str:
    """``524,288 tokens``, ``0.30 req/s``, ``3.2 s``, ``45 %``."""
    if v is None:
        return "unknown"
    if isinstance(v, bool):
        s = "yes" if v else "no"
    elif isinstance(v, int):
        s = f"{v:,}"
    elif isinstance(v, float):
        if unit == "%":
            return f"{v * 100:.1f} %"
        a = abs(v)
        if a >= 1000:
            s = f"{v:,.0f}"
        elif a >= 100:
            s = f"{v:.0f}"
        elif a >= 10:
            s = f"{v:.1f}"
        else:
            s = f"{v:.2f}"
    else:
        s = str(v)
    return f"{s} {unit}".rstrip() if unit else s
