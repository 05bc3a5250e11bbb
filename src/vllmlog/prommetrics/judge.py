"""Metric checks (codes M1xx) that judge a target's snapshots and emit log-finding-shaped dicts."""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from .exposition import Snapshot, label_key
from .rates import counter_increase, counter_reset, gauge_values
from .report import TargetReport

SEVERITIES: tuple[str, ...] = ("info", "warning", "error", "critical")

#: Handbook thresholds (overridable per call).
DEFAULT_THRESHOLDS: dict[str, float] = {
    "kv_warning": 0.80,
    "kv_error": 0.95,
    "waiting_high": 10.0,
    "ttft_p95_s": 1.0,
    "tpot_p95_s": 0.2,
    "min_generation_tps": 20.0,
    "hang_s": 10.0,
    "abort_ratio": 0.10,
    "error_ratio": 0.05,
    "bad_request_ratio": 0.20,
    "gpu_memory": 0.95,
}


@dataclass(slots=True, frozen=True)
class MetricCheck:
    """One metric check: stable code, slug, category, default severity, docs and detector."""

    code: str
    slug: str
    category: str
    severity: str
    doc: str
    """Markdown with the fixed headings *What it detects*, *Why it matters*, *How to fix*."""
    detect: Callable[[TargetReport, dict[str, float]], Iterator[dict[str, Any]]] = field(repr=False)

    def section(self, heading: str) -> str:
        """One section of the doc (``"What it detects"`` …) without its heading, like `rules.base.Rule.section`."""
        parts = re.split(r"^## ", self.doc, flags=re.M)
        for part in parts:
            title, _, body = part.partition("\n")
            if title.strip().lower() == heading.strip().lower():
                return inspect.cleandoc(body).strip()
        return ""


CHECKS: dict[str, MetricCheck] = {}


def _check(code: str, slug: str, category: str, severity: str) -> Callable:
    def deco(fn: Callable[[TargetReport, dict[str, float]], Iterator[dict[str, Any]]]) -> Callable:
        CHECKS[code] = MetricCheck(code, slug, category, severity, inspect.cleandoc(fn.__doc__ or ""), fn)
        return fn
    return deco


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


def _counter_growth(rep: TargetReport, role: str) -> tuple[str, Snapshot, Snapshot, float] | None:
    """(name, first, last snapshot, increase) of a role's counter when it grew over the samples, else None."""
    name = rep.names.get(role)
    if not name or len(rep.snapshots) < 2:
        return None
    a, b = rep.snapshots[0], rep.snapshots[-1]
    inc = counter_increase(a, b, name) or 0.0
    return (name, a, b, inc) if inc > 0 else None


