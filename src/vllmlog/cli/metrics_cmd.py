"""`vllmlog scrape|alerts|dashboard|logging-config|lnav-format|metric-names`: vLLM's /metrics side."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from ..errors import ConfigError, InputError
from ._app import app

def _write(text: str, output: Optional[Path]) -> None:
    if output is None or str(output) == "-":
        sys.stdout.write(text)
    else:
        output.write_text(text, encoding="utf-8")
        Console(stderr=True, markup=False).print(f"wrote {output}")


def _resolve_version(vllm_version: Optional[str], from_log: Optional[Path], from_scrape: Optional[str]):
    from ..prommetrics.catalog import parse_version
    from ..prommetrics.versions import version_from_log

    if vllm_version:
        from ..prommetrics.catalog import LATEST
        from ..prommetrics.versions import RELEASES

        v = parse_version(vllm_version)
        if v[:2] > LATEST[:2] or v[:2] < RELEASES[0][:2]:
            raise ConfigError(f"vLLM {vllm_version} is not a release vllmlog knows "
                              f"({RELEASES[0][0]}.{RELEASES[0][1]} – {LATEST[0]}.{LATEST[1]})",
                              hint="its metric names are unknown: pass a known release (`vllmlog metric-names "
                                   f"--vllm-version {LATEST[0]}.{LATEST[1]}` lists the newest one's), or --from-scrape URL")
        return v
    if from_log:
        v = version_from_log(str(from_log))
        if v is None:
            raise InputError(f"{from_log}: no vLLM version line found",
                             hint="pass --vllm-version X.Y explicitly")
        return v
    if from_scrape:
        from ..prommetrics.exposition import load_snapshot_files
        from ..prommetrics.scrape import fetch_snapshot, normalize_url
        from ..prommetrics.versions import guess_version

        if Path(from_scrape).is_file():
            snap = load_snapshot_files([from_scrape])[0]
        else:
            import httpx

            with httpx.Client(timeout=10.0) as client:
                snap = fetch_snapshot(client, normalize_url(from_scrape))
        guess = guess_version(snap)
        if guess.representative() is None:
            raise InputError(f"{from_scrape}: no vLLM metrics to tell the version from",
                             hint="pass --vllm-version X.Y explicitly")
        Console(stderr=True, markup=False).print(f"vLLM version from scrape: {guess} (using {guess.high[0]}.{guess.high[1]}."
                                   f"{guess.high[2]} names)")
        return guess.representative()
    raise ConfigError("no vLLM version given", hint="pass --vllm-version X.Y, --from-log LOG or --from-scrape URL")


@app.command("scrape")
def scrape(
    urls: list[str] = typer.Argument(None, help="vLLM /metrics URLs (host:port is enough); one per replica. With "
                                     "--file: more snapshot files (`--file a.prom b.prom`)."),
    file: list[Path] = typer.Option(None, "--file", "-f", help="Saved snapshot .prom files, in time order "
                                    "(`--file a.prom b.prom c.prom`, or --file repeated)."),
    interval: str = typer.Option("10s", "--interval", help="Time between samples (rates need two)."),
    count: int = typer.Option(2, "--count", "-n", help="Number of samples per target."),
    prometheus: Optional[str] = typer.Option(None, "--prometheus", help="Read the series from this Prometheus (query_range)."),
    since: str = typer.Option("1h", "--since", help="With --prometheus: how far back."),
    step: Optional[str] = typer.Option(None, "--step", help="With --prometheus: resolution (default since/600, ≥5s)."),
    until: Optional[str] = typer.Option(None, "--until", help="With --prometheus: end of the range (ISO time or epoch)."),
    match: Optional[str] = typer.Option(None, "--match", help='With --prometheus: extra label matchers, e.g. job="vllm".'),
    as_json: bool = typer.Option(False, "--json", help="One JSON object per target."),
    fail_on: str = typer.Option("warning", "--fail-on", help="Exit 1 when a finding is at least this severe."),
    threshold: list[str] = typer.Option(None, "--set", help="Override a check threshold, e.g. --set ttft_p95_s=0.5."),
    timeout: float = typer.Option(5.0, "--timeout", help="HTTP timeout in seconds."),
) -> None:
    """Scrape vLLM's /metrics, compute rates and bucket-estimated quantiles, and judge them (M1xx checks)."""
    from ..prommetrics.judge import SEVERITIES, severity_at_least
    from ..prommetrics.scrape import build_report, parse_duration, scrape_files, scrape_targets

    if fail_on not in SEVERITIES:
        raise ConfigError(f"unknown severity {fail_on!r}", hint="use " + ", ".join(SEVERITIES))
    if file and urls:
        # `--file a.prom b.prom`: the option takes one value, the rest arrive as positional arguments
        file = list(file) + [Path(u) for u in urls]
        urls = []
    sources = sum(bool(x) for x in (urls, file, prometheus))
    if sources != 1:
        raise ConfigError("give exactly one source: URL(s), --file, or --prometheus",
                          hint="e.g. vllmlog scrape localhost:8000 --count 3")
    thresholds = _thresholds(threshold or [])
    if file:
        reports = scrape_files([str(f) for f in file], thresholds, interval_s=parse_duration(interval))
    elif prometheus:
        from ..prommetrics.promapi import fetch_history

        hist = fetch_history(prometheus, parse_duration(since), until=_when(until) if until else None,
                             step_s=parse_duration(step) if step else None, timeout_s=max(timeout, 10.0), match=match)
        if not hist:
            raise InputError(f"{prometheus}: no vLLM series in the last {since}",
                             hint="check that Prometheus scrapes vLLM (vllmlog scrape URL works?)")
        reports = [build_report(target, snaps, thresholds) for target, snaps in hist.items()]
    else:
        reports = scrape_targets(list(urls), interval_s=parse_duration(interval), count=count, timeout_s=timeout,
                                 thresholds=thresholds)
    if as_json:
        sys.stdout.write(json.dumps([r.to_dict() for r in reports], indent=2, default=str) + "\n")
    else:
        from ..prommetrics.view import ScrapeView

        Console(markup=False).print(ScrapeView(reports))
    worst = [f for r in reports for f in r.findings if severity_at_least(f["severity"], fail_on)]
    raise typer.Exit(1 if worst else 0)


