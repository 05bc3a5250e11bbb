"""R605 request-timeouts."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register

_TIMEOUT = re.compile(r"time(?:d)? ?out|timeout", re.I)


@register
class RequestTimeouts(Rule):
    """## What it detects
    Requests that end because a timeout fired: the handbook's ``Status: CANCELLED. Reason: Timeout after
    60s``, request failures whose reason names a timeout.
    ## Why it matters
    Each is a failed user request; the timeout value tells whether the server is too slow or the timeout
    too tight.
    ## How to fix
    Compare the timeout with the requests' latency: if the server is slow see the queue/throughput
    findings; otherwise raise the timeout (client, gateway, ``--timeout-keep-alive``)."""

    code, slug, category, severity = "R605", "request-timeouts", "timeout", Severity.WARNING
    title = "Requests time out"
    explains = ("aborting", "failing")
    needs_symptom = True
    options: dict[str, Any] = {"min_count": 3, "min_fraction": 0.05}
    consequence_of = ("engine_hang", "queue_backlog", "slow_throughput", "kv_cache_pressure_preemption")

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """Timeouts logged by the server behind an aborting/failing symptom."""
        return True if symptom.kind == "aborting" and symptom.category == "timeout" else None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in v.events if e.kind in ("request_finished", "request_failed") and not v.in_shutdown(e.line)
                   and (e.fields.get("timeout_s") is not None or _TIMEOUT.search(str(e.fields.get("reason") or e.fields.get("error") or "")))]
            if not evs:
                continue
            n = len({e.request_id or e.line for e in evs})
            total = max(u.request_count(run, v.file), n, 1)
            share = n / total
            sev = self.severity if n >= int(options["min_count"]) and share >= float(options["min_fraction"]) else Severity.INFO
            tmo = next((u.num(e.fields.get("timeout_s")) for e in evs if e.fields.get("timeout_s") is not None), None)
            yield self.finding(
                f"{n} of {total} requests ({share:.0%}) ended by a timeout" + (f" of {tmo:g} s" if tmo else "") + ".",
                severity=sev, evidence=u.dedupe([u.first(e) for e in evs[:5]]), first_seen=evs[0].ts, last_seen=evs[-1].ts,
                count=n, file=v.file, process=evs[0].process, server=v.index,
                root_cause="Requests take longer than the configured timeout (queueing, slow generation or long outputs).",
                remediation="Compare the timeout with request latency: fix slowness first (queue/throughput findings), "
                            "otherwise raise the timeout" + (f" above {tmo:g} s" if tmo else "") + " and stream responses.",
                data={"timeouts": n, "requests": total, "timeout_s": tmo},
            )
