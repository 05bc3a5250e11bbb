"""Series on the fleet's fixed time grid: buckets of ``step`` seconds aligned on the epoch, so every replica's
buckets line up and merge by adding (counts, sums) or taking the max.

Per bucket: requests that arrived, requests that ended by outcome (success / failed = error + cancelled /
aborted, at their last known time), and from the engine's stats lines (or the handbook's decode lines) the
KV-cache usage (sum and count of samples → mean; max), Waiting and Running (max) and generation throughput
(sum and count → mean). A bucket with no sample holds ``None`` (not observed), never 0.

With ``fleet --prometheus``, a bucket that has no stats line of the log takes the replica's ``/metrics`` points
instead (within the log's own time range; ``metrics_n`` counts them): the log's own lines win where both exist.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from .mapper import epoch

COUNTS = ("arrivals", "success", "failed", "aborted", "unfinished")
SUMS = ("kv_sum", "kv_n", "gen_sum", "gen_n", "metrics_n")
MAXES = ("kv_max", "waiting_max", "running_max")
FIELDS = COUNTS + SUMS + MAXES
_OUTCOME = {"success": "success", "error": "failed", "cancelled": "failed", "aborted": "aborted",
            "unfinished": "unfinished"}


def _bucket(t: float, step: float) -> int:
    return int(math.floor(t / step))


def replica_grid(run: Any, step: float) -> dict[str, Any]:
    """One replica's grid: ``{"step", "t0" (epoch s of the first bucket), "n", field → list}``."""
    cells: dict[int, dict[str, Any]] = {}

    def cell(t: float) -> dict[str, Any]:
        b = _bucket(t, step)
        c = cells.get(b)
        if c is None:
            c = cells[b] = {}
        return c

    def add(c: dict[str, Any], k: str, v: float) -> None:
        c[k] = c.get(k, 0) + v

    def mx(c: dict[str, Any], k: str, v: float) -> None:
        if v is not None and (c.get(k) is None or v > c[k]):
            c[k] = v

    for j in run.journeys:
        a = epoch(j.arrival_ts)
        if a is not None:
            add(cell(a), "arrivals", 1)
        e = epoch(j.finish_ts or j.last_token_ts or j.first_token_ts or j.scheduled_ts or j.arrival_ts)
        if e is not None:
            add(cell(e), _OUTCOME.get(j.status, "unfinished"), 1)
    log_stats = [s for s in run.series.stats if s.source_kind != "prometheus"]
    prom = [s for s in run.series.stats if s.source_kind == "prometheus"]
    if prom:  # /metrics fill the buckets without a stats line, within the log's own time range
        have = {_bucket(t, step) for t in (epoch(s.ts) for s in log_stats) if t is not None}
        lo, hi = epoch(run.start_ts), epoch(run.end_ts)
        prom = [s for s in prom if (t := epoch(s.ts)) is not None and _bucket(t, step) not in have
                and (lo is None or lo <= t) and (hi is None or t <= hi)]
    for s in log_stats + prom:
        t = epoch(s.ts)
        if t is None:
            continue
        c = cell(t)
        if s.source_kind == "prometheus":
            add(c, "metrics_n", 1)
        if s.kv_cache_usage is not None:
            add(c, "kv_sum", float(s.kv_cache_usage))
            add(c, "kv_n", 1)
            mx(c, "kv_max", float(s.kv_cache_usage))
        if s.waiting is not None:
            mx(c, "waiting_max", s.waiting)
        if s.running is not None:
            mx(c, "running_max", s.running)
        if s.generation_throughput is not None:
            add(c, "gen_sum", float(s.generation_throughput))
            add(c, "gen_n", 1)
    for d in run.series.decode:
        t = epoch(d.ts)
        if t is None or not d.steps:
            continue
        c = cell(t)
        add(c, "kv_sum", d.kv_mean)
        add(c, "kv_n", 1)
        mx(c, "kv_max", d.kv_max)
        mx(c, "running_max", d.batch_size_max)
    return _dense(cells, step)


def _dense(cells: dict[int, dict[str, Any]], step: float) -> dict[str, Any]:
    if not cells:
        return {"step": step, "t0": None, "n": 0, **{k: [] for k in FIELDS}}
    lo, hi = min(cells), max(cells)
    n = hi - lo + 1
    out: dict[str, Any] = {"step": step, "t0": lo * step, "n": n}
    for k in FIELDS:
        default = 0 if k in COUNTS or k in SUMS else None
        out[k] = [cells.get(lo + i, {}).get(k, default) for i in range(n)]
    return out


def merge(grids: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The fleet's grid: counts and sums added, maxima of maxima, over the union of the buckets."""
    cells: dict[int, dict[str, Any]] = {}
    step = None
    for g in grids:
        if not g or not g.get("n"):
            continue
        step = g["step"] if step is None else step
        if g["step"] != step:
            raise ValueError("grids of different steps cannot merge")
        b0 = _bucket(g["t0"], step)
        for i in range(g["n"]):
            c = cells.setdefault(b0 + i, {})
            for k in COUNTS + SUMS:
                v = g[k][i] if k in g else 0  # a grid without a field (metrics_n: older results) adds nothing
                if v:
                    c[k] = c.get(k, 0) + v
            for k in MAXES:
                v = g[k][i] if k in g else None
                if v is not None and (c.get(k) is None or v > c[k]):
                    c[k] = v
    return _dense(cells, step if step is not None else 60.0)


def at(g: dict[str, Any], t: float) -> int | None:
    """Index of the bucket holding epoch second ``t`` in ``g`` (None outside it)."""
    if not g.get("n"):
        return None
    i = _bucket(t, g["step"]) - _bucket(g["t0"], g["step"])
    return i if 0 <= i < g["n"] else None


def mean(g: dict[str, Any], s: str, n: str, i: int) -> float | None:
    """``g[s][i] / g[n][i]`` or None when no sample fell in bucket ``i``."""
    k = g[n][i]
    return g[s][i] / k if k else None
