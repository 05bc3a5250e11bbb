"""Build one ``ServiceState`` per server run of a ``Run`` (cached per Run, like ``rules._util.servers``)."""

from __future__ import annotations

import re
import weakref
from statistics import median
from typing import TYPE_CHECKING, Any

from .config import server_config
from .model import Baseline, Coverage, Interval, Lifecycle, ServiceState

if TYPE_CHECKING:  # pragma: no cover
    from ..rules._util import ServerView
    from ..run import Run

#: Kinds that show a start-up happened in this server run, and the milestone each marks.
_STAGES = {
    "server_version": "args", "server_args": "args", "engine_config": "engine config",
    "model_loading": "loading weights", "model_loaded": "weights loaded", "memory_profiling": "kv cache",
    "kv_cache_blocks": "kv cache", "kv_cache_size": "kv cache", "kv_cache_memory": "kv cache",
    "cuda_graph_captured": "graphs captured", "engine_initialized": "engine initialized",
    "server_starting": "api server", "server_routes": "api server", "server_process_started": "api server",
}
#: An excerpt marker: the pasted log says output was cut here.
_TRIM = re.compile(r"^\s*(?:\.\.\.+|…|\[\.\.\.\]|\[?\d+ (?:more )?lines? (?:omitted|trimmed|skipped)\]?|<snip>|\(\.\.\.\))\s*$", re.I)

_CACHE: list[tuple[Any, tuple[int, int, int], list[ServiceState]]] = []


def service_states(run: Run) -> list[ServiceState]:
    """Per-server-run states of ``run`` (cached; a Run fed more events since is rebuilt)."""
    from ..rules._util import servers

    size = (len(run.notable), len(run.series.stats), len(run.servers))
    for ref, n, states in _CACHE:
        if ref() is run and n == size:
            return states
    views = servers(run)
    by_key: dict[tuple[str, int], dict[str, int]] = {}
    for j in run.journeys:
        d = by_key.setdefault((j.file, j.server), {})
        d[j.status] = d.get(j.status, 0) + 1
    states = []
    for i, v in enumerate(views):
        nxt = views[i + 1] if i + 1 < len(views) else None
        states.append(_state(run, v, restarted=nxt is not None and nxt.file == v.file,
                             statuses=by_key.get((v.file, v.index), {})))
    try:
        _CACHE.append((weakref.ref(run), size, states))
    except TypeError:  # pragma: no cover - a Run is weak-referenceable
        _CACHE.append((lambda r=run: r, size, states))
    if len(_CACHE) > 4:
        _CACHE.pop(0)
    return states


def _state(run: Run, v: ServerView, *, restarted: bool, statuses: dict[str, int]) -> ServiceState:
    cfg = server_config(v)
    cap = cfg.max_num_seqs if cfg.sources.get("max_num_seqs") == "logged" else None
    engines: dict[Any, list[Interval]] = {}
    all_iv: list[float] = []
    for key, samples in v.by_engine().items():
        xs = _intervals(samples, cap)
        engines[key] = xs
        all_iv += [x.dt_s for x in xs if x.gap_before_s is None]
    lc = _lifecycle(v, restarted)
    cov = _coverage(run, v, engines, all_iv)
    st = ServiceState(view=v, config=cfg, engines=engines, lifecycle=lc, coverage=cov, baseline=_baseline(engines),
                      http=_http(run, v), statuses=dict(statuses))
    if cap is None and st.cap:
        for xs in engines.values():
            for x in xs:
                x.cap = st.cap
    return st


