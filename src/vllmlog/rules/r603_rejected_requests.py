"""R603 rejected-requests."""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterator

from ..run import Run
from . import _util as u
from .base import Finding, Rule, Severity
from .r601_request_too_long import rejected_share
from .r602_bad_request_params import bad_param_events
from .registry import register

_GEN = ("/v1/completions", "/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/generate", "/pooling",
        "/score", "/rerank", "/v1/audio")


@register
class RejectedRequests(Rule):
    """## What it detects
    Many HTTP 400/413/422 answers on the generation endpoints with no error text in the log (recent
    vLLM logs a frontend rejection only as the access line, even with ``--enable-log-requests``).
    When the log says why (R601, R602), those rules report it and this one stays quiet.
    Without a reason the category is inferred: when the same endpoint also answers 200 — some requests
    pass, others fail — the usual cause is prompt + max_tokens above ``--max-model-len``
    (``request_too_long``); when every request fails it is more often a parameter
    (``bad_request_params``). The message says it is an inference.
    ## Why it matters
    Clients get errors while the server looks healthy; nothing in the log says which requests.
    ## How to fix
    Read the 400 body on the client side (it names the problem), or restart with ``--log-error-stack``
    (0.11+) so the server logs it; then fix the client (shorter prompts, valid parameters)."""

    code, slug, category, severity = "R603", "rejected-requests", "request_too_long", Severity.WARNING
    title = "Requests rejected with HTTP 4xx (no reason logged)"
    explains = ("rejected",)
    needs_symptom = True
    options: dict[str, Any] = {"min_count": 3, "min_fraction": 0.05, "error_fraction": 0.5}

    def mechanism(self, finding: Finding, symptom: Any, state: Any) -> bool | None:
        """The rejections the symptom counts are the ones this rule read the reason of."""
        if symptom.kind == "rejected" and symptom.data.get("reasons"):
            return False  # the server logged why: the reason names the category, not an inference
        return None

    def detect(self, run: Run, options: dict[str, Any]) -> Iterator[Finding]:
        for v in u.servers(run):
            if any(u.is_length_rejection(e) for e in v.events) or bad_param_events(v):
                continue
            rej = [e for e in v.events if e.kind == "http_access" and e.fields.get("http_status") in (400, 413, 422)
                   and str(e.fields.get("path") or "").startswith(_GEN)]
            if len(rej) < int(options["min_count"]):
                continue
            share = rejected_share(run, len(rej), v.file)
            if share < float(options["min_fraction"]):
                continue
            paths = Counter(str(e.fields.get("path")) for e in rej)
            ok_same = sum(run.http_paths.get(p, 0) for p in paths) - len(rej)
            mixed = ok_same > 0
            lim = u.num(u.arg(v, "max_model_len"))
            # how long a prompt must be to overflow the context, given what the accepted requests asked for: when most
            # requests fail and overflowing would take a prompt of half the context or more, the length is not the
            # likely reason — a parameter most of the client's calls carry is
            # (a max_tokens the server filled in — the context left after the prompt, when the client sets none —
            # asks for nothing: such a client overflows only with a prompt of the whole context)
            asked = [j.max_tokens for j in v.journeys if getattr(j, "max_tokens", None)]
            own = [j.max_tokens for j in v.journeys if getattr(j, "max_tokens", None) and not (
                lim and _defaulted(j.max_tokens, getattr(j, "prompt_tokens", None), lim))]
            need = (lim - max(own)) if lim and own else (lim if lim and asked else None)
            no_ask = bool(asked) and not own
            long_shot = need is not None and lim and need >= 0.5 * lim and share >= 0.5
            # V1 checks a prompt's length before the engine takes the request ("Added request" comes after the
            # check): rejections answered right after their request was added were not length errors
            admitted = _admitted(v, rej)
            after_add = admitted >= max(1, len(rej) / 2)
            cat = "request_too_long" if mixed and not long_shot and not after_add else "bad_request_params"
            guess = (f"{admitted} of the {len(rej)} rejected requests had been added to the engine just before the "
                     f"400 (so they passed the length check) — most often a parameter the response cannot honour "
                     f"(logprobs, n, a format) or an unsupported option" if after_add else
                     f"the same endpoints also answered {ok_same} requests successfully, so specific requests are "
                     f"rejected — most often prompt + max_tokens above --max-model-len {u.ints(lim)}"
                     if cat == "request_too_long" else
                     f"{share:.0%} of requests fail, and "
                     + ("the accepted requests set no max_tokens (the server gave each what the context left), so "
                        if no_ask else f"with max_tokens ≤ {u.ints(max(own))} ")
                     + f"a prompt would need {u.ints(need)}+ tokens to overflow --max-model-len {u.ints(lim)} — most "
                     f"often an invalid or unsupported parameter most calls carry" if mixed else
                     "every request to these endpoints was rejected — most often an invalid or unsupported parameter "
                     "sent by the client")
            mixed = cat == "request_too_long"
            yield self.finding(
                f"{len(rej)} requests rejected with HTTP {'/'.join(sorted({str(e.fields.get('http_status')) for e in rej}))} "
                f"on {', '.join(p for p, _ in paths.most_common(3))} ({share:.0%} of API requests) and no reason in the "
                f"log; inferred: {guess}.",
                category=cat, severity=Severity.ERROR if share >= float(options["error_fraction"]) else self.severity,
                evidence=u.dedupe([u.first(e) for e in rej[:5]]), first_seen=min((e.ts for e in rej if e.ts), default=None),
                last_seen=max((e.ts for e in rej if e.ts), default=None), count=len(rej), file=v.file,
                process=rej[0].process, server=v.index,
                root_cause=("Clients send requests longer than the server's max model length (inferred: the log records "
                            "only the 400 access lines)." if mixed else
                            "Clients send requests the server rejects (inferred: the log records only the 400 access lines)."),
                remediation=("Check the 400 response body on the client (it names the limit); keep prompt + max_tokens ≤ "
                             f"{u.ints(lim) if lim else 'max-model-len'} (truncate/chunk inputs, lower max_tokens) or raise "
                             "`--max-model-len` if the model supports it; restart with `--log-error-stack` to log each "
                             "rejection." if mixed else
                             "Check the 400 response body on the client (it names the parameter) and fix the client; "
                             "restart with `--log-error-stack` to log each rejection."),
                data={"rejected": len(rej), "share": share, "inferred": cat, "same_endpoint_ok": ok_same,
                      "admitted_before_reject": admitted},
            )


