"""Load distributions from vLLM's ``/metrics`` histograms (``--prometheus``): request prompt and generation
lengths (``vllm:request_prompt_tokens``, ``vllm:request_generation_tokens``) and time in the queue
(``vllm:request_queue_time_seconds``) and end-to-end latency (``vllm:e2e_request_latency_seconds``) over one
server run's window — the increase of each histogram between the
snapshot at (or just before) the run's start and the last one within it.

Means are exact (``_sum`` ÷ ``_count`` increases: ``logged``); quantiles interpolate within buckets as
Prometheus's ``histogram_quantile`` does (``estimated``)."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from ..prommetrics.exposition import Snapshot
    from ..run import Run
    from ..state import ServiceState

#: role → what it measures (the catalog's roles; the names differ between releases).
ROLES = {"request_prompt_tokens": "prompt length", "request_generation_tokens": "output length",
         "queue_time": "time in the queue", "e2e": "end-to-end latency"}
PAD_S = 30.0
"""Seconds of /metrics history taken before a server run's first and after its last log line."""


@dataclass(frozen=True)
class Histo:
    """One histogram's increase over a window."""

    role: str
    name: str
    """The metric family (``vllm:request_prompt_tokens`` …)."""
    count: float
    mean: float | None
    p50: float | None
    p95: float | None
    target: str
    start: float
    """Epoch of the snapshot the increase starts from."""
    end: float

    @property
    def source(self) -> str:
        t0 = datetime.fromtimestamp(self.start, tz=timezone.utc)
        t1 = datetime.fromtimestamp(self.end, tz=timezone.utc)
        return (f"{self.name} on {self.target}: increase {t0:%H:%M:%S}–{t1:%H:%M:%S} UTC over {self.count:,.0f} "
                "requests")


def distributions(snaps: Sequence[Snapshot], target: str = "", start: float | None = None,
                  end: float | None = None) -> dict[str, Histo]:
    """The histograms' increase from the last snapshot at or before ``start`` (else the first after it) to the last
    at or before ``end`` (epochs; None: the whole history)."""
    from ..prommetrics.rates import bucket_deltas, counter_increase, histogram_quantile
    from ..prommetrics.report import resolve

    xs = sorted(snaps, key=lambda s: s.time)
    if start is not None:
        before = [s for s in xs if s.time <= start]
        xs = ([before[-1]] if before else []) + [s for s in xs if s.time > start]
    if end is not None:
        xs = [s for s in xs if s.time <= end]
    if len(xs) < 2:
        return {}
    a, b = xs[0], xs[-1]
    out: dict[str, Histo] = {}
    for role in ROLES:
        name = resolve(b, role)
        if name is None:
            continue
        n = counter_increase(a, b, name + "_count")
        if not n:
            continue
        total = counter_increase(a, b, name + "_sum")
        buckets = bucket_deltas(a, b, name)
        out[role] = Histo(role, name, n, total / n if total is not None else None,
                          histogram_quantile(0.5, buckets), histogram_quantile(0.95, buckets), target, a.time, b.time)
    return out


def _epoch(ts: datetime | None) -> float | None:
    """Log times are naive local time, taken as UTC (the usual container clock), as ``prommetrics.merge`` does."""
    if ts is None:
        return None
    return ts.timestamp() if ts.tzinfo is not None else float(calendar.timegm(ts.timetuple())) + ts.microsecond / 1e6


def for_state(run: Run | None, st: ServiceState) -> dict[str, Histo]:
    """The /metrics histograms over one server run: its own target for a ``prometheus:<target>`` pseudo run, else
    the target whose history overlaps the run's time window (of several, the one whose request count is nearest
    the run's journeys)."""
    hist: dict[str, list[Any]] = getattr(run, "prometheus", None) or {}
    if not hist:
        return {}
    if st.file.startswith("prometheus:"):
        target = st.file.split(":", 1)[1]
        return distributions(hist.get(target, ()), target) if target in hist else {}
    t0, t1 = _epoch(st.lifecycle.start_ts), _epoch(st.lifecycle.end_ts)
    if t0 is None or t1 is None:
        return {}
    best: tuple[float, dict[str, Histo]] | None = None
    for target, snaps in hist.items():
        d = distributions(snaps, target, t0 - PAD_S, t1 + PAD_S)
        if not d:
            continue
        n = next(iter(d.values())).count
        score = abs(n - len(st.view.journeys))
        if best is None or score < best[0]:
            best = (score, d)
    return best[1] if best is not None else {}
