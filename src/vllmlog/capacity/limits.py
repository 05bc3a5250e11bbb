"""Which limit binds, and when: per stats interval, then merged into windows with their evidence.

* ``max_num_seqs`` — Running pinned at the seat limit while requests wait;
* ``kv_cache`` — seats free but the cache full (≥ 90 %) while requests wait, or preemptions;
* ``compute`` — throughput near the engine's saturation (the fitted step-time model) while requests wait or
  every running request slows down as Running grows;
* ``headroom`` — requests run, none wait, and nothing is near its limit;
* ``idle`` — nothing runs; ``unknown`` — requests wait and no limit above is visible.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from ..state import Interval
    from .model import Throughput

LIMITS = ("max_num_seqs", "kv_cache", "compute", "unknown", "headroom", "idle")


@dataclass
class Window:
    """Consecutive stats intervals bound by the same limit."""

    limit: str
    start: datetime | None
    end: datetime | None
    intervals: int
    seconds: float
    first_line: int
    last_line: int
    running: tuple[int, int]
    waiting: tuple[int, int]
    kv: tuple[float, float] | None
    gen_tps: float
    """Mean generation throughput over the window."""
    evidence: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"limit": self.limit, "start": _iso(self.start), "end": _iso(self.end), "intervals": self.intervals,
                "seconds": self.seconds, "lines": [self.first_line, self.last_line],
                "running": list(self.running), "waiting": list(self.waiting),
                "kv_cache_usage": list(self.kv) if self.kv else None, "generation_tokens_per_s": self.gen_tps,
                "evidence": self.evidence}


def classify(x: Interval, seats: int | None, tp: Throughput | None) -> str:
    """The limit that binds in one interval."""
    if x.running <= 0 and x.waiting <= 0:
        # Running is the instant of the line; throughput says whether requests ran during the interval
        return "idle" if x.gen_tps <= 0 and x.prompt_tps <= 0 else "headroom"
    b = x.binding
    if b == "max_num_seqs" or (b is None and seats and x.running >= seats and x.waiting > 0):
        return "max_num_seqs"
    if b == "kv_cache":
        return "kv_cache"
    near = tp is not None and len(tp.batch_sizes) >= 2 and x.running > 1 and tp.near_saturation(x.running)
    if b == "unknown":
        return "compute" if near else "unknown"
    return "compute" if near else "headroom"


def windows(xs: Sequence[Interval], seats: int | None, tp: Throughput | None) -> list[Window]:
    """Merge intervals into windows of one limit."""
    out: list[Window] = []
    cur: list[Interval] = []
    lim = None
    for x in xs:
        k = classify(x, seats, tp)
        if cur and k != lim:
            out.append(_window(lim, cur, seats))  # type: ignore[arg-type]
            cur = []
        lim = k
        cur.append(x)
    if cur:
        out.append(_window(lim, cur, seats))  # type: ignore[arg-type]
    return out


def _window(limit: str, xs: list[Interval], seats: int | None) -> Window:
    r = [x.running for x in xs]
    w = [x.waiting for x in xs]
    kv = [x.kv for x in xs if x.kv is not None]
    secs = sum(x.dt_s for x in xs)
    gen = sum(x.gen_tps * x.dt_s for x in xs) / secs if secs else 0.0
    pre = sum(x.preemptions for x in xs)
    win = Window(limit, xs[0].ts, xs[-1].ts, len(xs), secs, xs[0].sample.line, xs[-1].sample.line,
                 (min(r), max(r)), (min(w), max(w)), (min(kv), max(kv)) if kv else None, gen)
    rr = f"Running {r[0]}" if min(r) == max(r) else f"Running {min(r)}–{max(r)}"
    ww = f"Waiting {w[0]}" if min(w) == max(w) else f"Waiting {min(w)}–{max(w)}"
    kk = (f"KV {kv[0]:.0%}" if min(kv) == max(kv) else f"KV {min(kv):.0%}–{max(kv):.0%}") if kv else ""
    if limit == "max_num_seqs":
        win.evidence = f"{rr} = --max-num-seqs {seats}, {ww}" + (f", {kk}" if kk else "")
    elif limit == "kv_cache":
        win.evidence = f"{kk} with {rr} < seats, {ww}" + (f", {pre} preemptions" if pre else "")
    elif limit == "compute":
        win.evidence = f"{rr}, {ww}, {gen:,.0f} generated tok/s: near the fitted saturation" + (
            " (nobody waits: the clients' concurrency sets Running, the device sets each request's speed)"
            if max(w) == 0 else "")
    elif limit == "headroom":
        win.evidence = f"{rr}, nobody waiting, {gen:,.0f} generated tok/s" + (f", {kk}" if kk else "")
    elif limit == "unknown":
        win.evidence = f"{rr}, {ww}" + (f", {kk}" if kk else "") + ": no seat, cache or compute limit visible"
    else:
        win.evidence = "nothing running"
    return win


def binding(ws: Sequence[Window]) -> str:
    """The limit of the run: the one that held longest while requests waited, else headroom / idle."""
    time: dict[str, float] = {}
    for w in ws:
        time[w.limit] = time.get(w.limit, 0.0) + w.seconds
    for group in (("max_num_seqs", "kv_cache", "compute", "unknown"), ("headroom",), ("idle",)):
        got = [(time[k], k) for k in group if k in time]
        if got:
            return max(got)[1]
    return "idle"


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts else None
