"""Prometheus alert rules for one vLLM release, built from the metric catalog (never from literals)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from ..prommetrics.catalog import Version, format_version, role_names
from ..prommetrics.judge import CHECKS

GROUP_BY = "job, instance, model_name"
HTTP_GROUP_BY = "job, instance"
#: API handlers that generate tokens (HTTP metrics carry no model_name).
GENERATION_HANDLERS = "/v1/completions|/v1/chat/completions|/v1/responses"
ABORT = 'finished_reason="abort"'
ERROR = 'finished_reason="error"'
NOT_ABORT = 'finished_reason!="abort"'
#: Ratio alerts also need this many events in the window, so two requests at night do not page anyone.
MIN_EVENTS = 3


def _seconds(window: str) -> int:
    """'5m' → 300."""
    return int(window[:-1]) * {"s": 1, "m": 60, "h": 3600}[window[-1]]


@dataclass(slots=True)
class AlertOptions:
    """Thresholds and names that tune the generated rules."""

    job: str = "vllm"
    """Prometheus job label of the vLLM scrape targets."""
    ttft_p95_s: float = 0.5
    """TTFT p95 SLO (handbook: 500 ms)."""
    tpot_p95_s: float = 0.2
    """TPOT / inter-token p95 SLO."""
    kv_warning: float = 0.80
    """KV-cache usage warning threshold (ratio)."""
    kv_critical: float = 0.95
    """KV-cache usage critical threshold (handbook: 95 %)."""
    waiting_high: float = 10.0
    """Waiting requests considered a backlog."""
    abort_ratio: float = 0.10
    """Share of aborted requests."""
    error_ratio: float = 0.05
    """Share of failed (5xx / engine error) requests."""
    bad_request_ratio: float = 0.20
    """Share of HTTP 4xx answers."""
    min_generation_tps: float = 20.0
    """Generation tokens/s below which a busy engine is slow."""
    gpu_memory: float = 0.95
    """GPU memory ratio (handbook: 95 %), needs `gpu_exporter`."""
    gpu_exporter: str | None = None
    """``dcgm`` adds a GPU-memory alert on NVIDIA DCGM-exporter metrics (vLLM exports none)."""
    rate_window: str = "5m"
    """Range of rate() windows."""


@dataclass(slots=True)
class AlertRule:
    """One alerting rule."""

    alert: str
    code: str
    expr: str
    for_: str
    severity: str
    summary: str
    description: str
    extra_labels: dict[str, str] = field(default_factory=dict)
    category: str | None = None
    """Diagnosis category label; defaults to the category of the M-check named by `code`."""

    def to_dict(self) -> dict[str, Any]:
        """The rule as Prometheus expects it in a rule group."""
        return {
            "alert": self.alert,
            "expr": self.expr,
            "for": self.for_,
            "labels": {"severity": self.severity, "vllmlog_code": self.code,
                       "category": self.category or CHECKS[self.code].category, **self.extra_labels},
            "annotations": {
                "summary": self.summary,
                "description": self.description,
                "runbook": f"vllmlog rule {self.code}",
            },
        }


def _vec(names: list[str], matchers: str = "", fn: str | None = None, window: str | None = None) -> str:
    """One selector per live name, joined with `or` when a rename overlaps (labels match, so no duplicates)."""
    parts = []
    for n in names:
        sel = f"{n}{{{matchers}}}" if matchers else n
        if fn:
            sel = f"{fn}({sel}[{window}])"
        parts.append(sel)
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def build_rules(version: Version, opts: AlertOptions | None = None) -> list[AlertRule]:
    """Alert rules whose expressions only name metrics that `version` exposes."""
    o = opts or AlertOptions()
    w = o.rate_window
    g = GROUP_BY
    names = {r: role_names(r, version) for r in (
        "running", "waiting", "kv_usage", "generation_tokens", "preemptions", "request_success", "ttft", "tpot",
        "itl", "http_requests")}
    if not names["running"]:
        raise ConfigError(f"vLLM {format_version(version)} exposes no engine metrics",
                          hint="vLLM has /metrics from 0.2.3 on")
    up = f'up{{job="{o.job}"}}'
    running = _vec(names["running"])
    rules: list[AlertRule] = [
        AlertRule("VllmTargetDown", "M102", f"{up} == 0", "1m", "critical",
                  "vLLM target {{ $labels.instance }} is down",
                  "Prometheus cannot scrape /metrics: the API server exited, hangs or the port is closed."),
        AlertRule("VllmMetricsMissing", "M112",
                  f"{up} == 1 unless on (job, instance) count by (job, instance) ({running})", "5m", "warning",
                  "{{ $labels.instance }} answers but exposes no vLLM engine metrics",
                  "The target has no " + names["running"][0] + ": --disable-log-stats is set, the scrape points "
                  "at the wrong port, or the metric names changed (check vllmlog scrape)."),
    ]
    gen = names["generation_tokens"]
    if gen:
        rules.append(AlertRule(
            "VllmEngineNotProgressing", "M101",
            f"sum by ({g}) ({running}) > 0 and on ({g}) sum by ({g}) ({_vec(gen, fn='rate', window='2m')}) == 0",
            "1m", "critical", "vLLM engine on {{ $labels.instance }} is not generating tokens",
            "Requests are running but no token was generated for 2 minutes: the engine core is hung or stopped."))
        rules.append(AlertRule(
            "VllmSlowGeneration", "M106",
            f"sum by ({g}) ({_vec(gen, fn='rate', window=w)}) < {o.min_generation_tps:g}"
            f" and on ({g}) sum by ({g}) ({_vec(gen, fn='rate', window=w)}) > 0"
            f" and on ({g}) sum by ({g}) ({running}) > 0",
            "10m", "warning", "vLLM on {{ $labels.instance }} generates under "
            f"{o.min_generation_tps:g} tokens/s",
            "Generation throughput is {{ $value | humanize }} tokens/s while requests are running."))
    waiting = _vec(names["waiting"])
    rules.append(AlertRule(
        "VllmRequestsWaiting", "M103", f"sum by ({g}) ({waiting}) > {o.waiting_high:g}", "5m", "warning",
        "{{ $value }} requests waiting on {{ $labels.instance }}",
        "Requests queue faster than the engine admits them (batch full or KV cache short)."))
    rules.append(AlertRule(
        "VllmQueueGrowing", "M103",
        f"sum by ({g}) (delta({names['waiting'][0]}[10m])) > 5 and on ({g}) sum by ({g}) ({waiting}) > 5",
        "5m", "warning", "Waiting queue on {{ $labels.instance }} keeps growing",
        "The number of waiting requests grew by {{ $value }} over 10 minutes."))
    if names["kv_usage"]:
        kv = _vec(names["kv_usage"])
        rules.append(AlertRule(
            "VllmKvCacheHigh", "M104", f"max by ({g}) ({kv}) > {o.kv_warning:g}", "10m", "warning",
            "KV cache on {{ $labels.instance }} above " + f"{o.kv_warning:.0%}",
            "KV-cache usage is {{ $value | humanizePercentage }}; admission slows and preemptions follow."))
        rules.append(AlertRule(
            "VllmKvCacheFull", "M104", f"max by ({g}) ({kv}) > {o.kv_critical:g}", "5m", "critical",
            "KV cache on {{ $labels.instance }} above " + f"{o.kv_critical:.0%}",
            "KV-cache usage is {{ $value | humanizePercentage }}."))
        if names["preemptions"]:
            rules.append(AlertRule(
                "VllmPreemptionsUnderKvPressure", "M105",
                f"sum by ({g}) ({_vec(names['preemptions'], fn='rate', window=w)}) > 0"
                f" and on ({g}) max by ({g}) ({kv}) > {o.kv_warning:g}",
                "5m", "warning", "vLLM on {{ $labels.instance }} preempts requests under KV pressure",
                "{{ $value | humanize }} preemptions/s while the KV cache is nearly full; requests are recomputed."))
    for role, alert, code, slo, what in (("ttft", "VllmTtftP95High", "M107", o.ttft_p95_s, "TTFT"),
                                         ("tpot", "VllmTpotP95High", "M108", o.tpot_p95_s, "TPOT")):
        fams = names[role] or (names["itl"] if role == "tpot" else [])
        if not fams:
            continue
        buckets = _vec([f + "_bucket" for f in fams], fn="rate", window=w)
        rules.append(AlertRule(
            alert, code, f"histogram_quantile(0.95, sum by ({g}, le) ({buckets})) > {slo:g}", "5m", "warning",
            f"{what} p95 on " + "{{ $labels.instance }} over " + f"{slo * 1000:g} ms",
            f"p95 {what} is " + "{{ $value | humanizeDuration }} (from " + fams[0] + ")."))
    succ = names["request_success"]
    http = names["http_requests"]
    if http and succ:
        started = f'sum by ({HTTP_GROUP_BY}) (rate({http[0]}{{handler=~"{GENERATION_HANDLERS}",status="2xx"}}[{w}]))'
        # aborted = started − finished without abort: right whether or not the release counts aborts
        finished = f"sum by ({HTTP_GROUP_BY}) ({_vec(succ, NOT_ABORT, 'rate', w)})"
        rules.append(AlertRule(
            "VllmClientAbortsHigh", "M109",
            f"clamp_min({started} - on ({HTTP_GROUP_BY}) {finished}, 0) / on ({HTTP_GROUP_BY}) {started}"
            f" > {o.abort_ratio:g} and on ({HTTP_GROUP_BY}) {started} * {_seconds(w)} >= {MIN_EVENTS}",
            "10m", "warning", "Clients abandon requests on {{ $labels.instance }}",
            "{{ $value | humanizePercentage }} of started responses never finish (client disconnects or "
            "timeouts; recent vLLM does not count them in request_success{finished_reason=\"abort\"})."))
    elif succ:
        rules.append(AlertRule(
            "VllmClientAbortsHigh", "M109",
            f'sum by ({g}) ({_vec(succ, ABORT, "rate", w)})'
            f" / on ({g}) sum by ({g}) ({_vec(succ, fn='rate', window=w)}) > {o.abort_ratio:g}"
            f' and on ({g}) sum by ({g}) ({_vec(succ, ABORT, "increase", w)}) >= {MIN_EVENTS}',
            "10m", "warning", "Clients abort requests on {{ $labels.instance }}",
            "{{ $value | humanizePercentage }} of finished requests were aborted."))
    if http:
        total = f"sum by ({HTTP_GROUP_BY}) (rate({http[0]}[{w}]))"
        rules.append(AlertRule(
            "VllmHttpErrorsHigh", "M110",
            f'sum by ({HTTP_GROUP_BY}) (rate({http[0]}{{status="5xx"}}[{w}])) / on ({HTTP_GROUP_BY}) {total}'
            f" > {o.error_ratio:g}"
            f' and on ({HTTP_GROUP_BY}) sum by ({HTTP_GROUP_BY}) (increase({http[0]}{{status="5xx"}}[{w}])) >= {MIN_EVENTS}', "5m", "critical", "vLLM on {{ $labels.instance }} fails requests (5xx)",
            "{{ $value | humanizePercentage }} of HTTP requests end in 5xx."))
        rules.append(AlertRule(
            "VllmBadRequestsHigh", "M110",
            f'sum by ({HTTP_GROUP_BY}) (rate({http[0]}{{status="4xx"}}[{w}])) / on ({HTTP_GROUP_BY}) {total}'
            f" > {o.bad_request_ratio:g}"
            f' and on ({HTTP_GROUP_BY}) sum by ({HTTP_GROUP_BY}) (increase({http[0]}{{status="4xx"}}[{w}])) >= {MIN_EVENTS}', "10m", "warning", "Many rejected requests (4xx) on {{ $labels.instance }}",
            "{{ $value | humanizePercentage }} of HTTP requests are rejected (prompt over --max-model-len, bad "
            "parameters, unknown model).", category="bad_request_params"))
    if succ and version >= (0, 13, 0):
        rules.append(AlertRule(
            "VllmEngineRequestErrors", "M110",
            f'sum by ({g}) ({_vec(succ, ERROR, "rate", w)})'
            f" / on ({g}) sum by ({g}) ({_vec(succ, fn='rate', window=w)}) > {o.error_ratio:g}"
            f' and on ({g}) sum by ({g}) ({_vec(succ, ERROR, "increase", w)}) >= {MIN_EVENTS}',
            "5m", "critical", "Requests finish with errors on {{ $labels.instance }}",
            "{{ $value | humanizePercentage }} of finished requests ended with finished_reason=error."))
    if o.gpu_exporter == "dcgm":
        rules.append(AlertRule(
            "GpuMemoryHigh", "M114",
            f"max by (Hostname, gpu) (DCGM_FI_DEV_FB_USED / (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)) > {o.gpu_memory:g}",
            "5m", "warning", "GPU {{ $labels.gpu }} on {{ $labels.Hostname }} memory above " + f"{o.gpu_memory:.0%}",
            "GPU frame-buffer use is {{ $value | humanizePercentage }} (DCGM exporter); vLLM preallocates "
            "--gpu-memory-utilization, so other processes on the GPU are the usual cause."))
    elif o.gpu_exporter is not None:
        raise ConfigError(f"unknown GPU exporter {o.gpu_exporter!r}", hint="use --gpu-exporter dcgm")
    return rules


def rule_groups(version: Version, opts: AlertOptions | None = None) -> dict[str, Any]:
    """The `groups:` document for a Prometheus rule file."""
    return {"groups": [{"name": f"vllm-{format_version(version)}",
                        "rules": [r.to_dict() for r in build_rules(version, opts)]}]}


def render_prometheus(version: Version, opts: AlertOptions | None = None) -> str:
    """A Prometheus rule file (YAML)."""
    head = (f"# Alert rules for vLLM {format_version(version)} generated by vllmlog from its metric catalog.\n"
            "# Each alert's runbook annotation names the vllmlog check that explains it.\n")
    return head + to_yaml(rule_groups(version, opts)) + "\n"


def render_k8s(version: Version, opts: AlertOptions | None = None, name: str = "vllm-alerts",
               namespace: str | None = None, labels: dict[str, str] | None = None) -> str:
    """A prometheus-operator PrometheusRule manifest (YAML); `labels` e.g. the operator's ruleSelector."""
    meta: dict[str, Any] = {"name": name, "labels": {"app.kubernetes.io/name": "vllm",
                                                       "app.kubernetes.io/managed-by": "vllmlog", **(labels or {})}}
    if namespace:
        meta["namespace"] = namespace
    doc = {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule", "metadata": meta,
           "spec": rule_groups(version, opts)}
    return to_yaml(doc) + "\n"


def to_yaml(obj: Any, indent: int = 0) -> str:
    """A small YAML emitter for dicts/lists/scalars (strings double-quoted, JSON escapes are valid YAML)."""
    pad = "  " * indent
    if isinstance(obj, dict):
        if not obj:
            return pad + "{}"
        lines = []
        for k, v in obj.items():
            key = json.dumps(str(k)) if not str(k).replace("_", "").replace("-", "").replace(".", "").replace(
                "/", "").isalnum() else str(k)
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{key}:\n{to_yaml(v, indent + 1)}")
            else:
                lines.append(f"{pad}{key}: {_scalar(v)}")
        return "\n".join(lines)
    if isinstance(obj, list):
        if not obj:
            return pad + "[]"
        lines = []
        for item in obj:
            if isinstance(item, (dict, list)) and item:
                body = to_yaml(item, indent + 1)
                lines.append(f"{pad}- {body.lstrip()}")
            else:
                lines.append(f"{pad}- {_scalar(item)}")
        return "\n".join(lines)
    return pad + _scalar(obj)


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, (dict, list)):
        return "{}" if isinstance(v, dict) else "[]"
    return json.dumps(str(v), ensure_ascii=False)
