"""The incident timeline: lifecycle events, warnings and errors, metric turning points and findings in
one chronological story — the handbook's log → metric → symptom chain.

``build_timeline(run, findings)`` returns ``TimelineEntry`` objects (the HTML report and
``vllmlog timeline`` render them). Repeated lines (aborts, 4xx/5xx, preemptions) are collapsed into one
entry with a count; stats series contribute only their turning points (KV 70 % → 99 %, Waiting 0 → 200,
throughput collapse, a gap in the stats lines)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Iterable, Sequence

from .errors import ConfigError
from .model import Event
from .rules import _util as u
from .rules.base import Finding

#: Lifecycle kinds and how the timeline words them.
_LIFE = {
    "server_version": "server starting", "server_banner": "server starting", "engine_config": "engine config",
    "model_loading": "loading model", "model_loaded": "model loaded", "kv_cache_size": "KV cache sized",
    "kv_cache_blocks": "KV cache sized", "engine_initialized": "engine initialised", "server_ready": "ready",
    "server_shutdown": "shutting down", "server_stopped": "server stopped", "engine_shutdown": "engine stopping",
}
#: Failure kinds shown whatever their log level.
_FAIL = {
    "cuda_oom", "kv_cache_no_memory", "kv_cache_insufficient", "insufficient_free_memory", "engine_fatal",
    "engine_start_failed", "engine_dead", "engine_core_died", "worker_died", "worker_exception", "cuda_error",
    "engine_iteration_timeout", "shm_broadcast_timeout", "rpc_timeout", "engine_start_timeout", "nccl_timeout",
    "nccl_error", "model_load_error", "max_model_len_too_large", "port_in_use", "config_error", "oom_killed",
    "process_crashed", "block_allocation_failed", "queue_wait_exceeded",
}
#: Kinds that mark a crash in the lifecycle (first of each kind per server run).
_CRASH = {"engine_fatal", "engine_core_died", "worker_died", "engine_start_failed", "process_crashed", "oom_killed"}
#: Kinds collapsed into one entry per burst.
_BURST = {"request_aborted", "request_failed", "http_access", "preemption", "stream_error", "context_length_exceeded",
          "request_preprocess_error", "bad_request_params", "request_exception", "slow_generation", "request_rejected"}
_NOISE = {"python_warning", "nanobind_leak", "resource_leak", "shutdown_step", "log", "unparsed", "torch_log", "cpp_log",
          "environment_notice", "compile", "nccl_debug", "progress"}
_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?\s*$")


@dataclass
class TimelineEntry:
    """One moment of the incident story."""

    ts: datetime | None
    kind: str
    """``incident``, ``lifecycle``, ``error``, ``warning``, ``metric`` or ``finding``."""
    text: str
    """What happened, in words (with the numbers)."""
    file: str = ""
    line: int = 0
    process: str | None = None
    severity: str | None = None
    count: int = 1
    code: str | None = None
    """Finding code (``finding`` entries)."""
    raw: str = ""
    """The log line itself, when the entry comes from one."""
    data: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {
            "ts": self.ts.isoformat() if self.ts else None, "kind": self.kind, "text": self.text, "file": self.file,
            "line": self.line, "process": self.process, "severity": self.severity, "count": self.count,
            "code": self.code, "raw": self.raw, "data": self.data,
        }


def parse_window(value: str | timedelta | None, default: timedelta = timedelta(minutes=10)) -> timedelta:
    """``"10m"``, ``"90s"``, ``"1h"`` → timedelta; raises ConfigError."""
    if value is None:
        return default
    if isinstance(value, timedelta):
        return value
    m = _DUR.match(str(value))
    if not m:
        raise ConfigError(f"invalid window {value!r}", hint="use e.g. 90s, 10m or 1h")
    n = float(m[1])
    unit = (m[2] or "s")[0]
    return timedelta(seconds=n * {"s": 1, "m": 60, "h": 3600}[unit])


def parse_around(value: str | datetime | None, run: Any) -> datetime | None:
    """``"03:41:30"``, ``"11-30 03:41:30"`` or ISO time → datetime (date taken from the run)."""
    if value is None or isinstance(value, datetime):
        return value
    s = str(value).strip()
    base = run.start_ts or datetime.now()
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S", "%m-%d %H:%M:%S", "%H:%M:%S", "%H:%M"):
        try:
            t = datetime.strptime(s, fmt)
        except ValueError:
            continue
        if fmt.startswith("%H"):
            return base.replace(hour=t.hour, minute=t.minute, second=t.second, microsecond=0)
        if fmt.startswith("%m"):
            return t.replace(year=base.year)
        return t
    raise ConfigError(f"invalid time {value!r}", hint="use HH:MM:SS, 'MM-DD HH:MM:SS' or an ISO timestamp")


def _head(e: Event) -> str:
    return e.text.split("\n", 1)[0]


def _describe(e: Event) -> str:
    f = e.fields
    if e.kind == "http_access":
        return f"HTTP {f.get('http_status')} on {f.get('method', '')} {f.get('path', '')}".strip()
    if e.kind in ("server_ready",):
        return "server ready (application startup complete)"
    if e.kind == "kv_cache_size" and f.get("kv_cache_tokens"):
        return f"KV cache: {u.ints(u.num(f.get('kv_cache_tokens')))} tokens"
    if e.kind == "kv_cache_blocks" and f.get("num_gpu_blocks"):
        return f"KV cache: {u.ints(u.num(f.get('num_gpu_blocks')))} GPU blocks"
    xt, xm = f.get("exc_type"), f.get("exc_message")
    label = _LIFE.get(e.kind, e.kind.replace("_", " "))
    if xm:
        return f"{label}: {str(xt or '').rsplit('.', 1)[-1]}{': ' if xt else ''}{str(xm)[:140]}"
    if e.kind in ("server_version", "server_banner"):
        ver = f.get("version")
        mdl = f.get("model")
        return "server starting" + (f" (vLLM {ver}" if ver else "") + (f", model {mdl}" if mdl else "") + (")" if ver else "")
    msg = re.sub(r"^\S+\.py:\d+\]\s*", "", u.msg_of(e))
    return f"{label}: {msg[:160]}" if e.kind not in _LIFE else f"{label} — {msg[:140]}"


def _events(run: Any) -> list[TimelineEntry]:
    out: list[TimelineEntry] = []
    burst: dict[tuple[str, str, Any], TimelineEntry] = {}
    for v in u.servers(run):
        if v.index > 0:
            out.append(TimelineEntry(v.srv.start_ts, "lifecycle", f"server restarted (run {v.index + 1} in this file)",
                                     v.file, v.srv.first_line, severity="warning"))
        seen_life: set[str] = set()
        for e in v.events:
            k = e.kind
            if k in _LIFE:
                label = _LIFE[k]
                if label in seen_life and k not in ("server_ready",):
                    continue
                seen_life.add(label)
                out.append(TimelineEntry(e.ts, "lifecycle", _describe(e), e.file, e.line, e.process, raw=_head(e)))
                continue
            if k in _BURST:
                if k == "http_access" and (e.fields.get("http_status") or 0) < 400:
                    continue
                key = (e.file, k if k != "http_access" else f"http{e.fields.get('http_status')}", e.fields.get("reason"))
                cur = burst.get(key)
                if cur is not None and cur.ts and e.ts and (e.ts - cur.data["last"]).total_seconds() <= 60:
                    cur.count += 1
                    cur.data["last"] = e.ts
                    continue
                sev = "error" if k in ("request_failed", "stream_error") or (e.fields.get("http_status") or 0) >= 500 else "warning"
                ent = TimelineEntry(e.ts, "error" if sev == "error" else "warning", _describe(e), e.file, e.line,
                                    e.process, severity=sev, raw=_head(e), data={"last": e.ts})
                burst[key] = ent
                out.append(ent)
                continue
            if k in _CRASH and not v.in_shutdown(e.line) and k not in seen_life:
                seen_life.add(k)
                out.append(TimelineEntry(e.ts, "lifecycle", "crash — " + _describe(e), e.file, e.line, e.process,
                                         severity="critical", raw=_head(e)))
                continue
            if k in _FAIL or (e.level in ("ERROR", "CRITICAL") and k not in _NOISE) or \
                    (e.level == "WARNING" and k not in _NOISE and k != "engine_stats"):
                sev = "error" if (e.level in ("ERROR", "CRITICAL") or k in _FAIL) else "warning"
                if v.in_shutdown(e.line) and k not in ("worker_died", "engine_core_died"):
                    sev = "info"
                out.append(TimelineEntry(e.ts, "error" if sev == "error" else "warning", _describe(e), e.file, e.line,
                                         e.process, severity=sev, raw=_head(e)))
    for ent in out:
        last = ent.data.pop("last", None)
        if ent.count > 1 and last is not None and ent.ts is not None:
            ent.text += f" ×{ent.count} (until {last:%H:%M:%S})"
    return out


def _handbook(run: Any, v: Any) -> list[TimelineEntry]:
    """Turning points of the handbook's per-step lines: KV usage per second, queue size at scheduling."""
    out: list[TimelineEntry] = []
    level = 0
    for d in v.in_file.decode:  # the file's decode seconds, indexed once (rules/_util.FileIndex)
        lv = 3 if d.kv_max >= 0.95 else 2 if d.kv_max >= 0.80 else 1 if d.kv_max >= 0.70 else 0
        if lv > level:
            out.append(TimelineEntry(d.ts, "metric", f"KV-cache usage reaches {u.pct(d.kv_max)} (decode steps)", d.file,
                                     d.first_line, severity="warning" if lv >= 2 else "info"))
        elif lv == 0 and level >= 2:
            out.append(TimelineEntry(d.ts, "metric", f"KV-cache usage back to {u.pct(d.kv_max)}", d.file, d.first_line,
                                     severity="info"))
        level = max(level, lv) if lv else 0  # hysteresis: report new highs and the return to normal
    peak = 0
    for s in v.stats:
        if s.source_kind != "request_scheduled" or s.waiting is None:
            continue
        if s.waiting >= max(10, 2 * peak):
            out.append(TimelineEntry(s.ts, "metric", f"queue grows: Waiting {peak} → {s.waiting} (Running {s.running})",
                                     s.file, s.line, s.process, severity="warning"))
            peak = s.waiting
        elif s.waiting == 0 and peak:
            out.append(TimelineEntry(s.ts, "metric", "queue drained: Waiting → 0", s.file, s.line, s.process,
                                     severity="info"))
            peak = 0
    return out


