"""prommetrics: catalog, exposition parsing, version guess, rates/quantiles, judging, scrape CLI."""

from __future__ import annotations

import os
import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest

from vllmlog.cli import main
from vllmlog.errors import ConfigError, InputError
from vllmlog.prommetrics import (
    CHECKS,
    load_snapshot_files,
    names_for,
    parse_exposition,
    parse_version,
    role_names,
    scrape_files,
    scrape_targets,
)
from vllmlog.prommetrics.catalog import renamed
from vllmlog.prommetrics.rates import histogram_quantile
from vllmlog.prommetrics.versions import guess_version, version_from_log

from .snapshots import serve_snapshots

DATA = Path(__file__).parent / "data" / "metrics"
FINDING_KEYS = {"code", "rule", "category", "severity", "title", "message", "evidence", "root_cause", "remediation",
                "first_seen", "last_seen", "count"}


def files(*names: str) -> list[str]:
    return [str(DATA / f"{n}.prom") for n in names]


# --- catalog -------------------------------------------------------------------------------------

def test_catalog_renames_by_version() -> None:
    assert role_names("kv_usage", parse_version("0.6")) == ["vllm:gpu_cache_usage_perc"]
    assert role_names("kv_usage", parse_version("0.10.1")) == ["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"]
    assert role_names("kv_usage", parse_version("0.12")) == ["vllm:kv_cache_usage_perc"]
    assert role_names("itl", parse_version("0.10.2"))[0] == "vllm:inter_token_latency_seconds"
    # deprecated 0.11, hidden by default 0.12-0.14 (the catalog counts hidden as gone), removed 0.15
    assert "vllm:time_per_output_token_seconds" in names_for(parse_version("0.11.0"))
    assert "vllm:time_per_output_token_seconds" not in names_for(parse_version("0.12.0"))
    assert "vllm:avg_generation_throughput_toks_per_s" not in names_for(parse_version("0.7.0"))
    assert renamed("vllm:gpu_cache_usage_perc") == "vllm:kv_cache_usage_perc"
    assert all(n.endswith("_total") for n in names_for(parse_version("0.32")) if n.startswith("vllm:") and
               n.split(":")[1].startswith(("prompt_tokens", "generation_tokens", "num_preemptions", "request_success")))


def test_parse_version_rejects_garbage() -> None:
    assert parse_version("v0.9.2rc1") == (0, 9, 2)
    assert parse_version("0.10.x") == (0, 10, 99)
    with pytest.raises(ConfigError):
        parse_version("latest")


# --- exposition and version guess -----------------------------------------------------------------

def test_parse_recorded_snapshot_and_guess_version() -> None:
    snap = load_snapshot_files(files("metrics-02-overload-2"))[0]
    assert snap.time == pytest.approx(1796007690.755653)  # from the index CSV
    assert snap.series("vllm:num_requests_waiting")[0].value == 60.0
    assert snap.series("vllm:num_requests_waiting")[0].labels == {"engine": "0", "model_name": "/models/tiny"}
    g = guess_version(snap)
    assert str(g) == ">=0.32.0" and g.engine == "v1"
    line, text = snap.line_of("vllm:num_requests_waiting")
    assert text.startswith("vllm:num_requests_waiting{") and snap.text.splitlines()[line - 1] == text


@pytest.mark.parametrize("name,low,high", [("synthetic-v0.6.3", "0.6.3", "0.6.3"),
                                          ("synthetic-v0.10.1", "0.9.2", "0.10.1"),
                                          ("synthetic-v0.10.2", "0.10.2", "0.10.2")])
def test_guess_version_of_old_layouts(name: str, low: str, high: str) -> None:
    g = guess_version(load_snapshot_files(files(name))[0])
    assert g.low == parse_version(low) and g.high == parse_version(high)


def test_not_exposition_is_input_error() -> None:
    with pytest.raises(InputError):
        parse_exposition("<html>hello</html>\n{", "x", 0.0)
    with pytest.raises(InputError):
        load_snapshot_files([str(DATA / "nope.prom")])
    with pytest.raises(InputError, match="time order"):
        load_snapshot_files(files("P2-metrics-8", "P2-metrics-5"))


def test_version_from_log(tmp_path: Path) -> None:
    log = tmp_path / "v.log"
    log.write_text("INFO 03-25 10:15:22 utils.py:1] Python version 3.11.7\n"
                   "INFO 03-25 10:15:23 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: …\n")
    assert version_from_log(str(log)) == (0, 6, 3)


# --- quantiles --------------------------------------------------------------------------------------

def test_histogram_quantile_matches_prometheus_interpolation() -> None:
    buckets = [(0.1, 0.0), (0.5, 50.0), (1.0, 100.0), (math.inf, 100.0)]
    assert histogram_quantile(0.5, buckets) == pytest.approx(0.5)
    assert histogram_quantile(0.75, buckets) == pytest.approx(0.75)
    assert histogram_quantile(0.25, buckets) == pytest.approx(0.3)
    assert histogram_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]) is None
    assert histogram_quantile(0.99, [(1.0, 1.0), (math.inf, 10.0)]) == 1.0  # +Inf bucket → highest finite bound


