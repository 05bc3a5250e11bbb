"""Run the diagnosis rules on a ``Run``: findings (worst first) and a summary.

``diagnose`` is what ``vllmlog diagnose``, ``analyze`` and ``watch`` call. Rules are pure; this module
adds what needs the whole picture: a finding explained by another one in the same server run (client
aborts during a hang, the EngineDeadError after an OOM kill) is marked ``caused_by`` and its severity
lowered below the cause; evidence lines the Run does not keep are looked up in the file; findings are
sorted by severity, then time.
"""

from __future__ import annotations

import gzip
import logging
import os
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable

from .rules.base import Evidence, Finding, Rule, Severity
from .rules.config import DiagnoseConfig
from .rules.registry import load_rules

log = logging.getLogger(__name__)

#: Slack when deciding whether a cause came before its consequence.
_SLACK_S = 5.0
#: Across files (API server log + worker log), how long before a consequence its cause may start.
_CROSS_FILE_S = 120.0


@dataclass
class Diagnosis:
    """Findings (explainers' causes), symptoms (what clients felt), incidents (the two joined), the
    service states they were judged against, and the verdict."""

    findings: list[Finding]
    incidents: list[Any]
    symptoms: list[Any]
    states: list[Any]
    verdict: Any = None


def run_diagnosis(run: Any, config: DiagnoseConfig | None = None, *, fill_text: bool = True) -> Diagnosis:
    """The whole diagnosis of ``run``: explainers → symptoms → incidents → verdict."""
    from . import incidents as inc_mod
    from .state import service_states
    from .symptoms import detect
    from .verdict import verdict_of

    cfg = config or DiagnoseConfig()
    rules = load_rules()
    found: list[tuple[Rule, Finding]] = []
    for rule in rules.values():
        if not cfg.is_enabled(rule):
            continue
        opts = cfg.options_for(rule)
        try:
            for f in rule.detect(run, opts):
                found.append((rule, f))
        except Exception:  # a broken rule must not hide the others' findings
            log.exception("rule %s failed", rule.code)
    try:
        states = service_states(run)
        symptoms = detect(run, cfg.thresholds)
    except Exception:  # pragma: no cover - the state model must not take the findings down with it
        log.exception("service state / symptoms failed")
        states, symptoms = [], []
    incidents = inc_mod.build(run, found, symptoms, states, _partial_files(run))
    findings = [f for i in incidents for f in i.findings]
    seen = {id(f) for f in findings}
    findings += sorted((f for _, f in found if id(f) not in seen and "duplicate_of" not in f.data), key=Finding.sort_key)
    if fill_text:
        _resolve(findings, also=[e for i in incidents for e in i.evidence] + [e for s in symptoms for e in s.evidence])
    for f in findings:
        f.evidence = [e for e in f.evidence if e.line > 0]
    return Diagnosis(findings, incidents, symptoms, states, verdict_of(run, incidents, findings, states))


def diagnose(run: Any, config: DiagnoseConfig | None = None, *, fill_text: bool = True) -> list[Finding]:
    """All findings for ``run``, in incident order (each incident's cause first), then notes."""
    return run_diagnosis(run, config, fill_text=fill_text).findings


def _partial_files(run: Any) -> set[str]:
    """Input files that hold only part of a deployment (worker / engine logs: no API server lines)."""
    api: set[str] = set()
    for s in getattr(run, "servers", []):
        if s.ready:
            api.add(s.file)
    for st in getattr(getattr(run, "series", None), "stats", []) or []:
        api.add(st.file)
    for e in getattr(run, "notable", []):
        if e.kind == "http_access":
            api.add(e.file)
    return {f for f in getattr(run, "files", []) if f not in api} if len(getattr(run, "files", [])) > 1 else set()


def _same_incident(c: Finding, f: Finding, partial: set[str]) -> bool:
    """Same server run of the same file — or, when one file is a worker/engine-only log, close in time."""
    if c.file == f.file:
        return c.server == f.server
    if c.file not in partial and f.file not in partial:
        return False  # two replicas: one's trouble does not explain the other's
    if c.first_seen is None or f.first_seen is None:
        return False
    return -_CROSS_FILE_S <= (c.first_seen - f.first_seen).total_seconds() <= _SLACK_S


