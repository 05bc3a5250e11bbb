"""Incidents: symptoms (what clients felt) joined with the causes that explain them.

One incident per time window of one server run: an impact headline (its worst symptom: dead > never ready /
stalled > failing > rejected > queueing > thrashing > aborting > slow), the best-supported cause chain with a
confidence, the evidence (the cause's lines first; each log record cited by one incident only) and the fixes.

How a cause is attached (``explain``): a finding of an explainer (a rule) explains a symptom when the rule
declares that kind (``Rule.explains``), both belong to the same server run (or one file holds only a worker's
part of it, and they are close in time), the cause *started* no later than the symptom did (start against
start, with a small slack for 1-second timestamps; a cause logged after the fact — an NCCL watchdog — states
its real onset), and the rule's ``mechanism`` check does not refute it. Symptoms that lead to each other (a
stall makes the queue grow and clients give up) join the same incident when they overlap in time. A symptom no
explainer accounts for is still an incident, named by the symptom (low confidence). A finding of an explainer
that needs an impact (``Rule.needs_symptom``: KV near full, a queue, a slow speed, a few aborts) explains
nothing → it is saturation, reported as info; other findings without a symptom stand as their own incident.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Iterable

from .rules import advice
from .rules.base import Evidence, Finding, Rule, Severity
from .symptoms.base import IMPACT, LEADS_TO, Symptom

if TYPE_CHECKING:  # pragma: no cover
    from .run import Run
    from .state import ServiceState

#: Seconds a cause may start after its symptom (1-second timestamps, lines of one event spread over a second).
SLACK_S = 5.0
#: Across files (API-server log + worker log), how far apart a cause and its symptom may be.
CROSS_FILE_S = 120.0
#: Symptoms that lead to each other join one incident when the later starts within this long after the
#: earlier ended.
JOIN_S = 600.0
#: Two symptoms of kinds that feed each other, begun within this many seconds: neither is upstream of the other.
MUTUAL_TIE_S = 30.0
#: Symptom pairs where the first leads to the second only if it began first: a queue or a stall keeps an older
#: symptom going, but a burst of 5xx answers cannot be why clients were already aborting.
ONSET_FIRST = frozenset({("failing", "aborting")})
#: A symptom whose mechanism-confirmed explainer is one of these causes has a cause of its own and is not the
#: consequence of the other: clients that abort at a fixed age, or cancel everything in flight at once, do so
#: whatever the server answered other requests (a stall or a queue, in contrast, is why requests reach a client's
#: timeout, and stays joined).
OWN_CAUSE: dict[tuple[str, str], frozenset[str]] = {("failing", "aborting"): frozenset({"client_abort", "timeout"})}

#: How specific a category is as a root cause (a named mechanism beats a generic one).
SPECIFICITY = {
    "startup_oom": 3, "kv_cache_capacity_error": 3, "runtime_oom": 3, "distributed_nccl": 3, "model_load_failure": 3,
    "config_error": 3, "request_too_long": 3, "bad_request_params": 3,
    "kv_cache_pressure_preemption": 2, "queue_backlog": 2, "timeout": 2, "client_abort": 2,
    "engine_dead": 1, "engine_hang": 1, "slow_throughput": 1,
}
CONFIDENCE = ("low", "medium", "high")


@dataclass
class Incident:
    """One incident: what clients felt (headline), why (cause chain), the lines that show it, what to do."""

    id: str
    severity: Severity
    impact: str
    """The worst symptom kind (``dead``, ``never_ready``, ``stalled``, …), or ``finding`` when an explainer's
    finding stands alone (no symptom detector saw the impact)."""
    headline: str
    category: str
    confidence: str
    file: str | None
    server: int
    onset: datetime | None
    end: datetime | None
    trend: str = "stable"
    cause: Finding | None = None
    findings: list[Finding] = field(default_factory=list)
    symptoms: list[Symptom] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)

    @property
    def chain(self) -> list[str]:
        """Cause → consequences: the root finding's code, then the symptoms in onset order."""
        out = [self.cause.code] if self.cause is not None else []
        out += [s.kind for s in sorted(self.symptoms, key=lambda s: s.onset or datetime.max)]
        return out

    superseded: bool = False
    """A later start of the same server (a restart in the same file) followed: the incident is history."""
    repeats: int = 0
    """Later server runs of the same file that failed the same way (a crash loop), merged into this incident."""

    def sort_key(self) -> tuple[Any, ...]:
        return (-int(self.severity), -IMPACT.get(self.impact, 0), self.superseded, self.onset or datetime.max,
                self.file or "")

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (``vllmlog diagnose --json`` → ``incidents``)."""
        c = self.cause
        return {
            "id": self.id, "severity": self.severity.label, "category": self.category, "impact": self.impact,
            "headline": self.headline, "confidence": self.confidence,
            "cause": ({"code": c.code, "category": c.category, "title": c.title, "message": c.message,
                       "root_cause": c.root_cause} if c is not None else None),
            "chain": self.chain, "onset": _iso(self.onset), "end": _iso(self.end), "trend": self.trend,
            "file": self.file, "server": self.server,
            "evidence": [e.to_dict() for e in self.evidence], "fixes": list(self.fixes),
            "findings": [f.code for f in self.findings], "symptoms": [s.to_dict() for s in self.symptoms],
            "repeats": self.repeats,
        }

    @property
    def alert_code(self) -> str:
        """What ``watch`` alerts on: the cause's code, or the impact when no cause is established."""
        return self.cause.code if self.cause is not None else f"incident:{self.impact}"

    def alert_dict(self) -> dict[str, Any]:
        """The finding-shaped dict ``watch``'s alert engine folds (alert = incident open, resolve = closed):
        the cause finding's fields, with the incident's severity, headline, time span and fixes."""
        c = self.cause
        base = c.to_dict() if c is not None else {"rule": None, "title": self.headline, "evidence": []}
        base.update({
            "code": self.alert_code, "severity": self.severity.label, "category": self.category,
            "message": self.headline, "incident": self.id, "impact": self.impact, "confidence": self.confidence,
            "first_seen": _iso(self.onset), "last_seen": _iso(self.end) or base.get("last_seen"),
            "evidence": [e.to_dict() for e in self.evidence] or base.get("evidence") or [],
            "remediation": list(self.fixes) or base.get("remediation"),
        })
        return base


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat() if ts else None