# --- judging recorded incidents ----------------------------------------------------------------------

def codes(reports) -> dict[str, str]:
    return {f["code"]: f["severity"] for r in reports for f in r.findings}


def test_healthy_light_load_has_no_warning() -> None:
    reps = scrape_files(files("metrics-01-light-load-1", "metrics-01-light-load-4", "metrics-01-light-load-5"))
    d = reps[0].to_dict()
    assert not [f for f in d["findings"] if f["severity"] != "info"]
    assert d["rates"]["generation_tokens_per_s"] > 0 and d["quantiles"]["ttft"]["estimate"] == "bucket"
    assert 0.0 <= d["kv_cache_usage"] <= 1.0


def test_engine_hang_from_recorded_p2() -> None:
    reps = scrape_files(files(*(f"P2-metrics-{i}" for i in range(5, 9))))
    f = next(f for f in reps[0].findings if f["code"] == "M101")
    assert f["category"] == "engine_hang" and f["severity"] == "critical"
    assert set(f) >= FINDING_KEYS
    ev = f["evidence"][0]
    assert ev["file"].endswith("P2-metrics-8.prom") and ev["line"] == 57
    assert ev["text"] == 'vllm:num_requests_running{engine="0",model_name="/models/tiny"} 8.0'


def test_overload_is_queue_backlog() -> None:
    reps = scrape_files(files("metrics-02-overload-2", "metrics-02-overload-4"))
    found = {f["code"]: f for f in reps[0].findings}
    assert found["M103"]["category"] == "queue_backlog"
    assert found["M107"]["category"] == "queue_backlog"  # TTFT p95 driven by queue time


def test_kv_pressure_and_preemptions() -> None:
    reps = scrape_files(files("metrics-03-kv-pressure-1", "metrics-03-kv-pressure-4"))
    c = codes(reps)
    assert c["M104"] == "error" and c["M105"] in ("warning", "error")
    assert reps[0].rates["preemptions_per_s"] > 0


def test_client_aborts_estimated_from_http_counts() -> None:
    reps = scrape_files(files("metrics-04-aborts-1", "metrics-04-aborts-6"))
    f = next(f for f in reps[0].findings if f["code"] == "M109")
    assert f["count"] == 25  # the client truth: 25 of 80 requests aborted
    assert f["category"] == "client_abort"


def test_bad_request_flood() -> None:
    reps = scrape_files(files("P3-metrics-1", "P3-metrics-15"))
    f = next(f for f in reps[0].findings if f["code"] == "M110")
    assert f["category"] == "bad_request_params" and f["severity"] == "warning"


def test_every_check_is_documented() -> None:
    from vllmlog.rules.base import CATEGORIES  # one taxonomy for log rules and metric checks

    for chk in CHECKS.values():
        assert chk.category in CATEGORIES, chk.code
        assert chk.code.startswith("M1")
        for heading in ("What it detects", "Why it matters", "How to fix"):
            assert chk.section(heading), (chk.code, heading)


# --- live scrape against a local HTTP server ---------------------------------------------------------

@pytest.fixture
def metrics_server() -> Iterator[tuple[str, type]]:
    srv = serve_snapshots([])
    try:
        yield f"127.0.0.1:{srv.server_address[1]}", srv.RequestHandlerClass
    finally:
        srv.shutdown()
        srv.server_close()


def test_scrape_live_targets(metrics_server) -> None:
    url, handler = metrics_server
    handler.bodies = [(DATA / f"P2-metrics-{i}.prom").read_bytes() for i in (6, 7)]
    reps = scrape_targets([url, "127.0.0.1:9"], interval_s=0.2, count=2, timeout_s=2.0)
    live, dead = reps
    assert handler.hits == 2
    d = live.to_dict()
    assert d["running"] == 8.0 and d["samples"] == 2 and d["vllm_version_guess"] == ">=0.32.0"
    assert d["rates"]["generation_tokens_per_s"] == 0.0
    assert [f["code"] for f in dead.findings] == ["M102"]
    assert dead.findings[0]["category"] == "engine_dead"


