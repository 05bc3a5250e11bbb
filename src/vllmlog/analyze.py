"""`analyze`: log paths → one ``Analysis`` (run + summary + findings + timeline + verdict).

The terminal rendering (``vllmlog.render``), the JSON document (``Analysis.to_dict``) and the
HTML report (``vllmlog.export.html``) all read the same ``Analysis``; every log-derived string
they show passes through a ``Redactor`` (prompts/outputs redacted unless asked otherwise).

The diagnosis (``vllmlog.diagnose``), the timeline (``vllmlog.timeline``) and the RED/USE summary
(``vllmlog.summary``) are separate modules; when one is not available (an older install, an
import error) the analysis records it in ``unavailable`` and the outputs say so instead of
pretending everything is fine.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Sequence

from .errors import InputError
from .redact import DEFAULT as DEFAULT_REDACTOR
from .redact import Redactor
from .numbers import compute, describe, percentile  # noqa: F401  (describe: re-exported)
from .run import Run, load

#: Severities, least to most severe (vllmlog's common vocabulary).
SEVERITIES: tuple[str, ...] = ("info", "warning", "error", "critical")
#: ``--fail-on`` values: a severity, or ``never``.
FAIL_ON_CHOICES: tuple[str, ...] = SEVERITIES + ("never",)

VERDICTS = ("healthy", "degraded", "failing", "incomplete", "unknown")

SCHEMA = "vllmlog.analysis/1"


# --------------------------------------------------------------------------- findings

def severity_name(sev: Any) -> str:
    """A finding's severity as one of ``SEVERITIES`` (accepts enums, strings, odd casing)."""
    if sev is None:
        return "info"
    v = getattr(sev, "value", sev)
    if isinstance(v, int) and not isinstance(v, bool):
        v = getattr(sev, "name", str(v))
    s = str(v).lower()
    if "." in s:
        s = s.rsplit(".", 1)[-1]
    return s if s in SEVERITIES else ("warning" if s == "warn" else "info")


def severity_rank(sev: Any) -> int:
    """0 (info) … 3 (critical)."""
    return SEVERITIES.index(severity_name(sev))


def finding_dict(f: Any) -> dict[str, Any]:
    """A finding (object with ``to_dict`` or a dict) as a plain dict."""
    if isinstance(f, dict):
        d = dict(f)
    elif hasattr(f, "to_dict"):
        d = dict(f.to_dict())
    else:  # pragma: no cover - defensive
        d = {"title": str(f)}
    d["severity"] = severity_name(d.get("severity"))
    return d


def finding_view(d: dict[str, Any]) -> dict[str, Any]:
    """The fields every output shows, whatever the producing rule called them."""
    ev = d.get("evidence") or []
    evidence = []
    for e in ev if isinstance(ev, list) else [ev]:
        if isinstance(e, dict):
            evidence.append({"file": e.get("file"), "line": e.get("line"), "text": str(e.get("text") or e.get("line_text") or ""),
                             "ts": e.get("ts")})
        else:
            evidence.append({"file": None, "line": None, "text": str(e), "ts": None})
    return {
        "severity": severity_name(d.get("severity")),
        "code": d.get("code") or d.get("id") or d.get("rule_id") or "",
        "rule": d.get("rule") or d.get("slug") or d.get("name") or "",
        "title": d.get("title") or d.get("summary") or d.get("rule") or "finding",
        "message": d.get("message") or d.get("detail") or d.get("description") or "",
        "root_cause": d.get("root_cause") or d.get("cause") or "",
        "fix": d.get("remediation") or d.get("fix") or d.get("fixes") or "",
        "first_seen": d.get("first_seen") or d.get("first_ts") or d.get("start") or d.get("ts"),
        "last_seen": d.get("last_seen") or d.get("last_ts") or d.get("end"),
        "count": d.get("count"),
        "evidence": evidence,
    }


def verdict_of(findings: Sequence[dict[str, Any]] | None) -> str:
    """failing if any critical/error finding, degraded if any warning, healthy otherwise."""
    worst = max((severity_rank(f.get("severity")) for f in findings or []), default=0)
    return "failing" if worst >= 2 else "degraded" if worst == 1 else "healthy"


def should_fail(findings: Sequence[dict[str, Any]] | None, fail_on: str) -> bool:
    """True when a finding is at least as severe as ``fail_on`` (``never`` never fails)."""
    if fail_on == "never":
        return False
    floor = SEVERITIES.index(fail_on)
    return any(severity_rank(f.get("severity")) >= floor for f in findings or [])


