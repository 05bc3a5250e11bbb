"""Generated alert rules: `promtool check rules` and `promtool test rules` against each version's series."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from vllmlog.export.alerts import AlertOptions, build_rules, render_k8s, render_prometheus, rule_groups, to_yaml
from vllmlog.export.grafana import metric_names_in
from vllmlog.prommetrics.catalog import CATALOG, parse_version, sample_names_for
from vllmlog.prommetrics.exposition import load_snapshot_files

DATA = Path(__file__).parent / "data" / "metrics"
PROMTOOL = shutil.which("promtool")
JOB, INSTANCE = "vllm", "vllm-0:8000"
STEPS = 30  # one sample a minute for 30 minutes

#: version → exposition fixture with exactly that version's names and labels
VERSIONS = {
    "0.6.3": DATA / "synthetic-v0.6.3.prom",  # V0, synthetic (header says so)
    "0.10.1": DATA / "synthetic-v0.10.1.prom",  # V1 in the 0.9-0.11 rename window, synthetic
    "0.10.2": DATA / "synthetic-v0.10.2.prom",  # both ITL names live at once, synthetic
    "0.32.0": DATA / "P3-metrics-15.prom",  # recorded from a real vLLM 0.32.0
}


def promtool() -> str:
    """promtool's path; missing promtool fails in CI and skips locally."""
    if PROMTOOL is None:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail("promtool is required in CI (apt-get install prometheus)")
        pytest.skip("promtool not installed")
    return PROMTOOL


def run_promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, timeout=120)


def _role_of(name: str) -> str | None:
    base = re.sub(r"_(bucket|sum|count)$", "", name)
    for spec in CATALOG:
        if spec.name in (name, base) and spec.role:
            return spec.role
    return None


BASE = {  # healthy behaviour, per-minute increments for counters
    "running": 2.0, "waiting": 0.0, "kv_usage": 0.3, "swapped": 0.0, "cpu_kv_usage": 0.0,
    "prompt_tokens": 600.0, "generation_tokens": 3000.0, "preemptions": 0.0,
    "request_success": {"stop": 10.0}, "http_requests": {"2xx": 10.0},
    "ttft": (10.0, 0.09), "tpot": (10.0, 0.04), "itl": (10.0, 0.04), "e2e": (10.0, 4.0), "queue_time": (10.0, 0.2),
}

SCENARIOS: dict[str, dict] = {
    "healthy": {},
    "hang": {"running": 8.0, "generation_tokens": 0.0, "prompt_tokens": 0.0},
    "slow": {"generation_tokens": 600.0},
    "waiting": {"waiting": 30.0},
    "queue_growing": {"waiting": ("ramp", 0.0, 2.0)},
    "kv_high": {"kv_usage": 0.85},
    "kv_full_preempt": {"kv_usage": 0.97, "preemptions": 30.0},
    "ttft": {"ttft": (10.0, 3.0)},
    "tpot": {"tpot": (10.0, 0.6), "itl": (10.0, 0.6)},
    "aborts_label": {"request_success": {"stop": 5.0, "abort": 5.0}, "http_requests": {"2xx": 5.0}},
    "aborts_http": {"request_success": {"stop": 5.0}, "http_requests": {"2xx": 10.0}},  # 0.32: aborts uncounted
    "aborts_counted": {"request_success": {"stop": 5.0, "abort": 5.0}, "http_requests": {"2xx": 10.0}},
    "few_errors": {"http_requests": {"2xx": 0.1, "5xx": 0.1}},  # 50 % errors but 1 in 10 min: no page
    "http_5xx": {"http_requests": {"2xx": 10.0, "5xx": 5.0}},
    "http_4xx": {"http_requests": {"2xx": 10.0, "4xx": 10.0}},
    "engine_errors": {"request_success": {"stop": 5.0, "error": 5.0}},
}

GEN_HANDLER = "/v1/completions"


def _series_values(name: str, labels: dict[str, str], kind: str, behaviour: dict) -> str | None:
    role = _role_of(name)
    b = {**BASE, **behaviour}
    if role in ("ttft", "tpot", "itl", "e2e", "queue_time") and role in b:
        per_min, x = b[role]
        if name.endswith("_bucket"):
            le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
            inc = per_min if le >= x else 0.0
        elif name.endswith("_count"):
            inc = per_min
        else:
            inc = per_min * x
        return f"0+{inc:g}x{STEPS}"
    if role in ("request_success", "http_requests"):
        key = labels.get("finished_reason") if role == "request_success" else labels.get("status")
        if role == "http_requests" and labels.get("handler") != GEN_HANDLER:
            return f"0+0x{STEPS}"
        return f"0+{b[role].get(key, 0.0):g}x{STEPS}"
    v = b.get(role) if role else None
    if v is None:
        return f"0x{STEPS}" if kind == "gauge" else f"0+0x{STEPS}"
    if isinstance(v, tuple):
        return f"{v[1]:g}+{v[2]:g}x{STEPS}"
    if kind == "counter":
        return f"0+{v:g}x{STEPS}"
    return f"{v:g}x{STEPS}"