def _evidence(snap: Snapshot, name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    line, text = snap.line_of(name, labels)
    return {"file": snap.source, "line": line if snap.from_file else None, "text": text}


def _finding(code: str, title: str, message: str, evidence: list[dict[str, Any]], root_cause: str,
             remediation: str, first: float, last: float, count: int = 1, severity: str | None = None,
             category: str | None = None, data: dict[str, Any] | None = None) -> dict[str, Any]:
    """A finding dict in the shape of `rules.base.Finding.to_dict()` (plus ``source: metrics``)."""
    chk = CHECKS[code]
    return {"code": code, "rule": chk.slug, "category": category or chk.category,
            "severity": severity or chk.severity, "title": title, "message": message, "evidence": evidence,
            "root_cause": root_cause, "remediation": remediation, "first_seen": _iso(first),
            "last_seen": _iso(last), "count": count, "file": evidence[0]["file"] if evidence else None,
            "process": None, "server": 0, "caused_by": None, "data": data or {}, "source": "metrics"}


def _gauge(snap: Snapshot, name: str | None, agg: Callable[[list[float]], float] = sum) -> float | None:
    if not name:
        return None
    vals = gauge_values(snap, name)
    return agg(vals) if vals else None


@_check("M101", "engine-not-progressing", "engine_hang", "critical")
def engine_hang(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    Requests are running (`vllm:num_requests_running` > 0) but `vllm:generation_tokens_total` and
    `vllm:prompt_tokens_total` do not move between scrapes for at least `hang_s` seconds.
    ## Why it matters
    The EngineCore is stuck (hung collective, SIGSTOP, deadlock, dead GPU): clients wait until timeout
    while `/health` may still answer.
    ## How to fix
    Take a stack dump of the EngineCore (`py-spy dump --pid`), check NCCL/driver errors in the log and
    dmesg, then restart the server; set `VLLM_ENGINE_ITERATION_TIMEOUT_S` and a liveness probe on tokens."""
    run_name, gen = rep.names.get("running"), rep.names.get("generation_tokens")
    if not run_name or not gen or len(rep.snapshots) < 2:
        return
    stretch: list[Snapshot] = []
    best: list[Snapshot] = []
    for a, b in zip(rep.snapshots, rep.snapshots[1:]):
        ra, rb = _gauge(a, run_name) or 0.0, _gauge(b, run_name) or 0.0
        frozen = ra > 0 and rb > 0 and (counter_increase(a, b, gen) or 0.0) == 0.0
        if frozen:
            stretch = stretch or [a]
            stretch.append(b)
            if stretch[-1].time - stretch[0].time > (best[-1].time - best[0].time if best else -1):
                best = list(stretch)
        else:
            stretch = []
    if not best or best[-1].time - best[0].time < th["hang_s"]:
        return
    a, b = best[0], best[-1]
    dur = b.time - a.time
    running = _gauge(b, run_name) or 0.0
    yield _finding(
        "M101", "Engine not progressing",
        f"{running:.0f} requests running but no token generated for {dur:.0f} s "
        f"({len(best)} scrapes, {gen} frozen at {_gauge(b, gen) or 0:.0f})",
        [_evidence(b, run_name), _evidence(a, gen), _evidence(b, gen)],
        "The engine core stopped stepping while requests were scheduled (hang, stopped or wedged process).",
        "Dump the EngineCore stack (py-spy dump), check the log/dmesg for NCCL, CUDA or OOM errors, restart "
        "the server; alert on `rate(vllm:generation_tokens_total[2m]) == 0` while requests run.",
        a.time, b.time, count=len(best) - 1,
        data={"running": running, "frozen_s": round(dur, 3), "threshold_s": th["hang_s"]})


@_check("M102", "target-unreachable", "engine_dead", "critical")
def target_down(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    The `/metrics` endpoint did not answer (connection refused, timeout, non-200).
    ## Why it matters
    The API server is gone or wedged; with a dead EngineCore vLLM shuts the API server down.
    ## How to fix
    Check the process and the end of its log (`vllmlog diagnose`), look for `EngineDeadError`, OOM kills
    in dmesg, and restart; keep a Prometheus `up == 0` alert on the job."""
    if rep.error is None:
        return
    t = rep.snapshots[-1].time if rep.snapshots else time.time()
    seen = " after answering earlier" if rep.snapshots else ""
    yield _finding("M102", "Scrape target unreachable", f"{rep.target}: {rep.error}{seen}",
                   [{"file": rep.target, "line": None, "text": rep.error}],
                   "The vLLM API server is not serving /metrics (process exited, port closed or hung).",
                   "Check whether the server process is alive, read the end of its log, restart it.", t, t)


@_check("M103", "queue-backlog", "queue_backlog", "warning")
def queue_backlog(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    `vllm:num_requests_waiting` at or above `waiting_high` (default 10) in the latest scrape and in at
    least half of the scrapes, or climbing across three or more scrapes.
    ## Why it matters
    Arrivals exceed what the scheduler admits; TTFT grows with the queue.
    ## How to fix
    Add replicas or rate-limit; raise `--max-num-seqs` / `--max-num-batched-tokens` if KV usage is low."""
    name, run_name = rep.names.get("waiting"), rep.names.get("running")
    if not name:
        return
    vals = [(_gauge(s, name) or 0.0) for s in rep.snapshots]
    high = [v >= th["waiting_high"] for v in vals]
    climbing = len(vals) >= 3 and all(b > a for a, b in zip(vals[-3:], vals[-2:])) and vals[-1] >= 5
    if not (sum(high) >= min(2, len(vals)) or climbing):
        return
    first_i = next(i for i, h in enumerate(high) if h) if any(high) else len(vals) - 3
    last_i = max(i for i, h in enumerate(high) if h) if any(high) else len(vals) - 1
    peak_i = max(range(len(vals)), key=lambda i: vals[i])
    last = rep.snapshots[peak_i]
    running = _gauge(last, run_name) if run_name else None
    trend = "climbing" if climbing else f"in {sum(high)}/{len(vals)} scrapes, now {vals[-1]:.0f}"
    yield _finding(
        "M103", "Requests queueing",
        f"up to {vals[peak_i]:.0f} requests waiting with {running or 0:.0f} running ({trend})",
        [_evidence(last, name)] + ([_evidence(last, run_name)] if run_name else []),
        "More requests arrive than the engine admits: the batch is full (max-num-seqs) or KV cache is short.",
        "Add replicas or rate-limit clients; raise --max-num-seqs/--max-num-batched-tokens when KV usage is low.",
        rep.snapshots[first_i].time, rep.snapshots[last_i].time, count=sum(high) or 1)


@_check("M104", "kv-cache-high", "kv_cache_pressure_preemption", "warning")
def kv_high(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    KV-cache usage (`vllm:kv_cache_usage_perc`, formerly `vllm:gpu_cache_usage_perc`) above 0.80
    (warning) or 0.95 (error) in any scrape.
    ## Why it matters
    A full KV cache stops admission and forces preemptions (recompute), raising TTFT and e2e latency.
    ## How to fix
    Raise `--gpu-memory-utilization`, lower `--max-num-seqs` or `--max-model-len`, enable prefix caching,
    or add replicas."""
    name = rep.names.get("kv_usage")
    if not name:
        return
    vals = [(s, _gauge(s, name, max) or 0.0) for s in rep.snapshots]
    over = [(s, v) for s, v in vals if v > th["kv_warning"]]
    if not over:
        return
    peak_s, peak = max(over, key=lambda x: x[1])
    sev = "error" if peak > th["kv_error"] else "warning"
    yield _finding("M104", "KV cache nearly full",
                   f"KV-cache usage peaked at {peak:.1%} ({len(over)}/{len(vals)} scrapes above "
                   f"{th['kv_warning']:.0%})", [_evidence(peak_s, name)],
                   "Running sequences fill the KV cache; new requests wait and running ones get preempted.",
                   "Raise --gpu-memory-utilization, lower --max-num-seqs or --max-model-len, add replicas.",
                   over[0][0].time, over[-1][0].time, count=len(over), severity=sev,
                   data={"peak": peak, "warning": th["kv_warning"], "error": th["kv_error"]})


@_check("M105", "preemptions", "kv_cache_pressure_preemption", "warning")
def preemptions(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    `vllm:num_preemptions_total` increased between scrapes.
    ## Why it matters
    Preempted requests lose their KV blocks and are recomputed later (V1 never logs this), wasting compute
    and adding latency.
    ## How to fix
    Give the KV cache more room (`--gpu-memory-utilization`, smaller `--max-num-seqs`/`--max-model-len`)."""
    grown = _counter_growth(rep, "preemptions")
    if grown is None:
        return
    name, a, b, inc = grown
    rate = inc / max(b.time - a.time, 1e-9)
    kv_name = rep.names.get("kv_usage")
    kvs = [_gauge(s, kv_name, max) for s in rep.snapshots] if kv_name else []
    kv = max((v for v in kvs if v is not None), default=None)
    sev = "error" if kv is not None and kv > th["kv_error"] else "warning"
    yield _finding("M105", "Requests preempted",
                   f"{inc:.0f} preemptions in {b.time - a.time:.0f} s ({rate:.2f}/s)"
                   + (f", KV usage peaked at {kv:.0%}" if kv is not None else ""),
                   [_evidence(a, name), _evidence(b, name)],
                   "The scheduler ran out of KV blocks and evicted running requests to make room.",
                   "Raise --gpu-memory-utilization or lower --max-num-seqs / --max-model-len.",
                   a.time, b.time, count=int(inc), severity=sev,
                   data={"preemptions": inc, "per_s": round(rate, 4), "kv_peak": kv})


@_check("M106", "slow-generation", "slow_throughput", "warning")
def slow_generation(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    Generation throughput below `min_generation_tps` (20 tok/s) while requests are running and tokens
    still move (zero movement is M101).
    ## Why it matters
    Users see very slow streaming; usually compute contention, swapping to CPU, or a degraded GPU.
    ## How to fix
    Check GPU utilisation/clocks and co-located jobs, CUDA graphs (`--enforce-eager` off), batch size."""
    gps, run_name = rep.rates.get("generation_tokens_per_s"), rep.names.get("running")
    if gps is None or not run_name or gps <= 0 or gps >= th["min_generation_tps"]:
        return
    a, b = rep.snapshots[0], rep.snapshots[-1]
    if not ((_gauge(a, run_name) or 0) > 0 and (_gauge(b, run_name) or 0) > 0):
        return
    gen = rep.names["generation_tokens"]
    yield _finding("M106", "Slow generation", f"{gps:.1f} generated tokens/s while requests are running",
                   [_evidence(a, gen), _evidence(b, gen), _evidence(b, run_name)],
                   "The engine steps slowly: compute contention, CPU offload/swap, or a degraded device.",
                   "Check device utilisation and clocks, other jobs on the host, --enforce-eager, batch limits.",
                   a.time, b.time)


def _latency_check(rep: TargetReport, key: str, limit: float, code: str, what: str) -> Iterator[dict[str, Any]]:
    q = rep.quantiles.get(key)
    if not q or q.get("p95") is None or q["p95"] <= limit:
        return
    a, b = rep.snapshots[0], rep.snapshots[-1]
    category = None
    if key == "ttft":
        queue = rep.quantiles.get("queue", {}).get("p95")
        waiting = rep.waiting or 0
        category = "queue_backlog" if (queue is not None and queue >= 0.5 * q["p95"]) or waiting > 0 \
            else "slow_throughput"
    fam = q["metric"]
    basis = "since process start" if q["basis"] == "since_start" else f"over {b.time - a.time:.0f} s"
    yield _finding(code, f"{what} p95 over SLO",
                   f"{what} p95 ≈ {q['p95']:.3f} s (bucket estimate, {basis}; limit {limit:g} s, "
                   f"{q['count']:.0f} observations)",
                   [_evidence(b, fam + "_count")] + ([_evidence(a, fam + "_count")] if a is not b else []),
                   "Requests spend long in the queue (backlog) or the engine is slow; see queue p95."
                   if key == "ttft" else "Decode steps are slow: batch too large, contention, or long prompts "
                   "interleaving (chunked prefill).",
                   "Reduce load or add replicas; tune --max-num-seqs / --max-num-batched-tokens.",
                   a.time, b.time, count=int(q["count"]), category=category,
                   data={"p95_s": q["p95"], "limit_s": limit, "metric": fam, "estimate": "bucket"})


@_check("M107", "ttft-slo", "queue_backlog", "warning")
def ttft_slo(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    p95 time to first token, estimated from `vllm:time_to_first_token_seconds` bucket deltas, above
    `ttft_p95_s` (1 s for scrapes; alerts default to the handbook's 500 ms).
    ## Why it matters
    TTFT is what users feel first; a high p95 means queueing or slow prefill.
    ## How to fix
    If queue time dominates, add capacity or rate-limit; otherwise tune prefill (chunked prefill,
    `--max-num-batched-tokens`), or shorten prompts."""
    yield from _latency_check(rep, "ttft", th["ttft_p95_s"], "M107", "TTFT")


@_check("M108", "tpot-slo", "slow_throughput", "warning")
def tpot_slo(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    p95 time per output token (`vllm:request_time_per_output_token_seconds`, or the inter-token
    histogram of older releases) above `tpot_p95_s` (200 ms).
    ## Why it matters
    Streaming feels sluggish; it usually means an oversized batch or contention.
    ## How to fix
    Lower `--max-num-seqs`, enable chunked prefill, add replicas."""
    key = "tpot" if "tpot" in rep.quantiles else "itl"
    yield from _latency_check(rep, key, th["tpot_p95_s"], "M108", "TPOT" if key == "tpot" else "Inter-token latency")


@_check("M109", "client-aborts", "client_abort", "warning")
def client_aborts(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    More than `abort_ratio` (10 %) of finished requests have `finished_reason="abort"` in the window.
    ## Why it matters
    Clients give up (timeouts, closed streams): usually a symptom of latency, and wasted compute.
    ## How to fix
    Compare with TTFT/queue; raise client timeouts or capacity; make clients cancel deliberately."""
    ratio, name = rep.rates.get("abort_ratio"), rep.names.get("request_success")
    if ratio is None or not name or ratio <= th["abort_ratio"]:
        return
    a, b = rep.snapshots[0], rep.snapshots[-1]
    n = (rep.rates.get("aborts_per_s") or 0.0) * (b.time - a.time)
    if n < 3:
        return
    labelled = counter_increase(a, b, name, {"finished_reason": "abort"}) or 0.0
    how = "" if labelled >= n - 0.5 else " (estimated: HTTP 2xx responses started minus requests finished)"
    ev = [_evidence(b, name, {"finished_reason": "abort"})]
    http = rep.names.get("http_requests")
    if how and http:
        ev = [_evidence(b, http, {"status": "2xx"}), _evidence(b, name)]
    yield _finding("M109", "Clients aborting requests",
                   f"{n:.0f} aborted requests ({ratio:.0%} of started){how}", ev,
                   "Clients close connections or time out before the response completes.",
                   "Check TTFT/queue time; raise client timeouts or add capacity.", a.time, b.time, count=int(n))


@_check("M110", "request-errors", "engine_dead", "error")
def request_errors(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    Requests finishing with `finished_reason="error"` (0.13+) or HTTP 5xx, above `error_ratio` (5 %),
    or HTTP 4xx above `bad_request_ratio` (20 %) of all requests.
    ## Why it matters
    Failures reach users; 4xx floods are usually prompts longer than `--max-model-len` or bad parameters.
    ## How to fix
    For 5xx read the log's tracebacks (`vllmlog diagnose`); for 4xx find the rejected requests in the
    log and fix clients or raise `--max-model-len`."""
    a, b = rep.snapshots[0], rep.snapshots[-1]
    if len(rep.snapshots) < 2:
        return
    succ, http = rep.names.get("request_success"), rep.names.get("http_requests")
    errors = (counter_increase(a, b, succ, {"finished_reason": "error"}) or 0.0) if succ else 0.0
    h5 = (counter_increase(a, b, http, {"status": "5xx"}) or 0.0) if http else 0.0
    h4 = (counter_increase(a, b, http, {"status": "4xx"}) or 0.0) if http else 0.0
    total = (counter_increase(a, b, http) or 0.0) if http else (counter_increase(a, b, succ) or 0.0) if succ else 0.0
    if not total:
        return
    if (errors + h5) / total > th["error_ratio"] and errors + h5 >= 3:
        ev = [_evidence(b, succ, {"finished_reason": "error"})] if succ and errors else []
        ev += [_evidence(b, http, {"status": "5xx"})] if http and h5 else []
        yield _finding("M110", "Requests failing", f"{errors + h5:.0f} failed requests "
                       f"({(errors + h5) / total:.0%} of {total:.0f}): {errors:.0f} engine errors, {h5:.0f} HTTP 5xx",
                       ev, "The server fails requests (engine errors or internal server errors).",
                       "Read the tracebacks in the log (vllmlog diagnose) and fix the cause.", a.time, b.time,
                       count=int(errors + h5))
    if h4 / total > th["bad_request_ratio"] and h4 >= 3:
        yield _finding("M110", "Many rejected requests (HTTP 4xx)",
                       f"{h4:.0f} HTTP 4xx answers ({h4 / total:.0%} of {total:.0f} requests)",
                       [_evidence(b, http, {"status": "4xx"})],
                       "Clients send requests the server rejects: prompts over --max-model-len, bad parameters, "
                       "unknown model.", "Find the rejected requests in the log (vllmlog diagnose); fix clients "
                       "or raise --max-model-len.", a.time, b.time, count=int(h4), severity="warning",
                       category="bad_request_params")


@_check("M111", "admission-rejections", "queue_backlog", "warning")
def admission_rejections(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    `vllm:admission_rejections_total` (0.32+) increased: the waiting queue hit `--max-num-queued-reqs`
    or `--max-num-queued-tokens`.
    ## Why it matters
    Requests are refused outright instead of queued.
    ## How to fix
    Add capacity or raise the queue limits."""
    grown = _counter_growth(rep, "admission_rejections")
    if grown is None:
        return
    name, a, b, inc = grown
    yield _finding("M111", "Admission rejections", f"{inc:.0f} requests rejected at admission",
                   [_evidence(b, name)], "The waiting queue is at its configured limit.",
                   "Add replicas or raise --max-num-queued-reqs/--max-num-queued-tokens.", a.time, b.time,
                   count=int(inc))


@_check("M112", "metrics-missing", "config_error", "warning")
def metrics_missing(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    The endpoint answers but exposes no `vllm:` engine gauges.
    ## Why it matters
    Dashboards and alerts on vLLM names stay silently empty.
    ## How to fix
    Remove `--disable-log-stats`, check the URL points at the vLLM API server (same port as the API)."""
    if rep.error or not rep.snapshots or "running" in rep.names or rep.snapshots[-1].has("DCGM_FI_DEV_FB_USED"):
        return
    s = rep.snapshots[-1]
    yield _finding("M112", "No vLLM metrics", f"{rep.target} exposes no vllm:num_requests_running",
                   [{"file": s.source, "line": None, "text": f"{len(s.samples)} samples, none named vllm:*"}],
                   "Stats logging is disabled (--disable-log-stats) or this is not a vLLM /metrics endpoint.",
                   "Drop --disable-log-stats; scrape the API server port's /metrics.", s.time, s.time)


@_check("M113", "server-restarted", "engine_dead", "info")
def restarted(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    A vLLM counter went down between two scrapes.
    ## Why it matters
    The server restarted (crash loop, redeploy); rates across the restart are computed from zero.
    ## How to fix
    Check why the process restarted (log end, OOM kills)."""
    gen = rep.names.get("generation_tokens")
    if not gen:
        return
    for a, b in zip(rep.snapshots, rep.snapshots[1:]):
        if counter_reset(a, b, gen):
            yield _finding("M113", "Server restarted", f"{gen} went down between scrapes",
                           [_evidence(a, gen), _evidence(b, gen)], "The vLLM process restarted.",
                           "Look for the cause of the restart in the previous run's log.", a.time, b.time)


@_check("M114", "gpu-memory-high", "runtime_oom", "warning")
def gpu_memory(rep: TargetReport, th: dict[str, float]) -> Iterator[dict[str, Any]]:
    """## What it detects
    GPU frame-buffer use above `gpu_memory` (95 %) on an NVIDIA DCGM-exporter target
    (`DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)`); vLLM itself exports no GPU memory.
    ## Why it matters
    vLLM preallocates `--gpu-memory-utilization` of the GPU; anything else growing on it (another process,
    CUDA graphs, a second model) ends in CUDA out-of-memory.
    ## How to fix
    Find the other processes on the GPU (`nvidia-smi`), lower `--gpu-memory-utilization`, or give vLLM the GPU
    to itself."""
    if not rep.snapshots:
        return
    snap = rep.snapshots[-1]
    used = {label_key(s.labels): s for s in snap.series("DCGM_FI_DEV_FB_USED")}
    free = {label_key(s.labels): s.value for s in snap.series("DCGM_FI_DEV_FB_FREE")}
    for key, s in used.items():
        total = s.value + free.get(key, 0.0)
        if key not in free or total <= 0 or s.value / total <= th["gpu_memory"]:
            continue
        gpu = s.labels.get("gpu", "?")
        yield _finding("M114", "GPU memory nearly full",
                       f"GPU {gpu} on {s.labels.get('Hostname', rep.target)}: {s.value / total:.1%} of frame buffer used",
                       [_evidence(snap, "DCGM_FI_DEV_FB_USED", s.labels)],
                       "The GPU's memory is almost exhausted; the next allocation spike fails with CUDA OOM.",
                       "Check nvidia-smi for other processes; lower --gpu-memory-utilization.", snap.time, snap.time,
                       data={"ratio": round(s.value / total, 4), "limit": th["gpu_memory"], "gpu": gpu})


def judge(rep: TargetReport, thresholds: dict[str, float] | None = None) -> list[dict[str, Any]]:
    """Run every check on one target; findings sorted by severity (worst first)."""
    th = {**DEFAULT_THRESHOLDS, **(thresholds or {})}
    out: list[dict[str, Any]] = []
    for chk in CHECKS.values():
        out.extend(chk.detect(rep, th))
    out.sort(key=lambda f: -SEVERITIES.index(f["severity"]))
    return out


def severity_at_least(sev: str, floor: str) -> bool:
    """True when `sev` is as bad as `floor` or worse."""
    return SEVERITIES.index(sev) >= SEVERITIES.index(floor)