# --------------------------------------------------------------------------- statistics

def quantile(sorted_vals: Sequence[float], q: float) -> float | None:
    """Linear-interpolated quantile of an ascending list (None when empty), as numpy's default."""
    return percentile(sorted_vals, q * 100)


LATENCY_METRICS = ("queue_s", "ttft_s", "tpot_s", "e2e_s")


def _mean_max(u: dict[str, Any]) -> dict[str, Any]:
    """``count / mean / max`` of a ``numbers.usage`` block (time-weighted mean)."""
    if not u.get("count"):
        return {"count": 0}
    return {"count": u["count"], "mean": u.get("time_weighted_mean", u.get("mean")), "max": u["max"]}


def red_use(run: Run, numbers: dict[str, Any] | None = None) -> dict[str, Any]:
    """The compact RED/USE view the terminal and the HTML report show — a selection of
    ``vllmlog.numbers.compute(run)`` (pass ``numbers`` when already computed), never a second computation.

    RED: request rate, errors and aborts (ratios over finished requests), durations (queue, TTFT,
    TPOT, e2e over successful requests). USE: running/waiting/swapped, KV-cache usage, preemptions,
    throughput."""
    n = numbers if numbers is not None else compute(run)
    r = n["requests"]
    durations = {}
    for m in LATENCY_METRICS:
        d = dict(n["latency"][m])
        if d["count"]:
            # kept for older readers: share of estimated values in the distribution (0 or 1: never mixed)
            d["estimated"] = 1.0 if d["basis"] == "estimated" else 0.0
            d["ts_resolution_s"] = d.get("resolution_s")
        durations[m] = d
    q = n["queue"]
    th = n["throughput"]
    pre = n["preemptions"]
    use = {
        "running": _mean_max(q["running"]),
        "waiting": dict(_mean_max(q["waiting"]), time_above_0_s=n["waiting"]["time_above_0_s"]),
        "swapped": _mean_max(q["swapped"]),
        "kv_cache_usage": _mean_max(n["kv_cache_usage"]),
        "batch_size": _mean_max(n["batch_size"]),
        "prompt_throughput": _mean_max(th["prompt_tokens_per_s"]),
        "generation_throughput": _mean_max(th["generation_tokens_per_s"]),
        "preemptions": pre["total"],
        "preemptions_source": pre["source"],
        "silent_preemption": pre["silent"],
        "preempted_requests": pre["requests_preempted"],
    }
    http = n["http"]
    return {
        "requests": {
            "total": r["total"], "by_status": {k: v for k, v in r["by_status"].items() if v},
            "finished": r["finished"], "failed": r["failed"], "aborted": r["aborted"],
            "failed_or_aborted": r["failed"] + r["aborted"], "unfinished": r["by_status"]["unfinished"],
            "evicted": r.get("evicted", 0),
            "error_rate": r["error_rate"], "abort_rate": r["abort_rate"],
            "rate_per_s": r["rate_per_s"], "rate": r["rate"],
            "http": {"total": http["total"], "errors": http["errors"], "5xx": http["5xx"], "by_status": http["by_status"]},
        },
        "durations": durations,
        "time_to_abort_s": n["time_to_abort_s"],
        "use": use,
        "unmeasured": n["unmeasured"],
        "levels": dict(run.levels),
        "lines": run.parse_stats.lines,
        "events": run.parse_stats.events,
    }


# --------------------------------------------------------------------------- the analysis

