"""CLI: `alerts` (version from flag, log or scrape), `metrics-lint`, `metric-names`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from vllmlog.cli import main
from vllmlog.prommetrics.catalog import parse_version
from vllmlog.prommetrics.lint import lint_text

DATA = Path(__file__).parent / "data" / "metrics"
OLD_RULES = """groups:
- name: vllm
  rules:
  - alert: KvFull
    expr: vllm:gpu_cache_usage_perc > 0.9
  - alert: Aborts
    expr: |
      rate(vllm:request_success{finished_reason="abort"}[5m]) > 1
  - alert: Ttft
    expr: vllm:time_to_first_token_seconds > 1
    annotations:
      description: "prose mentioning vllm:whatever is ignored when the file has expr keys"
"""


def _check_rules(path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("promtool is required in CI")
        pytest.skip("promtool not installed")
    res = subprocess.run([promtool, "check", "rules", str(path)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("args", [["--vllm-version", "0.5.4"], ["--vllm-version", "0.9.2"],
                                  ["--vllm-version", "0.33"], ["--from-scrape", str(DATA / "P3-metrics-1.prom")],
                                  ["--from-log", str(DATA / "lnav-sample-v032.log")]])
def test_alerts_cli_writes_valid_rule_files(args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "rules.yml"
    assert main(["alerts", *args, "-o", str(out)]) == 0
    _check_rules(out)
    text = out.read_text()
    assert "runbook: \"vllmlog rule M1" in text
    assert lint_text(text, parse_version("0.32.0" if "--vllm-version" not in args else args[1])) == []


def test_alerts_cli_k8s_and_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["alerts", "--vllm-version", "0.10", "--format", "k8s", "--namespace", "mon",
                 "--k8s-label", "release=prometheus"]) == 0
    out = capsys.readouterr().out
    assert 'release: "prometheus"' in out
    assert out.startswith('apiVersion: "monitoring.coreos.com/v1"') and "vllm:gpu_cache_usage_perc" in out
    assert main(["alerts"]) == 2
    assert "hint:" in capsys.readouterr().err
    assert main(["alerts", "--vllm-version", "0.10", "--format", "xml"]) == 2
    assert main(["alerts", "--vllm-version", "banana"]) == 2


def test_metrics_lint_finds_silent_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "old.yml"
    f.write_text(OLD_RULES)
    assert main(["metrics-lint", str(f), "--vllm-version", "0.15", "--json"]) == 1
    problems = json.loads(capsys.readouterr().out)
    by = {p["name"]: p for p in problems}
    assert by["vllm:gpu_cache_usage_perc"]["suggestion"] == "vllm:kv_cache_usage_perc"
    assert by["vllm:gpu_cache_usage_perc"]["line"] == 5
    assert by["vllm:request_success"]["suggestion"] == "vllm:request_success_total"
    assert by["vllm:request_success"]["line"] == 8  # inside the block scalar
    assert "histogram" in by["vllm:time_to_first_token_seconds"]["problem"]
    assert "vllm:whatever" not in by
    assert main(["metrics-lint", str(f), "--vllm-version", "0.6.3"]) == 1  # request_success needs _total there too


def test_metric_names_cli(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metric-names", "--vllm-version", "0.10.1", "--json"]) == 0
    names = {r["name"] for r in json.loads(capsys.readouterr().out)}
    assert {"vllm:gpu_cache_usage_perc", "vllm:kv_cache_usage_perc"} <= names
    assert "vllm:inter_token_latency_seconds" not in names