def onset_of(f: Finding) -> datetime | None:
    """When the cause started: its stated real onset (``data['onset_ts']``, e.g. an NCCL watchdog's
    timeout before its line) or its first line."""
    t = f.data.get("onset_ts")
    return t if isinstance(t, datetime) else f.first_seen


class _Scope:
    """Which findings and symptoms may belong together (same server run, or a worker-only file near in time)."""

    def __init__(self, partial: set[str]) -> None:
        self.partial = partial

    def same(self, a_file: str | None, a_srv: int, a_ts: datetime | None, b_file: str | None, b_srv: int,
             b_ts: datetime | None) -> bool:
        if a_file == b_file:
            return a_srv == b_srv
        if a_file not in self.partial and b_file not in self.partial:
            return False
        if a_ts is None or b_ts is None:
            return False
        return abs((a_ts - b_ts).total_seconds()) <= CROSS_FILE_S


def _explains(rule: Rule, f: Finding, s: Symptom, st: ServiceState | None, scope: _Scope, recs: _Records) -> int:
    """0: no; 1: plausible (kind, scope and time fit); 2: its mechanism is verified (or both cite one record)."""
    if s.kind not in rule.explains:
        return 0
    fo = onset_of(f)
    if not scope.same(f.file, f.server, fo, s.file, s.server, s.onset):
        return 0
    try:
        m = rule.mechanism(f, s, st)
    except Exception:  # pragma: no cover - a broken check must not break the diagnosis
        m = None
    if m is False:
        return 0
    if {recs.key(e) for e in f.evidence if (e.file, e.line) not in recs.stats} & \
            {recs.key(e) for e in s.evidence if (e.file, e.line) not in recs.stats}:
        return 2  # they cite the same log record: one event, seen from both sides
    if fo is not None and s.onset is not None and (fo - s.onset).total_seconds() > SLACK_S:
        if not (f.data.get("logged_late") and s.end is not None and fo <= s.end + timedelta(seconds=CROSS_FILE_S)):
            # a silence that the failure ended: the stats stopped, and the engine's fatal error is what came next —
            # what the engine did while silent is unknown, what ended the silence is the only cause the log shows
            if not (s.kind == "stalled" and s.data.get("stats_stopped") and s.end is not None
                    and abs((fo - s.end).total_seconds()) <= SLACK_S and f.severity >= Severity.CRITICAL):
                return 0
    return 2 if m else 1


