"""R604 client-aborts."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register

#: Client-side timeout / disconnect messages that sometimes share the log (proxies, wrappers, pasted output).
_CLIENT = re.compile(r"ECONNRESET|Broken pipe|ClientDisconnect|client (?:disconnected|timeout)|read timed? ?out|\\(after \\d+ ?ms\\)", re.I)


@register
class ClientAborts(Rule):
    """## What it detects
    Requests aborted because the client went away: ``Aborted request …`` (V0/V1), ``Request … aborted``,
    the handbook's ``Status: ERROR. Reason: Client disconnected`` — when they are a noticeable share of
    traffic. A lone cancel is normal and reported as info. Aborts during an engine hang, a queue backlog
    or slow generation are consequences and are reported with that cause.
    ## Why it matters
    Aborted requests are wasted work and, when the client timed out, failed user requests: usually the
    client's timeout is shorter than the time the server needs (long prompts, long outputs, queueing).
    ## How to fix
    Raise the client/proxy timeout above the p99 latency, stream responses so tokens arrive before the
    timeout, or make requests cheaper (shorter prompts / max_tokens)."""

    code, slug, category, severity = "R604", "client-aborts", "client_abort", Severity.WARNING
    title = "Clients abort requests"
    explains = ("aborting",)
    needs_symptom = True
    options: dict[str, Any] = {"min_count": 3, "min_fraction": 0.1}
    consequence_of = ("engine_hang", "queue_backlog", "slow_throughput", "engine_dead", "kv_cache_pressure_preemption",
                      "runtime_oom")

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """Client disconnects behind an aborting symptom (not server-side timeouts)."""
        return True if symptom.kind == "aborting" and symptom.category == "client_abort" else None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in v.events if not v.in_shutdown(e.line) and (
                e.kind == "request_aborted" or (e.kind == "request_finished" and e.fields.get("status") == "error"
                                               and "disconnect" in str(e.fields.get("reason") or "").lower()))]
            if not evs:
                continue
            n = u.distinct_requests(evs)
            total = max(u.request_count(run, v.file), n, 1)
            share = n / total
            sev = self.severity if n >= int(options["min_count"]) and share >= float(options["min_fraction"]) else Severity.INFO
            js = v.in_file.by_request()
            ages = []
            for e in evs:
                j = js.get(e.request_id or "")
                if j is not None and j.arrival_ts and e.ts:
                    ages.append((e.ts - j.arrival_ts).total_seconds())
            age_txt = ""
            ages = [a for a in ages if a > 0.5]
            if ages:
                ages.sort()
                age_txt = f"; aborted {ages[len(ages) // 2]:.0f} s (median) after arrival"
            t0, t1 = evs[0].ts, evs[-1].ts
            client = [e for e in v.events if e.kind in ("unparsed", "log") and _CLIENT.search(e.text) and e.ts and t0 and t1
                      and -5 <= (e.ts - t0).total_seconds() and (e.ts - t1).total_seconds() <= 60]
            yield self.finding(
                f"{n} of {total} requests ({share:.0%}) aborted by the client{age_txt}.", severity=sev,
                title=self.title if sev >= Severity.WARNING else "Client aborts (normal level)",
                evidence=u.dedupe([u.first(e) for e in evs[:5]] + [u.first(e) for e in client[:2]]), first_seen=evs[0].ts, last_seen=evs[-1].ts, count=n,
                file=v.file, process=evs[0].process, server=v.index,
                root_cause="Clients disconnect before the answer is complete — typically a client or proxy timeout shorter "
                           "than the time the request needs (long prompt, long output, queueing).",
                remediation="Raise the client/proxy timeout above the observed latency"
                            + (f" (aborts came ~{ages[len(ages) // 2]:.0f} s after arrival)" if ages else "")
                            + ", stream the response so tokens arrive before it fires, or shorten prompts / max_tokens.",
                data={"aborted": n, "requests": total, "share": share},
            )
