"""Symptoms clients see on their requests: server errors, rejections, aborts and timeouts."""

from __future__ import annotations

import bisect
import re
from typing import Any, TYPE_CHECKING, Callable, Iterator

from ..rules import _util as u
from ..run import client_host
from ..rules.base import Severity
from .base import Symptom, detector

if TYPE_CHECKING:  # pragma: no cover
    from ..model import Event
    from ..run import Run
    from ..state import ServiceState

#: Paths whose 404 says nothing about the service (browsers, scanners, typos outside the API).
_API = re.compile(r"^/(?:v1/|v2/|generate|tokenize|detokenize|pooling|score|rerank|classify|invocations|inference/)")
_LENGTH = re.compile(r"maximum context length|max_model_len|maximum model length|too long|is too large|exceeds? "
                     r"(?:the )?(?:max|limit)|prompt length|input tokens", re.I)
_SERVER_FAIL_KINDS = frozenset({"request_failed", "request_exception", "stream_error", "asgi_exception"})
_CLIENT_FAIL = re.compile(r"bad request|input error|validation|invalid|must be|not supported|unsupported|"
                          r"does not exist|not found|unknown|expected", re.I)


def requests_seen(st: ServiceState) -> int:
    """How many API requests the server run answered (journeys, or POST access lines when more)."""
    return max(st.coverage.requests, getattr(st.view.srv, "api_requests", 0) or 0)


def _share(n: int, st: ServiceState) -> float:
    return n / max(requests_seen(st), n, 1)


def _is_client_error(e: Event) -> bool:
    k = u.kinds_of(e)
    if k & {"bad_request_params", "context_length_exceeded", "prompt_too_long", "request_rejected",
            "request_preprocess_error"}:
        return True
    if e.kind == "request_failed":
        return e.fields.get("reason") in ("bad_request", "bad request", "input_error", "input error") or \
            "(bad request)" in e.text or "(input error)" in e.text
    return False


