"""Capacity over time for a fleet (several logs, one per replica, or one long log): the peak request rate per
day (per hour when the logs span less than three days), its linear trend, and when that trend crosses what the
fleet sustains within the SLO."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Sequence

from .figure import LOGGED, MODEL, Figure

if TYPE_CHECKING:  # pragma: no cover
    from ..run import Run
    from .plan import ServerCapacity

#: Width of the buckets whose busiest one is a period's peak rate.
PEAK_BUCKET_S = 60.0


@dataclass
class Trend:
    """Peak rate per period, its trend, and the fleet's capacity against it."""

    period: str
    """``day`` or ``hour``."""
    points: list[tuple[datetime, float, int]] = field(default_factory=list)
    """(period start, peak arrivals/s in a 60-second bucket, requests in the period)."""
    slope_per_day: float | None = None
    """Growth of the peak rate, req/s per day (least squares over the periods)."""
    replicas: int = 0
    """Replicas of the fleet: the most server runs serving at the same time."""
    capacity: Figure | None = None
    """Requests/s the fleet sustains within the SLO (sum of each replica's)."""
    runs_out: datetime | None = None
    """When the trend of the peak reaches the capacity (None: not growing, or no capacity)."""
    figures: list[Figure] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"period": self.period, "points": [[t.isoformat(), r, n] for t, r, n in self.points],
                "slope_per_day": self.slope_per_day, "replicas": self.replicas,
                "capacity": self.capacity.to_dict() if self.capacity else None,
                "runs_out": self.runs_out.isoformat() if self.runs_out else None,
                "figures": {f.key: f.to_dict() for f in self.figures}}


def trend(run: Run, servers: Sequence[ServerCapacity]) -> Trend | None:
    """The trend over every journey of ``run`` (None with fewer than two periods of arrivals)."""
    ts = sorted(j.arrival_ts for j in run.journeys if j.arrival_ts is not None)
    if len(ts) < 2:
        return None
    span = (ts[-1] - ts[0]).total_seconds()
    period = "day" if span >= 3 * 86400 else "hour"
    width = 86400.0 if period == "day" else 3600.0
    groups: dict[datetime, list[datetime]] = {}
    for t in ts:
        key = t.replace(hour=0, minute=0, second=0, microsecond=0) if period == "day" else \
            t.replace(minute=0, second=0, microsecond=0)
        groups.setdefault(key, []).append(t)
    if len(groups) < 2:
        return None
    tr = Trend(period)
    for key in sorted(groups):
        xs = groups[key]
        counts: dict[int, int] = {}
        for t in xs:
            b = int((t - key).total_seconds() // PEAK_BUCKET_S)
            counts[b] = counts.get(b, 0) + 1
        tr.points.append((key, max(counts.values()) / PEAK_BUCKET_S, len(xs)))
    t0 = tr.points[0][0]
    xd = [(t - t0).total_seconds() / 86400.0 for t, _, _ in tr.points]
    ys = [r for _, r, _ in tr.points]
    mx, my = sum(xd) / len(xd), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xd)
    slope = sum((x - mx) * (y - my) for x, y in zip(xd, ys)) / sxx if sxx else 0.0
    icpt = my - slope * mx
    tr.slope_per_day = slope
    tr.figures.append(Figure("peak_rate_last", f"peak rate, last {period}", ys[-1], "req/s", LOGGED,
                             f"busiest {PEAK_BUCKET_S:g}-second bucket of arrivals on {tr.points[-1][0]:%Y-%m-%d %H:%M}"))
    tr.figures.append(Figure("peak_rate_trend", "trend of the peak rate", slope, "req/s per day", MODEL,
                             f"least squares over {len(ys)} {period}s",
                             ("the peak grows linearly, as it did over these periods",)))
    # the fleet: the most server runs serving at once (one per replica); each sustains its own SLO rate
    spans = [(sc.windows[0].start, sc.windows[-1].end, float(sc.replicas.per_replica.value)) for sc in servers
             if sc.windows and sc.windows[0].start and sc.windows[-1].end and sc.replicas.per_replica is not None
             and sc.replicas.per_replica.value]
    if spans:
        tr.replicas = max(sum(1 for b in spans if b[0] <= a[1] and a[0] <= b[1]) for a in spans)
        rates = sorted(r for _, _, r in spans)
        per = rates[len(rates) // 2]
        cap = per * tr.replicas
        tr.capacity = Figure("fleet_capacity", f"fleet capacity ({tr.replicas} replica{'s' if tr.replicas != 1 else ''})",
                             cap, "req/s", MODEL,
                             f"{tr.replicas} × {per:.2f} req/s (median of {len(rates)} server runs' SLO rate)",
                             ("replicas: the most server runs serving at the same time",
                              "the router spreads arrivals evenly"))
        tr.figures.append(tr.capacity)
        if slope > 0:
            days = (cap - icpt) / slope
            when = t0 + timedelta(days=days)
            tr.runs_out = when
            tr.figures.append(Figure("runs_out", "the peak reaches the fleet's capacity",
                                     when.strftime("%Y-%m-%d") if when > tr.points[-1][0] else "already",
                                     "", MODEL, f"trend {icpt:.2f} + {slope:.3f} req/s per day reaches {cap:.2f} req/s",
                                     ("the trend continues; the request mix and the replicas stay the same",)))
    return tr
