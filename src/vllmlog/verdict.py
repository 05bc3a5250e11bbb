"""The verdict: a positive statement of what was observed, not only the absence of findings.

``down`` / ``failing`` / ``degraded`` when an incident is open at critical / error / warning; otherwise
``healthy`` — qualified ``saturated`` (it ran at a limit: every seat taken, the KV cache full, bursts queued and
drained, without clients feeling it) or ``idle`` (served, but no request came) — or ``incomplete`` when too
little was observed to say (nothing served, an input that could not be read whole). Every verdict lists the
checks that ran, what each saw, and the input coverage.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .rules.base import Severity

if TYPE_CHECKING:  # pragma: no cover
    from .incidents import Incident
    from .rules.base import Finding
    from .run import Run
    from .state import ServiceState

STATUSES = ("down", "failing", "degraded", "incomplete", "healthy")
_BY_SEV = {Severity.CRITICAL: "down", Severity.ERROR: "failing", Severity.WARNING: "degraded"}
PASSED, FAILED, NOT_OBSERVED = "passed", "failed", "not observed"

#: check name → the symptom kind that fails it.
CHECKS = (
    ("became ready", "never_ready"),
    ("engine alive", "dead"),
    ("making progress", "stalled"),
    ("requests succeed", "failing"),
    ("requests accepted", "rejected"),
    ("queue drains", "queueing"),
    ("no preemption", "thrashing"),
    ("clients stay", "aborting"),
    ("speed steady", "slow"),
)


@dataclass
class Check:
    """One check of the verdict: what it looked at and what it saw."""

    name: str
    status: str
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"check": self.name, "status": self.status, "detail": self.detail}


@dataclass
class Verdict:
    """``status`` (one of ``STATUSES``), an optional qualifier (``saturated``, ``idle``), the reason in words,
    the checks and the coverage they rest on."""

    status: str
    qualifier: str | None = None
    reason: str = ""
    checks: list[Check] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)
    """Why the input could not be observed whole (truncated gzip, unreadable file, lines cut …)."""
    coverage: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``HEALTHY (saturated)``, ``DOWN``, ``INCOMPLETE`` …"""
        return self.status.upper() + (f" ({self.qualifier})" if self.qualifier else "")

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "qualifier": self.qualifier, "label": self.label, "reason": self.reason,
                "checks": [c.to_dict() for c in self.checks], "incomplete": list(self.incomplete),
                "coverage": dict(self.coverage)}


def input_problems(run: Run) -> list[str]:
    """What of the input could not be read whole (from the parse statistics and ``run.coverage``)."""
    out: list[str] = []
    cov = getattr(run, "coverage", None)
    reasons = getattr(cov, "reasons", None)
    if reasons:
        out += [str(r) for r in reasons]
    for s in getattr(run.parse_stats, "inputs", []) or []:
        if getattr(s, "incomplete", False):
            msg = f"{s.path}: input ended early (truncated or unreadable)"
            if msg not in out:
                out.append(msg)
        if getattr(s, "truncated_lines", 0):
            msg = f"{s.path}: {s.truncated_lines} over-long line(s) truncated"
            if msg not in out:
                out.append(msg)
    return out


