"""Capacity per replica of a fleet (``vllmlog capacity DIR``, one log or several rotated pieces per replica): each
replica's throughput within the SLO, what it carried, and which limit bound it — the rows the fleet's trend and
run-out date (``trend``) sum up."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from .plan import ServerCapacity


@dataclass
class ReplicaCapacity:
    """One replica's capacity over its server runs."""

    name: str
    files: list[str]
    server_runs: int
    binding: str
    """The limit that bound its longest-serving run (``limits.LIMITS``)."""
    slo_rate: float | None
    """Requests/s it sustains within the SLO (the median over its server runs; model)."""
    saturation_rate: float | None
    """Requests/s at its operating point with the queue never empty (model)."""
    peak_rate: float | None
    """Its busiest bucket of arrivals (logged)."""
    mean_rate: float | None
    requests: int
    seats: int | None

    @property
    def load_share(self) -> float | None:
        """Peak arrivals ÷ the rate it sustains within the SLO (> 1: it was pushed past the SLO)."""
        return self.peak_rate / self.slo_rate if self.peak_rate is not None and self.slo_rate else None

    def to_dict(self) -> dict[str, Any]:
        return {"replica": self.name, "files": list(self.files), "server_runs": self.server_runs,
                "binding": self.binding, "slo_rate": self.slo_rate, "saturation_rate": self.saturation_rate,
                "peak_rate": self.peak_rate, "mean_rate": self.mean_rate, "requests": self.requests,
                "max_num_seqs": self.seats, "load_share": self.load_share}


def _median(xs: list[float]) -> float | None:
    xs = sorted(xs)
    if not xs:
        return None
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _fig(sc: ServerCapacity, key: str) -> float | None:
    f = sc.load.get(key)
    return float(f.value) if f is not None and isinstance(f.value, (int, float)) else None


def replicas(servers: Sequence[ServerCapacity], names: Mapping[str, str] | None = None) -> list[ReplicaCapacity]:
    """One row per replica (``names``: file → replica name, as ``fleet.inputs.discover`` names them; else the file
    name), sorted by name."""
    by: dict[str, list[ServerCapacity]] = {}
    files: dict[str, list[str]] = {}
    for sc in servers:
        if sc.file.startswith("prometheus:"):
            continue
        name = (names or {}).get(sc.file) or os.path.basename(sc.file)
        by.setdefault(name, []).append(sc)
        if sc.file not in files.setdefault(name, []):
            files[name].append(sc.file)
    out = []
    for name in sorted(by):
        scs = by[name]
        longest = max(scs, key=lambda s: sum(w.seconds for w in s.windows))
        slo = [float(s.replicas.per_replica.value) for s in scs if s.replicas.per_replica is not None
               and s.replicas.per_replica.value]
        sat = [float(s.replicas.saturation.value) for s in scs if s.replicas.saturation is not None
               and s.replicas.saturation.value]
        peaks = [v for v in (_fig(s, "rate_peak") for s in scs) if v is not None]
        means = [v for v in (_fig(s, "rate_mean") for s in scs) if v is not None]
        out.append(ReplicaCapacity(name, files[name], len(scs), longest.binding, _median(slo), _median(sat),
                                   max(peaks) if peaks else None, _median(means), sum(s.load.requests for s in scs),
                                   longest.facts.seats))
    return out
