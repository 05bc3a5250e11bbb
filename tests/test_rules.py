"""Rule engine: registry, docs, thresholds config, and one trigger / one clean fixture per rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllmlog.errors import ConfigError
from vllmlog.rules import CATEGORIES, Severity, all_rules, get_rule, load_config
from vllmlog.rules.config import HANDBOOK_THRESHOLDS, DiagnoseConfig, config_from_dict
from vllmlog.run import load

FIXTURES = Path(__file__).parent / "rules"
RULES = all_rules()


def test_codes_unique_and_well_formed() -> None:
    codes = [r.code for r in RULES]
    assert len(codes) == len(set(codes))
    assert len({r.slug for r in RULES}) == len(RULES)
    families = {"S": "1", "K": "2", "Q": "3", "E": "4", "D": "5", "R": "6"}
    for r in RULES:
        assert r.code[0] in families and r.code[1] == families[r.code[0]], r.code
        assert r.category in CATEGORIES
        assert r.title


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_documented(rule) -> None:
    for heading in ("What it detects", "Why it matters", "How to fix"):
        assert rule.section(heading), f"{rule.code} lacks '## {heading}'"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_has_fixtures(rule) -> None:
    assert (FIXTURES / f"{rule.code}.log").exists(), f"tests/rules/{rule.code}.log missing"
    assert (FIXTURES / f"{rule.code}_clean.log").exists(), f"tests/rules/{rule.code}_clean.log missing"


def _fire(rule, path: Path) -> list:
    run = load(str(path), year=2026)
    opts = DiagnoseConfig().options_for(rule)
    return [f for f in rule.detect(run, opts) if f.severity >= Severity.WARNING]


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_triggers(rule) -> None:
    found = _fire(rule, FIXTURES / f"{rule.code}.log")
    assert found, f"{rule.code} did not trigger on its fixture"
    for f in found:
        assert f.code == rule.code and f.category in CATEGORIES
        assert f.message and f.remediation and f.root_cause
        assert f.evidence and all(e.line > 0 for e in f.evidence)
        d = f.to_dict()
        assert set(d) >= {"code", "rule", "category", "severity", "title", "message", "evidence", "root_cause",
                          "remediation", "first_seen", "last_seen", "count", "file", "process"}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.code)
def test_rule_quiet_on_clean(rule) -> None:
    assert not _fire(rule, FIXTURES / f"{rule.code}_clean.log")


def test_get_rule_by_code_and_slug() -> None:
    assert get_rule("k202").slug == "kv-cache-pressure"
    assert get_rule("kv-cache-pressure").code == "K202"
    with pytest.raises(ConfigError):
        get_rule("Z999")


def test_severity_order_and_parse() -> None:
    assert Severity.CRITICAL > Severity.ERROR > Severity.WARNING > Severity.INFO
    assert Severity.parse("Warning") is Severity.WARNING
    with pytest.raises(ValueError):
        Severity.parse("loud")


def test_handbook_defaults() -> None:
    assert HANDBOOK_THRESHOLDS == {"waiting_s": 30.0, "kv_caution": 0.80, "kv_critical": 0.95,
                                   "min_generation_tps": 20.0, "max_ttft_s": 1.0}
    cfg = DiagnoseConfig()
    assert cfg.options_for(get_rule("K202"))["kv_caution"] == 0.80
    assert cfg.options_for(get_rule("Q301"))["waiting_s"] == 30.0
    assert cfg.options_for(get_rule("Q302"))["min_generation_tps"] == 20.0
    assert cfg.options_for(get_rule("Q303"))["max_ttft_s"] == 1.0


def test_toml_config(tmp_path: Path) -> None:
    p = tmp_path / "t.toml"
    p.write_text('[thresholds]\nkv_caution = 0.7\n[rules.Q301]\nwaiting_s = 60\n[rules]\ndisable = ["R604"]\n')
    cfg = load_config(p)
    assert cfg.options_for(get_rule("K202"))["kv_caution"] == 0.7
    assert cfg.options_for(get_rule("Q301"))["waiting_s"] == 60.0
    assert not cfg.is_enabled(get_rule("R604"))


@pytest.mark.parametrize("doc", [
    {"thresholds": {"nope": 1}}, {"thresholds": {"kv_caution": "high"}}, {"rules": {"K202": {"nope": 1}}},
    {"rules": {"Z999": {}}}, {"rules": {"disable": "R604"}}, {"rules": {"K202": {"min_intervals": "x"}}},
])
def test_bad_config(doc) -> None:
    with pytest.raises(ConfigError):
        config_from_dict(doc)


def test_bad_toml(tmp_path: Path) -> None:
    p = tmp_path / "bad.toml"
    p.write_text("[thresholds\n")
    with pytest.raises(ConfigError):
        load_config(p)
    with pytest.raises(ConfigError):
        load_config(tmp_path / "missing.toml")


def test_threshold_changes_outcome(tmp_path: Path) -> None:
    """Raising the KV caution threshold above the peak silences K202 on the thrash log."""
    run = load(str(FIXTURES / "K202.log"), year=2026)
    rule = get_rule("K202")
    cfg = config_from_dict({"thresholds": {"kv_caution": 0.999, "kv_critical": 0.9995}, "rules": {"K202": {"min_intervals": 99}}})
    fs = [f for f in rule.detect(run, cfg.options_for(rule)) if f.severity >= Severity.WARNING]
    # preemption lines alone still prove pressure
    assert fs and "preemption" in fs[0].message


#: Small variants of real failure texts (other vLLM versions, log excerpts): file → (code, category).
VARIANTS = {
    "v0_runtime_oom.log": ("E405", "runtime_oom"),
    "v1_config_value_error.log": ("E404", "config_error"),
    "v1_excerpt_dead.log": ("E403", "engine_dead"),
    "start_timeout.log": ("E404", "engine_hang"),
    "v1_bad_request_len.log": ("R601", "request_too_long"),
    "v1_preempt_field.log": ("K202", "kv_cache_pressure_preemption"),
    "argparse.log": ("S105", "config_error"),
    "v1_stuck_queue_running0.log": ("E402", "engine_hang"),
    "v0_zero_gpu_blocks.log": ("K201", "kv_cache_capacity_error"),
    "torch_rank_prefix_no_cache.log": ("K201", "kv_cache_capacity_error"),
    "v1_error_stack_bad_param.log": ("R602", "bad_request_params"),
    "v1_no_kernel_image.log": ("E404", "config_error"),  # a build without kernels for this GPU: the environment
}


def test_single_preemption_is_not_an_incident() -> None:
    """V0 logs the 1st preemption: one line with counter 1 at 60 % KV is reported as info, not a warning."""
    from vllmlog.diagnose import diagnose

    fs = diagnose(load(str(FIXTURES / "variants" / "v0_one_preemption.log"), year=2026))
    assert [f.code for f in fs if f.severity >= Severity.WARNING] == []


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_variants(name) -> None:
    from vllmlog.diagnose import diagnose

    fs = diagnose(load(str(FIXTURES / "variants" / name), year=2026))
    assert fs, name
    code, cat = VARIANTS[name]
    assert (fs[0].code, fs[0].category) == (code, cat), [(f.code, f.category, f.message) for f in fs]
    assert fs[0].severity >= Severity.WARNING


@pytest.mark.parametrize("name,warns", [("v1_kv_burst_drains.log", False), ("v1_kv_high_queue_stays.log", True)])
def test_kv_pressure_needs_sustained_pressure(name, warns) -> None:
    """KV above the caution level for two intervals while the queue drains (no preemption) is a burst the
    server absorbed: info. The same level while Waiting stays > 0 after it is pressure: warning."""
    rule = get_rule("K202")
    run = load(str(FIXTURES / "variants" / name), year=2026)
    fs = list(rule.detect(run, load_config(None).options_for(rule)))
    assert fs and (fs[0].severity >= Severity.WARNING) == warns, [(f.severity, f.message) for f in fs]
