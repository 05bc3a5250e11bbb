"""Numbers for people, shared by the terminal report (``render``) and the HTML report (``export.html``)."""

from __future__ import annotations

from typing import Any


def fmt_seconds(v: Any, sep: str = "") -> str:
    """A duration in seconds: `–` when unknown, else `1,234s`, `12.34s`, `340ms` or `4.5ms` (`sep` before the unit)."""
    if v is None:
        return "–"
    v = float(v)
    if v == 0:
        return f"0{sep}s"
    if v >= 100:
        return f"{v:,.0f}{sep}s"
    if v >= 1:
        return f"{v:.2f}{sep}s"
    return f"{v * 1000:.0f}{sep}ms" if v >= 0.01 else f"{v * 1000:.1f}{sep}ms"


def fmt_number(v: Any, pct: bool = False, pct_digits: int = 0, sep: str = "") -> str:
    """`–` when unknown; a fraction as a percentage (`pct_digits` decimals, `sep` before `%`); else `1,234` / `1,234.5`."""
    if v is None:
        return "–"
    if pct:
        return f"{float(v) * 100:.{pct_digits}f}{sep}%"
    return f"{v:,.1f}" if isinstance(v, float) else f"{v:,}"
