"""A replica against its peers: outliers (far from the fleet's median) and router imbalance (skewed load).

Outliers use a robust score — distance from the peers' median in units of the median absolute deviation
(MAD × 1.4826 ≈ σ for normal data) — and a material difference, so identical healthy replicas (MAD 0) are
never flagged for a rounding difference: a replica is an outlier on a metric when its score is ≥ ``Z`` *and* it
is worse than the median by at least the metric's ``min_abs`` (and, for latencies, ``min_ratio`` × the median).
Only the bad direction counts (a faster replica is not a problem; for decode speed, slower is worse). Latencies are compared only between
replicas whose distributions have the same basis (measured with measured).

Imbalance compares requests per replica over the time all replicas were up (the grid buckets inside every
replica's time range), falling back to each replica's whole arrival rate when they never overlapped.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from ..numbers import percentile

Z = 3.5
#: metric → (row key, basis key or None, min_abs, min_ratio, what it means); a worse value is higher, except in LOW
METRICS: dict[str, tuple[str, str | None, float, float, str]] = {
    "decode_speed": ("decode_tok_s_per_seq", None, 2.0, 2.0, "generation tokens/s per running request"),
    "ttft_p50": ("ttft_p50_s", "ttft_basis", 0.05, 2.0, "median time to first token"),
    "ttft_p99": ("ttft_p99_s", "ttft_basis", 0.1, 2.0, "p99 time to first token"),
    "e2e_p50": ("e2e_p50_s", "e2e_basis", 0.1, 2.0, "median end-to-end latency"),
    "tpot_p50": ("tpot_p50_s", "tpot_basis", 0.005, 1.5, "median time per output token (decode speed)"),
    "error_rate": ("error_rate", None, 0.05, 0.0, "failed ÷ finished requests"),
    "abort_rate": ("abort_rate", None, 0.10, 0.0, "aborted ÷ finished requests"),
    "kv_mean": ("kv_mean", None, 0.25, 0.0, "mean KV-cache usage"),
}
#: Metrics where lower is worse.
LOW = frozenset({"decode_speed"})
#: Imbalance: a replica is hot / cold when its requests are ≥ HOT × / ≤ COLD × the peers' median.
HOT, COLD = 1.5, 0.5
#: …and only when the median replica saw at least this many requests in the common window.
MIN_REQUESTS = 20


def _median(xs: Sequence[float]) -> float:
    return float(percentile(sorted(xs), 50))  # type: ignore[arg-type]


def outliers(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Replicas far worse than their peers on one metric, worst score first."""
    out: list[dict[str, Any]] = []
    live = [r for r in rows if r["status"] != "error"]
    for metric, (key, bkey, min_abs, min_ratio, what) in METRICS.items():
        groups: dict[Any, list[dict[str, Any]]] = {}
        for r in live:
            if r.get(key) is None:
                continue
            groups.setdefault(r.get(bkey) if bkey else None, []).append(r)
        for basis, grp in groups.items():
            if len(grp) < 3:
                continue
            low = metric in LOW
            if low:  # a speed: compared as ratios (log scale), so a bimodal fleet's spread does not hide a 5× drop
                grp = [r for r in grp if r[key] > 0]
                if len(grp) < 3:
                    continue
            xs = [float(r[key]) for r in grp]
            med = _median(xs)
            if low:
                ls = [math.log(x) for x in xs]
                lmed = _median(ls)
                lscale = max(1.4826 * _median([abs(v - lmed) for v in ls]), math.log(min_ratio) / 2)
            else:
                scale = max(1.4826 * _median([abs(x - med) for x in xs]), min_abs / 2)
            for r, x in zip(grp, xs):
                worse = (med - x) if low else (x - med)
                z = (lmed - math.log(x)) / lscale if low else worse / scale
                if z < Z or worse < min_abs:
                    continue
                if min_ratio and med > 0 and (x * min_ratio > med if low else x < min_ratio * med):
                    continue
                peers = [y for rr, y in zip(grp, xs) if rr is not r]
                out.append({"replica": r["replica"], "metric": metric, "what": what, "value": x,
                            "peer_median": _median(peers), "fleet_median": med, "score": round(z, 2),
                            "basis": basis, "peers": len(grp) - 1})
    out.sort(key=lambda o: (-o["score"], o["replica"], o["metric"]))
    return out