def test_scrape_cli_json_and_exit_codes(metrics_server, capsys) -> None:
    url, handler = metrics_server
    handler.bodies = [(DATA / "metrics-01-light-load-4.prom").read_bytes(),
                      (DATA / "metrics-01-light-load-5.prom").read_bytes()]
    rc = main(["scrape", url, "--interval", "0.1s", "--count", "2", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0
    obj = out[0]
    for key in ("running", "waiting", "kv_cache_usage", "vllm_version_guess", "rates", "quantiles", "findings"):
        assert key in obj
    assert obj["quantiles"]["ttft"]["estimate"] == "bucket"
    rc = main(["scrape", "--json", *sum((["--file", f] for f in files("P2-metrics-5", "P2-metrics-6",
                                                                          "P2-metrics-7", "P2-metrics-8")), [])])
    assert rc == 1
    assert json.loads(capsys.readouterr().out)[0]["findings"][0]["code"] == "M101"
    rc = main(["scrape", "--fail-on", "critical", "--file", files("P3-metrics-1")[0], "--file",
               files("P3-metrics-15")[0]])
    assert rc == 0
    capsys.readouterr()
    assert main(["scrape", "--file", str(DATA / "missing.prom")]) == 2
    assert "error:" in capsys.readouterr().err


# --- old layouts: the same checks resolve V0 / 0.10 names ---------------------------------------------

def _with_values(fixture: str, values: dict[str, float], tmp: Path, name: str) -> str:
    """Copy a synthetic fixture, setting the value of every sample of the given names."""
    import re as _re

    lines = []
    for line in (DATA / f"{fixture}.prom").read_text().splitlines():
        m = _re.match(r"^([^{\s]+)(\{[^}]*\})? (\S+)$", line)
        if m and m.group(1) in values:
            val = values[m.group(1)]
            if m.group(1) == "vllm:request_success_total" and 'finished_reason="stop"' not in line:
                val = 0.0
            line = f"{m.group(1)}{m.group(2) or ''} {val}"
        lines.append(line)
    out = tmp / f"{name}.prom"
    out.write_text("\n".join(lines) + "\n")
    return str(out)


@pytest.mark.parametrize("fixture,kv_name", [("synthetic-v0.6.3", "vllm:gpu_cache_usage_perc"),
                                             ("synthetic-v0.10.1", "vllm:kv_cache_usage_perc")])
def test_old_layouts_are_judged_with_their_names(fixture: str, kv_name: str, tmp_path: Path) -> None:
    base = {"vllm:num_requests_running": 6.0, "vllm:num_requests_waiting": 25.0, kv_name: 0.97,
            "vllm:gpu_cache_usage_perc": 0.97, "vllm:generation_tokens_total": 5000.0,
            "vllm:prompt_tokens_total": 900.0, "vllm:num_preemptions_total": 10.0,
            "vllm:request_success_total": 50.0}
    a = _with_values(fixture, base, tmp_path, "a")
    b = _with_values(fixture, {**base, "vllm:num_preemptions_total": 40.0}, tmp_path, "b")
    reps = scrape_files([a, b], interval_s=10.0)
    d = reps[0].to_dict()
    assert d["kv_cache_usage"] == 0.97 and d["waiting"] == 25.0 and d["metric_names"]["kv_usage"] == kv_name
    c = codes(reps)
    assert c["M101"] == "critical"  # 6 running, tokens frozen for 10 s
    assert c["M104"] == "error" and c["M105"] == "error" and c["M103"] == "warning"


def test_scrape_cli_threshold_overrides(capsys) -> None:
    args = ["scrape", "--json", "--file", files("metrics-01-light-load-4")[0], "--file",
            files("metrics-01-light-load-5")[0]]
    assert main(args) == 0
    capsys.readouterr()
    assert main([*args, "--set", "ttft_p95_s=0.01"]) == 1
    assert [f["code"] for f in json.loads(capsys.readouterr().out)[0]["findings"]] == ["M107"]
    assert main([*args, "--set", "nope=1"]) == 2


def test_dcgm_target_gpu_memory(tmp_path: Path) -> None:
    text = ("# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge\n"
            'DCGM_FI_DEV_FB_USED{gpu="0",UUID="GPU-1",Hostname="node-1"} 79000\n'
            'DCGM_FI_DEV_FB_USED{gpu="1",UUID="GPU-2",Hostname="node-1"} 1000\n'
            "# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).\n# TYPE DCGM_FI_DEV_FB_FREE gauge\n"
            'DCGM_FI_DEV_FB_FREE{gpu="0",UUID="GPU-1",Hostname="node-1"} 1000\n'
            'DCGM_FI_DEV_FB_FREE{gpu="1",UUID="GPU-2",Hostname="node-1"} 79000\n')
    f = tmp_path / "dcgm.prom"
    f.write_text(text)
    reps = scrape_files([str(f)])
    assert [(x["code"], x["data"]["gpu"]) for x in reps[0].findings] == [("M114", "0")]
    assert reps[0].findings[0]["evidence"][0]["line"] == 3


def test_scrape_text_view(capsys) -> None:
    from rich.console import Console

    from vllmlog.prommetrics.view import ScrapeView

    reps = scrape_files(files("P2-metrics-5", "P2-metrics-6", "P2-metrics-7", "P2-metrics-8"))
    con = Console(width=300, record=True, color_system=None, file=open(os.devnull, "w"))  # no wrapping
    con.print(ScrapeView(reps))
    text = con.export_text().replace(str(DATA), "<DATA>")
    expected = (DATA / "expected-scrape-p2.txt").read_text()
    assert text == expected
