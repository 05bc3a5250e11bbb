"""A Grafana dashboard for one vLLM release, with every query built from the metric catalog."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ..errors import ConfigError
from ..prommetrics.catalog import Version, format_version, role_names

SCHEMA_VERSION = 39
DS = {"type": "prometheus", "uid": "${datasource}"}
SEL = 'model_name=~"$model_name",instance=~"$instance"'
HTTP_SEL = 'instance=~"$instance"'
RI = "$__rate_interval"

#: Series that `vllmlog watch` exports about the log it follows (src/vllmlog/live/exporter.py): name → kind.
WATCH_METRICS: dict[str, str] = {
    "vllmlog_findings_active": "gauge",
    "vllmlog_alerts": "gauge",
    "vllmlog_num_requests_running": "gauge",
    "vllmlog_num_requests_waiting": "gauge",
    "vllmlog_kv_cache_usage_ratio": "gauge",
    "vllmlog_generation_throughput_tokens_per_second": "gauge",
    "vllmlog_prompt_throughput_tokens_per_second": "gauge",
    "vllmlog_errors_total": "counter",
    "vllmlog_requests_total": "counter",
    "vllmlog_preemptions_total": "counter",
    "vllmlog_watch_source_up": "gauge",
    "vllmlog_watch_lag_bytes": "gauge",
}


class _Builder:
    """Accumulates panels with unique ids and a simple 2-column grid."""

    def __init__(self) -> None:
        self.panels: list[dict[str, Any]] = []
        self.next_id = 1
        self.x = 0
        self.y = 0

    def row(self, title: str) -> None:
        if self.x:
            self.x, self.y = 0, self.y + 8
        self.panels.append({"id": self.next_id, "type": "row", "title": title, "collapsed": False,
                            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y}, "panels": []})
        self.next_id += 1
        self.y += 1

    def panel(self, title: str, targets: list[tuple[str, str]], unit: str = "short", kind: str = "timeseries",
              description: str = "") -> None:
        p: dict[str, Any] = {
            "id": self.next_id, "type": kind, "title": title, "description": description, "datasource": DS,
            "gridPos": {"h": 8, "w": 12, "x": self.x, "y": self.y},
            "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
            "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}},
            "targets": [{"refId": chr(ord("A") + i), "datasource": DS, "expr": expr, "legendFormat": legend,
                         "range": True} for i, (expr, legend) in enumerate(targets)],
        }
        self.panels.append(p)
        self.next_id += 1
        if self.x:
            self.x, self.y = 0, self.y + 8
        else:
            self.x = 12


def _sel(names: list[str], matchers: str = SEL, fn: str | None = None, suffix: str = "") -> str:
    parts = []
    for n in names:
        s = f"{n}{suffix}{{{matchers}}}"
        parts.append(f"{fn}({s}[{RI}])" if fn else s)
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def build_dashboard(version: Version, include_watch: bool = True) -> dict[str, Any]:
    """The dashboard JSON model (Grafana schema 39) for `version`'s metric names."""
    r = {k: role_names(k, version) for k in (
        "running", "waiting", "swapped", "kv_usage", "prompt_tokens", "generation_tokens", "preemptions",
        "request_success", "ttft", "tpot", "itl", "e2e", "queue_time", "prefill_time", "decode_time",
        "http_requests", "prefix_cache_queries", "prefix_cache_hits", "avg_generation_throughput",
        "avg_prompt_throughput")}
    if not r["running"]:
        raise ConfigError(f"vLLM {format_version(version)} exposes no engine metrics")
    b = _Builder()
    b.row("Latency (quantiles are estimates from histogram buckets)")
    for role, title in (("ttft", "Time to first token"), ("itl", "Inter-token latency"),
                        ("tpot", "Time per output token (per request)"), ("e2e", "End-to-end request latency"),
                        ("queue_time", "Queue time")):
        fams = r[role]
        if not fams:
            continue
        targets = [(f"histogram_quantile({q}, sum by (le) ({_sel(fams, fn='rate', suffix='_bucket')}))", f"p{round(q * 100)}")
                   for q in (0.5, 0.95, 0.99)]
        targets.append((f"sum({_sel(fams, fn='rate', suffix='_sum')}) / sum({_sel(fams, fn='rate', suffix='_count')})",
                        "mean"))
        b.panel(title, targets, unit="s", description=f"from {', '.join(fams)}")
    b.row("Throughput")
    tput = []
    if r["prompt_tokens"]:
        tput.append((f"sum({_sel(r['prompt_tokens'], fn='rate')})", "prompt tokens/s"))
    if r["generation_tokens"]:
        tput.append((f"sum({_sel(r['generation_tokens'], fn='rate')})", "generation tokens/s"))
    if not tput:  # ≤0.3.2 only had the averaged gauges
        tput = [(f"sum({_sel(r['avg_prompt_throughput'])})", "prompt tokens/s"),
                (f"sum({_sel(r['avg_generation_throughput'])})", "generation tokens/s")]
    b.panel("Token throughput", tput, unit="short")
    if r["request_success"]:
        b.panel("Finished requests by reason",
                [(f"sum by (finished_reason) ({_sel(r['request_success'], fn='rate')})", "{{finished_reason}}")],
                unit="reqps")
    b.row("Scheduler and KV cache")
    sched = [(f"sum by (instance) ({_sel(r['running'])})", "running {{instance}}"),
             (f"sum by (instance) ({_sel(r['waiting'])})", "waiting {{instance}}")]
    if r["swapped"]:
        sched.append((f"sum by (instance) ({_sel(r['swapped'])})", "swapped {{instance}}"))
    b.panel("Scheduler state", sched)
    if r["kv_usage"]:
        b.panel("KV-cache usage", [(f"max by (instance) ({_sel(r['kv_usage'])})", "{{instance}}")],
                unit="percentunit", description=f"from {', '.join(r['kv_usage'])}")
    if r["preemptions"]:
        b.panel("Preemptions", [(f"sum by (instance) ({_sel(r['preemptions'], fn='rate')})", "{{instance}}")],
                unit="short", description="preemptions per second (V1 never logs them)")
    if r["prefix_cache_queries"] and r["prefix_cache_hits"]:
        b.panel("Prefix-cache hit rate", [(f"sum({_sel(r['prefix_cache_hits'], fn='rate')}) / "
                                           f"sum({_sel(r['prefix_cache_queries'], fn='rate')})", "hit rate")],
                unit="percentunit")
    b.row("Errors")
    err = []
    if r["http_requests"]:
        h = r["http_requests"][0]
        err += [(f'sum by (status) (rate({h}{{{HTTP_SEL},status=~"4xx|5xx"}}[{RI}]))', "HTTP {{status}}")]
        if r["request_success"]:
            err.append((f'clamp_min(sum(rate({h}{{{HTTP_SEL},handler=~"/v1/completions|/v1/chat/completions|/v1/responses",status="2xx"}}[{RI}]))'
                        f" - sum({_sel(r['request_success'], fn='rate')}), 0)", "started but unfinished (aborts)"))
    if r["request_success"]:
        bad = _sel(r["request_success"], matchers=SEL + ',finished_reason=~"abort|error"', fn="rate")
        err.append((f"sum by (finished_reason) ({bad})", "{{finished_reason}}"))
    if err:
        b.panel("Errors and aborts", err, unit="reqps")
    if include_watch:
        b.row("From the logs (vllmlog watch)")
        b.panel("Findings and alerts (vllmlog watch)",
                [("sum by (code, severity) (vllmlog_findings_active)", "{{code}} {{severity}}"),
                 ("sum by (state) (vllmlog_alerts)", "alerts {{state}}")],
                description="what vllmlog's rules report on the followed log")
        b.panel("Scheduler state from stats lines",
                [("sum(vllmlog_num_requests_running)", "running"), ("sum(vllmlog_num_requests_waiting)", "waiting"),
                 ("max(vllmlog_kv_cache_usage_ratio)", "KV usage"),
                 ("sum(vllmlog_generation_throughput_tokens_per_second)", "gen tok/s"),
                 ("sum(vllmlog_prompt_throughput_tokens_per_second)", "prompt tok/s")])
        b.panel("Errors, requests and preemptions from the log",
                [(f"sum by (category) (rate(vllmlog_errors_total[{RI}]))", "errors {{category}}"),
                 (f"sum by (status) (rate(vllmlog_requests_total[{RI}]))", "requests {{status}}"),
                 (f"sum(rate(vllmlog_preemptions_total[{RI}]))", "preemptions")], unit="short")
        b.panel("Watcher health", [("min(vllmlog_watch_source_up)", "source up"),
                                   ("max(vllmlog_watch_lag_bytes)", "lag bytes")], unit="short")
    uid_seed = f"vllmlog-vllm-{format_version(version)}"
    return {
        "uid": "vllmlog-" + hashlib.sha1(uid_seed.encode()).hexdigest()[:10],
        "title": f"vLLM {format_version(version)} (vllmlog)",
        "tags": ["vllm", "vllmlog"],
        "schemaVersion": SCHEMA_VERSION,
        "version": 1,
        "editable": True,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "timezone": "",
        "annotations": {"list": []},
        "templating": {"list": [
            {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
             "current": {}, "hide": 0, "refresh": 1},
            {"name": "model_name", "label": "Model", "type": "query", "datasource": DS,
             "query": {"query": f"label_values({r['running'][0]}, model_name)", "refId": "model"},
             "definition": f"label_values({r['running'][0]}, model_name)", "refresh": 2, "includeAll": True,
             "multi": True, "allValue": ".*", "current": {}, "hide": 0, "sort": 1},
            {"name": "instance", "label": "Instance", "type": "query", "datasource": DS,
             "query": {"query": f'label_values({r["running"][0]}{{model_name=~"$model_name"}}, instance)',
                       "refId": "instance"},
             "definition": f'label_values({r["running"][0]}{{model_name=~"$model_name"}}, instance)', "refresh": 2,
             "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "hide": 0, "sort": 1},
        ]},
        "panels": b.panels,
    }


def dashboard_exprs(dash: dict[str, Any]) -> list[str]:
    """Every PromQL expression in a dashboard (panel targets)."""
    return [t["expr"] for p in dash["panels"] for t in p.get("targets", [])]


def metric_names_in(expr: str) -> set[str]:
    """Metric names referenced by a PromQL expression (vllm:*, vllmlog_*, http_*, DCGM_*, up)."""
    names = set(re.findall(r"(?<![\w:])(vllm:[a-z0-9_]+|vllmlog_[a-z0-9_]+|http_[a-z0-9_]+|DCGM_[A-Z0-9_]+|up)(?=[{\[\s)]|$)", expr))
    return names
