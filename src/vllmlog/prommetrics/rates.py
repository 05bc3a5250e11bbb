"""Counter rates and histogram quantiles between two snapshots, Prometheus-style."""

from __future__ import annotations

import math
from collections import defaultdict

from .exposition import Snapshot, label_key


def _sum_by_series(snap: Snapshot, name: str, match: dict[str, str] | None = None) -> dict[tuple, float]:
    """name's samples keyed by their label set, filtered by `match` labels."""
    out: dict[tuple, float] = {}
    for s in snap.series(name):
        if match and any(s.labels.get(k) != v for k, v in match.items()):
            continue
        out[label_key(s.labels)] = s.value
    return out


def counter_increase(a: Snapshot, b: Snapshot, name: str, match: dict[str, str] | None = None) -> float | None:
    """Increase of a counter summed over its series from a to b, handling resets; None when absent."""
    va, vb = _sum_by_series(a, name, match), _sum_by_series(b, name, match)
    if not vb:
        return None
    total = 0.0
    for key, v in vb.items():
        before = va.get(key, 0.0)
        total += v if v < before else v - before  # a drop means the process restarted
    return total


def counter_reset(a: Snapshot, b: Snapshot, name: str) -> bool:
    """True when any series of `name` went down from a to b (process restart)."""
    va, vb = _sum_by_series(a, name), _sum_by_series(b, name)
    return any(vb[k] < va[k] for k in vb.keys() & va.keys())


def gauge_values(snap: Snapshot, name: str) -> list[float]:
    """All values of a gauge in one snapshot (one per engine/model series)."""
    return [s.value for s in snap.series(name)]


def bucket_deltas(a: Snapshot | None, b: Snapshot, family: str) -> list[tuple[float, float]]:
    """Cumulative (le, count) pairs of a histogram's increase from a to b, summed over series."""
    acc: dict[float, float] = defaultdict(float)
    before: dict[tuple, float] = {}
    if a is not None:
        for s in a.series(family + "_bucket"):
            before[label_key(s.labels)] = s.value
    reset = a is not None and counter_reset(a, b, family + "_count")
    for s in b.series(family + "_bucket"):
        le = s.labels.get("le")
        if le is None:
            continue
        bound = math.inf if le in ("+Inf", "Inf", "inf") else float(le)
        prev = 0.0 if reset else before.get(label_key(s.labels), 0.0)
        acc[bound] += max(s.value - prev, 0.0)
    return sorted(acc.items())


def histogram_quantile(q: float, buckets: list[tuple[float, float]]) -> float | None:
    """Prometheus's histogram_quantile over cumulative (le, count) buckets; None without observations."""
    if not buckets or buckets[-1][0] != math.inf:
        return None
    total = buckets[-1][1]
    if total <= 0:
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for i, (bound, count) in enumerate(buckets):
        if count >= rank:
            if bound == math.inf:
                return buckets[i - 1][0] if i > 0 else None  # highest finite bound, as Prometheus does
            if i == 0 and bound <= 0:
                return bound
            width = count - prev_count
            frac = 0.0 if width <= 0 else (rank - prev_count) / width
            return prev_bound + (bound - prev_bound) * frac
        prev_bound, prev_count = bound, count
    return None


def histogram_mean(a: Snapshot | None, b: Snapshot, family: str) -> float | None:
    """Mean observation from _sum/_count increases; None without observations."""
    if a is None:
        s, c = _total(b, family + "_sum"), _total(b, family + "_count")
    else:
        s, c = counter_increase(a, b, family + "_sum"), counter_increase(a, b, family + "_count")
    if s is None or not c:
        return None
    return s / c


def _total(snap: Snapshot, name: str) -> float | None:
    vals = [s.value for s in snap.series(name)]
    return sum(vals) if vals else None
