"""The service summary: RED (rate, errors, duration) over journeys, USE (KV cache, queue, preemptions)
over the engine series, warnings/errors by template, SLO attainment, and a by-day/by-hour digest.

Percentiles use linear interpolation exactly as numpy's default (``method="linear"``), implemented
here so the library does not need numpy. The JSON keys are stable (see ``summarize``).
"""

from __future__ import annotations

import bisect

from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from .errors import ConfigError
from .journeys import Journey
from .numbers import (LATENCIES, PCTS, RequestStats, SloTargets, compute, describe, engine_use, held, percentile,
                      series_groups, usage)
from .numbers import max_num_seqs as _max_num_seqs
from .parsing.templates import template

if TYPE_CHECKING:
    from .run import Run
    from .series import SeriesBuilder

__all__ = ["LATENCIES", "PCTS", "BUCKETS", "Digest", "JourneyStats", "SloTargets", "buckets", "describe",
           "engine_use", "grouped_events", "per_engine", "percentile", "summarize", "summarize_paths"]

BUCKETS = ("day", "hour")
#: The journey fold is ``numbers.RequestStats`` (one computation for every renderer).
JourneyStats = RequestStats
_usage = usage
_series_groups = series_groups
_held = held


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts is not None else None


def per_engine(series: SeriesBuilder) -> list[dict[str, Any]]:
    """One line per (file, server run, engine): the series' extremes and time-weighted means."""
    keys: dict[tuple, dict[str, Any]] = {}
    for s in series.stats:
        if s.ts is None:
            continue
        k = (s.file, s.server, s.engine if s.source_kind == "engine_stats" else None)
        d = keys.get(k)
        if d is None:
            d = keys[k] = {"file": s.file, "server": s.server, "engine": k[2], "source": s.source_kind, "samples": 0,
                           "first_ts": _iso(s.ts), "last_ts": _iso(s.ts)}
        d["samples"] += 1
        d["last_ts"] = _iso(s.ts)
    out = []
    # each series grouped once per (attribute, kind) and bucketed by (file, server run), in group order:
    # per_engine stays linear in server runs
    by_run: dict[tuple[str, tuple], dict[tuple, list[tuple[tuple, list]]]] = {}

    def runs_of(attr: str, kinds: tuple) -> dict[tuple, list[tuple[tuple, list]]]:
        b = by_run.get((attr, kinds))
        if b is None:
            b = by_run[(attr, kinds)] = {}
            for k, v in _series_groups(series, attr, None, kinds).items():
                b.setdefault((k[0], k[1]), []).append((k, v))
        return b

    for (f, srv, eng), d in sorted(keys.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] if kv[0][2] is not None else -1)):
        kinds = (d["source"],)

        def one(attr: str, f: str = f, srv: int = srv, eng: Any = eng, kinds: tuple = kinds) -> dict[str, Any]:
            g = {k: v for k, v in runs_of(attr, kinds).get((f, srv), ()) if k[2] == eng or eng is None}
            return _usage(g)

        for attr in ("running", "waiting", "swapped", "kv_cache_usage", "generation_throughput", "prompt_throughput"):
            u = one(attr)
            d[attr] = {"max": u["max"], "mean": u["time_weighted_mean"]}
        out.append(d)
    dec: dict[tuple, dict[str, Any]] = {}
    for x in series.decode:
        k = (x.file, x.server)
        d = dec.get(k)
        if d is None:
            d = dec[k] = {"file": x.file, "server": x.server, "engine": None, "source": "decode_steps", "samples": 0,
                          "first_ts": _iso(x.ts), "last_ts": _iso(x.ts), "_bs": 0.0, "_kv": 0.0,
                          "batch_size": {"max": 0, "mean": None}, "kv_cache_usage": {"max": 0.0, "mean": None}}
        d["samples"] += 1
        d["last_ts"] = _iso(x.ts)
        d["_bs"] += x.batch_size_mean
        d["_kv"] += x.kv_mean
        d["batch_size"]["max"] = max(d["batch_size"]["max"], x.batch_size_max)
        d["kv_cache_usage"]["max"] = max(d["kv_cache_usage"]["max"], x.kv_max)
    for d in dec.values():
        d["batch_size"]["mean"] = d.pop("_bs") / d["samples"]
        d["kv_cache_usage"]["mean"] = d.pop("_kv") / d["samples"]
        out.append(d)
    return out


# ----------------------------------------------------------------------------- warnings / errors
def _message(e: Any) -> str:
    """The first line of an event's message, without the process/level/time/source prefix."""
    m = e.fields.get("_message")
    if m:
        return m
    first = e.text.split("\n", 1)[0]
    if e.source:
        i = first.find(e.source + "]")
        if i >= 0:
            return first[i + len(e.source) + 1:].strip()
    return first