def _common_window(ok: Sequence[dict[str, Any]]) -> tuple[float, float] | None:
    starts = [r["time_range"]["start_s"] for r in ok if r["time_range"].get("start_s") is not None]
    ends = [r["time_range"]["end_s"] for r in ok if r["time_range"].get("end_s") is not None]
    if len(starts) != len(ok) or len(ends) != len(ok):
        return None
    lo, hi = max(starts), min(ends)
    return (lo, hi) if hi > lo else None


def imbalance(ok: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]],
              incidents: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """Requests per replica over the common window; hot/cold replicas; max/median and coefficient of variation.

    The members of a fleet-wide load incident (``incidents``: a surge queueing, slowing, aborting on many
    replicas) are left out of the comparison (``explained``): their traffic is the incident's, and counted among
    the peers they would raise the median until the router's ordinary replicas look cold and a skewed one normal."""
    from .fleetwide import LOAD_KINDS

    explained = {m["replica"]: f["id"] for f in incidents if f.get("kind") in LOAD_KINDS for m in f["replicas"]}
    if explained and len(ok) - len(explained) >= 3:
        rest = [r for r in ok if r["replica"] not in explained]
        out = imbalance(rest, rows)
        out["explained"] = {k: f"{v}: its traffic is the fleet-wide load incident's" for k, v in sorted(explained.items())}
        out["replicas"] = len(ok)
        return out
    out: dict[str, Any] = {"replicas": len(ok), "skewed": False, "hot": [], "cold": [], "per_replica": {}}
    if len(ok) < 2:
        out["basis"] = "fewer than 2 replicas"
        return out
    win = _common_window(ok)
    counts: dict[str, float] = {}
    if win is not None:
        out["basis"] = "requests arrived in the window every replica was up"
        out["window"] = {"start_s": win[0], "end_s": win[1], "seconds": win[1] - win[0]}
        for r in ok:
            g = r["grid"]
            n = 0
            if g.get("n"):
                for i in range(g["n"]):
                    t = g["t0"] + i * g["step"]
                    if t >= win[0] - g["step"] and t <= win[1]:
                        n += g["arrivals"][i]
            counts[r["replica"]] = n
    else:
        # replicas up at different times saw different traffic: that is not the router's doing
        out["basis"] = "not judged: the replicas were never up at the same time"
        out["per_replica"] = {r["replica"]: {"rate_per_s": r["red_use"]["requests"]["rate_per_s"]} for r in ok}
        return out
    vals = list(counts.values())
    total = sum(vals)
    med = _median(vals)
    mean = total / len(vals)
    var = sum((v - mean) ** 2 for v in vals) / len(vals)
    out["per_replica"] = {k: {"requests": v, "share": (v / total) if total else None} for k, v in sorted(counts.items())}
    out["median"] = med
    out["max_over_median"] = (max(vals) / med) if med else None
    out["min_over_median"] = (min(vals) / med) if med else None
    out["cv"] = (var ** 0.5 / mean) if mean else None
    enough = med >= MIN_REQUESTS
    status = {r["replica"]: r["status"] for r in rows}
    if len(ok) >= 3 and med > 0 and enough:
        out["hot"] = sorted(k for k, v in counts.items() if v >= HOT * med)
        # a replica that is down gets fewer requests because it is down, not because of the router
        out["cold"] = sorted(k for k, v in counts.items() if v <= COLD * med and status.get(k) not in ("down", "error"))
        out["skewed"] = bool(out["hot"] or out["cold"])
    elif len(ok) == 2 and min(vals) >= MIN_REQUESTS and max(vals) >= 2 * min(vals):
        out["hot"] = [max(counts, key=lambda k: counts[k])]
        out["cold"] = [min(counts, key=lambda k: counts[k])]
        out["skewed"] = True
    return out