@dataclass
class Analysis:
    """Everything ``vllmlog analyze`` reports about a set of logs."""

    run: Run
    red_use: dict[str, Any]
    """The compact RED/USE view every output shows (``red_use``: a selection of ``numbers``)."""
    summary: dict[str, Any] | None
    """The full summary document of ``vllmlog.summary`` (None when unavailable)."""
    findings: list[dict[str, Any]] | None
    """Findings as dicts, worst first; None when the diagnosis could not run."""
    timeline: list[dict[str, Any]] | None
    """Incident timeline entries; None when unavailable."""
    unavailable: dict[str, str] = field(default_factory=dict)
    """Parts that could not be produced → why (``{"diagnosis": "…"}``)."""
    numbers: dict[str, Any] | None = None
    """The shared numbers (``vllmlog.numbers.compute``) that ``red_use`` and ``summary`` show."""
    incidents: list[dict[str, Any]] | None = None
    """Incidents (``vllmlog.incidents``): what clients felt joined with its cause, worst first."""
    verdict_info: dict[str, Any] | None = None
    """The diagnosis's verdict (``vllmlog.verdict.Verdict.to_dict``): status, qualifier, reason, checks."""

    @property
    def coverage(self) -> Any:
        """What was read and what was not (``vllmlog.coverage.Coverage``), computed once."""
        cov = self.__dict__.get("_coverage")
        if cov is None:
            cov = self.__dict__["_coverage"] = self.run.coverage
        return cov

    @property
    def verdict(self) -> str:
        """down / failing / degraded / incomplete / healthy — the diagnosis's verdict (never HEALTHY on input
        that was not read in full); ``unknown`` when the diagnosis could not run."""
        if self.verdict_info is not None:
            v = str(self.verdict_info["status"])
        elif self.findings is None:
            return "unknown"
        else:
            v = verdict_of(self.findings)
        return "incomplete" if v == "healthy" and not self.coverage.complete else v

    @property
    def verdict_label(self) -> str:
        """``HEALTHY (saturated)``, ``DOWN`` … (the verdict's status with its qualifier)."""
        if self.verdict_info is not None:
            return str(self.verdict_info.get("label") or self.verdict.upper())
        return self.verdict.upper()

    @property
    def files(self) -> list[str]:
        return list(self.run.files)

    def views(self) -> list[dict[str, Any]]:
        """Findings normalised for display (see ``finding_view``)."""
        return [finding_view(f) for f in self.findings or []]

    def to_dict(self, redactor: Redactor = DEFAULT_REDACTOR) -> dict[str, Any]:
        """The machine-readable document (``vllmlog analyze --json``)."""
        run = self.run
        rd = redactor.value
        return {
            "schema": SCHEMA,
            "verdict": self.verdict,
            "coverage": self.coverage.to_dict(),
            "files": self.files,
            "time_range": {"start": run.start_ts.isoformat() if run.start_ts else None,
                           "end": run.end_ts.isoformat() if run.end_ts else None},
            "servers": [rd(server_view(s.to_dict())) for s in run.servers],
            "red_use": self.red_use,
            "numbers": self.numbers,
            "summary": rd(self.summary) if self.summary is not None else None,
            "verdict_detail": rd(self.verdict_info) if self.verdict_info is not None else None,
            "incidents": rd(self.incidents) if self.incidents is not None else None,
            "findings": rd(self.findings) if self.findings is not None else None,
            "timeline": rd(self.timeline) if self.timeline is not None else None,
            "unavailable": self.unavailable,
            "traces": run.traces,
            "client": run.client,
            "startup": [w.to_dict() for w in run.startup],
            "parse": {"lines": run.parse_stats.lines, "events": run.parse_stats.events,
                      "unknown_templates": rd(run.parse_stats.to_dict(20)["unknown_templates"])},
        }


def server_view(d: dict[str, Any]) -> dict[str, Any]:
    """A server run's dict without private keys (``_engine_config_seen``)."""
    out = dict(d)
    out["config"] = {k: v for k, v in (d.get("config") or {}).items() if not str(k).startswith("_")}
    return out


def _optional(module: str) -> tuple[Any | None, str | None]:
    try:
        return importlib.import_module(f"vllmlog.{module}"), None
    except ImportError as exc:
        return None, f"vllmlog.{module} is not available ({exc})"


def _summary_detail(run: Run, numbers: dict[str, Any] | None = None) -> tuple[dict[str, Any] | None, str | None]:
    mod, why = _optional("summary")
    if mod is None:
        return None, why
    fn = getattr(mod, "summarize", None)
    if callable(fn):
        try:
            res = fn(run, numbers=numbers) if numbers is not None else fn(run)
        except Exception as exc:  # a bug there must not take the whole report down
            return None, f"summary failed: {type(exc).__name__}: {exc}"
        if hasattr(res, "to_dict"):
            res = res.to_dict()
        return (res if isinstance(res, dict) else None), None
    return None, "vllmlog.summary has no summarize()"