def shutdown_noise(run: Run) -> Callable[[Any], bool]:
    """A predicate: the event was logged after its server run's requested shutdown began (SIGTERM,
    Ctrl-C, ``shutdown triggered``) — ``AsyncLLM output_handler failed``, ``EngineDeadError`` and the like
    there are how vLLM stops, not errors of the run."""
    try:
        from .rules._util import servers

        views = servers(run)
    except Exception:  # pragma: no cover - the diagnosis helpers are optional here
        return lambda e: False
    by_file: dict[str, list[Any]] = {}
    for v in views:
        by_file.setdefault(v.file, []).append(v)
    starts = {f: [v.srv.first_line for v in vs] for f, vs in by_file.items()}  # a file's runs in line order

    def after_shutdown(e: Any) -> bool:
        vs = by_file.get(e.file)
        if not vs:
            return False
        i = bisect.bisect_right(starts[e.file], e.line) - 1  # the last run starting at or before the line
        return i >= 0 and vs[i].in_shutdown(e.line)

    return after_shutdown


def grouped_events(run: Run, levels: tuple[str, ...], when: Callable[[datetime], bool] | None = None,
                   top: int = 50, skip: Callable[[Any], bool] | None = None,
                   only: Callable[[Any], bool] | None = None) -> list[dict[str, Any]]:
    """Notable events of the given levels grouped by message template: count, first/last seen
    (``skip``/``only``: leave out / keep only the events a predicate picks)."""
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for e in run.notable:
        lvl = e.level  # the level first: the predicates (pure) run only on events of the wanted levels
        if e.kind == "http_access":
            st = e.fields.get("http_status") or 0
            lvl = "ERROR" if st >= 500 else ("WARNING" if st >= 400 else lvl)
        if lvl not in levels:
            continue
        if (skip is not None and skip(e)) or (only is not None and not only(e)):
            continue
        if when is not None and (e.ts is None or not when(e.ts)):
            continue
        tmpl = e.template or template(_message(e))
        key = (e.kind, tmpl)
        iso = _iso(e.ts)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {"kind": e.kind, "template": tmpl, "level": lvl, "count": 0, "first_seen": iso,
                               "last_seen": iso, "file": e.file, "first_line": e.line}
        g["count"] += 1
        if iso is not None:
            if g["first_seen"] is None or iso < g["first_seen"]:  # type: ignore[operator]
                g["first_seen"] = iso
            if g["last_seen"] is None or iso > g["last_seen"]:  # type: ignore[operator]
                g["last_seen"] = iso
    return sorted(groups.values(), key=lambda g: (-g["count"], g["first_seen"] or ""))[:top]


# ----------------------------------------------------------------------------- the summary
def _runs(run: Run) -> list[dict[str, Any]]:
    out = []
    for s in run.servers:
        key_args = {k: s.args[k] for k in ("max_num_seqs", "max_model_len", "max_num_batched_tokens",
                                           "gpu_memory_utilization", "tensor_parallel_size", "enable_prefix_caching",
                                           "enable_chunked_prefill", "dtype", "port") if k in s.args}
        out.append({
            "file": s.file, "index": s.index, "version": s.version, "model": s.model, "generation": s.generation,
            "start_ts": _iso(s.start_ts), "ready_ts": _iso(s.ready_ts), "end_ts": _iso(s.end_ts),
            "ready": s.ready, "shutdown": s.shutdown, "args": key_args,
            "config": {k: v for k, v in s.config.items() if not k.startswith("_")},
            "lines": [s.first_line, s.last_line],
        })
    return out


def summarize(run: Run, digest: Digest | None = None, slo: SloTargets | None = None,
              by: str | None = None, top: int = 30, numbers: dict[str, Any] | None = None) -> dict[str, Any]:
    """The summary document: the shared numbers (``vllmlog.numbers.compute``: ``requests, latency,
    time_to_abort_s, tokens, throughput, kv_cache_usage, queue, waiting, batch_size,
    prefix_cache_hit_rate, preemptions, http, slo, unmeasured``) plus ``time_range, runs, engines,
    errors, warnings, lines`` (+ ``buckets`` with ``by``).

    ``digest`` holds journeys already folded in while streaming; without it ``run.journeys`` is used.
    ``numbers`` is an already computed ``compute(run)`` (``analyze`` passes its own: one computation)."""
    if digest is None:
        digest = Digest(slo, by)
        if numbers is None or by is not None:
            for j in run.journeys:
                digest.add(j)
    if numbers is None:
        numbers = compute(run, digest.total)
    start, end = run.start_ts, run.end_ts
    dur = (end - start).total_seconds() if start and end else None
    noise = shutdown_noise(run)
    doc: dict[str, Any] = {
        "time_range": {"start": _iso(start), "end": _iso(end), "duration_s": dur},
        "runs": _runs(run),
        **numbers,
        "engines": per_engine(run.series),
        "errors": grouped_events(run, ("ERROR", "CRITICAL"), top=top, skip=noise),
        "shutdown_errors": grouped_events(run, ("ERROR", "CRITICAL"), top=top, only=noise),
        "warnings": grouped_events(run, ("WARNING",), top=top),
        "lines": run.parse_stats.lines,
        "coverage": run.coverage.to_dict(),
    }
    if run.traces is not None:  # --traces: what the trace input held, how it joined, the start-up waterfall
        doc["traces"] = run.traces
        doc["startup"] = [w.to_dict() for w in run.startup]
    if by is not None:
        doc["buckets"] = buckets(run, by, digest.slo, top=top, stats=digest.buckets if digest.by == by else None)
    return doc