def _metrics(run: Any) -> list[TimelineEntry]:
    out: list[TimelineEntry] = []
    for v in u.servers(run):
        out += _handbook(run, v)
        for samples in v.by_engine().values():
            interval = u.interval_s(samples)
            prev = None
            kv_level = 0
            waiting_on = False
            peak_wait = 0
            for s in samples:
                kv = s.kv_cache_usage
                if kv is not None:
                    level = 3 if kv >= 0.95 else 2 if kv >= 0.80 else 1 if kv >= 0.70 else 0
                    if level > kv_level:
                        frm = f"{u.pct(prev.kv_cache_usage)} → " if prev is not None and prev.kv_cache_usage is not None else ""
                        out.append(TimelineEntry(s.ts, "metric", f"KV-cache usage {frm}{u.pct(kv)}", s.file, s.line, s.process,
                                                 severity="warning" if level >= 2 else "info"))
                    elif level == 0 and kv_level >= 2:
                        out.append(TimelineEntry(s.ts, "metric", f"KV-cache usage back to {u.pct(kv)}", s.file, s.line,
                                                 s.process, severity="info"))
                    kv_level = max(kv_level, level) if level else 0
                w = s.waiting or 0
                if w > 0 and not waiting_on:
                    out.append(TimelineEntry(s.ts, "metric", f"requests start queueing: Waiting 0 → {w} (Running {s.running})",
                                             s.file, s.line, s.process, severity="info"))
                    waiting_on, peak_wait = True, w
                elif w > 0 and w >= 2 * peak_wait and w - peak_wait >= 10:
                    out.append(TimelineEntry(s.ts, "metric", f"queue grows: Waiting {peak_wait} → {w} (Running {s.running})",
                                             s.file, s.line, s.process, severity="warning"))
                    peak_wait = w
                elif w == 0 and waiting_on:
                    out.append(TimelineEntry(s.ts, "metric", "queue drained: Waiting → 0", s.file, s.line, s.process,
                                             severity="info"))
                    waiting_on, peak_wait = False, 0
                if prev is not None:
                    g0, g1 = prev.generation_throughput or 0, s.generation_throughput or 0
                    if (s.running or 0) > 0 and g0 >= 10 and g1 <= 0.2 * g0:
                        out.append(TimelineEntry(s.ts, "metric", f"throughput collapse: generation {g0:.1f} → {g1:.1f} "
                                                 f"tokens/s with Running {s.running}", s.file, s.line, s.process,
                                                 severity="warning"))
                    if prev.ts and s.ts and (s.ts - prev.ts).total_seconds() > max(3 * interval, interval + 20) \
                            and (prev.running or 0) > 0:
                        out.append(TimelineEntry(prev.ts, "metric", f"no stats line for {u.secs((s.ts - prev.ts).total_seconds())} "
                                                 f"(Running {prev.running} before the gap)", prev.file, prev.line,
                                                 prev.process, severity="warning"))
                    if prev.running is not None and s.running is not None and prev.running >= 8 \
                            and s.running <= 0.75 * prev.running and (s.waiting or 0) > 0:
                        out.append(TimelineEntry(s.ts, "metric", f"Running drops {prev.running} → {s.running} while "
                                                 f"{s.waiting} wait", s.file, s.line, s.process, severity="warning"))
                prev = s
    return out