def _fold_consequences(found: list[tuple[Rule, Finding]], partial: set[str] | None = None) -> None:
    """Mark findings explained by another finding of the same incident and lower their severity."""
    partial = partial or set()
    order = sorted(found, key=lambda rf: rf[1].sort_key())
    # a finding may narrow or widen its rule's list (e.g. KV pressure without preemption)
    cons_of = {id(f): f.data.get("consequence_of", r.consequence_of) for r, f in order}
    # without a partial (worker-only) file, a cause is in the same file and server run: look only there
    # (in ``order``), so folding stays linear in server runs
    same_run: dict[tuple[str | None, int | None], list[tuple[Rule, Finding]]] = {}
    if not partial:
        for rf in order:
            same_run.setdefault((rf[1].file, rf[1].server), []).append(rf)
    for rule, f in order:
        cons = cons_of[id(f)]
        if not cons:
            continue
        cands = same_run[(f.file, f.server)] if not partial else order
        causes = [c for r, c in cands if c is not f and c.category in cons and _same_incident(c, f, partial)
                  and c.caused_by is None and c.data.get("can_explain", True)
                  and int(c.severity) >= int(f.severity) - 1
                  and (c.category in rule.consequence_any_time or _before(c, f))
                  and not (f.category in cons_of[id(c)] and _started_later(c, f))]
        if not causes:
            continue
        c = causes[0]
        f.caused_by = c.code
        # a cause is at least as grave as what it led to (an OOM in a worker log that killed the engine)
        if f.severity > c.severity:
            c.severity = f.severity
        f.severity = min(f.severity, c.severity.lowered())
        f.message = f"{f.message.rstrip('.')} — likely a consequence of {c.code} ({c.category})."


def _started_later(c: Finding, f: Finding) -> bool:
    """``c`` started after ``f`` — of two findings that could each explain the other (an NCCL error and a
    worker death), the one that started first is the cause, whatever the slack of ``_before``."""
    return c.first_seen is not None and f.first_seen is not None and c.first_seen > f.first_seen


def _before(cause: Finding, f: Finding) -> bool:
    """The cause started before the consequence ended (or times are unknown)."""
    if cause.first_seen is None or f.first_seen is None:
        return True
    end = f.last_seen or f.first_seen
    return (cause.first_seen - end).total_seconds() <= _SLACK_S


#: path → (inode, size, [(line number, byte offset)]) checkpoints, so ``watch`` re-reads little.
_INDEX: dict[str, tuple[int, int, list[tuple[int, int]]]] = {}
_STEP = 4096
_BLOCK = 1 << 20


def _read_lines(path: str, wanted: set[int]) -> dict[int, str]:
    """The text of the given 1-based lines (split on \\n only: vLLM tracebacks contain stray \\r)."""
    if not wanted:
        return {}
    lo, hi = min(wanted), max(wanted)
    out: dict[int, str] = {}
    if path.endswith(".gz"):
        with gzip.open(path, "rb") as fh:
            for i, raw in enumerate(fh, 1):
                if i in wanted:
                    out[i] = raw.decode("utf-8", "replace").rstrip("\r\n")
                if i >= hi:
                    break
        return out
    st = os.stat(path)
    ino, size, marks = _INDEX.get(path, (st.st_ino, st.st_size, [(1, 0)]))
    if ino != st.st_ino or st.st_size < size:
        marks = [(1, 0)]
    start_line, off = max((m for m in marks if m[0] <= lo), default=(1, 0))
    # block by block: newlines are counted in C and only a block holding a wanted line is split (a Python loop
    # over every line of a 1M-line log was most of the evidence look-up); marks are block starts (line, offset)
    want = sorted(w for w in wanted if w >= start_line)
    k = 0
    with open(path, "rb") as fh:
        fh.seek(off)
        i = start_line  # the line that starts at ``off`` (= buf[0])
        buf = b""
        while k < len(want):
            data = fh.read(_BLOCK)
            if not data:  # the last line has no newline
                if buf and want[k] == i:
                    out[i] = buf.decode("utf-8", "replace").rstrip("\r\n")
                break
            buf += data
            n = buf.count(b"\n")
            if not n:
                continue
            end = buf.rfind(b"\n") + 1
            if want[k] < i + n:
                lines = buf[:end].split(b"\n")
                while k < len(want) and want[k] < i + n:
                    out[want[k]] = lines[want[k] - i].decode("utf-8", "replace").rstrip("\r\n")
                    k += 1
            off += end
            i += n
            buf = buf[end:]
            if i - marks[-1][0] >= _STEP:
                marks.append((i, off))
    _INDEX[path] = (st.st_ino, st.st_size, marks)
    return out


def _evidence_needs(evs: list[Evidence]) -> dict[str, set[int]]:
    need: dict[str, set[int]] = {}
    for e in evs:
        if not e.text and e.file != "-" and not e.file.startswith("prometheus:"):
            need.setdefault(e.file, set()).add(e.line)
    return need


def _resolve_evidence(evs: list[Evidence], texts: dict[tuple[str, int], str] | None = None) -> None:
    """Fill empty evidence texts (incidents, symptoms) by reading the needed lines of each file once (``texts``:
    lines already read, a superset of the needed ones)."""
    if texts is None:
        texts = {}
        for path, lines in _evidence_needs(evs).items():
            try:
                for i, t in _read_lines(path, lines).items():
                    texts[(path, i)] = t
            except OSError as exc:
                log.warning("cannot read %s for evidence: %s", path, exc)
    for e in evs:
        if not e.text:
            e.text = texts.get((e.file, e.line), "") or e.fallback