def _leads(a: Symptom, b: Symptom) -> bool:
    """``a`` plausibly led to (or kept up) ``b``: ``b`` is a kind ``a`` leads to, same server run, and their
    windows meet — ``a`` began before ``b`` ended and ``b`` began before ``a`` ended (+ ``JOIN_S``): a stall
    that starts while a queue already exists keeps that queue from draining."""
    health_kill = b.kind == "dead" and b.data.get("health_check") and a.kind in ("queueing", "stalled", "slow")
    if (b.kind not in LEADS_TO.get(a.kind, ()) and not health_kill) or (a.file, a.server) != (b.file, b.server):
        return False
    if a.onset is None or b.onset is None:
        return True
    if (a.kind, b.kind) in ONSET_FIRST and (a.onset - b.onset).total_seconds() > SLACK_S:
        return False  # failed answers do not make clients give up on requests that were aborted before them
    b_end = b.end or b.onset
    a_end = a.end or a.onset
    return (a.onset - b_end).total_seconds() <= SLACK_S and (b.onset - a_end).total_seconds() <= JOIN_S


class _Records:
    """Maps an evidence line to the log record (multi-line event) it belongs to."""

    def __init__(self, run: Run) -> None:
        self.by_file: dict[str, tuple[list[int], list[int]]] = {}
        self.stats: set[tuple[str, int]] = {(s.file, s.line) for s in run.series.stats}
        """Stats lines: shared observations, never 'one record' of two findings."""
        spans: dict[str, list[tuple[int, int]]] = {}
        for e in run.notable:
            if e.line_end > e.line:
                spans.setdefault(e.file, []).append((e.line, e.line_end))
        for fname, sp in spans.items():
            sp.sort()
            self.by_file[fname] = ([a for a, _ in sp], [b for _, b in sp])

    def key(self, ev: Evidence) -> tuple[str, int]:
        starts, ends = self.by_file.get(ev.file, ([], []))
        i = bisect.bisect_right(starts, ev.line) - 1
        if i >= 0 and starts[i] <= ev.line <= ends[i]:
            return (ev.file, starts[i])
        return (ev.file, ev.line)