def incident_entries(incidents: Sequence[Any]) -> list[TimelineEntry]:
    """Each incident (``vllmlog.incidents.Incident``) opens at its onset — what clients felt, the cause and its
    confidence — and, when it ended before the log did, closes at its end: the same incidents ``diagnose``,
    ``analyze`` and the HTML report show."""
    out: list[TimelineEntry] = []
    for inc in incidents:
        if inc.onset is None:
            continue
        c = inc.cause
        ev0 = inc.evidence[0] if inc.evidence else None
        data = {"incident": inc.id, "category": inc.category, "impact": inc.impact, "trend": inc.trend,
                "chain": inc.chain, "superseded": inc.superseded, "confidence": inc.confidence}
        code = c.code if c is not None else None
        out.append(TimelineEntry(inc.onset, "incident", f"{inc.id} opens [{inc.category}, {inc.confidence} "
                                 f"confidence]: {inc.headline}", inc.file or "", ev0.line if ev0 else 0, None,
                                 severity=inc.severity.label, code=code, data={**data, "phase": "open"}))
        if inc.end is None or inc.end <= inc.onset:
            continue
        span = _span((inc.end - inc.onset).total_seconds())
        if inc.trend == "recovered":  # the symptom ended before the log did
            text = f"{inc.id} recovered after {span} ({inc.impact})"
        elif inc.impact == "finding":  # an explainer's finding alone: its last line
            text = f"{inc.id} last seen {span} after it opened"
        else:  # still open when the log ends (or the server died): no close entry
            continue
        out.append(TimelineEntry(inc.end, "incident", text, inc.file or "", ev0.line if ev0 else 0, None,
                                 severity="info", code=code, data={**data, "phase": "close"}))
    return out