def summarize_paths(paths: Sequence[str] | str, *, year: int | None = None, slo: SloTargets | None = None,
                    by: str | None = None, top: int = 30, progress: Callable[[int], None] | None = None,
                    journey_sink: Callable[[Journey], None] | None = None,
                    traces: Sequence[str] | Any = None) -> dict[str, Any]:
    """Stream logs into a summary in bounded memory: journeys are folded in (and passed to
    ``journey_sink``) as they complete, never all kept. ``traces``: OTLP JSON files whose spans join."""
    from .reader import ParseStats, iter_batches
    from .run import Pipeline, bulk_gc, read_trace_input

    digest = Digest(slo, by)

    def both(j: Journey) -> None:
        digest.add(j)
        journey_sink(j)  # type: ignore[misc]

    sink = digest.add if journey_sink is None else both
    st = ParseStats()
    pipe = Pipeline(journey_sink=sink, keep_journeys=False, traces=read_trace_input(traces))
    many = not isinstance(paths, str) and len(paths) > 1
    with bulk_gc():
        for batch in iter_batches(paths, year=year, stats=st, progress=progress, skip_unreadable=many):
            pipe.feed(batch)
        run = pipe.finish(st)
    return summarize(run, digest, top=top, by=by)


def _floor(ts: datetime, by: str) -> datetime:
    if by == "day":
        return ts.replace(hour=0, minute=0, second=0, microsecond=0)
    return ts.replace(minute=0, second=0, microsecond=0)


class Digest:
    """A journey sink for streaming summaries: overall ``JourneyStats`` plus one per day/hour bucket."""

    def __init__(self, slo: SloTargets | None = None, by: str | None = None) -> None:
        if by is not None and by not in BUCKETS:
            raise ConfigError(f"--by {by!r} is not supported", hint="use --by day or --by hour")
        self.slo = slo or SloTargets()
        self.by = by
        self.total = JourneyStats(self.slo)
        self.buckets: dict[datetime, JourneyStats] = {}

    def add(self, j: Journey) -> None:
        """Fold one finished journey in (by arrival time for the buckets)."""
        self.total.add(j)
        if self.by is not None:
            ts = j.arrival_ts or j.finish_ts
            if ts is not None:
                k = _floor(ts, self.by)
                b = self.buckets.get(k)
                if b is None:
                    b = self.buckets[k] = JourneyStats(self.slo)
                b.add(j)


def buckets(run: Run, by: str, slo: SloTargets | None = None, top: int = 10,
            stats: dict[datetime, JourneyStats] | None = None) -> list[dict[str, Any]]:
    """The digest: one block per day (or hour) with requests, latency, KV, queue, errors and warnings.

    Journeys are assigned by arrival time, from ``stats`` (a ``Digest``'s buckets) or ``run.journeys``."""
    if by not in BUCKETS:
        raise ConfigError(f"--by {by!r} is not supported", hint="use --by day or --by hour")
    step = timedelta(days=1) if by == "day" else timedelta(hours=1)
    if stats is None:
        d = Digest(slo, by)
        for j in run.journeys:
            d.add(j)
        stats = d.buckets
    keys = set(stats)
    for s in run.series.stats:
        if s.ts is not None:
            keys.add(_floor(s.ts, by))
    for e in run.notable:
        if e.ts is not None and e.level in ("WARNING", "ERROR", "CRITICAL"):
            keys.add(_floor(e.ts, by))
    noise = shutdown_noise(run)
    out = []
    for k in sorted(keys):
        lo, hi = k, k + step

        def when(ts: datetime, lo: datetime = lo, hi: datetime = hi) -> bool:
            return lo <= ts < hi

        js = stats.get(k) or JourneyStats(slo)
        use = engine_use(run.series, _max_num_seqs(run), when)
        lat = js.latency_dict()
        errs = grouped_events(run, ("ERROR", "CRITICAL"), when, top, skip=noise)
        warns = grouped_events(run, ("WARNING",), when, top)
        out.append({
            "start": k.isoformat(), "end": hi.isoformat(),
            "requests": js.requests_dict(step.total_seconds()),
            "latency": {m: {x: lat[m][x] for x in ("count", "p50", "p90", "p95", "p99", "mean", "max", "basis",
                                                  "resolution_s")} for m in LATENCIES},
            "kv_cache_usage": use["kv_cache_usage"],
            "queue": use["queue"],
            "throughput": use["throughput"],
            "preemptions": js.preemptions,
            "errors": errs,
            "warnings": warns,
            "error_count": sum(g["count"] for g in errs),
            "warning_count": sum(g["count"] for g in warns),
            "slo": js.slo_dict(),
        })
    return out
