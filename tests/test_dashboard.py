"""Grafana dashboard: structure, unique ids, every PromQL parses with promtool, names exist for the version."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vllmlog.cli import main
from vllmlog.export.alerts import to_yaml
from vllmlog.export.grafana import SCHEMA_VERSION, WATCH_METRICS, build_dashboard, dashboard_exprs, metric_names_in
from vllmlog.prommetrics.catalog import parse_version, sample_names_for
from vllmlog.prommetrics.exposition import load_snapshot_files

DATA = Path(__file__).parent / "data" / "metrics"
VERSIONS = {"0.6.3": DATA / "synthetic-v0.6.3.prom", "0.10.1": DATA / "synthetic-v0.10.1.prom",
            "0.10.2": DATA / "synthetic-v0.10.2.prom",
            "0.32.0": DATA / "P3-metrics-15.prom"}


def promtool() -> str:
    """promtool's path; missing promtool fails in CI and skips locally."""
    path = shutil.which("promtool")
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("promtool is required in CI (apt-get install prometheus)")
        pytest.skip("promtool not installed")
    return path

VERSIONS_ALL = ["0.3.0", "0.4.3", *VERSIONS, "0.12.0", "0.33.0"]
GRAFANA_VARS = {"$__rate_interval": "5m", "$__interval": "1m", "$__range": "1h", "$model_name": "m",
                "$instance": "i"}


def _promql(expr: str) -> str:
    for k, v in GRAFANA_VARS.items():
        expr = expr.replace(k, v)
    return expr


@pytest.mark.parametrize("version", VERSIONS_ALL)
def test_dashboard_structure(version: str) -> None:
    d = build_dashboard(parse_version(version))
    assert d["schemaVersion"] == SCHEMA_VERSION and d["uid"] and d["title"]
    ids = [p["id"] for p in d["panels"]]
    assert len(ids) == len(set(ids))
    names = {v["name"] for v in d["templating"]["list"]}
    assert {"datasource", "model_name", "instance"} <= names
    titles = " ".join(p["title"] for p in d["panels"]).lower()
    latency = parse_version(version) >= (0, 3, 3)  # latency histograms exist from 0.3.3
    for word in ("latency" if latency else "scheduler", "throughput", "scheduler", "kv"):
        assert word in titles
    for p in d["panels"]:
        assert {"x", "y", "w", "h"} <= set(p["gridPos"])
        refs = [t["refId"] for t in p.get("targets", [])]
        assert len(refs) == len(set(refs))
    json.dumps(d)


@pytest.mark.parametrize("version", VERSIONS_ALL)
def test_dashboard_names_exist_for_version(version: str) -> None:
    v = parse_version(version)
    allowed = sample_names_for(v) | set(WATCH_METRICS)
    d = build_dashboard(v)
    used: set[str] = set()
    for expr in dashboard_exprs(d):
        names = metric_names_in(expr)
        assert names, expr
        assert names <= allowed, (expr, names - allowed)
        used |= names
    for var in d["templating"]["list"]:
        q = var.get("definition", "")
        assert metric_names_in(q) <= allowed
    if version in VERSIONS:  # and against the version's fixture series
        fixture = load_snapshot_files([VERSIONS[version]])[0].sample_names()
        assert used - set(WATCH_METRICS) <= fixture, (used - set(WATCH_METRICS)) - fixture


@pytest.mark.parametrize("version", VERSIONS_ALL)
def test_dashboard_promql_parses_with_promtool(version: str, tmp_path: Path) -> None:
    d = build_dashboard(parse_version(version))
    exprs = [_promql(e) for e in dashboard_exprs(d)]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:expr{i}", "expr": e}
                                                          for i, e in enumerate(exprs)]}]}
    path = tmp_path / "exprs.yml"
    path.write_text(to_yaml(rules) + "\n")
    res = subprocess.run([promtool(), "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


def test_dashboard_cli_from_scrape_file(tmp_path: Path) -> None:
    out = tmp_path / "d.json"
    fixture = VERSIONS["0.10.1"]
    assert main(["dashboard", "--from-scrape", str(fixture), "-o", str(out)]) == 0
    d = json.loads(out.read_text())
    assert "0.10.1" in d["title"]
    text = out.read_text()
    assert "vllm:time_per_output_token_seconds_bucket" in text and "inter_token_latency" not in text
    assert main(["dashboard"]) == 2


def test_watch_metrics_match_the_watch_exporter() -> None:
    """Every vllmlog_* name the dashboard uses is one `vllmlog watch` exports (contract with live/exporter.py)."""
    exporter = Path(__file__).parents[1] / "src" / "vllmlog" / "live" / "exporter.py"
    if not exporter.exists():
        pytest.skip("watch exporter not present yet")
    src = exporter.read_text()
    d = build_dashboard(parse_version("0.32.0"))
    used = {n for e in dashboard_exprs(d) for n in metric_names_in(e) if n.startswith("vllmlog_")}
    assert used == set(WATCH_METRICS)
    for name, kind in WATCH_METRICS.items():
        base = name[: -len("_total")] if kind == "counter" else name
        assert f'"{base}"' in src, name
