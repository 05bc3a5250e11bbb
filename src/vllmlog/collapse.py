"""Collapse repeated timeline entries into one row with a count, for every renderer of the timeline.

The timeline (``vllmlog.timeline``) already folds bursts of a few request kinds; what remains can
still repeat: twenty ``block allocation failed`` errors, a warning printed every stats interval.
``collapse_repeats`` keeps the first entry of each run of look-alikes (same kind, severity, file
and message template, the next one within ``window_s`` of the previous) and records how many it
stands for and until when, so a renderer prints ``… ×32 (until 10:01:30)``. Metric turning points
fold only when their text is identical (their numbers are the point).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Sequence

from .parsing.templates import template

#: Entry kinds never merged (each finding and lifecycle step is its own moment).
KEEP_KINDS = frozenset({"finding", "lifecycle"})


def as_datetime(v: Any) -> datetime | None:
    """A datetime, or an ISO string of one (a timeline or finding dict's ``ts``), as a datetime; None if neither."""
    if v is None or isinstance(v, datetime):
        return v
    try:
        return datetime.fromisoformat(str(v))
    except ValueError:
        return None


def collapse_repeats(entries: Sequence[dict[str, Any]], window_s: float = 60.0) -> list[dict[str, Any]]:
    """Entries (timeline dicts, chronological) with look-alike repeats folded into their first one.

    A folded entry is a copy with ``count`` (the sum of the folded counts), ``repeats`` (how many
    entries it stands for) and ``last_ts`` (ISO time of the last one). Order is kept."""
    out: list[dict[str, Any]] = []
    open_: dict[tuple[Any, ...], tuple[dict[str, Any], datetime | None]] = {}
    for e in entries:
        kind = e.get("kind")
        if kind in KEEP_KINDS:
            out.append(e)
            continue
        text = str(e.get("text") or "")
        # a metric turning point differs from the next by its numbers (82 % → 95 %): only exact repeats fold
        key = (kind, e.get("severity"), e.get("file"), text if kind == "metric" else template(text))
        ts = as_datetime(e.get("ts"))
        cur = open_.get(key)
        if cur is not None:
            first, last = cur
            near = ts is None or last is None or (ts - last).total_seconds() <= window_s
            if near:
                first["count"] = int(first.get("count") or 1) + int(e.get("count") or 1)
                first["repeats"] += 1
                if ts is not None:
                    first["last_ts"] = ts.isoformat()
                open_[key] = (first, ts or last)
                continue
        row = dict(e)
        row["count"] = int(e.get("count") or 1)
        row["repeats"] = 1
        row["last_ts"] = None
        open_[key] = (row, ts)
        out.append(row)
    return out