def analyze(
    paths: Sequence[str] | str,
    *,
    year: int | None = None,
    progress: Callable[[int], None] | None = None,
    config: Any = None,
    run: Run | None = None,
    traces: Sequence[str] | Any = None,
    client: str | None = None,
) -> Analysis:
    """Parse the logs (or take an already loaded ``run``), diagnose, build the timeline.

    ``traces``: OTLP JSON trace files whose spans join the journeys (see ``vllmlog.traces``)."""
    if run is None:
        run = load(paths, year=year, progress=progress, traces=traces)
    if client:
        run.add_client(client)  # before the numbers: journeys carry the client's own timings
    unavailable: dict[str, str] = {}
    numbers = compute(run)
    ru = red_use(run, numbers)
    summary, why = _summary_detail(run, numbers)
    if summary is None and why:
        unavailable["summary"] = why

    findings_obj: list[Any] | None = None
    findings: list[dict[str, Any]] | None = None
    incidents: list[dict[str, Any]] | None = None
    verdict_info: dict[str, Any] | None = None
    incident_objs: list[Any] = []
    diag, why = _optional("diagnose")
    if diag is not None and hasattr(diag, "run_diagnosis"):
        try:
            dg = diag.run_diagnosis(run, config=config)
            findings_obj = list(dg.findings)
            findings = [finding_dict(f) for f in findings_obj]  # incident order: each incident's cause first
            incident_objs = list(dg.incidents)
            incidents = [i.to_dict() for i in incident_objs]
            verdict_info = dg.verdict.to_dict() if dg.verdict is not None else None
        except Exception as exc:
            unavailable["diagnosis"] = f"diagnosis failed: {type(exc).__name__}: {exc}"
    else:
        unavailable["diagnosis"] = why or "vllmlog.diagnose has no diagnose()"

    timeline: list[dict[str, Any]] | None = None
    tl, why = _optional("timeline")
    if tl is not None and hasattr(tl, "build_timeline"):
        try:
            # the cap is applied here: build_timeline's own cap compares entries pairwise (quadratic
            # on logs with tens of thousands of warnings); same selection, by identity
            res = list(tl.build_timeline(run, findings_obj or [], limit=1 << 62, incidents=incident_objs))
            timeline = _timeline_dicts(_cap_timeline(res, TIMELINE_LIMIT))
        except Exception as exc:
            unavailable["timeline"] = f"timeline failed: {type(exc).__name__}: {exc}"
    else:
        unavailable["timeline"] = why or "vllmlog.timeline has no build_timeline()"
    return Analysis(run=run, red_use=ru, summary=summary, findings=findings, timeline=timeline, unavailable=unavailable,
                    numbers=numbers, incidents=incidents, verdict_info=verdict_info)


TIMELINE_LIMIT = 2000


def _cap_timeline(entries: list[Any], limit: int) -> list[Any]:
    """At most ``limit`` entries: every finding, lifecycle and error entry, then the earliest others."""
    if len(entries) <= limit:
        return entries
    keep_ids = {id(e) for e in entries if getattr(e, "kind", None) in ("incident", "finding", "lifecycle")
                or getattr(e, "severity", None) in ("error", "critical")}
    room = max(0, limit - len(keep_ids))
    out = []
    for e in entries:  # already chronological
        if id(e) in keep_ids:
            out.append(e)
        elif room > 0:
            out.append(e)
            room -= 1
    return out


def _timeline_dicts(res: Any) -> list[dict[str, Any]]:
    if hasattr(res, "to_dict"):
        res = res.to_dict()
    if isinstance(res, dict):
        res = res.get("entries") or res.get("events") or res.get("timeline") or []
    out = []
    for e in res or []:
        out.append(e.to_dict() if hasattr(e, "to_dict") else dict(e) if isinstance(e, dict) else {"text": str(e)})
    return out


# --------------------------------------------------------------------------- bundled examples

def example_names() -> list[str]:
    """Names of the bundled example logs (``vllmlog analyze --example NAME``)."""
    root = resources.files("vllmlog") / "examples"
    return sorted(p.name[:-4] for p in root.iterdir() if p.name.endswith(".log"))


def example_path(name: str) -> str:
    """Filesystem path of a bundled example log."""
    name = name[:-4] if name.endswith(".log") else name
    if name not in example_names():
        raise InputError(f"no bundled example named {name!r}", hint="choose one of: " + ", ".join(example_names()))
    p = resources.files("vllmlog") / "examples" / f"{name}.log"
    return str(Path(str(p)))