def _thresholds(items: list[str]) -> dict[str, float]:
    from ..prommetrics.judge import DEFAULT_THRESHOLDS

    out: dict[str, float] = {}
    for item in items:
        key, _, val = item.partition("=")
        if key not in DEFAULT_THRESHOLDS:
            raise ConfigError(f"unknown threshold {key!r}", hint="one of: " + ", ".join(DEFAULT_THRESHOLDS))
        try:
            out[key] = float(val)
        except ValueError as exc:
            raise ConfigError(f"--set {item}: not a number") from exc
    return out


def _when(text: str) -> float:
    from datetime import datetime, timezone

    try:
        return float(text)
    except ValueError:
        pass
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise ConfigError(f"--until {text!r}: not an ISO time or epoch seconds") from exc
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


_VERSION_OPT = typer.Option(None, "--vllm-version", help="vLLM release whose metric names to use, e.g. 0.10.")
_FROM_LOG = typer.Option(None, "--from-log", help="Take the version from a vLLM log.")
_FROM_SCRAPE = typer.Option(None, "--from-scrape", help="Take the version from a /metrics URL or .prom file.")
_OUTPUT = typer.Option(None, "--output", "-o", help="Write here instead of stdout.")


@app.command("alerts")
def alerts(
    vllm_version: Optional[str] = _VERSION_OPT,
    fmt: str = typer.Option("prometheus", "--format", help="prometheus (rule file) or k8s (PrometheusRule)."),
    from_log: Optional[Path] = _FROM_LOG,
    from_scrape: Optional[str] = _FROM_SCRAPE,
    output: Optional[Path] = _OUTPUT,
    job: str = typer.Option("vllm", "--job", help="Prometheus job label of the vLLM targets."),
    ttft_slo: float = typer.Option(0.5, "--ttft-slo", help="TTFT p95 limit in seconds."),
    tpot_slo: float = typer.Option(0.2, "--tpot-slo", help="TPOT p95 limit in seconds."),
    gpu_exporter: Optional[str] = typer.Option(None, "--gpu-exporter", help="dcgm: add a GPU-memory > 95 % alert."),
    namespace: Optional[str] = typer.Option(None, "--namespace", help="k8s: metadata.namespace."),
    k8s_label: list[str] = typer.Option(None, "--k8s-label", help="k8s: metadata label KEY=VALUE (repeatable), "
                                        "e.g. release=prometheus for the operator's ruleSelector."),
) -> None:
    """Write Prometheus alert rules that use exactly the metric names of one vLLM release."""
    from ..export.alerts import AlertOptions, render_k8s, render_prometheus

    version = _resolve_version(vllm_version, from_log, from_scrape)
    opts = AlertOptions(job=job, ttft_p95_s=ttft_slo, tpot_p95_s=tpot_slo, gpu_exporter=gpu_exporter)
    if fmt == "prometheus":
        text = render_prometheus(version, opts)
    elif fmt == "k8s":
        labels = {}
        for item in k8s_label or []:
            key, sep, val = item.partition("=")
            if not sep or not key:
                raise ConfigError(f"--k8s-label {item!r}: expected KEY=VALUE")
            labels[key] = val
        text = render_k8s(version, opts, namespace=namespace, labels=labels)
    else:
        raise ConfigError(f"unknown alert format {fmt!r}", hint="use prometheus or k8s")
    _write(text, output)