def verdict_of(run: Run, incidents: list[Incident], findings: list[Finding], states: list[ServiceState]) -> Verdict:
    """The verdict for one diagnosis."""
    open_ = [i for i in incidents if i.severity >= Severity.WARNING]
    problems = input_problems(run)
    kinds: dict[str, list[Any]] = {}
    for i in incidents:
        for s in i.symptoms:
            kinds.setdefault(s.kind, []).append(s)
    serving = [s for s in states if s.lifecycle.serving]
    intervals = sum(s.coverage.stats_intervals for s in states)
    requests = sum(max(s.coverage.requests, getattr(s.view.srv, "api_requests", 0) or 0) for s in states)
    cov = {"lines": getattr(run.parse_stats, "lines", 0), "server_runs": len(states), "serving": len(serving),
           "stats_intervals": intervals, "requests": requests,
           "stats_gaps": sum(len(s.coverage.gaps) for s in states),
           "trimmed_lines": sum(len(s.coverage.trimmed) for s in states)}
    checks = [_check(name, kind, kinds, states, serving, intervals) for name, kind in CHECKS]
    if open_:
        worst = max(i.severity for i in open_)
        top = sorted(open_, key=lambda i: i.sort_key())[0]
        v = Verdict(_BY_SEV[worst], reason=top.headline, checks=checks, incomplete=problems, coverage=cov)
        return v
    if not states or (not serving and not any(s.lifecycle.started for s in states)):
        return Verdict("incomplete", reason="no vLLM server activity in the input" if not problems else problems[0],
                       checks=checks, incomplete=problems or ["no vLLM server activity in the input"], coverage=cov)
    if problems:
        return Verdict("incomplete", reason="; ".join(problems[:3]), checks=checks, incomplete=problems, coverage=cov)
    if not serving:
        return Verdict("incomplete", reason="the log shows a start-up but no serving (the excerpt ends before the server "
                       "was ready)", checks=checks, incomplete=["no serving observed"], coverage=cov)
    qual, why = _qualifier(states, requests)
    return Verdict("healthy", qual, reason=why, checks=checks, coverage=cov)


def _check(name: str, kind: str, kinds: dict[str, list[Any]], states: list[ServiceState], serving: list[ServiceState],
           intervals: int) -> Check:
    bad = [s for s in kinds.get(kind, []) if s.severity >= Severity.WARNING]
    if bad:
        return Check(name, FAILED, bad[0].headline)
    if kind == "never_ready":
        if serving:
            ex = [s for s in serving if s.lifecycle.excerpt]
            return Check(name, PASSED, f"{len(serving)} server run(s) served" + (" (the log starts mid-run)" if ex else ""))
        return Check(name, NOT_OBSERVED, "no serving in the log")
    if not serving:
        return Check(name, NOT_OBSERVED, "the server did not serve")
    if kind in ("stalled", "queueing", "thrashing", "slow") and not intervals:
        return Check(name, NOT_OBSERVED, "no stats lines (--disable-log-stats, or stats at DEBUG while idle)")
    detail = {
        "dead": "no engine error while serving",
        "stalled": "tokens produced whenever requests ran",
        "failing": "no server errors (5xx, failed requests)",
        "rejected": "no significant share of requests rejected",
        "queueing": "every queue drained",
        "thrashing": "no preemption",
        "aborting": "aborts at a normal level",
        "slow": "throughput steady against the run's own baseline",
    }[kind]
    return Check(name, PASSED, detail)


#: Saturation seen for this long (two 5 s stats intervals) makes a healthy run *healthy (saturated)*.
SATURATED_S = 10.0


def _qualifier(states: list[ServiceState], requests: int) -> tuple[str | None, str]:
    xs = [x for s in states for x in s.intervals]
    busy = [x for x in xs if x.busy]
    if not busy and requests == 0:
        return "idle", "served, but no request was running in the observed window"
    at_cap = [x for x in busy if x.binding == "max_num_seqs" or (x.seat_util or 0) >= 1.0]
    kv_full = [x for x in busy if (x.kv or 0) >= 0.9]
    queued = [x for x in busy if x.waiting > 0]
    parts = []
    if at_cap:
        parts.append(f"Running at its seat limit in {len(at_cap)} interval(s)")
    if kv_full:
        parts.append(f"KV cache ≥ 90 % in {len(kv_full)} interval(s)")
    if queued:
        parts.append(f"requests queued in {len(queued)} interval(s) and drained")
    # how long it was saturated, not how many stats lines said so (the stats interval is a setting)
    seen = {id(x): x.dt_s for x in at_cap + kv_full + queued}
    if parts and ((len(at_cap) + len(kv_full) + len(queued)) >= 2 or sum(seen.values()) >= SATURATED_S):
        return "saturated", "; ".join(parts) + " — without errors, stalls or lasting queues"
    return None, f"{requests} request(s), {len(busy)} busy stats interval(s); every check passed"
