"""Reduce: the replicas' compact results → the fleet summary.

Everything here adds up what the map returned — counters add, grids merge, latency distributions come exact
from the per-request rows (``rows.fleet_latency``) — so the fleet's numbers are the per-replica numbers of
``numbers.compute`` taken over the union of the replicas, not a second definition. What is summed from
per-replica means (fleet throughput, mean KV usage) says so in its ``basis``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from . import grid as gridmod
from .sketch import RELATIVE_ACCURACY
from .fleetwide import fleet_incidents
from .peers import imbalance, outliers

SCHEMA = "vllmlog.fleet/1"
#: Replica health, worst first (``error``: the replica's logs could not be read).
HEALTH = ("error", "down", "failing", "degraded", "incomplete", "unknown", "healthy")
_SEV = {"critical": 3, "error": 2, "warning": 1, "info": 0}


def _get(d: Any, path: str) -> Any:
    for k in path.split("."):
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def health_rank(r: dict[str, Any]) -> int:
    """0 (unreadable) … 6 (healthy)."""
    if r.get("error"):
        return 0
    st = (r.get("verdict") or {}).get("status") or "unknown"
    return HEALTH.index(st) if st in HEALTH else HEALTH.index("unknown")


def replica_row(r: dict[str, Any]) -> dict[str, Any]:
    """One line of the replica table."""
    if r.get("error"):
        return {"replica": r["replica"], "status": "error", "label": "UNREADABLE", "reason": r["error"],
                "files": len(r.get("files") or []), "flags": [], "load": None}
    ru = r["red_use"]
    req = ru["requests"]
    dur = ru["durations"]
    use = ru["use"]
    worst = max(r["incidents"], key=lambda i: (_SEV.get(i["severity"], 0), -(i["onset_s"] or 0)), default=None)
    return {
        "replica": r["replica"], "status": r["verdict"]["status"], "label": r["verdict"].get("label"),
        "reason": r["verdict"].get("reason") or "", "files": len(r["files"]), "lines": r["lines"],
        "requests": req["total"], "finished": req["finished"], "failed": req["failed"], "aborted": req["aborted"],
        "error_rate": req["error_rate"], "abort_rate": req["abort_rate"], "rate_per_s": req["rate_per_s"],
        "ttft_p50_s": dur["ttft_s"].get("p50"), "ttft_p99_s": dur["ttft_s"].get("p99"),
        "ttft_basis": dur["ttft_s"].get("basis"),
        "e2e_p50_s": dur["e2e_s"].get("p50"), "e2e_p99_s": dur["e2e_s"].get("p99"), "e2e_basis": dur["e2e_s"].get("basis"),
        "tpot_p50_s": dur["tpot_s"].get("p50"), "tpot_basis": dur["tpot_s"].get("basis"),
        "kv_mean": use["kv_cache_usage"].get("mean"), "kv_max": use["kv_cache_usage"].get("max"),
        "waiting_max": use["waiting"].get("max"), "running_max": use["running"].get("max"),
        "gen_tokens_per_s": use["generation_throughput"].get("mean"),
        "preemptions": use["preemptions"], "restarts": r["restarts"],
        "decode_tok_s_per_seq": (r.get("decode_speed") or {}).get("tokens_per_s_per_seq_p50")
        if (r.get("decode_speed") or {}).get("samples", 0) >= 3 else None,
        "incidents": len(r["incidents"]),
        "worst_incident": ({"id": worst["id"], "severity": worst["severity"], "impact": worst["impact"],
                            "headline": worst["headline"], "onset": worst["onset"]} if worst else None),
        "complete": bool(r["coverage"].get("complete", True)),
        "flags": [],
        "load": None,
    }


def _sum_counts(dicts: Sequence[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in (d or {}).items():
            out[k] = out.get(k, 0) + int(v or 0)
    return dict(sorted(out.items()))


def _red(ok: Sequence[dict[str, Any]], rows_dir: str | None, percentiles: str = "exact") -> dict[str, Any]:
    reqs = [r["red_use"]["requests"] for r in ok]
    by_status = _sum_counts([q["by_status"] for q in reqs])
    total = sum(q["total"] for q in reqs)
    fin = sum(q["finished"] for q in reqs)
    failed = sum(q["failed"] for q in reqs)
    aborted = sum(q["aborted"] for q in reqs)
    arrivals = sum(q["rate"].get("arrivals") or 0 for q in reqs)
    firsts = [q["rate"]["first"] for q in reqs if q["rate"].get("first")]
    lasts = [q["rate"]["last"] for q in reqs if q["rate"].get("last")]
    rate: dict[str, Any] = {"arrivals": arrivals, "first": min(firsts) if firsts else None,
                            "last": max(lasts) if lasts else None, "window_s": None, "per_s": None}
    if arrivals >= 2 and firsts and lasts:
        from datetime import datetime

        w = (datetime.fromisoformat(rate["last"]) - datetime.fromisoformat(rate["first"])).total_seconds() + 1.0
        rate["window_s"] = w
        rate["per_s"] = arrivals / w
    http_by = _sum_counts([q["http"]["by_status"] for q in reqs])
    http_tot = sum(http_by.values())
    h5 = sum(v for k, v in http_by.items() if int(k) >= 500)
    h4 = sum(v for k, v in http_by.items() if 400 <= int(k) < 500)
    latency = None
    if percentiles == "sketch" or not rows_dir:
        from .sketch import merged_latency

        latency = merged_latency(ok)
    else:
        from .rows import fleet_latency

        files = [r["rows"]["file"] for r in ok if r.get("rows")]
        latency = fleet_latency(rows_dir, files)
        for m, d in latency.items():  # an all-estimated distribution carries the coarsest replica resolution
            if d.get("basis") == "estimated":
                res = [r["red_use"]["durations"].get(m, {}).get("resolution_s") for r in ok]
                d["resolution_s"] = max([x for x in res if x], default=1.0)
    return {
        "requests": {"total": total, "by_status": by_status, "finished": fin, "failed": failed, "aborted": aborted,
                     "error_rate": failed / fin if fin else None, "abort_rate": aborted / fin if fin else None,
                     "ratio_denominator": "finished", "rate": rate, "rate_per_s": rate["per_s"]},
        "latency": latency,
        "http": {"total": http_tot, "by_status": http_by, "4xx": h4, "5xx": h5,
                 "error_rate": (h4 + h5) / http_tot if http_tot else None},
        "slo": _slo([r["slo"] for r in ok]),
    }


def _slo(slos: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """SLO attainment over the fleet: met/total added per metric and basis (measured wins, as per replica)."""
    out: dict[str, Any] = {"targets": slos[0]["targets"] if slos else None}
    names = sorted({k for s in slos for k in s if k != "targets"})
    for n in names:
        acc: dict[str, list[int]] = {}
        for s in slos:
            d = s.get(n) or {}
            if d.get("basis"):
                a = acc.setdefault(d["basis"], [0, 0])
                a[0] += d["met"]
                a[1] += d["total"]
        b = "measured" if "measured" in acc else ("estimated" if "estimated" in acc else None)
        met, tot = acc.get(b, [0, 0]) if b else (0, 0)
        out[n] = {"met": met, "total": tot, "attainment": met / tot if tot else None, "basis": b}
    return out


def _use(ok: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def vals(path: str) -> list[float]:
        return [v for v in (_get(r["red_use"]["use"], path) for r in ok) if v is not None]

    kv_means, kv_max = vals("kv_cache_usage.mean"), vals("kv_cache_usage.max")
    gen = vals("generation_throughput.mean")
    pr = vals("prompt_throughput.mean")
    return {
        "kv_cache_usage": {"replica_mean_median": _median(kv_means), "max": max(kv_max, default=None),
                           "replicas_above_0.9": sum(1 for v in kv_max if v >= 0.9),
                           "basis": "per-replica time-weighted means"},
        "waiting": {"max": max(vals("waiting.max"), default=None),
                    "replicas_queueing": sum(1 for v in vals("waiting.max") if v > 0)},
        "running": {"max": max(vals("running.max"), default=None)},
        "generation_tokens_per_s": {"sum": math.fsum(gen) if gen else None,
                                    "basis": "sum of per-replica time-weighted means of the stats lines"},
        "prompt_tokens_per_s": {"sum": math.fsum(pr) if pr else None,
                                "basis": "sum of per-replica time-weighted means of the stats lines"},
        "preemptions": sum(int(r["red_use"]["use"].get("preemptions") or 0) for r in ok),
    }


def _median(xs: Sequence[float]) -> float | None:
    from ..numbers import percentile

    return percentile(sorted(xs), 50) if xs else None


def _verdict(rows: list[dict[str, Any]], incidents: list[dict[str, Any]], suspects: set[str]) -> dict[str, Any]:
    n = len(rows)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    bad = [r for r in rows if r["status"] in ("error", "down", "failing", "degraded")]
    down = sum(counts.get(k, 0) for k in ("down", "error"))
    if n and down == n:
        status = "down"
    elif any(i["severity"] in ("critical", "error") for i in incidents) or (n and 2 * (down + counts.get("failing", 0)) >= n):
        status = "failing"
    elif bad or incidents or suspects:
        status = "degraded"
    elif any(r["status"] in ("incomplete", "unknown") for r in rows):
        status = "incomplete"
    else:
        status = "healthy"
    parts = [f"{len(bad)} of {n} replicas unhealthy" if bad else f"all {n} replicas healthy" if status == "healthy"
             else f"no replica with an incident of its own ({n})" if status == "degraded" else
             f"{n - len(bad)} of {n} replicas without incidents"]
    odd = sorted(suspects - {r["replica"] for r in bad})
    if odd:
        parts.append(f"{len(odd)} otherwise healthy replica{'s' if len(odd) != 1 else ''} far worse than its peers "
                     f"({', '.join(odd[:5])})")
    if incidents:
        parts.append(f"{len(incidents)} fleet-wide incident{'s' if len(incidents) != 1 else ''}")
    return {"status": status, "label": status.upper(), "headline": "; ".join(parts),
            "replicas_by_status": dict(sorted(counts.items(), key=lambda kv: HEALTH.index(kv[0]) if kv[0] in HEALTH else 9))}


def provenance(percentiles: str) -> dict[str, str]:
    """Where each of the fleet document's numbers comes from: ``exact`` or ``sketch`` first, then how."""
    lat = ("exact: numbers.percentile (numpy-linear) over every request's value, read by Polars from the "
           "Parquet rows" if percentiles == "exact" else
           f"sketch: DDSketch merged from the replicas' sketches, relative error ≤ {RELATIVE_ACCURACY:.0%} of the "
           "value at rank ⌊p·(n−1)⌋; count, min, max exact")
    return {
        "red.requests, red.http, red.slo, lines, events": "exact: the replicas' counters added",
        "red.latency": lat,
        "red.requests.rate": "exact: arrivals ÷ the fleet's first → last arrival",
        "use.*.max, use.waiting, use.running": "exact: maxima of the replicas' maxima",
        "use.kv_cache_usage.replica_mean_median, use.*_tokens_per_s": "exact: from the replicas' time-weighted means "
                                                                    "of their stats lines (see each basis)",
        "replicas[].*_p50_s, *_p99_s": "exact: each replica's own numbers (numbers.describe over its requests)",
        "grid": "exact: counts and sums added, maxima of maxima, per bucket",
        "outliers, imbalance, incidents": "exact: computed from the numbers above",
    }