def _span(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def build_timeline(run: Any, findings: Sequence[Finding] | None = None, around: datetime | str | None = None,
                   window: timedelta | str | None = None, *, limit: int = 2000,
                   incidents: Sequence[Any] | None = None) -> list[TimelineEntry]:
    """The incident story of ``run``: chronological entries, optionally only ``window`` around a time.

    ``incidents`` (``run_diagnosis(run).incidents``) adds an ``incident`` entry where each opens and ends."""
    entries = _events(run) + _metrics(run) + incident_entries(incidents or [])
    if getattr(run, "trace_spans", None):  # --traces: the start-up waterfall (vllmlog.traces.startup)
        from .traces.startup import timeline_entries

        entries += timeline_entries(run)
    if getattr(run, "servers", None):  # start-ups the log alone tells: what took the time (vllmlog.startup)
        from .startup import timeline_entries as startup_entries

        entries += startup_entries(run)
    for f in findings or []:
        if f.first_seen is None and not f.evidence:
            continue
        ev0 = f.evidence[0] if f.evidence else None
        entries.append(TimelineEntry(f.first_seen, "finding", f"{f.code} [{f.category}] {f.message}", f.file or "",
                                     ev0.line if ev0 else 0, f.process, severity=f.severity.label, count=f.count,
                                     code=f.code, data={"category": f.category}))
    centre = parse_around(around, run)
    if centre is not None:
        half = parse_window(window) / 2 if window is not None else timedelta(minutes=5)
        entries = [e for e in entries if e.ts is not None and centre - half <= e.ts <= centre + half]
    entries.sort(key=lambda e: (e.ts or datetime.min, e.kind != "incident", e.file, e.line, e.kind != "finding"))
    if len(entries) > limit:
        # partition by identity in one pass (a `not in keep` test per entry was quadratic on big logs)
        keep: list[TimelineEntry] = []
        others: list[TimelineEntry] = []
        for e in entries:
            (keep if e.kind in ("incident", "finding", "lifecycle") or e.severity in ("error", "critical") else others).append(e)
        rest = others[: max(0, limit - len(keep))]
        entries = sorted(keep + rest, key=lambda e: (e.ts or datetime.min, e.file, e.line))
    return entries


def around_finding(findings: Iterable[Finding], code: str, incidents: Sequence[Any] = ()) -> datetime | None:
    """Onset of the incident ``code`` names (its id, ``I1``), else the first-seen time of the first finding with
    ``code`` (or category); raises ConfigError when absent."""
    for inc in incidents:
        if inc.id.upper() == code.upper():
            return inc.onset
    for f in findings:
        if f.code.upper() == code.upper() or f.category == code or f.rule == code:
            return f.first_seen
    raise ConfigError(f"no finding {code!r} in this log", hint="`vllmlog diagnose LOG` lists the findings")