def _cadence(gaps: list[float]) -> float:
    """The stats interval the engine logs at while it works: the lower quartile of the times between stats lines
    (with four or more), else the shortest. vLLM logs every interval only while it steps — an engine idle between
    requests logs only when one arrives — so the median of a lightly used server's gaps is its idle time, not its
    cadence; and with a handful of lines, one of them a silence (a stall, an idle hour), only the shortest gap is
    an interval at all (a gap is never shorter than the cadence it was logged at)."""
    g = sorted(gaps)
    return g[len(g) // 4] if len(g) >= 4 else g[0]


def _intervals(samples: list[StatsSample], cap: int | None) -> list[Interval]:  # noqa: F821 - doc name
    gaps = [(b.ts - a.ts).total_seconds() for a, b in zip(samples, samples[1:])
            if a.ts is not None and b.ts is not None and b.ts > a.ts]
    typical = _cadence(gaps) if gaps else 10.0
    out: list[Interval] = []
    prev = None
    for s in samples:
        dt = typical
        gap = None
        if prev is not None and prev.ts is not None and s.ts is not None and s.ts >= prev.ts:
            dt = (s.ts - prev.ts).total_seconds() or typical
            if dt >= max(3 * typical, typical + 20):
                gap = dt
                dt = typical
        out.append(Interval(sample=s, dt_s=dt, gap_before_s=gap, cap=cap))
        prev = s
    return out


def _lifecycle(v: ServerView, restarted: bool) -> Lifecycle:
    from ..rules._util import was_serving

    lc = Lifecycle(restarted=restarted, start_ts=v.srv.start_ts, end_ts=v.srv.end_ts, ready_ts=v.srv.ready_ts)
    for e in v.events:
        st = _STAGES.get(e.kind)
        if st is not None:
            lc.started = True
            lc.startup_stage = st
        if e.kind == "server_ready" and lc.ready_ts is None:
            lc.ready_ts = e.ts
    lc.serving = was_serving(v)
    lc.failed = not lc.serving and any(
        (e.level in ("ERROR", "CRITICAL") or e.kind in ("traceback", "config_error", "process_crashed"))
        and not v.in_shutdown(e.line) for e in v.events)
    lc.excerpt = lc.serving and not lc.started
    if v.graceful_line is not None:
        g = next((e for e in v.events if e.line == v.graceful_line), None)
        lc.shutdown_ts = g.ts if g is not None and g.ts is not None else v.srv.end_ts
    return lc


def _coverage(run: Run, v: ServerView, engines: dict[Any, list[Interval]], ivs: list[float]) -> Coverage:
    cov = Coverage(lines=max(0, v.srv.last_line - v.srv.first_line + 1))
    if v.srv.start_ts and v.srv.end_ts:
        cov.span_s = max(0.0, (v.srv.end_ts - v.srv.start_ts).total_seconds())
    xs = [x for xx in engines.values() for x in xx]
    cov.stats_intervals = len(xs)
    cov.interval_s = _cadence(ivs) if ivs else None
    for x in xs:
        if x.gap_before_s is not None and x.ts is not None:
            from datetime import timedelta

            cov.gaps.append((x.ts - timedelta(seconds=x.gap_before_s), x.ts, x.gap_before_s))
        cov.max_running = max(cov.max_running, x.running)
        cov.max_waiting = max(cov.max_waiting, x.waiting)
    cov.trimmed = [e.line for e in v.events if e.kind in ("unparsed", "log") and _TRIM.match(e.text.split("\n", 1)[0])]
    cov.requests = len(v.journeys)  # the view's journeys: j.file == v.file and j.server == v.index
    return cov


def _baseline(engines: dict[Any, list[Interval]]) -> Baseline:
    speeds = sorted(s for xs in engines.values() for x in xs if not x.stuck for s in [x.gen_per_seq] if s)
    prompts = [x.prompt_tps for xs in engines.values() for x in xs if x.admitting]
    b = Baseline(busy_intervals=len(speeds))
    if speeds:
        upper = speeds[len(speeds) // 2:]
        b.gen_per_seq = median(upper)
    if prompts:
        b.prompt_tps = median(prompts)
    return b


def _http(run: Run, v: ServerView) -> dict[int, int]:
    counts = getattr(v.srv, "http_status", None)
    if counts:
        return {int(k): int(n) for k, n in counts.items()}
    out: dict[int, int] = {}
    for e in v.events:
        if e.kind == "http_access":
            st = e.fields.get("http_status")
            if isinstance(st, int):
                out[st] = out.get(st, 0) + 1
    return out