def reduce_fleet(results: Sequence[dict[str, Any]], *, rows_dir: str | None = None,
                 window_s: float = 300.0, min_share: float = 0.25, percentiles: str = "exact") -> dict[str, Any]:
    """The fleet document from the replicas' results (any order: they are sorted by name first).

    ``percentiles``: ``exact`` (Polars over the Parquet rows in ``rows_dir``) or ``sketch`` (the replicas'
    DDSketches merged; also the answer when there is no ``rows_dir``)."""
    results = sorted(results, key=lambda r: r["replica"])
    ok = [r for r in results if not r.get("error")]
    rows = [replica_row(r) for r in results]
    by_name = {r["replica"]: r for r in rows}
    merged = gridmod.merge(r["grid"] for r in ok)
    fws = fleet_incidents(ok, merged, window_s=window_s, min_share=min_share)
    for f in fws:
        for m in f["replicas"]:
            by_name[m["replica"]]["flags"].append(f"fleet-wide {f['id']}")
    outs = outliers(rows)
    for o in outs:
        by_name[o["replica"]]["flags"].append(f"outlier {o['metric']}")
    imb = imbalance(ok, rows, fws)
    for name in imb.get("hot", []):
        by_name[name]["load"] = "hot"
    for name in imb.get("cold", []):
        by_name[name]["load"] = "cold"
    suspects = {o["replica"] for o in outs}
    rows.sort(key=lambda r: (HEALTH.index(r["status"]) - (0.5 if r["replica"] in suspects else 0)
                             if r["status"] in HEALTH else 5,
                             -(_SEV.get((r.get("worst_incident") or {}).get("severity"), -1)),
                             -(r.get("error_rate") or 0.0), -(r.get("ttft_p99_s") or 0.0), r["replica"]))
    starts = [r["time_range"]["start"] for r in ok if r["time_range"]["start"]]
    ends = [r["time_range"]["end"] for r in ok if r["time_range"]["end"]]
    incomplete = [r["replica"] for r in results if r.get("error") or not r["coverage"].get("complete", True)]
    return {
        "schema": SCHEMA,
        "verdict": _verdict(rows, fws, suspects),
        "replicas_total": len(results),
        "replicas_read": len(ok),
        "time_range": {"start": min(starts) if starts else None, "end": max(ends) if ends else None},
        "lines": sum(r["lines"] for r in ok),
        "events": sum(r["events"] for r in ok),
        "coverage": {"complete": not incomplete, "incomplete_replicas": incomplete,
                     "unreadable": [{"replica": r["replica"], "error": r["error"]} for r in results if r.get("error")]},
        "red": _red(ok, rows_dir, percentiles),
        "provenance": provenance(percentiles if rows_dir else "sketch"),
        "use": _use(ok),
        "replicas": rows,
        "outliers": outs,
        "imbalance": imb,
        "incidents": fws,
        "grid": merged,
    }