@detector("failing")
def failing(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """Requests fail on the server side: HTTP 5xx, requests that end in an engine or server error, exceptions
    in the API server — outside a deliberate shutdown."""
    v = st.view
    if not st.lifecycle.serving:
        return
    e5 = [e for e in v.events if e.kind == "http_access" and (e.fields.get("http_status") or 0) >= 500
          and not v.in_shutdown(e.line)]
    fails = [e for e in v.events if e.kind in _SERVER_FAIL_KINDS and not v.in_shutdown(e.line) and not _is_client_error(e)]
    fails += [e for e in v.events if e.kind == "request_finished" and e.fields.get("status") == "error"
              and "disconnect" not in str(e.fields.get("reason") or "").lower() and not v.in_shutdown(e.line)]
    n = max(len(e5), u.distinct_requests(fails) if fails else 0)
    if n == 0:
        return
    # the API server's own traceback just before a 5xx answer, raised while it handled that request (building its
    # sampling parameters, rendering its chat template …): the request, not the engine, is what failed
    req_tb = _request_tracebacks(v, e5)
    fails += [e for e in req_tb if e not in fails]
    share = _share(n, st)
    sev = Severity.ERROR if n >= 3 or share >= 0.05 else Severity.WARNING
    evs = sorted(e5 + fails, key=lambda e: e.line)
    t0 = min((e.ts for e in evs if e.ts), default=None)
    t1 = max((e.ts for e in evs if e.ts), default=None)
    exc = next((e for e in fails if e.fields.get("exc_type") or e.fields.get("error")), None)
    what = f"{n} request(s) failed with a server error" + (f" ({share:.0%} of requests)" if share >= 0.01 else "")
    if e5:
        codes = sorted({e.fields.get("http_status") for e in e5})
        what += f"; HTTP {', '.join(str(c) for c in codes)} ×{len(e5)}"
    if exc is not None:
        xt = str(exc.fields.get("exc_type") or "").rsplit(".", 1)[-1]
        xm = str(exc.fields.get("exc_message") or "")
        what += f"; {(xt + (': ' + xm if xm else '')) if xt else u.msg_of(exc)}"[:122]
    later_ok = any(x.ts and t1 and x.ts > t1 and x.gen_tps > 0 for x in st.intervals)
    cat = _failing_category(fails)
    if req_tb and len(req_tb) >= len(e5) / 2 and later_ok and cat is None:
        cat = "bad_request_params"  # the requests failed in their own handling while the engine kept generating
    yield Symptom("failing", st.file, st.index, sev, what + ".", onset=t0, end=t1,
                  trend="recovering" if later_ok else "stable",
                  evidence=u.dedupe(([u.ev(exc), u.first(exc)] if exc is not None else []) + [u.first(e) for e in evs[:6]]),
                  category=cat, process=evs[0].process,
                  data={"failed": n, "http_5xx": len(e5), "share": share, "request_tracebacks": len(req_tb)})


#: Frames of the API server's per-request handling (OpenAI entrypoints, protocol → sampling params, chat templates).
_REQUEST_PATH = re.compile(r"entrypoints/openai/|to_sampling_params|create_chat_completion|create_completion|"
                           r"chat_utils\.py|_preprocess_chat|apply_hf_chat_template|serving_\w+\.py")
#: Frames that mean the engine itself failed (the request merely saw it).
_ENGINE_PATH = re.compile(r"EngineDead|engine/core|core_client|async_llm_engine\.py\", line \d+, in run_engine_loop|"
                          r"model_executor|worker/|AsyncEngineDeadError|EngineGenerateError")


def _request_tracebacks(v: u.ServerView, e5: list[Event]) -> list[Event]:
    """The tracebacks the API server printed while handling a request, each right before (≤ 3 records, ≤ 2 s)
    one of the 5xx answers — or right after it: uvicorn's "Exception in ASGI application" follows the access line
    of the 500 it sent —, with its frames in request handling and none in the engine."""
    def pred(e: Event) -> bool:
        return bool(e.fields.get("exc_type")) and bool(_REQUEST_PATH.search(e.text)) and not _ENGINE_PATH.search(e.text)

    out = _records_before(v, e5, 3, pred)
    return out + [e for e in _records_before(v, e5, 3, pred, after=True) if e not in out]


def _failing_category(fails: list[Event]) -> str | None:
    # the exception's type too: a bare "TimeoutError" / "asyncio.TimeoutError" has no message to read
    text = " ".join((str(e.fields.get("exc_type") or "") + ": " + str(e.fields.get("exc_message") or e.fields.get("error")
                                                                      or u.msg_of(e)))[:300] for e in fails[:5])
    if re.search(r"out of memory|OutOfMemory", text, re.I):
        return "runtime_oom"
    if _LENGTH.search(text):
        return "request_too_long"
    if re.search(r"time(?:d)? ?out", text, re.I):
        return "timeout"
    if re.search(r"EngineDead|engine (?:core )?(?:is )?dead|Background loop|engine.*died", text, re.I):
        return "engine_dead"
    if fails and _CLIENT_FAIL.search(text):
        return "bad_request_params"
    return None


#: Rejections below this share of the requests are a client that sends bad requests to a server that answers them
#: correctly (a wrong model name, one caller's over-long prompts): a note, not an incident. At or above it — or half
#: of what a few clients sent — a workload is being turned away.
REJECTED_SHARE = 0.10


#: What a client set up wrong, whatever it sends: a model name the server does not serve, missing or bad credentials.
_CLIENT_SETUP = re.compile(r"model [`'\"]?[^`'\"\s]{0,200}[`'\"]? does not exist|NotFoundError|Unauthorized|"
                           r"invalid api key|Incorrect API key", re.I)


def _misconfigured_client(acc: list[Event], rej: list[Event]) -> bool:
    """Every rejection is a client's own set-up (404 for a model the server does not serve, 401/403): the requests
    never asked the server for work, so below half of the traffic they are a note about that client, not an incident."""
    codes = {e.fields.get("http_status") for e in acc}
    if rej:
        return all(_CLIENT_SETUP.search(e.text) for e in rej)
    return bool(codes) and codes <= {401, 403, 404}


def _one_client(v: Any, acc: list[Event]) -> bool:
    """Every rejection answered one client host while at least two other hosts were served on the API: with no
    reason logged, a client's own bug (its request body) the server cannot say more about — below half of the
    traffic, a note. (When the server logs why — too long, a parameter over a limit — the rejection is named with
    its reason and stays an incident: the operator can act on it.)"""
    hosts = {client_host(e.fields.get("client")) for e in acc}
    if len(hosts) != 1 or None in hosts:
        return False
    bad = next(iter(hosts))
    return len(set(getattr(v.srv, "served_hosts", ()) or ()) - {bad}) >= 2


@detector("rejected")
def rejected(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """Requests rejected as invalid (HTTP 400/401/403/404-on-the-API/413/422, or a rejection line): the server is
    fine, the clients get errors. 404s for paths outside the API (favicon, typos) do not count."""
    v = st.view
    acc = [e for e in v.events if e.kind == "http_access" and not v.in_shutdown(e.line) and (
        e.fields.get("http_status") in (400, 401, 403, 413, 422)
        or (e.fields.get("http_status") == 404 and e.fields.get("method") == "POST"
            and _API.match(str(e.fields.get("path") or ""))))]
    rej = [e for e in v.events if _is_client_error(e) and not v.in_shutdown(e.line)]
    # a client that keeps calling a route that does not exist (a base URL with a trailing slash, a typo): the same
    # API path answered 404 again and again, and that is most of what the clients do
    by_path: dict[str, list[Event]] = {}
    for e in v.events:
        if e.kind == "http_access" and e.fields.get("http_status") == 404 and e.fields.get("method") != "POST" \
                and _API.match(str(e.fields.get("path") or "")) and not v.in_shutdown(e.line):
            by_path.setdefault(str(e.fields.get("path")), []).append(e)
    wrong = [e for es in by_path.values() if len(es) >= 5 for e in es]
    api = getattr(v.srv, "api_requests", 0) or 0
    if wrong and len(wrong) / (len(wrong) + api) >= 0.5:
        acc = sorted(acc + wrong, key=lambda e: e.line)
    else:
        wrong = []
    n = max(len(acc), u.distinct_requests(rej) if rej else 0)
    if n == 0:
        return
    # the reason is often the ERROR/WARNING line the API server logged just before the 4xx access line
    reasons = _reasons_before(v, acc) if not rej else []
    rej = rej or reasons
    share = _share(n, st) if not wrong else len(wrong) / (len(wrong) + api)
    sev = (Severity.ERROR if share >= 0.5 and n >= 3 else
           Severity.WARNING if share >= 0.5 or (n >= 2 and share >= REJECTED_SHARE and not _misconfigured_client(
               acc, rej) and not (not rej and _one_client(v, acc))) else Severity.INFO)
    text = " ".join(u.msg_of(e)[:300] for e in rej[:10])
    length = bool(rej) and sum(1 for e in rej if _LENGTH.search(e.text) or u.is_length_rejection(e)) >= len(rej) / 2
    cat = "request_too_long" if length else "bad_request_params"
    evs = sorted(rej + acc, key=lambda e: e.line)
    t0 = min((e.ts for e in evs if e.ts), default=None)
    t1 = max((e.ts for e in evs if e.ts), default=None)
    codes = sorted({e.fields.get("http_status") for e in acc})
    head = f"{n} request(s) rejected" + (f" with HTTP {', '.join(str(c) for c in codes)}" if codes else "") \
        + (f" ({share:.0%} of requests)" if share >= 0.01 else "")
    if rej:
        head += f": {u.msg_of(rej[0])[:140]}"
    elif wrong:
        paths = sorted({str(e.fields.get('path')) for e in wrong})
        head += (f": {len(wrong)} calls to a route the server does not have ({', '.join(paths[:3])}) — a client's "
                 "base URL or path is wrong")
    yield Symptom("rejected", st.file, st.index, sev, head.rstrip(". ") + ".", onset=t0, end=t1,
                  evidence=u.dedupe([u.ev(e) for e in rej[:3]] + [u.first(e) for e in acc[:3]]), category=cat,
                  process=evs[0].process, data={"rejected": n, "share": share, "length": length, "text": text[:200],
                                                "reasons": len(rej),
                                                **({"fix": "point the client at the server's real routes: the base URL is "
                                                           "`http://HOST:PORT/v1` (no trailing slash); vLLM serves "
                                                           "/v1/models, /v1/completions, /v1/chat/completions"}
                                                   if wrong else {})})


def _reasons_before(v: u.ServerView, acc: list[Event]) -> list[Event]:
    """For each 4xx access line, the ERROR/WARNING record logged just before it (≤ 4 lines, ≤ 2 s earlier):
    the API server's own words for why it rejected the request."""
    return _records_before(v, acc, 4, lambda e: e.level in ("ERROR", "WARNING"))


def _records_before(v: u.ServerView, answers: list[Event], n: int, pred: Callable[[Event], bool], *,
                    after: bool = False) -> list[Event]:
    """For each access line in ``answers``, the nearest record ``pred`` accepts among the ``n`` records before it —
    no other access line between, ending ≤ ``n`` lines and ≤ 2 s before it: what the API server logged about that
    request (each record once, in answer order). ``after``: the same looking forward (uvicorn logs the traceback of a
    500 after its access line)."""
    if not answers:
        return []
    evs = v.events
    pos = {id(e): i for i, e in enumerate(evs)}
    out: list[Event] = []
    for a in answers:
        i = pos.get(id(a))
        if i is None:
            continue
        for e in (evs[i + 1:i + 1 + n] if after else reversed(evs[max(0, i - n):i])):
            if e.kind == "http_access":
                break
            near, dt = (e.line - a.line_end, (e.ts - a.ts) if e.ts and a.ts else None) if after else \
                (a.line - e.line_end, (a.ts - e.ts) if e.ts and a.ts else None)
            if near <= n and (dt is None or 0 <= dt.total_seconds() <= 2) and pred(e):
                if e not in out:
                    out.append(e)
                break
    return out


_TIMEOUT = re.compile(r"time(?:d)? ?out|timeout", re.I)


@detector("aborting")
def aborting(run: Run, st: ServiceState, opts: dict) -> Iterator[Symptom]:
    """Clients give up: a noticeable share of requests aborted (disconnects), aborts at a constant age (a
    client timeout: even two of two is a pattern), or requests ended by a timeout. A lone cancel is normal."""
    v = st.view
    ab = [e for e in v.events if not v.in_shutdown(e.line) and (
        e.kind == "request_aborted" or (e.kind == "request_finished" and e.fields.get("status") == "error"
                                       and "disconnect" in str(e.fields.get("reason") or "").lower()))]
    tmo = [e for e in v.events if e.kind in ("request_finished", "request_failed") and not v.in_shutdown(e.line)
           and (e.fields.get("timeout_s") is not None or _TIMEOUT.search(str(e.fields.get("reason") or e.fields.get("error") or "")))]
    n_ab = u.distinct_requests(ab) if ab else 0
    n_to = len({e.request_id or e.line for e in tmo})
    n = n_ab + n_to
    if n == 0:
        return
    total = max(requests_seen(st), n, 1)
    share = n / total
    ages = _ages(run, st, ab)
    fixed = None
    if len(ages) >= 2:
        lo, hi = min(ages), max(ages)
        med = sorted(ages)[len(ages) // 2]
        # ages measured on 1-second timestamps: a 1 s timeout reads 0–1 s
        if hi >= 1.0 and hi - lo <= max(2.0, 0.1 * med):
            fixed = max(med, sum(ages) / len(ages), 1.0)
    # a request cut off at a client or proxy timeout's round value after running that long (OpenAI's and LiteLLM's
    # default 600 s, Dify's 300 s, nginx/ALB 60 s …): even one is a timeout, not a user's cancel
    t_hit = _round_timeout(ages)
    mass = _mass_abort(st, ab)
    # the share is known only when requests other than the aborted ones are logged, or the aborted ones' own arrivals
    # are (an RL trainer's "Aborted request(s)" lines with no request line at all say nothing about the traffic)
    share_known = requests_seen(st) > n_ab or bool(ages) or n_to > 0 or (getattr(v.srv, "api_requests", 0) or 0) > 0
    # a fixed age is a pattern of every abort, and of more than a couple of cancels among many requests
    pattern = fixed is not None and (n >= 3 or share >= 0.5)
    sev = Severity.WARNING if (share_known and ((n >= 3 and share >= 0.1) or pattern or (n >= 2 and share >= 0.5))) \
        or t_hit is not None or mass is not None else Severity.INFO
    evs = sorted(ab + tmo, key=lambda e: e.line)
    head = (f"{n} of {total} requests ({share:.0%}) " if share_known else f"{n} requests (no other request logged) ") \
        + ("timed out" if n_to > n_ab else "aborted by the client")
    if mass is not None:
        head += (f"; all {mass[0]} requests in flight were aborted in the same second at {mass[1]:%H:%M:%S} (a client or "
                 f"proxy dropped every connection at once: a timeout or restart on the client side)")
    if t_hit is not None and not (fixed is not None and pattern):
        head += (f"; {t_hit[1]} of them cut off {t_hit[0]:.0f} s after arrival — a client/proxy timeout of "
                 f"{t_hit[0]:.0f} s ended {'it' if t_hit[1] == 1 else 'them'} while still generating")
    elif fixed is not None and pattern:
        head += f", all about {fixed:.0f} s after arrival (a fixed client timeout)"
    elif ages:
        head += f"; median {sorted(ages)[len(ages) // 2]:.0f} s after arrival"
    t0 = min((e.ts for e in evs if e.ts), default=None)
    t1 = max((e.ts for e in evs if e.ts), default=None)
    yield Symptom("aborting", st.file, st.index, sev, head + ".", onset=t0, end=t1,
                  evidence=u.dedupe([u.first(e) for e in evs[:6]]),
                  category="timeout" if n_to > n_ab or t_hit is not None else "client_abort", process=evs[0].process,
                  data={"aborted": n_ab, "timeouts": n_to, "share": share, "fixed_age_s": fixed,
                        "timeout_s": t_hit[0] if t_hit else None,
                        "median_age_s": sorted(ages)[len(ages) // 2] if ages else None})


def _mass_abort(st: ServiceState, ab: list[Event]) -> tuple[int, Any] | None:
    """(n, when) when ≥ 3 requests were aborted within one second and they were every request in flight: Running in
    the stats line before was no more than that, and 0 in the one after."""
    by_s: dict[Any, set[str]] = {}
    for e in ab:
        if e.ts is not None:
            for rid in e.fields.get("request_ids") or [e.request_id or str(e.line)]:
                by_s.setdefault(e.ts.replace(microsecond=0), set()).add(str(rid))
    samples = sorted((x for xs in st.engines.values() for x in xs if x.ts is not None), key=lambda x: x.ts)
    times = [x.ts for x in samples]
    for t, ids in sorted(by_s.items(), key=lambda kv: -len(kv[1])):
        if len(ids) < 3:
            break
        k = bisect.bisect_right(times, t)  # samples[:k] at or before the burst, samples[k:] after it
        if 0 < k < len(samples) and 0 < samples[k - 1].running <= len(ids) and samples[k].running == 0:
            return len(ids), t
    return None


#: Round timeouts clients and proxies ship with or are set to (seconds).
ROUND_TIMEOUTS = (60.0, 90.0, 120.0, 180.0, 240.0, 300.0, 600.0, 900.0, 1200.0, 1800.0, 3600.0)


def _round_timeout(ages: list[float]) -> tuple[float, int] | None:
    """(timeout, requests) when aborted requests ended at a round timeout's age (within 1.5 s, the 1-second
    timestamps' error), the most hit first; None when none did."""
    hits: dict[float, int] = {}
    for a in ages:
        for t in ROUND_TIMEOUTS:
            if abs(a - t) <= max(1.5, 0.005 * t):
                hits[t] = hits.get(t, 0) + 1
    if not hits:
        return None
    t = max(hits, key=lambda k: (hits[k], k))
    return t, hits[t]


def _ages(run: Run, st: ServiceState, aborts: list[Event]) -> list[float]:
    js = {}
    for j in st.view.journeys:  # this server run's journeys (j.file == st.file and j.server == st.index)
        js[j.request_id] = j
        for a in j.aliases:
            js.setdefault(a, j)
    out = []
    for e in aborts:
        for rid in e.fields.get("request_ids") or [e.request_id]:
            j = js.get(str(rid)) or js.get(u.rid_base(str(rid))) if rid else None
            if j is not None and j.arrival_ts and e.ts and j.first_line < e.line:  # its arrival was logged
                a = (e.ts - j.arrival_ts).total_seconds()
                if a >= 0:  # a cancel in the arrival's second counts too: it breaks an "all at N s" pattern
                    out.append(a)
    return out
