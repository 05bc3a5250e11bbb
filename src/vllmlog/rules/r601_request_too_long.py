"""R601 request-too-long."""

from __future__ import annotations

import re
from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .registry import register

KINDS = ("context_length_exceeded", "prompt_too_long")


_LIMIT = re.compile(r"maximum (?:context|model) length (?:is|of) ([\d,]+)")
_ASKED = [re.compile(r) for r in (r"for a total of (?:at least )?([\d,]+)", r"you requested ([\d,]+) tokens",
                                   r"contains (?:at least )?([\d,]+) input tokens", r"has ([\d,]+) input tokens",
                                   r"\(length ([\d,]+)\)", r"Input prompt \(([\d,]+) tokens\)")]


def _grab(rx: re.Pattern[str] | list[re.Pattern[str]], text: str) -> float | None:
    for r in rx if isinstance(rx, list) else [rx]:
        m = r.search(text)
        if m:
            return u.num(m.group(1))
    return None


def rejected_share(run: Run, n: int, file: str | None = None) -> float:
    """Share of API requests that the ``n`` rejections represent."""
    return n / max(u.request_count(run, file), n, 1)


@register
class RequestTooLong(Rule):
    """## What it detects
    Requests rejected because prompt + ``max_tokens`` exceed ``--max-model-len``: ``This model's maximum
    context length is N tokens. However, you requested M tokens``, ``'max_tokens' … is too large``,
    V0's ``Input prompt (N tokens) is too long and exceeds limit``.
    ## Why it matters
    Those clients get HTTP 400 (or an ignored request); the server itself is healthy.
    ## How to fix
    Client side: truncate or chunk inputs so prompt + max_tokens ≤ max-model-len, lower ``max_tokens``.
    Server side, only if long context is needed: raise ``--max-model-len`` up to what the model and the KV
    cache support."""

    code, slug, category, severity = "R601", "request-too-long", "request_too_long", Severity.WARNING
    title = "Requests longer than --max-model-len rejected"
    explains = ("rejected", "failing")
    needs_symptom = True
    options: dict[str, Any] = {"min_count": 1, "warn_count": 3, "warn_fraction": 0.05, "error_fraction": 0.5}

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """The rejections the symptom counts are the ones this rule read the reason of."""
        if symptom.kind == "rejected":
            return True if symptom.category == 'request_too_long' else None
        return None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            evs = [e for e in v.events if u.is_length_rejection(e) and (v.serving(e.line) or v.ready_line is None)]
            if len(evs) < int(options["min_count"]):
                continue
            lims = [u.num(e.fields.get("max_model_len") or e.fields.get("limit")) or _grab(_LIMIT, e.text) for e in evs]
            reqs = [u.num(e.fields.get("requested_tokens") or e.fields.get("prompt_tokens")) or _grab(_ASKED, e.text)
                    for e in evs]
            lim = next((x for x in lims if x), None) or u.num(u.arg(v, "max_model_len"))
            big = max((x for x in reqs if x), default=None)
            access = [e for e in v.events if e.kind == "http_access" and e.fields.get("http_status") == 400]
            after = []
            for e in evs[:3]:
                a = next((x for x in access if x.line > e.line_end), None)
                if a is not None and a.line - e.line_end <= 3:
                    after.append(a)
            evid = []
            for i, e in enumerate(evs[:3]):
                evid.append(u.first(e))
                evid.append(u.ev(e, "maximum context length", "too long", "is too large"))
                if i < len(after):
                    evid.append(u.first(after[i]))
            share = rejected_share(run, len(evs), v.file)
            yield self.finding(
                f"{len(evs)} requests rejected as too long for --max-model-len {u.ints(lim)}"
                + (f" (largest asked {u.ints(big)} tokens)" if big else "") + ".",
                severity=(Severity.ERROR if share >= float(options["error_fraction"]) else self.severity
                          if len(evs) >= int(options["warn_count"]) or share >= float(options["warn_fraction"]) else Severity.INFO),
                evidence=u.dedupe(evid), first_seen=evs[0].ts, last_seen=evs[-1].ts, count=len(evs), file=v.file,
                process=evs[0].process, server=v.index,
                root_cause="Clients send prompts (plus max_tokens) longer than the server's max model length; the "
                           "frontend rejects them with HTTP 400. The engine is unaffected.",
                remediation="Truncate or chunk inputs client-side so prompt + max_tokens ≤ "
                            f"{u.ints(lim) if lim else 'max-model-len'} and lower `max_tokens`; raise `--max-model-len` "
                            "only if the model (rope scaling) and the KV cache support the longer context.",
                data={"max_model_len": lim, "largest_request_tokens": big, "rejected": len(evs), "share": share},
            )