@app.command("dashboard")
def dashboard(
    vllm_version: Optional[str] = _VERSION_OPT,
    from_log: Optional[Path] = _FROM_LOG,
    from_scrape: Optional[str] = _FROM_SCRAPE,
    output: Optional[Path] = _OUTPUT,
    watch_panels: bool = typer.Option(True, "--watch-panels/--no-watch-panels", help="Add the vllmlog watch row."),
) -> None:
    """Write a Grafana dashboard (JSON) whose queries use one vLLM release's metric names."""
    from ..export.grafana import build_dashboard

    version = _resolve_version(vllm_version, from_log, from_scrape)
    _write(json.dumps(build_dashboard(version, include_watch=watch_panels), indent=2) + "\n", output)


@app.command("logging-config")
def logging_config(
    fmt: str = typer.Option("json", "--format", help="json (python-json-logger) or text (dated text lines)."),
    level: str = typer.Option("INFO", "--level", help="Log level for vllm and uvicorn loggers."),
    formatter_class: str = typer.Option("new", "--formatter-class",
                                        help="new: pythonjsonlogger.json (≥3.1); legacy: pythonjsonlogger.jsonlogger."),
    request_ids: bool = typer.Option(False, "--request-ids",
                                     help="Add a request_id field (needs vllmlog installed next to vLLM)."),
    log_file: Optional[str] = typer.Option(None, "--log-file",
                                           help="Log to this file instead of stdout (no process prefix on 0.10.1–0.30)."),
    output: Optional[Path] = _OUTPUT,
) -> None:
    """Write a VLLM_LOGGING_CONFIG_PATH dictConfig so vLLM ≥ 0.4.3 logs JSON lines."""
    from ..export.logging_config import build_logging_config

    cfg = build_logging_config(fmt=fmt, level=level, formatter_class=formatter_class, request_ids=request_ids,
                               log_file=log_file)
    _write(json.dumps(cfg, indent=2) + "\n", output)
    err = Console(stderr=True, markup=False)
    err.print("use: VLLM_LOGGING_CONFIG_PATH=<this file> vllm serve …  (vLLM 0.32+ also has "
              "--logging-config.formatter json)", highlight=False)
    if fmt == "json":
        err.print("needs: pip install python-json-logger (in vLLM's environment)", highlight=False)
        if not log_file:
            err.print("note: vLLM 0.10.1–0.30 prefix stdout lines with '(APIServer pid=N) '; use --log-file for "
                      "clean JSON lines", highlight=False)


@app.command("lnav-format")
def lnav_format(output: Optional[Path] = _OUTPUT) -> None:
    """Write an lnav format file for vLLM text and JSON logs (install with `lnav -i FILE`)."""
    from ..export.lnav import render_lnav_format

    _write(render_lnav_format(), output)


@app.command("metric-names")
def metric_names(vllm_version: str = typer.Option(..., "--vllm-version", help="vLLM release, e.g. 0.9.2."),
                 as_json: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
    """List the /metrics families a vLLM release exposes (from the catalog)."""
    from ..prommetrics.catalog import metrics_for, parse_version

    specs = sorted(metrics_for(parse_version(vllm_version)), key=lambda s: s.name)
    rows = [{"name": s.name, "type": s.kind, "engines": sorted(s.engines), "role": s.role,
             "conditional": s.conditional} for s in specs]
    if as_json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return
    t = Table(box=None)
    for c in ("name", "type", "engines", "role", "conditional"):
        t.add_column(c)
    for r in rows:
        t.add_row(r["name"], r["type"], ",".join(r["engines"]), r["role"] or "", "yes" if r["conditional"] else "")
    Console(markup=False).print(t)


@app.command("metrics-lint")
def metrics_lint(
    files: list[Path] = typer.Argument(..., help="Alert rules, recording rules or dashboards to check."),
    vllm_version: Optional[str] = _VERSION_OPT,
    from_log: Optional[Path] = _FROM_LOG,
    from_scrape: Optional[str] = _FROM_SCRAPE,
    as_json: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Report vllm:* names in existing rules/dashboards that match nothing on a vLLM release."""
    from ..prommetrics.lint import lint_files

    version = _resolve_version(vllm_version, from_log, from_scrape)
    problems = lint_files([str(f) for f in files], version)
    if as_json:
        sys.stdout.write(json.dumps(problems, indent=2) + "\n")
    else:
        con = Console(markup=False)
        for p in problems:
            fix = f"  → use {p['suggestion']}" if p["suggestion"] else ""
            con.print(f"{p['file']}:{p['line']}: {p['name']}: {p['problem']}{fix}", markup=False, highlight=False)
        if not problems:
            con.print("no problems: every vllm:* name exists in this release")
    raise typer.Exit(1 if problems else 0)
