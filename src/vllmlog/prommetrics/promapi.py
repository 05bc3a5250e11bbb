"""Prometheus as a source: pull vLLM series with `query_range` and turn them into snapshots/points."""

from __future__ import annotations

import math
import re
import time as _time
from collections import defaultdict
from typing import Any

import httpx

from ..errors import InputError
from .catalog import CATALOG, kind_of
from .exposition import Sample, Snapshot
from .rates import counter_increase, gauge_values
from .report import LATENCY_ROLES, resolve

#: Roles whose series are pulled (enough for `scrape` judging, a timeline and capacity's length distributions).
ROLES: tuple[str, ...] = ("running", "waiting", "swapped", "kv_usage", "prompt_tokens", "generation_tokens",
                          "preemptions", "request_success", "admission_rejections", "http_requests",
                          "request_prompt_tokens", "request_generation_tokens", *LATENCY_ROLES)


def history_selector() -> str:
    """One PromQL selector for every sample name of every role, across all releases."""
    names: set[str] = set()
    for spec in CATALOG:
        if spec.role in ROLES:
            if spec.kind == "histogram":
                names.update(spec.name + s for s in ("_bucket", "_sum", "_count"))
            else:
                names.add(spec.name)
    return '{__name__=~"' + "|".join(sorted(re.escape(n).replace("\\:", ":") for n in names)) + '"}'


def query_range(client: httpx.Client, base_url: str, query: str, start: float, end: float,
                step: float) -> list[dict[str, Any]]:
    """GET /api/v1/query_range and return its `result` list (matrix)."""
    url = base_url.rstrip("/") + "/api/v1/query_range"
    try:
        resp = client.get(url, params={"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}",
                                       "step": f"{step:g}"})  # float seconds: "1.5s" is no valid duration
    except httpx.HTTPError as exc:
        raise InputError(f"{base_url}: cannot reach Prometheus ({type(exc).__name__}: {exc})",
                         hint="pass the Prometheus base URL, e.g. http://localhost:9090") from exc
    try:
        body = resp.json()
    except ValueError as exc:
        raise InputError(f"{url}: HTTP {resp.status_code}, not a Prometheus API answer") from exc
    if resp.status_code != 200 or body.get("status") != "success":
        raise InputError(f"{url}: {body.get('errorType', resp.status_code)}: {body.get('error', '')}".rstrip(": "),
                         hint="check the URL and the --since range")
    return list(body.get("data", {}).get("result", []))


def fetch_history(base_url: str, since_s: float, until: float | None = None, step_s: float | None = None,
                  timeout_s: float = 30.0, match: str | None = None) -> dict[str, list[Snapshot]]:
    """vLLM series of the last `since_s` seconds as per-target snapshot lists (one per step)."""
    end = until if until is not None else _time.time()
    start = end - since_s
    step = step_s or max(5.0, math.ceil(since_s / 600))
    query = history_selector()
    if match:
        query = query[:-1] + "," + match + "}"
    with httpx.Client(timeout=timeout_s) as client:
        result = query_range(client, base_url, query, start, end, step)
        present = names_present(client, base_url, since_s, end, match)
    by_target: dict[str, dict[float, list[Sample]]] = defaultdict(lambda: defaultdict(list))
    for series in result:
        labels = dict(series.get("metric", {}))
        name = labels.pop("__name__", "")
        target = labels.get("instance") or labels.get("job") or base_url
        for t, v in series.get("values", []):
            by_target[target][float(t)].append(Sample(name, labels, float(v)))
    out: dict[str, list[Snapshot]] = {}
    for target, points in sorted(by_target.items()):
        snaps = []
        for t in sorted(points):
            samples = points[t]
            fams = {}
            for s in samples:
                base = re.sub(r"_(bucket|sum|count)$", "", s.name)
                fams[s.name if kind_of(s.name) else base] = kind_of(s.name) or kind_of(base) or "unknown"
            for name in present.get(target, ()):  # every vLLM name the target exposed: the version guess needs them
                base = re.sub(r"_(bucket|sum|count)$", "", name)
                fams.setdefault(base if kind_of(base) == "histogram" else name, kind_of(name) or kind_of(base) or "unknown")
            snaps.append(Snapshot(source=f"{base_url} {target}", time=t, samples=samples, families=fams,
                                  time_basis="prometheus"))
        out[target] = snaps
    return out


def names_present(client: httpx.Client, base_url: str, since_s: float, at: float,
                  match: str | None = None) -> dict[str, set[str]]:
    """Every vllm:* sample name each target exposed during the range (one instant query)."""
    extra = "," + match if match else ""
    query = f'group by (__name__, instance, job) (last_over_time({{__name__=~"vllm:.+"{extra}}}[{int(since_s)}s]))'
    try:
        resp = client.get(base_url.rstrip("/") + "/api/v1/query", params={"query": query, "time": f"{at:.3f}"})
        body = resp.json()
    except (httpx.HTTPError, ValueError):
        return {}
    out: dict[str, set[str]] = defaultdict(set)
    for series in body.get("data", {}).get("result", []):
        m = series.get("metric", {})
        out[m.get("instance") or m.get("job") or base_url].add(m.get("__name__", ""))
    return out


def history_points(snaps: list[Snapshot]) -> list[dict[str, Any]]:
    """Per-step points (running, waiting, KV usage, token and preemption rates) to merge into a timeline."""
    if not snaps:
        return []
    names = {r: resolve(snaps[-1], r) for r in ("running", "waiting", "kv_usage", "generation_tokens",
                                                "prompt_tokens", "preemptions")}
    rows = []
    prev: Snapshot | None = None
    for s in snaps:
        row: dict[str, Any] = {"time": s.time, "source": s.source}
        for role, key in (("running", "running"), ("waiting", "waiting")):
            vals = gauge_values(s, names[role]) if names[role] else []
            row[key] = sum(vals) if vals else None
        kv = gauge_values(s, names["kv_usage"]) if names["kv_usage"] else []
        row["kv_cache_usage"] = max(kv) if kv else None
        for role in ("generation_tokens", "prompt_tokens", "preemptions"):
            key = f"{role}_per_s"
            inc = counter_increase(prev, s, names[role]) if prev is not None and names[role] else None
            row[key] = None if inc is None or s.time <= prev.time else round(inc / (s.time - prev.time), 4)
        row["dt"] = None if prev is None else s.time - prev.time
        rows.append(row)
        prev = s
    return rows


def history_stats_samples(snaps: list[Snapshot], naive_utc: bool = True) -> list[Any]:
    """The history as `series.StatsSample` rows (source_kind ``prometheus``) to merge with log stats lines.

    Timestamps are naive UTC by default, like text-log times read on a UTC host; pass False for aware ones."""
    from datetime import datetime, timezone

    from ..series import StatsSample

    out = []
    for p in history_points(snaps):
        ts = datetime.fromtimestamp(p["time"], tz=timezone.utc)
        preempt = p.get("preemptions_per_s")
        out.append(StatsSample(
            ts=ts.replace(tzinfo=None) if naive_utc else ts, file=p["source"], line=0, process=None, engine=None,
            running=None if p["running"] is None else int(p["running"]),
            waiting=None if p["waiting"] is None else int(p["waiting"]), swapped=None,
            kv_cache_usage=p["kv_cache_usage"], prompt_throughput=p["prompt_tokens_per_s"],
            generation_throughput=p["generation_tokens_per_s"], prefix_cache_hit_rate=None,
            preemptions=None if preempt is None else round(preempt * (p.get("dt") or 0.0)), level=None,
            source_kind="prometheus"))
    return out
