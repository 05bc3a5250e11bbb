"""The start-up waterfall: vLLM's loading spans as "what took the time" per server start.

vLLM (0.11+, with ``--otlp-traces-endpoint``) exports its start-up as spans, one trace per start:
``Overall Loading`` > ``AsyncMPClient init`` > ``EngineCoreProc init`` > ``Executor init`` > ``Worker init``,
``Loading (CPU|GPU)`` > ``Load model`` > ``Initialize model``, ``Load weights``; ``Prepare model`` >
``Warmup (…)``, ``Capture model``, ``Allocate KV cache``. Their parent links follow the RPCs, not always
the clock (the workers' warm-up is a child of ``Executor init`` but runs inside ``Prepare model``), so the
waterfall nests spans by time containment within the trace and gives every span its *self* time (its
duration less its nested spans'). Self times add up to the total and are summed by phase:

==================  ==========================================================================
phase               spans
==================  ==========================================================================
process start       ``Overall Loading``, ``AsyncMPClient init``, ``EngineCoreProc init``,
                    ``Executor init`` (spawning the engine and worker processes, imports)
workers / device    ``Worker init``, ``Init device``
model load          ``Loading (…)``, ``Load model``, ``Initialize model``
weights             ``Load weights``
compile / warm-up   ``Warmup (…)``, ``Capture model``, names with "compile"
KV cache            ``Allocate KV cache``, ``Profile`` / "memory" profiling
other               ``Prepare model``'s own time, anything else
==================  ==========================================================================

Spans are exported when they end: a start-up still running (or stuck) has its finished inner spans
but no ``Overall Loading`` — ``complete`` is then False and ``last_step`` says how far it got.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Sequence

from .join import utc_naive
from .otlp import Span

ROOT = "Overall Loading"
#: Span names vLLM uses for its start-up (a trace holding one of them is a start-up trace).
STARTUP_NAMES = frozenset({
    ROOT, "AsyncMPClient init", "SyncMPClient init", "EngineCoreProc init", "EngineCore init", "Executor init",
    "Worker init", "Init device", "Loading (CPU)", "Loading (GPU)", "Load model", "Initialize model", "Load weights",
    "Prepare model", "Warmup (CPU)", "Warmup (GPU)", "Capture model", "Allocate KV cache",
})
PHASES = ("process start", "workers / device", "model load", "weights", "compile / warm-up", "KV cache", "other")


def phase_of(name: str) -> str:
    """The phase a start-up span's own time counts for."""
    n = name.lower()
    if n == "load weights" or "weights" in n:
        return "weights"
    if n.startswith("warmup") or "capture" in n or "compile" in n or "cuda graph" in n:
        return "compile / warm-up"
    if "kv cache" in n or "profile" in n or "memory" in n:
        return "KV cache"
    if n.startswith("loading") or n in ("load model", "initialize model"):
        return "model load"
    if n in ("worker init", "init device"):
        return "workers / device"
    if n in ("overall loading", "asyncmpclient init", "syncmpclient init", "enginecoreproc init", "enginecore init",
             "executor init"):
        return "process start"
    return "other"


@dataclass
class Step:
    """One span of the waterfall."""

    name: str
    start_ts: datetime
    end_ts: datetime
    start_s: float
    """Seconds after the start-up began."""
    duration_s: float
    self_s: float
    """Duration less the time of the spans nested in it."""
    depth: int
    phase: str
    process: str | None
    """``vllm.process_kind``/``vllm.process_name`` of the emitting process (``api_server`` when unset)."""
    pid: str | None
    span_id: str
    parent_id: str | None

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {"name": self.name, "start_ts": self.start_ts.isoformat(), "end_ts": self.end_ts.isoformat(),
                "start_s": self.start_s, "duration_s": self.duration_s, "self_s": self.self_s, "depth": self.depth,
                "phase": self.phase, "process": self.process, "pid": self.pid, "span_id": self.span_id,
                "parent_id": self.parent_id, "source": "traced"}