def _defaulted(max_tokens: int, prompt_tokens: int | None, lim: float) -> bool:
    """``max_tokens`` is the server's default, not the client's ask: vLLM sets it to what the context leaves after
    the prompt (``max_model_len - prompt``) when the request has none."""
    if prompt_tokens is not None:  # (within a few tokens: a client does not ask for the context to the token)
        return abs(max_tokens + prompt_tokens - lim) <= max(64, 0.01 * lim)
    return lim - 4096 < max_tokens < lim


def _admitted(v: u.ServerView, rej: list[Any]) -> int:
    """How many rejected requests the engine had taken, by accounting: requests the log shows reaching the engine
    ("Added request", queued, scheduled) beyond the successful answers to the generation endpoints. A length (or
    other input) check rejects before the engine sees the request, so those add nothing; a request that fails after
    it was added (building the response) counts once on each side. 0 when nothing shows the engine's side."""
    added = sum(1 for j in v.journeys if j.reached_engine)
    if not added:
        return 0
    # POSTs answered below 400 = every POST access line but the ≥ 400 ones (those are the ones the run keeps)
    failed = sum(1 for e in v.events if e.kind == "http_access" and e.fields.get("method") == "POST"
                 and (e.fields.get("http_status") or 0) >= 400)
    ok = (getattr(v.srv, "api_requests", 0) or 0) - failed
    return max(0, min(len(rej), added - ok))
