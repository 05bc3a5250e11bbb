"""Prometheus as a source: a real local `prometheus` scrapes recorded snapshots, we read them back."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from vllmlog.cli import main
from vllmlog.errors import InputError
from vllmlog.export.alerts import render_prometheus
from vllmlog.prommetrics.catalog import parse_version
from vllmlog.prommetrics.promapi import fetch_history, history_points, history_selector, history_stats_samples
from vllmlog.prommetrics.scrape import build_report

from .snapshots import free_port, serve_snapshots

DATA = Path(__file__).parent / "data" / "metrics"
SNAPSHOTS = [DATA / f"P2-metrics-{i}.prom" for i in range(5, 13)]


def _prometheus_bin() -> str:
    path = shutil.which("prometheus")
    if path is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("prometheus is required in CI (apt-get install prometheus)")
        pytest.skip("prometheus not installed")
    return path


def _quietly(cond) -> bool:
    try:
        return bool(cond())
    except (httpx.HTTPError, InputError, KeyError, ValueError):
        return False  # not up yet


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A prometheus on 127.0.0.1 scraping a tiny server that serves the P2 snapshots one after another."""
    binary = _prometheus_bin()
    bodies = [p.read_bytes() for p in SNAPSHOTS]
    srv = serve_snapshots(bodies)
    served = srv.RequestHandlerClass
    tmp = tmp_path_factory.mktemp("prom")
    port = free_port()
    (tmp / "rules.yml").write_text(render_prometheus(parse_version("0.32.0")))
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 500ms\n  evaluation_interval: 500ms\n"
        f"rule_files:\n  - {tmp / 'rules.yml'}\n"
        "scrape_configs:\n  - job_name: vllm\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{srv.server_address[1]}']\n")
    proc = subprocess.Popen([binary, f"--config.file={tmp / 'prometheus.yml'}", f"--storage.tsdb.path={tmp / 'data'}",
                             f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=subprocess.DEVNULL, stderr=(tmp / "prometheus.log").open("w"))
    base = f"http://127.0.0.1:{port}"
    try:
        # conditions, not times: every snapshot scraped, then the final (frozen) one held for >= 4 s of samples
        # and a 1 s-step history of >= 8 points over all of them (the tests' rates, quantiles and hang need it)
        def ready() -> bool:
            if served.hits < len(bodies) + 8:  # the final body served 9 times at 500 ms
                return False
            r = httpx.get(base + "/api/v1/query", params={"query": "count_over_time(vllm:num_requests_running[1m])"},
                          timeout=10)
            res = r.json()["data"]["result"] if r.status_code == 200 else []
            return bool(res) and float(res[0]["value"][1]) >= len(bodies) + 8 and \
                len(next(iter(fetch_history(base, since_s=60, step_s=1).values()), [])) >= 8

        deadline = time.monotonic() + 90
        while not _quietly(ready):
            if time.monotonic() > deadline:
                pytest.fail("prometheus did not scrape the snapshots in 90 s: " + (tmp / "prometheus.log").read_text()[-2000:])
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        srv.shutdown()
        srv.server_close()


def test_selector_covers_old_and_new_names() -> None:
    sel = history_selector()
    for name in ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "vllm:time_to_first_token_seconds_bucket",
                 "vllm:time_per_output_token_seconds_bucket", "http_requests_total"):
        assert name in sel


def test_query_range_round_trip(prometheus: str) -> None:
    hist = fetch_history(prometheus, since_s=60, step_s=1)
    assert len(hist) == 1
    target, snaps = next(iter(hist.items()))
    assert target.startswith("127.0.0.1:") and len(snaps) >= 5
    last = snaps[-1]
    assert last.series("vllm:num_requests_running")[0].value == 8.0
    assert last.series("vllm:num_requests_running")[0].labels["job"] == "vllm"
    rep = build_report(target, snaps)
    d = rep.to_dict()
    assert d["vllm_version_guess"] == ">=0.32.0" and d["running"] == 8.0
    assert d["rates"]["generation_tokens_per_s"] is not None
    assert d["quantiles"]["ttft"]["estimate"] == "bucket"
    pts = history_points(snaps)
    assert pts[-1]["running"] == 8.0 and pts[-1]["generation_tokens_per_s"] == 0.0  # frozen engine at the end
    rows = history_stats_samples(snaps)
    assert rows[-1].running == 8 and rows[-1].source_kind == "prometheus" and rows[-1].ts.tzinfo is None


def test_scrape_cli_with_prometheus(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["scrape", "--prometheus", prometheus, "--since", "1m", "--step", "1s", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc in (0, 1) and out[0]["running"] == 8.0


def test_bad_prometheus_url() -> None:
    with pytest.raises(InputError):
        fetch_history("http://127.0.0.1:9", since_s=60)


def test_generated_rules_load_and_evaluate_in_real_prometheus(prometheus: str) -> None:
    """The 0.32 rule file, loaded by a real Prometheus that scrapes real 0.32 snapshots, evaluates without error."""
    groups = httpx.get(prometheus + "/api/v1/rules").json()["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    assert len(rules) >= 10
    for r in rules:
        assert r["health"] == "ok" and not r.get("lastError"), (r["name"], r.get("lastError"))
    states = {r["name"]: r["state"] for r in rules}
    assert states["VllmTargetDown"] == "inactive" and states["VllmMetricsMissing"] == "inactive"


def test_timeline_and_analyze_merge_prometheus_history(prometheus: str, capsys: pytest.CaptureFixture[str],
                                                       tmp_path: Path) -> None:
    """`--prometheus URL` puts the metric history of an incident beside its log events."""
    from vllmlog.diagnose import diagnose
    from vllmlog.prommetrics.merge import merge_prometheus
    from vllmlog.run import load
    from vllmlog.timeline import build_timeline

    log = str(Path(__file__).parent / "data" / "corpus" / "vllm-cpu" / "00-cold-start-first-compile.log")
    run = load(log, year=2026)
    assert not [f for f in diagnose(run) if f.severity.label in ("critical", "error", "warning")]  # a healthy log
    n = merge_prometheus(run, prometheus, since_s=60, step_s=1)
    assert n >= 5
    src = [s for s in run.series.stats if s.source_kind == "prometheus"]
    assert src and src[-1].running == 8 and src[-1].file.startswith("prometheus:127.0.0.1:")
    findings = diagnose(run)  # the frozen engine in the metric history (Running 8 at 0 tokens/s) is judged too
    hang = [f for f in findings if f.category == "engine_hang" and f.file.startswith("prometheus:")]
    assert hang and hang[0].evidence and hang[0].evidence[0].text.startswith("[stats]")
    entries = build_timeline(run, findings)
    assert any(e.file.startswith("prometheus:") and e.kind == "finding" for e in entries)
    assert any(e.file == log for e in entries)  # log events and metric points in one story

    rc = main(["timeline", log, "--year", "2026", "--prometheus", prometheus, "--since", "1m", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and any(str(e.get("file", "")).startswith("prometheus:") for e in doc["entries"])
    rc = main(["analyze", log, "--year", "2026", "--prometheus", prometheus, "--since", "1m", "--json", "--no-html",
               "--fail-on", "warning"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and any(f["category"] == "engine_hang" for f in out["findings"])
