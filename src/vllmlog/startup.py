"""What a server's start-up spent its time on: weights, compile / warm-up, KV cache, … — per server start.

Two sources, the best one used:

* **traced** — vLLM's loading spans (``--otlp-traces-endpoint``; ``vllmlog.traces.startup``): each span's
  own time, summed by phase. Exact.
* **logged** — the log's own start-up lines. Durations vLLM states are taken as written (``logged``):
  ``Loading weights took 7.91 seconds``, ``Model loading took 14.2 GiB and 8.67 seconds``,
  ``torch.compile takes 12.40 s in total``, ``Graph capturing finished in 9 secs``, ``Memory profiling takes
  4.2 seconds``, ``init engine (profile, create kv cache, warmup model) took 44.1 seconds``. The rest comes
  from the timestamps of the milestones between them (``estimated`` with 1-second timestamps, ``derived``
  with millisecond ones):

  ==================  ===========================================================================
  phase               from … to …
  ==================  ===========================================================================
  process start       the server's first line → ``Initializing a V1 LLM engine`` (imports, config)
  workers / device    → ``Starting to load model`` (engine and worker processes, device, distributed)
  model load          → the last ``Loading weights took`` / ``Model loading took`` (less the weights)
  weights             ``Loading weights took X`` (inside model load)
  compile / warm-up   ``torch.compile takes X``, ``Graph capturing finished in X``, or ``Warming up model``
                      → ``Warming up done.`` (CPU)
  KV cache            the rest of model loaded → ``init engine … took`` (memory profiling, KV sizing and
                      allocation)
  API server          engine initialised → the server's ready line
  ==================  ===========================================================================

The phases are laid end to end from the first line, so they add up to the start-up's total. A start-up that
never got ready (it failed, is stuck, or the log ends) has an *open* phase (``complete=False``): the one it
was in when the log stopped saying anything new — ``stopped_in()`` names it, ``slowest()`` the phase that
took the most time. These are the inputs the diagnosis uses for a slow or stuck start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Iterable, Sequence

import orjson

if TYPE_CHECKING:  # pragma: no cover
    from .model import Event
    from .run import Run, ServerRun

PHASES = ("process start", "workers / device", "model load", "weights", "compile / warm-up", "KV cache",
          "engine init", "API server", "other")
"""Phase names: the traced waterfall's, plus ``engine init`` (vLLM's ``init engine (profile, create kv cache,
warmup model) took X`` when the log does not break it down) and ``API server`` (engine ready → server ready)."""

#: No start-up phase lasts longer than this (30 days): a larger logged duration is not a duration.
_MAX_PHASE_S = 30 * 86400.0


@dataclass(frozen=True)
class Phase:
    """Time one start-up spent in one phase."""

    name: str
    """One of ``PHASES``."""
    start: datetime | None
    """When the phase began (the log's clock)."""
    end: datetime | None
    """When it ended (for an open phase: the log's last line of the start-up)."""
    seconds: float
    """Time spent in it (traced: the spans' own time, which may be spread over several stretches)."""
    source: str
    """``traced`` (spans), ``logged`` (a duration vLLM wrote), ``derived`` (ms timestamps), ``estimated``
    (differences of 1-second timestamps)."""
    server: int = -1
    """Index of the server run in ``run.servers`` (−1: a traced start-up no log line belongs to)."""
    file: str = ""
    line: int = 0
    """The log line that ends (or states) the phase; 0 for traced phases."""
    complete: bool = True
    """False: the start-up was still in this phase when the log stopped (failed, stuck, or cut)."""
    detail: str = ""
    """What was measured (``Loading weights took 7.91 seconds``; spans ``Warmup (CPU)``; …)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {"name": self.name, "start": self.start.isoformat() if self.start else None,
                "end": self.end.isoformat() if self.end else None, "seconds": self.seconds, "source": self.source,
                "server": self.server, "file": self.file, "line": self.line, "complete": self.complete,
                "detail": self.detail}


@dataclass
class Startup:
    """One server start: its phases and how long it took in all."""

    server: int
    """Index in ``run.servers`` (−1: traced only)."""
    file: str
    start: datetime | None
    end: datetime | None
    """Ready time, else when the log stopped."""
    total_s: float
    ready: bool
    """The server became ready."""
    source: str
    """``traced`` or ``logged``: where ``phases`` come from."""
    phases: list[Phase] = field(default_factory=list)
    logged: list[Phase] = field(default_factory=list)
    """The log's own account (also when ``phases`` are traced: the two can be compared)."""
    waterfall: Any = None
    """The traced ``Waterfall`` (its spans, nested), when traced."""

    @property
    def complete(self) -> bool:
        """No phase was left open."""
        return all(p.complete for p in self.phases)

    def slowest(self) -> Phase | None:
        """The phase that took the most time."""
        return slowest(self.phases)

    def stopped_in(self) -> Phase | None:
        """The open phase of a start-up that never finished, else None."""
        return stopped_in(self.phases)

    def by_phase(self) -> dict[str, float]:
        """Phase → seconds (phases in ``PHASES`` order)."""
        out: dict[str, float] = {}
        for name in PHASES:
            s = sum(p.seconds for p in self.phases if p.name == name)
            if any(p.name == name for p in self.phases):
                out[name] = s
        return out

    def headline(self) -> str:
        """One line: how long, and what took the time (with the source)."""
        parts = [f"{k} {v:.1f} s" for k, v in sorted(self.by_phase().items(), key=lambda kv: -kv[1]) if v >= 0.05][:4]
        open_ = self.stopped_in()
        src = "traced" if self.source == "traced" else "from the log's lines"
        if open_ is not None:
            return (f"start-up did not finish: in {open_.name} for {open_.seconds:.1f} s when the log stopped "
                    f"({self.total_s:.1f} s after start; {src})" + (": " + ", ".join(parts) if parts else ""))
        return f"start-up took {self.total_s:.1f} s ({src})" + (": " + ", ".join(parts) if parts else "")

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        sl, op = self.slowest(), self.stopped_in()
        return {"server": self.server, "file": self.file, "start": self.start.isoformat() if self.start else None,
                "end": self.end.isoformat() if self.end else None, "total_s": self.total_s, "ready": self.ready,
                "complete": self.complete, "source": self.source, "by_phase": self.by_phase(),
                "slowest": sl.name if sl else None, "slowest_s": sl.seconds if sl else None,
                "stopped_in": op.name if op else None, "headline": self.headline(),
                "phases": [p.to_dict() for p in self.phases], "logged": [p.to_dict() for p in self.logged],
                "trace_id": getattr(self.waterfall, "trace_id", None)}


def slowest(phases: Iterable[Phase]) -> Phase | None:
    """The phase that took the most time (None without phases)."""
    ps = list(phases)
    return max(ps, key=lambda p: p.seconds) if ps else None


def stopped_in(phases: Iterable[Phase]) -> Phase | None:
    """The phase a start-up was in when its log stopped (failed, stuck, cut), or None when it finished."""
    return next((p for p in phases if not p.complete), None)


def phases(run: Run, server: int | None = None) -> list[Phase]:
    """Every server start's phases (traced when the start-up's spans are there, else from the log), in
    order; ``server`` keeps one server run (its index in ``run.servers``)."""
    out: list[Phase] = []
    for s in startups(run):
        if server is None or s.server == server:
            out += s.phases
    return out


# --------------------------------------------------------------------------- from the log
#: Event kinds that show a server run went through a start-up.
_STARTED = frozenset({"server_version", "server_banner", "server_args", "engine_config", "model_loading",
                      "model_loaded", "model_initialized", "memory_profiling", "kv_cache_size", "kv_cache_blocks",
                      "cuda_graph_captured", "engine_initialized"})
#: Records that end a start-up.
_FAILED = frozenset({"engine_start_failed", "engine_start_timeout", "engine_fatal", "engine_core_died", "worker_died",
                     "process_crashed", "cuda_oom", "oom_killed", "traceback", "kv_cache_insufficient",
                     "kv_cache_no_memory", "max_model_len_too_large", "model_load_error", "insufficient_free_memory"})

_KV_FAILED = frozenset({"kv_cache_insufficient", "kv_cache_no_memory", "max_model_len_too_large"})


#: Longest stated duration believed (a week): beyond it a number is garbage, not a start-up.
MAX_STATED_S = 7 * 86400.0


def _secs(v: Any) -> float | None:
    """A stated duration in seconds, or None when it is not a sane one (negative, NaN, inf, absurdly long)."""
    try:
        x = float(v) if isinstance(v, (int, float)) else float(str(v).split()[0].rstrip("s"))
    except (ValueError, IndexError, OverflowError):
        return None
    return x if 0.0 <= x <= MAX_STATED_S else None


def _line(e: Event) -> str:
    """The message of a start-up line, without its envelope (a JSON log's ``message`` field)."""
    from .rules._util import msg_of

    m = msg_of(e)
    if m.startswith("{"):
        try:
            m = str(orjson.loads(m).get("message") or m)
        except (orjson.JSONDecodeError, AttributeError):
            pass
    return m[:120]


@dataclass
class _Seg:
    base: str
    start: Event | None
    """Milestone the segment starts from (None: the server's first line)."""
    end: Event | None
    subs: list[tuple[str, float, str, Event | None, str]] = field(default_factory=list)
    """(phase, seconds, source, event, detail) parts of the segment other than its base phase."""
    umbrella: float | None = None
    """A stated duration of the whole segment (``Model loading took X``)."""
    lead: str | None = None
    """Phase of the time before the stated duration began (no milestone between: ``process start``)."""


def _server_startup(srv: ServerRun, index: int, events: Sequence[Event], ready_line: int | None = None) -> Startup | None:
    if not any(e.kind in _STARTED for e in events):
        return None  # an excerpt that begins while serving
    ready_ts = srv.ready_ts if srv.ready else None
    if ready_ts is None and ready_line is not None:  # no ready line, but it served (stats lines, requests)
        ready_ts = next((e.ts for e in events if e.line >= ready_line and e.ts is not None), None)
    if ready_ts is not None:
        events = [e for e in events if e.ts is None or e.ts <= ready_ts]
    # millisecond timestamps on the start-up's own lines (not a stray c10 line's): differences are `derived`
    stamped = [e for e in events if e.kind in _STARTED and e.ts is not None]
    tsrc = "derived" if stamped and sum(1 for e in stamped if e.ts.microsecond) * 2 > len(stamped) else "estimated"  # type: ignore[union-attr]
    start_ts = srv.start_ts
    if start_ts is None:
        return None

    def first(*kinds: str, after: Event | None = None) -> Event | None:
        lo = after.line if after is not None else 0
        return next((e for e in events if e.kind in kinds and e.line > lo and e.ts is not None), None)

    def last(*kinds: str, after: Event | None = None, before: Event | None = None) -> Event | None:
        lo = after.line if after is not None else 0
        hi = before.line if before is not None else 1 << 62
        return next((e for e in reversed(events) if e.kind in kinds and lo < e.line < hi and e.ts is not None), None)

    def between(a: Event | None, b: Event | None, *kinds: str) -> list[Event]:
        lo = a.line if a is not None else 0
        hi = b.line if b is not None else 1 << 62
        return [e for e in events if e.kind in kinds and lo < e.line < hi]

    m_engine = first("engine_config")
    m_load0 = first("model_loading", after=m_engine)
    m_loaded = last("model_loaded", after=m_load0 or m_engine)
    m_kv = first("kv_cache_size", "kv_cache_blocks", after=m_loaded)
    m_init = first("engine_initialized", after=m_loaded)
    if m_init is None:
        m_init = last("cuda_graph_captured", after=m_kv or m_loaded)
    if m_kv is not None and m_init is not None and m_init.line < m_kv.line:
        m_kv = None
    device = next((str(e.fields.get("kv_device") or "") for e in events if e.kind == "kv_cache_size"), "")
    cfg_dev = str(srv.config.get("device_config") or "")
    on_cpu = "cpu" in (device + " " + cfg_dev).lower()

    segs: list[_Seg] = []
    cur: Event | None = None
    if m_engine is not None:
        segs.append(_Seg("process start", cur, m_engine))
        cur = m_engine
    if m_load0 is not None:
        segs.append(_Seg("workers / device" if cur is not None else "process start", cur, m_load0))
        cur = m_load0
    if m_loaded is not None:
        seg = _Seg("model load", cur, m_loaded)
        w = [(e, _secs(e.fields.get("duration_s"))) for e in between(cur, m_kv or m_init, "model_loaded")
             if e.pattern == "startup.weights_took"]
        w = [(e, s) for e, s in w if s is not None]
        if w:
            e, s = max(w, key=lambda x: x[1])  # tensor-parallel workers: the slowest
            seg.subs.append(("weights", s, "logged", e, _line(e)))
        tot = [(e, _secs(e.fields.get("duration_s"))) for e in between(cur, m_kv or m_init, "model_loaded")
               if e.pattern == "startup.model_loading_took"]
        tot = [(e, s) for e, s in tot if s is not None]
        if tot:
            seg.umbrella = max(s for _, s in tot)
        segs.append(seg)
        cur = m_loaded
    dsegs: list[_Seg] = []  # model loaded → engine initialised: what `init engine … took X` covers
    if m_kv is not None:
        # with no 'weights loaded' line (V0 before 0.5), the stretch to the KV cache's size holds the loading
        seg = _Seg("KV cache" if cur is m_loaded else "model load" if cur is not None else "process start", cur, m_kv)
        dsegs.append(seg)
        _compile_subs(seg, between(cur, m_kv, "compile", "warmup", "memory_profiling"), tsrc)
        segs.append(seg)
        cur = m_kv
    if m_init is not None:
        seg = _Seg("KV cache", cur, m_init)
        evs = between(cur, m_init, "compile", "warmup", "memory_profiling", "cuda_graph_captured")
        if m_init.kind == "cuda_graph_captured":
            evs.append(m_init)
        _compile_subs(seg, evs, tsrc)
        segs.append(seg)
        dsegs.append(seg)
        x = _secs(m_init.fields.get("duration_s")) if m_init.kind == "engine_initialized" else None
        if x is not None:
            d0 = dsegs[0]
            d0.umbrella = max(0.0, x - sum(_len(d, tsrc, _ts_diff(d))[0] for d in dsegs[1:]))
            if d0.start is not m_loaded or m_loaded is None:  # the time before `init engine` began is not it
                d0.lead = _next_phase(d0.start, m_engine, m_load0, m_loaded, None, None, on_cpu, events)
            if len(dsegs) == 1 and not d0.subs:
                d0.base = "engine init"  # profile, KV cache and warm-up, not broken down by the log
        cur = m_init
    open_seg: _Seg | None = None
    if ready_ts is not None:
        ready_ev = next((e for e in events if e.kind in ("server_ready", "server_starting")
                         and (cur is None or e.line > cur.line)), None)
        segs.append(_Seg("API server" if cur is not None and cur is m_init else _next_phase(cur, m_engine, m_load0,
                                                                                              m_loaded, m_kv, m_init,
                                                                                              on_cpu, events),
                         cur, ready_ev))
    else:
        open_seg = _Seg(_next_phase(cur, m_engine, m_load0, m_loaded, m_kv, m_init, on_cpu, events), cur, None)
        if open_seg.base in ("compile / warm-up", "KV cache") and cur is not None:
            _compile_subs(open_seg, between(cur, None, "compile", "warmup", "memory_profiling", "cuda_graph_captured"),
                          tsrc)
        segs.append(open_seg)

    out: list[Phase] = []
    cursor = start_ts
    slack = 1.0 if tsrc == "estimated" else 0.001
    stop_ts = ready_ts or srv.end_ts or (events[-1].ts if events and events[-1].ts else start_ts)
    if ready_ts is None:  # a failed start-up stopped at its first error, not at the teardown's last line
        lo = cur.line if cur is not None else 0
        err = next((e for e in events if e.line > lo and e.ts is not None and (
            e.kind in _FAILED or e.level in ("ERROR", "CRITICAL"))), None)
        if err is not None:
            stop_ts = err.ts  # type: ignore[assignment]
            open_seg.end = err  # type: ignore[union-attr]
            kv_err = err.kind in _KV_FAILED or any(e.kind in _KV_FAILED for e in events if e.line > err.line)
            if open_seg.base != "KV cache" and cur is m_kv and cur is not None and (
                    kv_err or (cur.ts is not None and (stop_ts - cur.ts).total_seconds() < 1.0)):
                open_seg.base = "KV cache"  # it failed on the KV cache it had just sized
                open_seg.subs = []
    for seg in segs:
        mark = seg.start.ts if seg.start is not None and seg.start.ts else start_ts
        # vLLM's stated durations beat 1-second timestamps: less than a second of slack is rounding
        seg_start = cursor if timedelta(0) <= mark - cursor < timedelta(seconds=slack) else max(cursor, mark)
        seg_end_ts = seg.end.ts if seg.end is not None and seg.end.ts is not None else stop_ts
        is_open = seg is open_seg
        diff = (seg_end_ts - seg_start).total_seconds()
        if seg.umbrella is not None and 0 < diff - seg.umbrella < slack and seg.lead is None:
            diff = seg.umbrella
        length, base_len = _len(seg, tsrc, diff)
        t = seg_start
        src = _base_source(seg, tsrc) if seg.umbrella is not None and seg.umbrella >= diff else tsrc
        parts = [(seg.base, base_len, src, seg.end, _base_detail(seg))]
        if seg.lead is not None:
            lead = max(0.0, base_len - max(0.0, (seg.umbrella or 0.0) - sum(x[1] for x in seg.subs)))
            parts = [(seg.lead, lead, tsrc, seg.start, _base_detail(_Seg(seg.lead, seg.start, seg.end)) + " (before it)"),
                     (seg.base, base_len - lead, "logged" if not seg.subs else "derived", seg.end, _line(seg.end)
                      if seg.end is not None else "")]
        parts += seg.subs
        if seg.base == "KV cache" and seg.end is not None and seg.end.kind in ("kv_cache_size", "kv_cache_blocks"):
            parts = parts[1:] + parts[:1]  # warm-up/compile runs first, the KV cache is sized at the end
        for name, secs, src, ev, detail in parts:
            if not (secs < _MAX_PHASE_S):  # a hostile or corrupt "took N seconds" (inf, nan, 10**400): no phase
                continue
            if secs <= 0 and not (is_open and name == open_seg.base):  # type: ignore[union-attr]
                continue
            end = t + timedelta(seconds=secs)
            out.append(Phase(name=name, start=t, end=end, seconds=secs, source=src, server=index, file=srv.file,
                             line=ev.line if ev is not None else (seg.end.line if seg.end is not None else 0),
                             complete=not (is_open and name == open_seg.base), detail=detail))  # type: ignore[union-attr]
            t = end
        cursor = seg_start + timedelta(seconds=length)
    if not out:
        return None
    end = max(p.end for p in out if p.end is not None)
    return Startup(server=index, file=srv.file, start=start_ts, end=end, total_s=(end - start_ts).total_seconds(),
                   ready=ready_ts is not None, source="logged", phases=out, logged=list(out))


def _compile_subs(seg: _Seg, evs: list[Event], tsrc: str) -> None:
    """Compile / warm-up and memory-profiling parts of an engine-initialisation segment."""
    total = [e for e in evs if e.kind == "compile" and e.fields.get("action") == "total"]
    graphs = [e for e in evs if e.kind == "cuda_graph_captured"]
    w0 = next((e for e in evs if e.kind == "warmup" and e.fields.get("action") == "start"), None)
    w1 = next((e for e in evs if e.kind == "warmup" and e.fields.get("action") == "done"
               and (w0 is None or e.line > w0.line)), None)
    comp = 0.0
    detail = []
    src = "logged"
    for group in (total, graphs):
        vals = [(e, _secs(e.fields.get("duration_s"))) for e in group]
        vals = [(e, s) for e, s in vals if s is not None]
        if vals:
            e, s = max(vals, key=lambda x: x[1])
            comp += s
            detail.append(_line(e))
    ev = (graphs or total or [None])[-1]
    if not comp and w0 is not None and w1 is not None and w0.ts is not None and w1.ts is not None:
        comp = (w1.ts - w0.ts).total_seconds()
        src = tsrc
        ev = w1
        detail.append("'Warming up model for the compilation...' → 'Warming up done.'")
    if comp > 0 and seg.base != "compile / warm-up":  # (an open compile segment is all compile / warm-up)
        seg.subs.append(("compile / warm-up", comp, src, ev, "; ".join(detail)))
    prof = [(e, _secs(e.fields.get("duration_s"))) for e in evs if e.kind == "memory_profiling"]
    prof = [(e, s) for e, s in prof if s is not None]
    if prof and seg.base == "KV cache":
        e, s = max(prof, key=lambda x: x[1])
        seg.subs.append(("KV cache", s, "logged", e, _line(e)))


def _len(seg: _Seg, tsrc: str, ts_diff: float = 0.0) -> tuple[float, float]:
    """(segment length, its base phase's part): the timestamps' difference, or more when vLLM's own
    durations say so (1-second timestamps)."""
    stated = sum(_dur(s) for _, s, _, _, _ in seg.subs)
    length = max(_dur(ts_diff), stated, _dur(seg.umbrella or 0.0))
    return length, max(0.0, length - stated)


def _dur(x: float) -> float:
    """A logged duration, or 0 when it cannot be one (inf, nan, negative, beyond ``_MAX_PHASE_S``)."""
    return x if 0.0 <= x < _MAX_PHASE_S else 0.0


def _ts_diff(seg: _Seg) -> float:
    """Seconds between a segment's milestones (0 when one has no time)."""
    a = seg.start.ts if seg.start is not None else None
    b = seg.end.ts if seg.end is not None else None
    return max(0.0, (b - a).total_seconds()) if a is not None and b is not None else 0.0


def _base_source(seg: _Seg, tsrc: str) -> str:
    if seg.umbrella is not None and seg.base == "model load":
        return "derived" if seg.subs else "logged"  # Model loading took X (− the weights)
    if seg.umbrella is not None:
        return "derived"  # init engine took X − the stated parts
    return tsrc


def _base_detail(seg: _Seg) -> str:
    a = _line(seg.start) if seg.start is not None else "the server's first line"
    b = _line(seg.end) if seg.end is not None else "the last line of the start-up"
    return f"{a} → {b}"


def _next_phase(cur: Event | None, m_engine: Event | None, m_load0: Event | None, m_loaded: Event | None,
                m_kv: Event | None, m_init: Event | None, on_cpu: bool, events: Sequence[Event]) -> str:
    """The phase that follows the last milestone reached (what an unfinished start-up was doing)."""
    if cur is None:
        return "process start"
    if cur is m_init:
        return "API server"
    if cur is m_engine:
        return "workers / device"
    if cur is m_load0:
        return "model load"
    after = [e for e in events if e.line > cur.line]
    if cur is m_loaded:
        busy = any(e.kind == "warmup" and e.fields.get("action") == "start" for e in after) and not any(
            e.kind == "warmup" and e.fields.get("action") == "done" for e in after)
        compiling = any(e.kind == "compile" and e.fields.get("action") in ("dynamo_transform", "cache_dir",
                                                                              "graph_dynamic_shape") for e in after) \
            and not any(e.kind == "compile" and e.fields.get("action") == "total" for e in after)
        return "compile / warm-up" if busy or compiling else "KV cache"
    if cur is m_kv:
        # GPU: the KV cache is allocated at once, then CUDA graphs are captured; CPU (warmed up before the KV
        # cache is sized): allocation is what is left
        eager = any("enforce_eager=True" in e.text for e in events if e.kind == "engine_config")
        warmed = any(e.kind == "warmup" and e.fields.get("action") == "done" and e.line < cur.line for e in events)
        return "KV cache" if on_cpu or eager or warmed else "compile / warm-up"
    return "other"


def _views(run: Run) -> list[Any]:
    from .rules._util import servers

    return servers(run)


def _match(w: Any, srvs: Sequence[ServerRun]) -> int:
    """The server run a traced waterfall belongs to (API-server pid, else time), or −1."""
    best, gap = -1, None
    for i, s in enumerate(srvs):
        if w.api_pid and s.api_pid and w.api_pid != s.api_pid:
            continue
        if s.start_ts is None:
            continue
        end = s.ready_ts or s.end_ts or s.start_ts
        if s.start_ts - timedelta(minutes=2) <= w.start_ts <= end + timedelta(seconds=5):
            d = abs((w.start_ts - s.start_ts).total_seconds())
            if gap is None or d < gap:
                best, gap = i, d
    return best


def _traced(w: Any, index: int, file: str) -> list[Phase]:
    out = []
    for name, secs in w.phases.items():
        steps = [s for s in w.steps if s.phase == name and s.self_s > 0]
        if not steps:
            continue
        names = sorted({s.name for s in steps}, key=lambda n: -sum(x.self_s for x in steps if x.name == n))
        out.append(Phase(name=name, start=min(s.start_ts for s in steps), end=max(s.end_ts for s in steps),
                         seconds=secs, source="traced", server=index, file=file or w.file,
                         detail="spans " + ", ".join(f"'{n}'" for n in names[:4])))
    out.sort(key=lambda p: p.start or datetime.min)
    if not w.complete and out:
        # spans are exported when they end: the start-up is still in whatever follows the last one
        last = w.last_step
        out.append(Phase(name="other", start=w.end_ts, end=w.end_ts, seconds=0.0, source="traced", server=index,
                         file=file or w.file, complete=False,
                         detail=f"no 'Overall Loading' span: last finished step '{last.name if last else '?'}'"))
    return out


_CACHE: list[tuple[Any, tuple[int, ...], list[Startup]]] = []


def startups(run: Run) -> list[Startup]:
    """One ``Startup`` per server start: traced when its loading spans are there, else from the log's lines
    (computed once per Run: the timeline, the report and the diagnosis share it)."""
    import weakref

    size = (len(run.notable), len(run.servers), len(run.trace_spans), id(run.trace_spans))
    for ref, n, res in _CACHE:
        if ref() is run and n == size:
            return res
    res = _startups(run)
    try:
        _CACHE.append((weakref.ref(run), size, res))
    except TypeError:  # not weak-referenceable: no cache
        return res
    if len(_CACHE) > 4:
        _CACHE.pop(0)
    return res


def of_server(run: Run, file: str, index: int) -> Startup | None:
    """The start-up of the server run ``index`` of ``file`` (``ServerRun.file``/``.index``, as the diagnosis's
    ``ServiceState`` names it), or None when the log shows none."""
    for s in startups(run):
        if 0 <= s.server < len(run.servers):
            srv = run.servers[s.server]
            if srv.file == file and srv.index == index:
                return s
    return None


def _startups(run: Run) -> list[Startup]:
    srvs = run.servers
    views = _views(run) if srvs else []
    out: dict[int, Startup] = {}
    for i, s in enumerate(srvs):
        try:
            st = _server_startup(s, i, views[i].events, views[i].ready_line)
        except (OverflowError, ValueError):  # a date arithmetic past year 9999: no waterfall for that start
            st = None
        if st is not None:
            out[i] = st
    lone: list[Startup] = []
    for w in run.startup:
        i = _match(w, srvs)
        ph = _traced(w, i, srvs[i].file if i >= 0 else w.file)
        if not ph:
            continue
        logged = out[i].logged if i in out else []
        end, total = w.end_ts, w.total_s
        lop = stopped_in(logged)
        if lop is not None and lop.end is not None and lop.end > w.end_ts:
            # the spans of a start-up that never finished stop at its last finished step; the log says what
            # it was doing after that (and for how long)
            ph = [p for p in ph if p.complete]
            secs = (lop.end - max(w.end_ts, lop.start or w.end_ts)).total_seconds()
            ph.append(Phase(name=lop.name, start=max(w.end_ts, lop.start or w.end_ts), end=lop.end, seconds=secs,
                            source=lop.source, server=i, file=lop.file, line=lop.line, complete=False,
                            detail=lop.detail + " (after the last traced step)"))
            end, total = lop.end, (lop.end - w.start_ts).total_seconds()
        st = Startup(server=i, file=srvs[i].file if i >= 0 else w.file, start=w.start_ts, end=end,
                     total_s=total, ready=bool(srvs[i].ready) if i >= 0 else w.complete, source="traced",
                     phases=ph, logged=logged, waterfall=w)
        if i >= 0 and (i not in out or out[i].source != "traced"):
            out[i] = st
        else:
            lone.append(st)
    res = [out[i] for i in sorted(out)] + lone
    res.sort(key=lambda s: s.start or datetime.min)
    return res


#: Start-ups whose phases get timeline entries of their own (then headlines only, and every unfinished one).
MAX_DETAILED = 10


def timeline_entries(run: Run, starts: Sequence[Startup] | None = None) -> list[Any]:
    """Timeline entries for the start-ups told by the log alone (the traced ones have their own: each span,
    ``vllmlog.traces.startup.timeline_entries``): one headline per start, then each phase of ≥ 5 %."""
    from .timeline import TimelineEntry

    out = []
    every = list(starts if starts is not None else startups(run))
    for s in every:  # traced (their spans have entries of their own): only what the log adds after the last span
        for p in s.phases if s.source == "traced" else ():
            if not p.complete and p.source != "traced":
                out.append(TimelineEntry(
                    ts=p.start, kind="lifecycle", file=p.file, line=p.line, severity="warning",
                    text=f"start-up {p.name}: {p.seconds:.2f} s ({p.source}, after the last traced step) — still in it "
                         "when the log stopped", data={"source": p.source, "phase": p.to_dict()}))
    todo = [s for s in every if s.source != "traced"]
    for n, s in enumerate(todo):
        sev = "info" if s.stopped_in() is None else "warning"
        out.append(TimelineEntry(ts=s.start, kind="lifecycle", text=s.headline(), file=s.file, severity=sev,
                                 data={"source": "logged", "startup": s.to_dict()}))
        if n >= MAX_DETAILED and s.stopped_in() is None:
            continue  # a crash loop's hundred start-ups: their headlines only
        for p in s.phases:
            if p.seconds < 0.05 * max(s.total_s, 1e-9) and p.complete:
                continue
            mark = "~" if p.source == "estimated" else ""
            out.append(TimelineEntry(
                ts=p.start, kind="lifecycle", file=p.file, line=p.line, severity="info" if p.complete else "warning",
                text=f"start-up {p.name}: {mark}{p.seconds:.2f} s ({p.source})" + ("" if p.complete else
                                                                                    " — still in it when the log stopped"),
                data={"source": p.source, "phase": p.to_dict()}))
    return out