@dataclass
class Waterfall:
    """One server start, from its loading spans."""

    trace_id: str
    start_ts: datetime
    end_ts: datetime
    total_s: float
    complete: bool
    """True when ``Overall Loading`` ended (the start-up finished); False: still running, or stuck."""
    steps: list[Step] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)
    """Phase → seconds of self time (they add up to ``total_s`` when the start-up is complete)."""
    api_pid: str | None = None
    file: str = ""

    @property
    def dominant(self) -> tuple[str, float] | None:
        """The phase that took the most time."""
        if not self.phases:
            return None
        k = max(self.phases, key=lambda p: self.phases[p])
        return k, self.phases[k]

    @property
    def last_step(self) -> Step | None:
        """The step that ended last (how far an incomplete start-up got)."""
        return max(self.steps, key=lambda s: s.end_ts) if self.steps else None

    def headline(self) -> str:
        """One line: total and the phases that took the time."""
        parts = [f"{p} {s:.1f} s" for p, s in sorted(self.phases.items(), key=lambda kv: -kv[1]) if s >= 0.05][:4]
        if self.complete:
            return f"start-up took {self.total_s:.1f} s (traced): " + ", ".join(parts)
        last = self.last_step
        return (f"start-up incomplete after {self.total_s:.1f} s of spans (no '{ROOT}' span): last finished step "
                f"{last.name if last else '?'}; " + ", ".join(parts))

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (the analysis document's ``startup`` list)."""
        dom = self.dominant
        return {"trace_id": self.trace_id, "start_ts": self.start_ts.isoformat(), "end_ts": self.end_ts.isoformat(),
                "total_s": self.total_s, "complete": self.complete, "api_pid": self.api_pid, "file": self.file,
                "phases": dict(self.phases), "dominant_phase": dom[0] if dom else None,
                "dominant_s": dom[1] if dom else None, "headline": self.headline(), "source": "traced",
                "steps": [s.to_dict() for s in self.steps]}


def _union(intervals: list[tuple[int, int]]) -> int:
    """Total length of a union of [start, end) intervals."""
    total = 0
    cur_s = cur_e = None
    for s, e in sorted(intervals):
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s  # type: ignore[operator]
            cur_s, cur_e = s, e
        elif e > cur_e:
            cur_e = e
    if cur_e is not None:
        total += cur_e - cur_s  # type: ignore[operator]
    return total


def build(spans: Sequence[Span], offset_s: float = 0.0) -> Waterfall:
    """The waterfall of one start-up trace's spans."""
    spans = sorted(spans, key=lambda s: (s.start_ns, -s.end_ns))
    t0 = spans[0].start_ns
    t1 = max(s.end_ns for s in spans)
    idx = {id(s): i for i, s in enumerate(spans)}
    # time parent: the shortest span that contains this one; of two with the same interval, the span's
    # own parent link, else the one sorted first (never both ways)
    parent: dict[str, Span | None] = {}
    for s in spans:
        best: Span | None = None
        for o in spans:
            if o is s or not (o.start_ns <= s.start_ns and s.end_ns <= o.end_ns):
                continue
            if o.start_ns == s.start_ns and o.end_ns == s.end_ns and not (
                    s.parent_id == o.span_id or (o.parent_id != s.span_id and idx[id(o)] < idx[id(s)])):
                continue
            lo, lb = o.end_ns - o.start_ns, (best.end_ns - best.start_ns) if best is not None else None
            if best is None or lo < lb or (lo == lb and s.parent_id == o.span_id):  # type: ignore[operator]
                best = o
        parent[s.span_id] = best
    children: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        p = parent[s.span_id]
        if p is not None:
            children[p.span_id].append(s)

    def depth(s: Span) -> int:
        d = 0
        p = parent[s.span_id]
        while p is not None and d < 64:
            d += 1
            p = parent[p.span_id]
        return d

    steps: list[Step] = []
    phases = dict.fromkeys(PHASES, 0.0)
    api_pid = None
    for s in spans:
        kids = children.get(s.span_id, [])
        self_ns = (s.end_ns - s.start_ns) - _union([(k.start_ns, k.end_ns) for k in kids])
        ph = phase_of(s.name)
        phases[ph] += max(0, self_ns) / 1e9
        kind = s.resource.get("vllm.process_kind")
        proc = str(s.resource.get("vllm.process_name") or kind) if kind else "api_server"
        if s.name == ROOT:
            api_pid = s.pid
        steps.append(Step(
            name=s.name, start_ts=utc_naive(s.start_ns, offset_s), end_ts=utc_naive(s.end_ns, offset_s),
            start_s=(s.start_ns - t0) / 1e9, duration_s=s.duration_s, self_s=max(0, self_ns) / 1e9, depth=depth(s),
            phase=ph, process=proc, pid=s.pid, span_id=s.span_id, parent_id=s.parent_id,
        ))
    return Waterfall(
        trace_id=spans[0].trace_id, start_ts=utc_naive(t0, offset_s), end_ts=utc_naive(t1, offset_s),
        total_s=(t1 - t0) / 1e9, complete=any(s.name == ROOT for s in spans), steps=steps,
        phases={k: v for k, v in phases.items() if v > 0}, api_pid=api_pid, file=spans[0].file,
    )


#: Spans of one trace further apart than this are two start-ups (a reused trace id, a copied capture).
GAP_NS = 60 * 10**9


def waterfalls(spans: Iterable[Span], offset_s: float = 0.0) -> list[Waterfall]:
    """One waterfall per server start: the spans of a trace that holds a vLLM start-up span, split where
    more than a minute passes without one running; in start order."""
    by_trace: dict[str, list[Span]] = defaultdict(list)
    for s in spans:
        by_trace[s.trace_id].append(s)
    out = []
    for ss in by_trace.values():
        if not any(s.name in STARTUP_NAMES for s in ss):
            continue
        ss.sort(key=lambda s: s.start_ns)
        group: list[Span] = []
        end = 0
        for s in ss:
            if group and s.start_ns > end + GAP_NS:
                out.append(build(group, offset_s))
                group = []
            end = max(end, s.end_ns) if group else s.end_ns
            group.append(s)
        if group:
            out.append(build(group, offset_s))
    out.sort(key=lambda w: w.start_ts)
    return out


def timeline_entries(run: Any) -> list[Any]:
    """Timeline entries for the start-up waterfalls: one headline per start, and each step that took at
    least 5 % of it (``lifecycle`` entries with the step in ``data``, source ``traced``)."""
    from ..timeline import TimelineEntry

    out = []
    for w in run.startup:
        out.append(TimelineEntry(ts=w.start_ts, kind="lifecycle", text=w.headline(), file=w.file, severity="info",
                                 data={"source": "traced", "startup": {"trace_id": w.trace_id, "total_s": w.total_s,
                                                                     "complete": w.complete, "phases": w.phases}}))
        for s in w.steps:
            if s.duration_s < 0.05 * w.total_s or s.name == ROOT:
                continue
            out.append(TimelineEntry(
                ts=s.start_ts, kind="lifecycle", file=w.file, process=s.process, severity="info",
                text=f"start-up {'  ' * max(0, s.depth - 1)}{s.name}: {s.duration_s:.2f} s"
                     f"{f' (own {s.self_s:.2f} s)' if abs(s.self_s - s.duration_s) >= 0.01 else ''} [{s.phase}]",
                data={"source": "traced", "step": s.to_dict()},
            ))
    return out
