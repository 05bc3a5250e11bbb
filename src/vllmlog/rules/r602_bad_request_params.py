"""R602 bad-request-params."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .r601_request_too_long import rejected_share
from .registry import register


_PARAM = re.compile(r"parameter=(\w+)|\b(temperature|top_p|top_k|min_p|max_tokens|logprobs|n|best_of|presence_penalty|"
                    r"frequency_penalty|repetition_penalty|seed|stop|response_format|tools?)\b must")
#: events that may carry a rejected request's exception (its message names the parameter)
_EXC_KINDS = ("traceback", "request_preprocess_error", "request_exception", "log")
_SERVER_FAIL = frozenset({"engine_dead", "engine_fatal", "engine_core_died", "cuda_oom", "cuda_error", "worker_died"})
_MAX = re.compile(r"max allowed: (\d{1,18})|more than (\d{1,18}) logprobs")


def _reason(e) -> str:
    """The parameter a rejection names (``logprobs``), else the parser's reason."""
    m = _PARAM.search(e.text)
    if m:
        return m.group(1) or m.group(2)
    if "RequestValidationError" in str(e.fields.get("exc_type") or ""):
        return "request body validation"
    return str(e.fields.get("reason") or e.fields.get("param") or "invalid parameters")


def bad_param_events(v: u.ServerView) -> list:
    """Events showing a request rejected for invalid parameters (not length)."""
    out = []
    for e in v.events:
        k = u.kinds_of(e)
        if u.is_length_rejection(e):
            continue
        if e.kind == "request_exception" and not k.isdisjoint(_SERVER_FAIL):
            continue  # --log-error-stack also prints the server's own failures (engine dead, OOM): not a 400
        if "bad_request_params" in k or (e.kind == "request_failed" and e.fields.get("reason") == "bad_request") \
                or "RequestValidationError" in str(e.fields.get("exc_type") or "") or e.kind == "request_exception":
            out.append(e)
        elif e.kind in _EXC_KINDS and _PARAM.search(str(e.fields.get("exc_message") or e.fields.get("error") or "")):
            # a traceback (--log-error-stack, a preprocessing error) whose exception names a bad parameter
            out.append(e)
    return out


@register
class BadRequestParams(Rule):
    """## What it detects
    Requests rejected for invalid parameters: more logprobs than ``--max-logprobs``, temperature/top_p/n/
    max_tokens out of range, malformed JSON or wrong types (``RequestValidationError``),
    ``Request … failed (bad request)``.
    ## Why it matters
    The client gets HTTP 400 for every such call — an evaluation harness or an SDK default can make
    *every* request fail while the server looks idle.
    ## How to fix
    Fix the client's parameters; when the server limit is the issue, raise it (``--max-logprobs 10``)."""

    code, slug, category, severity = "R602", "bad-request-params", "bad_request_params", Severity.WARNING
    title = "Requests rejected for invalid parameters"
    explains = ("rejected", "failing")
    needs_symptom = True
    options: dict[str, Any] = {"min_count": 1, "warn_count": 3, "warn_fraction": 0.05, "error_fraction": 0.5}

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """The rejections the symptom counts are the ones this rule read the reason of."""
        if symptom.kind == "rejected":
            return True if symptom.category == 'bad_request_params' else None
        return None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in bad_param_events(v) if not v.in_shutdown(e.line)]
            if len(evs) < int(options["min_count"]):
                continue
            access = [e for e in v.events if e.kind == "http_access" and e.fields.get("http_status") in (400, 422)]
            reasons = sorted({_reason(e) for e in evs if e.kind != "request_exception"})
            logprobs = [e for e in evs if e.fields.get("reason") == "logprobs" or "logprobs" in e.text]
            lim = next((u.num(e.fields.get("limit")) for e in logprobs if e.fields.get("limit")), None)
            if lim is None:
                lim = next((float(m.group(1)) for e in logprobs for m in [_MAX.search(e.text)] if m), None)
            n = max(len(evs), len(access))
            share = rejected_share(run, n, v.file)
            main = [e for e in evs if e.kind != "request_exception"] or evs
            evid = [u.ev(e, "logprobs", "must be", "validation error", "failed (bad request)") for e in main[:3]]
            evid += [u.first(e) for e in access[:3]]
            rem = []
            if logprobs:
                rem.append(f"the client asks for more logprobs than the server allows ({int(lim) if lim else '--max-logprobs'}): "
                           f"request ≤ {int(lim) if lim else 'the limit'} or start the server with "
                           f"`--max-logprobs {int(lim * 2) if lim else 20}`")
            rem.append("fix the client's request parameters (the 400 body names the parameter)")
            yield self.finding(
                f"{n} requests rejected with HTTP 400 for invalid parameters"
                + (f" ({', '.join(reasons)})" if reasons else "") + (f"; {share:.0%} of API requests" if share >= 0.2 else "") + ".",
                severity=(Severity.ERROR if share >= float(options["error_fraction"]) else self.severity
                          if n >= int(options["warn_count"]) or share >= float(options["warn_fraction"]) else Severity.INFO),
                evidence=u.dedupe(evid), first_seen=min((e.ts for e in evs + access if e.ts), default=None),
                last_seen=max((e.ts for e in evs + access if e.ts), default=None), count=n, file=v.file,
                process=main[0].process, server=v.index,
                root_cause="Clients send parameters the server rejects" + (" (logprobs above --max-logprobs)" if logprobs else "") + ".",
                remediation="; ".join(rem) + ".", data={"rejected": n, "reasons": reasons, "share": share},
            )