def _resolve(findings: list[Finding], also: list[Evidence] | None = None) -> None:
    """Fill empty evidence texts and run probes by reading the needed lines of each file once; ``also``: more
    evidence (incidents', symptoms') filled from the same read (``_resolve_evidence``: one pass over a large file,
    not two)."""
    need: dict[str, set[int]] = {}
    probe_files: dict[str, tuple[int, int]] = {}
    for f in findings:
        for e in f.evidence:
            if not e.text:
                need.setdefault(e.file, set()).add(e.line)
        for p in f.probes:
            lo, hi = probe_files.get(p.file, (p.first, p.last))
            probe_files[p.file] = (min(lo, p.first), max(hi, p.last))
    extra_need = _evidence_needs(also) if also else {}
    if not need and not probe_files:
        if also:
            _resolve_evidence(also)
        return
    if set(need) | set(probe_files) == {"-"}:
        for f in findings:
            for e in f.evidence:
                e.text = e.text or e.fallback
        if also:
            _resolve_evidence(also)
        return
    texts: dict[tuple[str, int], str] = {}
    for path in set(need) | set(probe_files) | set(extra_need):
        if path == "-" or path.startswith("prometheus:"):  # stdin, or metric history merged with --prometheus
            continue
        wanted = set(need.get(path, set())) | extra_need.get(path, set())
        lo, hi = probe_files.get(path, (0, -1))
        wanted.update(range(max(lo, 1), hi + 1))
        try:
            for i, t in _read_lines(path, wanted).items():
                texts[(path, i)] = t
        except OSError as exc:
            log.warning("cannot read %s for evidence: %s", path, exc)
    for f in findings:
        for e in f.evidence:
            if not e.text:
                e.text = texts.get((e.file, e.line), "") or e.fallback
        extra: list[Evidence] = []
        for p in f.probes:
            hits = [Evidence(p.file, i, texts[(p.file, i)]) for i in range(p.first, p.last + 1)
                    if (p.file, i) in texts and p.needle in texts[(p.file, i)]]
            extra += hits[: p.limit]
        if extra:
            seen = {(e.file, e.line) for e in f.evidence}
            f.evidence[1:1] = [e for e in extra if (e.file, e.line) not in seen]
    if also:
        _resolve_evidence(also, texts)


VERDICTS = {Severity.CRITICAL: "down", Severity.ERROR: "failing", Severity.WARNING: "degraded", Severity.INFO: "healthy"}


def summarize(findings: Iterable[Finding], run: Any = None) -> dict[str, Any]:
    """Counts by severity and category, the top finding and a one-word verdict."""
    fs = list(findings)
    by_sev = {s.label: 0 for s in sorted(Severity, reverse=True)}
    by_cat: dict[str, int] = {}
    for f in fs:
        by_sev[f.severity.label] += 1
        by_cat[f.category] = by_cat.get(f.category, 0) + 1
    top = fs[0] if fs else None
    worst = top.severity if top else Severity.INFO
    out: dict[str, Any] = {
        "verdict": VERDICTS[worst] if fs else "healthy",
        "findings": len(fs),
        "by_severity": by_sev,
        "by_category": by_cat,
        "top": {"code": top.code, "category": top.category, "severity": top.severity.label, "title": top.title,
                "message": top.message} if top else None,
    }
    if run is not None:
        out["files"] = list(run.files)
        out["servers"] = [
            {"file": s.file, "index": s.index, "version": s.version, "model": s.model, "ready": s.ready,
             "start_ts": s.start_ts.isoformat() if s.start_ts else None,
             "end_ts": s.end_ts.isoformat() if s.end_ts else None}
            for s in run.servers
        ]
        out["time_range"] = [run.start_ts.isoformat() if run.start_ts else None,
                             run.end_ts.isoformat() if run.end_ts else None]
    return out


def report(run: Any, config: DiagnoseConfig | None = None) -> dict[str, Any]:
    """``{"findings": [...], "summary": {...}}`` — the JSON of ``vllmlog diagnose --json``."""
    fs = diagnose(run, config)
    return {"findings": [f.to_dict() for f in fs], "summary": summarize(fs, run)}


def at_or_above(findings: Iterable[Finding], severity: Severity) -> list[Finding]:
    """Findings at or above a severity (for ``--fail-on``)."""
    return [f for f in findings if f.severity >= severity]


def _now() -> datetime:  # pragma: no cover - kept for symmetry with watch
    return datetime.now()