def build(run: Run, found: list[tuple[Rule, Finding]], symptoms: list[Symptom], states: list[ServiceState],
          partial: set[str]) -> list[Incident]:
    """Join findings and symptoms into incidents (worst first). Mutates findings: ``incident``, ``caused_by``,
    severity of consequences and of explainers that found no impact."""
    scope = _Scope(partial)
    st_of = {(s.file, s.index): s for s in states}
    recs = _Records(run)
    found = _dedupe_records(found, recs)
    rule_of = {id(f): r for r, f in found}
    live = [s for s in symptoms if s.severity >= Severity.WARNING]

    # symptom groups: union of symptoms that lead to each other
    parent = list(range(len(live)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    # _leads and (without partial files) _explains need the same server run: pairs are taken within a server
    # run's symptoms (the same partition and links as over all pairs, linear in server runs)
    by_run: dict[tuple[Any, int], list[int]] = {}
    for i, a in enumerate(live):
        by_run.setdefault((a.file, a.server), []).append(i)
    # findings → symptoms they explain (their strength)
    links: dict[int, list[tuple[int, int]]] = {}
    own: dict[int, set[str]] = {}
    every = range(len(live))
    for r, f in found:
        for i in (every if partial else by_run.get((f.file, f.server), ())):
            s = live[i]
            k = _explains(r, f, s, st_of.get((s.file, s.server)), scope, recs)
            if k:
                links.setdefault(id(f), []).append((i, k))
                if k == 2:
                    own.setdefault(i, set()).add(f.category)
    for idx in by_run.values():
        for i in idx:
            for j in idx:
                if i != j and _leads(live[i], live[j]) and not (
                        own.get(j, set()) & OWN_CAUSE.get((live[i].kind, live[j].kind), frozenset())):
                    parent[root(j)] = root(i)
    # a finding explaining symptoms of two groups joins them (one cause, one incident)
    for ls in links.values():
        for (i, _), (j, _) in zip(ls, ls[1:]):
            a, b = live[i], live[j]
            if (a.file, a.server) == (b.file, b.server):
                parent[root(j)] = root(i)
    groups: dict[int, list[int]] = {}
    for i in range(len(live)):
        groups.setdefault(root(i), []).append(i)

    incidents: list[Incident] = []
    attached: set[int] = set()
    # each finding's links split by group once (in finding order, links in symptom order): the candidates of a
    # group are what filtering every finding's links by the group's members gives, without groups × findings
    group_of = {i: g for g, members in enumerate(groups.values()) for i in members}
    per_group: list[list[tuple[Rule, Finding, int, list[Symptom]]]] = [[] for _ in groups]
    for r, f in found:
        split: dict[int, list[tuple[int, int]]] = {}
        for i, k in links.get(id(f), []):
            split.setdefault(group_of[i], []).append((i, k))
        for g, ls in split.items():
            per_group[g].append((r, f, max(k for _, k in ls), [live[i] for i, _ in ls]))
    for g, members in enumerate(groups.values()):
        syms = [live[i] for i in members]
        cands = per_group[g]
        inc = _incident(syms, cands)
        for _, f, _, _ in cands:
            attached.add(id(f))
        incidents.append(inc)
    # explainers' findings no symptom shows: saturation notes, or incidents of their own
    for r, f in found:
        if id(f) in attached:
            continue
        if r.needs_symptom or f.severity < Severity.WARNING:
            if r.needs_symptom and f.severity >= Severity.WARNING:
                f.data["no_impact"] = True
                f.severity = Severity.INFO
                f.message = f"{f.message.rstrip('.')} — no impact on requests seen (saturation, not an incident)."
            continue
        incidents.append(Incident(
            id="", severity=f.severity, impact="finding", headline=f.message, category=f.category,
            confidence="medium", file=f.file, server=f.server, onset=onset_of(f), end=f.last_seen, cause=f,
            findings=[f], evidence=list(f.evidence), fixes=_fixes([f])))
    for inc in incidents:
        st = st_of.get((inc.file, inc.server))
        if st is not None:
            inc.fixes = advice.reconcile(inc.fixes, st.config, max_running=st.coverage.max_running or None)
            inc.superseded = st.lifecycle.restarted
    incidents = _merge_repeats(incidents)
    incidents.sort(key=Incident.sort_key)
    _own_records(incidents, recs)
    for n, inc in enumerate(incidents, 1):
        inc.id = f"I{n}"
        for f in inc.findings:
            f.incident = inc.id
    return incidents


def _depths(syms: list[Symptom]) -> dict[int, int]:
    """Causal depth of each symptom in a group: 0 for those nothing in the group leads to, else 1 + the
    smallest depth of what leads to them."""
    depth: dict[int, int] = {}

    def upstream(o: Symptom, s: Symptom) -> bool:
        # kinds that feed each other (a queue slows first tokens, slow prefill builds a queue): the one that began
        # clearly first is upstream; begun together, neither is
        if not _leads(o, s):
            return False
        if not _leads(s, o):
            return True
        return o.onset is not None and s.onset is not None and (s.onset - o.onset).total_seconds() > MUTUAL_TIE_S

    for s in syms:
        if not any(o is not s and upstream(o, s) for o in syms):
            depth[id(s)] = 0
    for _ in range(len(syms)):
        for s in syms:
            ps = [depth[id(o)] for o in syms if o is not s and id(o) in depth and upstream(o, s)]
            if id(s) not in depth and ps:
                depth[id(s)] = 1 + min(ps)
    for s in syms:
        depth.setdefault(id(s), 0)
    return depth


def _incident(syms: list[Symptom], cands: list[tuple[Rule, Finding, int, list[Symptom]]]) -> Incident:
    syms = sorted(syms, key=Symptom.sort_key)
    worst = syms[0]
    depth = _depths(syms)
    cause = None
    conf = "low"
    if cands:
        order = {id(s): i for i, s in enumerate(syms)}  # worst first

        def rank(c: tuple[Rule, Finding, int, list[Symptom]]) -> tuple[Any, ...]:
            # upstream first; then the cause of the worst symptom (the headline); a specific explainer before a
            # fallback; a verified mechanism before a plausible one; the more specific category; the earlier onset
            r, f, k, explained = c
            t = onset_of(f)
            return (min(depth[id(s)] for s in explained), min(order[id(s)] for s in explained),
                    bool(getattr(r, "fallback", False)), -k, -SPECIFICITY.get(f.category, 1), t or datetime.max,
                    -int(f.severity))
        cands.sort(key=rank)
        _, best, k, explained = cands[0]
        # a cause of what followed is not the cause of the incident: when nothing explains the root symptom, the
        # root symptom names the incident (a stall the clients then gave up on is a stall, not client aborts)
        if min(depth[id(s)] for s in explained) == 0:
            cause = best
            conf = "high" if k == 2 else "medium"
    category = cause.category if cause is not None else _root_symptom(syms).default_category
    sev = max(s.severity for s in syms)
    findings = [c[1] for c in cands]
    for f in findings:
        if f is cause:
            continue
        if f.caused_by is None:
            f.caused_by = cause.code if cause is not None else None
            if cause is not None:
                if f.severity > Severity.INFO and SPECIFICITY.get(f.category, 1) <= SPECIFICITY.get(cause.category, 1):
                    f.severity = min(f.severity, max(Severity.INFO, sev.lowered()))
                f.message = f"{f.message.rstrip('.')} — likely a consequence of {cause.code} ({cause.category})."
    ordered = ([cause] if cause is not None else []) + sorted((f for f in findings if f is not cause), key=Finding.sort_key)
    evid = list(cause.evidence) if cause is not None else []
    for s in syms:
        evid += s.evidence
    headline = worst.headline
    if cause is not None:
        headline += f" Cause: {cause.title.rstrip('.')} [{cause.code}]."
    onsets = [t for t in [s.onset for s in syms] + [onset_of(f) for f in findings] if t is not None]
    ends = [t for t in [s.end or s.onset for s in syms] if t is not None]
    return Incident(
        id="", severity=sev, impact=worst.kind, headline=headline, category=category, confidence=conf,
        file=worst.file, server=worst.server, onset=min(onsets) if onsets else None, end=max(ends) if ends else None,
        trend=worst.trend, cause=cause, findings=ordered, symptoms=syms, evidence=_dedupe(evid, 24),
        fixes=_fixes([f for f in ordered if f is cause or f.severity >= Severity.WARNING])
        or list(dict.fromkeys(s.fix for s in syms))[:2])


def _merge_repeats(incidents: list[Incident]) -> list[Incident]:
    """A crash loop is one incident: the same failure (category and cause) of successive server runs of one file
    joins the first occurrence, which cites each repeat's key line and counts them."""
    first: dict[tuple[Any, ...], Incident] = {}
    out: list[Incident] = []
    for inc in sorted(incidents, key=lambda i: (i.file or "", i.server, i.onset or datetime.max)):
        if inc.impact not in ("never_ready", "dead", "finding"):
            out.append(inc)
            continue
        key = (inc.file, inc.category, inc.cause.code if inc.cause is not None else inc.impact, inc.impact)
        head = first.get(key)
        if head is None or head.server == inc.server:
            first.setdefault(key, inc)
            out.append(inc)
            continue
        head.repeats = getattr(head, "repeats", 0) + 1
        head.superseded = inc.superseded
        if inc.evidence:
            head.evidence.append(inc.evidence[0])
        head.findings += inc.findings
        head.symptoms += inc.symptoms
        head.end = max((t for t in (head.end, inc.end) if t is not None), default=None)
    for inc in first.values():
        n = getattr(inc, "repeats", 0)
        if n:
            inc.headline = f"{inc.headline} (the same failure again in {n} later restart{'s' if n > 1 else ''})"
    return out


def _root_symptom(syms: list[Symptom]) -> Symptom:
    """The symptom the others follow from: nothing in the group leads to it (earliest, worst on ties)."""
    for s in sorted(syms, key=lambda s: (s.onset or datetime.max, -s.impact)):
        if not any(o is not s and _leads(o, s) for o in syms):
            return s
    return syms[0]


def _dedupe(evs: Iterable[Evidence], limit: int) -> list[Evidence]:
    seen: set[tuple[str, int]] = set()
    out = []
    for e in evs:
        if (e.file, e.line) in seen or e.line <= 0:
            continue
        seen.add((e.file, e.line))
        out.append(e)
        if len(out) >= limit:
            break
    return out


def _fixes(findings: list[Finding]) -> list[str]:
    out: list[str] = []
    for f in findings:
        for part in (f.remediation or "").split("; "):
            p = part.strip().rstrip(".")
            if p and p not in out:
                out.append(p)
    return out


def _dedupe_records(found: list[tuple[Rule, Finding]], recs: _Records) -> list[tuple[Rule, Finding]]:
    """One log record, one explanation: of two findings whose primary evidence is the same record, keep the
    more specific (then the more severe); the other is dropped and named in the kept one's ``data['also']``."""
    best: dict[tuple[str, int], tuple[Rule, Finding]] = {}
    out: list[tuple[Rule, Finding]] = []
    for r, f in found:
        if not f.evidence or (f.evidence[0].file, f.evidence[0].line) in recs.stats:
            out.append((r, f))
            continue
        key = recs.key(f.evidence[0])
        other = best.get(key)
        if other is None or (other[1].file, other[1].server) != (f.file, f.server):
            best[key] = (r, f)
            out.append((r, f))
            continue
        o, ro = other[1], other[0]
        if (not getattr(r, "fallback", False), SPECIFICITY.get(f.category, 1), int(f.severity)) > \
                (not getattr(ro, "fallback", False), SPECIFICITY.get(o.category, 1), int(o.severity)):
            out.remove(other)
            best[key] = (r, f)
            out.append((r, f))
            f.data.setdefault("also", []).append(o.code)
            o.data["duplicate_of"] = f.code
        else:
            o.data.setdefault("also", []).append(f.code)
            f.data["duplicate_of"] = o.code
    return out


def _own_records(incidents: list[Incident], recs: _Records) -> None:
    """Each record is evidence of one incident only: the first (worst) incident keeps it."""
    taken: set[tuple[str, int]] = set()
    for inc in incidents:
        keep = []
        for e in inc.evidence:
            k = recs.key(e)
            if k in taken and not (inc.cause is not None and e in inc.cause.evidence):
                continue
            keep.append(e)
        for e in keep:
            taken.add(recs.key(e))
        inc.evidence = keep


def window(inc: Incident) -> tuple[datetime | None, datetime | None]:
    """The incident's time window (onset, end) for charts and timelines."""
    end = inc.end or inc.onset
    if inc.onset is not None and end is not None and end < inc.onset:
        end = inc.onset + timedelta(seconds=1)
    return inc.onset, end