def input_series(fixture: Path, behaviour: dict, extra: list[tuple[str, dict[str, str], str]] = (),
                 used: set[str] | None = None) -> list[dict]:
    """promtool input_series: the fixture's samples (those the rules name, when `used` is given), plus `up`."""
    snap = load_snapshot_files([fixture])[0]
    out = [{"series": f'up{{instance="{INSTANCE}",job="{JOB}"}}', "values": f"1x{STEPS}"}]
    for s in snap.samples:
        if s.name.endswith("_created") or not (s.name.startswith("vllm:") or s.name.startswith("http_requests")):
            continue
        if used is not None and s.name not in used:
            continue  # series no rule reads cannot change any result; leaving them out keeps promtool fast
        base = re.sub(r"_(bucket|sum|count)$", "", s.name)
        kind = snap.families.get(s.name) or snap.families.get(base) or "gauge"
        kind = "counter" if s.name.endswith("_total") or s.name.endswith(("_bucket", "_sum", "_count")) else kind
        vals = _series_values(s.name, s.labels, kind, behaviour)
        labels = {**s.labels, "job": JOB, "instance": INSTANCE}
        out.append({"series": _selector(s.name, labels), "values": vals})
    for name, labels, vals in extra:
        out.append({"series": _selector(name, {**labels, "job": JOB, "instance": INSTANCE}), "values": vals})
    return out


def _selector(name: str, labels: dict[str, str]) -> str:
    return name + "{" + ",".join(f'{k}={json.dumps(v)}' for k, v in sorted(labels.items())) + "}"


def _exp(rule, model: str | None, http: bool) -> dict:
    labels = {"severity": rule["labels"]["severity"], "vllmlog_code": rule["labels"]["vllmlog_code"],
              "category": rule["labels"]["category"], "job": JOB, "instance": INSTANCE}
    if model and not http:
        labels["model_name"] = model
    return {"exp_labels": labels}


def _model_of(fixture: Path) -> str:
    snap = load_snapshot_files([fixture])[0]
    return next(s.labels["model_name"] for s in snap.samples if s.name == "vllm:num_requests_running")


# alert → (scenario, eval time, grouped by HTTP labels only)
EXPECT = {
    "VllmEngineNotProgressing": ("hang", "10m", False),
    "VllmSlowGeneration": ("slow", "20m", False),
    "VllmRequestsWaiting": ("waiting", "10m", False),
    "VllmQueueGrowing": ("queue_growing", "20m", False),
    "VllmKvCacheHigh": ("kv_high", "15m", False),
    "VllmKvCacheFull": ("kv_full_preempt", "10m", False),
    "VllmPreemptionsUnderKvPressure": ("kv_full_preempt", "15m", False),
    "VllmTtftP95High": ("ttft", "10m", False),
    "VllmTpotP95High": ("tpot", "10m", False),
    "VllmHttpErrorsHigh": ("http_5xx", "10m", True),
    "VllmBadRequestsHigh": ("http_4xx", "15m", True),
    "VllmEngineRequestErrors": ("engine_errors", "10m", False),
}


def _strip_annotations(groups: dict) -> dict:
    """The rules exactly as generated, minus annotations (their $value text is not what we test)."""
    g = json.loads(json.dumps(groups))
    for grp in g["groups"]:
        for r in grp["rules"]:
            r.pop("annotations", None)
    return g


@pytest.mark.parametrize("version", list(VERSIONS))
def test_generated_rules_pass_promtool_check(version: str, tmp_path: Path) -> None:
    for fmt, text in (("prometheus", render_prometheus(parse_version(version), AlertOptions(gpu_exporter="dcgm"))),):
        path = tmp_path / f"rules-{fmt}.yml"
        path.write_text(text)
        res = run_promtool("check", "rules", str(path))
        assert res.returncode == 0, res.stdout + res.stderr
        assert "SUCCESS" in res.stdout + res.stderr


@pytest.mark.parametrize("version", list(VERSIONS))
def test_every_expression_names_only_metrics_of_that_version(version: str) -> None:
    v = parse_version(version)
    allowed = sample_names_for(v) | {"up"}
    fixture = load_snapshot_files([VERSIONS[version]])[0].sample_names() | {"up"}
    for rule in build_rules(v):
        names = metric_names_in(rule.expr)
        assert names, rule.expr
        assert names <= allowed, (rule.alert, names - allowed)
        assert names <= fixture, (rule.alert, names - fixture)
        assert rule.to_dict()["annotations"]["runbook"] == f"vllmlog rule {rule.code}"
        assert rule.to_dict()["labels"]["severity"] in ("critical", "warning")
        from vllmlog.rules.base import CATEGORIES

        assert rule.to_dict()["labels"]["category"] in CATEGORIES
        assert rule.for_


@pytest.mark.parametrize("version", list(VERSIONS))
def test_promtool_unit_tests_fire_on_version_series(version: str, tmp_path: Path) -> None:
    v = parse_version(version)
    fixture = VERSIONS[version]
    model = _model_of(fixture)
    groups = rule_groups(v)
    rules = {r["alert"]: r for r in groups["groups"][0]["rules"]}
    used = {n for r in rules.values() for n in metric_names_in(r["expr"])}
    assert used - {"up"} <= load_snapshot_files([fixture])[0].sample_names()
    (tmp_path / "rules.yml").write_text(to_yaml(_strip_annotations(groups)) + "\n")
    tests = []
    # healthy: no alert at all
    tests.append({"interval": "1m", "input_series": input_series(fixture, SCENARIOS["healthy"], used=used),
                  "alert_rule_test": [{"eval_time": "25m", "alertname": a, "exp_alerts": []} for a in rules]})
    tests.append({"interval": "1m", "input_series": [{"series": f'up{{instance="{INSTANCE}",job="{JOB}"}}',
                                                      "values": f"0x{STEPS}"}],
                  "alert_rule_test": [{"eval_time": "5m", "alertname": "VllmTargetDown",
                                       "exp_alerts": [{"exp_labels": {"severity": "critical", "vllmlog_code": "M102", "category": "engine_dead",
                                                                      "job": JOB, "instance": INSTANCE}}]}]})
    tests.append({"interval": "1m", "input_series": [{"series": f'up{{instance="{INSTANCE}",job="{JOB}"}}',
                                                      "values": f"1x{STEPS}"}],
                  "alert_rule_test": [{"eval_time": "10m", "alertname": "VllmMetricsMissing",
                                       "exp_alerts": [{"exp_labels": {"severity": "warning", "vllmlog_code": "M112", "category": "config_error",
                                                                      "job": JOB, "instance": INSTANCE}}]}]})
    expected = dict(EXPECT)
    if "http_requests_total" in load_snapshot_files([fixture])[0].sample_names():
        expected["VllmClientAbortsHigh"] = ("aborts_http", "15m", True)
    else:
        expected["VllmClientAbortsHigh"] = ("aborts_label", "15m", False)
    covered = {"VllmTargetDown", "VllmMetricsMissing"}
    for alert, (scenario, at, http) in expected.items():
        if alert not in rules:
            continue
        extra = []
        if scenario == "http_5xx":  # the 5xx label value appears when the first 5xx happens
            extra = [("http_requests_total", {"handler": GEN_HANDLER, "method": "POST", "status": "5xx"},
                      f"0+5x{STEPS}")]
        if scenario == "engine_errors" and not any(
                s.labels.get("finished_reason") == "error" for s in load_snapshot_files([fixture])[0].samples):
            continue
        tests.append({"interval": "1m", "input_series": input_series(fixture, SCENARIOS[scenario], extra, used=used),
                      "alert_rule_test": [{"eval_time": at, "alertname": alert,
                                           "exp_alerts": [_exp(rules[alert], model, http)]}]})
        covered.add(alert)
    if "VllmClientAbortsHigh" in rules:  # releases that do count aborts in request_success fire too
        tests.append({"interval": "1m", "input_series": input_series(fixture, SCENARIOS["aborts_counted"], used=used),
                      "alert_rule_test": [{"eval_time": "15m", "alertname": "VllmClientAbortsHigh",
                                           "exp_alerts": [_exp(rules["VllmClientAbortsHigh"], model,
                                                               expected["VllmClientAbortsHigh"][2])]}]})
    if "VllmHttpErrorsHigh" in rules:
        extra = [("http_requests_total", {"handler": GEN_HANDLER, "method": "POST", "status": "5xx"}, f"0+0.1x{STEPS}")]
        tests.append({"interval": "1m", "input_series": input_series(fixture, SCENARIOS["few_errors"], extra, used=used),
                      "alert_rule_test": [{"eval_time": "20m", "alertname": "VllmHttpErrorsHigh", "exp_alerts": []}]})
    assert covered == set(rules), set(rules) - covered
    (tmp_path / "tests.yml").write_text(to_yaml({"rule_files": ["rules.yml"], "evaluation_interval": "1m",
                                                 "tests": tests}) + "\n")
    res = run_promtool("test", "rules", str(tmp_path / "tests.yml"))
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    assert "SUCCESS" in res.stdout + res.stderr


def test_engine_hang_alert_fires_on_recorded_p2_series(tmp_path: Path) -> None:
    """The real P2 snapshots (SIGSTOPped EngineCore, 0.32.0), one minute apart: the hang alert fires."""
    files = [DATA / f"P2-metrics-{i}.prom" for i in range(5, 13)]
    snaps = load_snapshot_files(files)
    keep = ("vllm:num_requests_running", "vllm:generation_tokens_total", "vllm:prompt_tokens_total")
    series: dict[str, list[float]] = {}
    for snap in snaps:
        for s in snap.samples:
            if s.name in keep:
                series.setdefault(_selector(s.name, {**s.labels, "job": JOB, "instance": INSTANCE}), []).append(s.value)
    inputs = [{"series": k, "values": " ".join(f"{x:g}" for x in v)} for k, v in series.items()]
    groups = rule_groups(parse_version("0.32.0"))
    (tmp_path / "rules.yml").write_text(to_yaml(_strip_annotations(groups)) + "\n")
    model = snaps[0].series("vllm:num_requests_running")[0].labels["model_name"]
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m", "input_series": inputs,
        "alert_rule_test": [
            {"eval_time": "1m", "alertname": "VllmEngineNotProgressing", "exp_alerts": []},
            {"eval_time": "5m", "alertname": "VllmEngineNotProgressing", "exp_alerts": [{"exp_labels": {
                "severity": "critical", "vllmlog_code": "M101", "category": "engine_hang", "job": JOB, "instance": INSTANCE,
                "model_name": model}}]},
        ]}]}
    (tmp_path / "tests.yml").write_text(to_yaml(tests) + "\n")
    res = run_promtool("test", "rules", str(tmp_path / "tests.yml"))
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]


def test_gpu_memory_alert_with_dcgm(tmp_path: Path) -> None:
    groups = rule_groups(parse_version("0.32.0"), AlertOptions(gpu_exporter="dcgm"))
    (tmp_path / "rules.yml").write_text(to_yaml(_strip_annotations(groups)) + "\n")
    lab = 'Hostname="node-1",gpu="0",instance="dcgm:9400",job="dcgm"'
    tests = {"rule_files": ["rules.yml"], "evaluation_interval": "1m", "tests": [{
        "interval": "1m",
        "input_series": [{"series": f"DCGM_FI_DEV_FB_USED{{{lab}}}", "values": f"78000x{STEPS}"},
                         {"series": f"DCGM_FI_DEV_FB_FREE{{{lab}}}", "values": f"1000x{STEPS}"}],
        "alert_rule_test": [{"eval_time": "10m", "alertname": "GpuMemoryHigh", "exp_alerts": [{"exp_labels": {
            "severity": "warning", "vllmlog_code": "M114", "category": "runtime_oom", "Hostname": "node-1",
            "gpu": "0"}}]}]}]}
    (tmp_path / "tests.yml").write_text(to_yaml(tests) + "\n")
    res = run_promtool("test", "rules", str(tmp_path / "tests.yml"))
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]


def test_k8s_prometheusrule_wraps_same_groups(tmp_path: Path) -> None:
    text = render_k8s(parse_version("0.10.1"), namespace="monitoring")
    assert text.startswith('apiVersion: "monitoring.coreos.com/v1"')
    assert 'kind: "PrometheusRule"' in text and 'namespace: "monitoring"' in text
    # the spec is a valid rule file on its own
    spec = to_yaml(rule_groups(parse_version("0.10.1"))) + "\n"
    (tmp_path / "spec.yml").write_text(spec)
    assert run_promtool("check", "rules", str(tmp_path / "spec.yml")).returncode == 0
    assert spec.strip().replace("\n", "\n  ") in text


def test_renamed_metrics_follow_the_version() -> None:
    old = " ".join(r.expr for r in build_rules(parse_version("0.6.3")))
    mid = " ".join(r.expr for r in build_rules(parse_version("0.10.1")))
    new = " ".join(r.expr for r in build_rules(parse_version("0.32.0")))
    assert "vllm:gpu_cache_usage_perc" in old and "vllm:kv_cache_usage_perc" not in old
    assert "vllm:kv_cache_usage_perc or vllm:gpu_cache_usage_perc" in mid
    assert "vllm:kv_cache_usage_perc" in new and "gpu_cache_usage_perc" not in new
    assert "vllm:time_per_output_token_seconds" in old and "vllm:time_per_output_token_seconds" not in new
    assert "vllm:request_time_per_output_token_seconds_bucket" in new
