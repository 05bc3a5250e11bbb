"""`vllmlog analyze`: library, JSON document, terminal output (fits 100 columns), exit codes, redaction."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from vllmlog.analyze import (Analysis, analyze, example_names, example_path, finding_view, red_use, should_fail,
                             verdict_of)
from vllmlog.cli import main
from vllmlog.redact import Redactor, redact
from vllmlog.render import render_analysis
from vllmlog.run import load

from .conftest import CORPUS, DATA

INJECTION = DATA / "analyze" / "injection.log"


def _render(a: Analysis, **kw) -> str:
    con = Console(width=100, record=True, force_terminal=False, color_system=None)
    render_analysis(a, con, **kw)
    return con.export_text()


def _fits(text: str, width: int = 100) -> None:
    too_long = [ln for ln in text.splitlines() if len(ln) > width]
    assert not too_long, too_long


# --------------------------------------------------------------------------- verdict / exit policy

def test_verdict_and_fail_on_policy() -> None:
    assert verdict_of([]) == "healthy"
    assert verdict_of([{"severity": "info"}]) == "healthy"
    assert verdict_of([{"severity": "warning"}, {"severity": "info"}]) == "degraded"
    assert verdict_of([{"severity": "error"}]) == "failing"
    assert verdict_of([{"severity": "critical"}]) == "failing"
    fs = [{"severity": "warning"}]
    assert should_fail(fs, "warning") and should_fail(fs, "info")
    assert not should_fail(fs, "error") and not should_fail(fs, "never")
    assert not should_fail(None, "info")


def test_finding_view_reads_the_rule_engine_shape() -> None:
    v = finding_view({"code": "K202", "rule": "kv-cache-pressure", "severity": "warning", "title": "KV cache full",
                      "message": "m", "evidence": [{"file": "a.log", "line": 3, "text": "x"}],
                      "root_cause": "r", "remediation": "--max-num-seqs 64", "first_seen": "2026-11-30T03:11:25"})
    assert v["fix"] == "--max-num-seqs 64" and v["evidence"][0]["line"] == 3 and v["code"] == "K202"


# --------------------------------------------------------------------------- redaction

@pytest.mark.parametrize("line, secret", [
    ("Received request chat-1: prompt: 'tell me <secret>', params: SamplingParams(n=1), prompt_token_ids: [1, 2, 3], lora_request: None",
     "tell me"),
    ("Received request chat-1: prompt: 'cut short by max_log_len", "cut short"),
    ("Generated response chatcmpl-1 (streaming complete): output: \"the answer is 42\", output_token_ids: None", "answer is"),
    ("Request 89ce JSON body: {\"model\":\"/models/tiny\",\"prompt\":\"private words\"}", "private words"),
    ("Request abc details: prompt: 'the lambda import', prompt_token_ids: [0, 1631, 2947", "lambda import"),
    ("{'type': 'int_parsing', 'loc': ('body', 'max_tokens'), 'msg': 'x', 'input': 'user typed this'}", "user typed"),
    ('error":{"message":"... \\"content\\": \\"hello there\\"}"', "hello there"),
])
def test_prompt_and_output_text_is_redacted(line: str, secret: str) -> None:
    out = redact(line)
    assert secret not in out and "[redacted]" in out
    assert redact(line, show_prompts=True) == line


def test_ip_masking_and_secrets() -> None:
    s = "mq_connect_ip=192.0.2.2 (local) version 0.32.0 peer [fe80:0:0:0:1:2:3:4] api_key='sk-abc' 10.1.2.3:8000"
    out = redact(s, mask_ips=True)
    assert "192.0.2.2" not in out and "10.1.2.3" not in out and "fe80" not in out
    assert "0.32.0" in out and "sk-abc" not in out
    assert "192.0.2.2" in redact(s)  # IPs kept unless asked


def test_every_output_redacts_prompts() -> None:
    a = analyze([str(INJECTION)], year=2026)
    doc = json.dumps(a.to_dict())
    term = _render(a, top=50, evidence_lines=10)
    for out in (doc, term):
        assert "SECRET-PROMPT-TEXT" not in out and "SECRET-OUTPUT-TEXT" not in out
    masked = json.dumps(a.to_dict(Redactor(mask_ips=True)))
    assert "127.0.0.1" not in masked


# --------------------------------------------------------------------------- library

def test_bundled_examples_are_listed_and_analyzable() -> None:
    names = example_names()
    assert {"healthy", "kv-pressure", "startup-kv-too-small"} <= set(names)
    for n in names:
        a = analyze([example_path(n)])
        assert a.run.parse_stats.lines > 100
        assert a.verdict in ("healthy", "degraded", "failing", "down", "incomplete", "unknown")


def test_json_document_shape() -> None:
    a = analyze([example_path("kv-pressure")])
    doc = json.loads(json.dumps(a.to_dict(), default=str))
    assert doc["schema"] == "vllmlog.analysis/1"
    assert set(doc) >= {"verdict", "files", "time_range", "servers", "red_use", "summary", "findings", "timeline",
                        "unavailable", "parse"}
    assert doc["servers"][0]["version"] == "0.32.0"
    assert "_engine_config_seen" not in doc["servers"][0]["config"]
    assert doc["red_use"]["requests"]["total"] == 240
    assert doc["red_use"]["use"]["kv_cache_usage"]["max"] == pytest.approx(1.0)
    assert doc["unavailable"] == {}, doc["unavailable"]
    assert doc["findings"] and doc["findings"][0]["code"] == "K202" and doc["verdict"] == "degraded"
    assert doc["summary"]["requests"] and doc["timeline"]
    assert all(set(e) >= {"ts", "kind", "text"} for e in doc["timeline"])


def test_red_use_from_simulated_handbook_run(tmp_path: Path) -> None:
    from vllmlog.simulate import build_config, simulate

    log = tmp_path / "h.log"
    with open(log, "w") as fp:
        simulate(build_config("kv-pressure", fmt="handbook", seed=2, duration_s=60), fp)
    run = load([str(log)], year=2026)
    ru = red_use(run)
    assert ru["requests"]["total"] == len(run.journeys) > 0
    assert ru["durations"]["e2e_s"]["count"] > 0
    assert ru["durations"]["ttft_s"]["p50"] <= ru["durations"]["ttft_s"]["p99"]
    assert ru["use"]["batch_size"]["count"] > 0 and ru["use"]["kv_cache_usage"]["max"] > 0.9


@pytest.mark.parametrize("name, verdict", [("healthy", "healthy"), ("kv-pressure", ("degraded", "failing")),
                                           ("startup-kv-too-small", "down")])
def test_examples_get_the_right_verdict(name: str, verdict) -> None:
    a = analyze([example_path(name)])
    assert a.findings is not None, a.unavailable
    assert a.verdict in ((verdict,) if isinstance(verdict, str) else verdict), [f["code"] for f in a.findings]


# --------------------------------------------------------------------------- terminal output

def test_terminal_output_fits_100_columns_with_long_findings() -> None:
    a = analyze([str(INJECTION)], year=2026)
    long = "x" * 300
    a.findings = [{"code": "K202", "rule": "kv", "severity": "error", "title": "KV cache full " + long,
                   "message": "message " + long, "root_cause": "cause " + long, "remediation": "fix " + long,
                   "evidence": [{"file": "/very/long/path/" + "d" * 80 + "/server.log", "line": 123456, "text": long}]}
                  ] * 7
    a.findings = [dict(f, incident=f"I{i + 1}") for i, f in enumerate(a.findings)]
    a.incidents = [{"id": f"I{i + 1}", "severity": "error", "impact": "failing", "category": "kv_cache_pressure_preemption",
                    "headline": "headline " + long, "confidence": "high", "cause": {"code": "K202"}, "chain": ["K202", "failing"],
                    "evidence": [{"file": "/very/long/path/" + "d" * 80 + "/server.log", "line": 123456, "text": long}],
                    "fixes": ["fix " + long], "findings": ["K202"]} for i in range(7)]
    a.verdict_info = {"status": "failing", "label": "FAILING", "reason": "headline " + long}
    out = _render(a, report_path="/tmp/" + "r" * 120 + ".html", report_bytes=4_900_000)
    _fits(out)
    assert "FAILING" in out and "2 more incident(s)" in out and "fix:" in out and "report:" in out


@pytest.mark.parametrize("log", ["vllm-cpu/03-kv-cache-pressure-preemption.log", "vllm-cpu/06b-startup-fail-kv-cache-too-small.log",
                                 "incidents/14-v0-1000-concurrent-preemption-thrash.log",
                                 "vllm-cpu-faults/P1-engine-dead-kill9.log"])
def test_terminal_output_of_corpus_logs_fits_100_columns_and_a_screen(log: str) -> None:
    a = analyze([str(CORPUS / log)], year=2026)
    out = _render(a, report_path="vllmlog-report.html", report_bytes=4_900_000)
    _fits(out)
    assert len(out.splitlines()) <= 60
    assert a.verdict.upper() in out


# --------------------------------------------------------------------------- CLI

def test_cli_writes_report_and_prints_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rc = main(["analyze", "--example", "kv-pressure"])
    out = capsys.readouterr().out
    report = (tmp_path / "vllmlog-report.html").read_text()
    assert 50_000 < len(report.encode()) < 1_500_000 and "var uPlot=" in report  # charts inlined, small
    assert "vllmlog-report.html" in out and "requests" in out
    # piped output is not hard-wrapped: the whole fix is one line (grep finds it); tables fit 160 columns
    [fix] = [ln for ln in out.splitlines() if ln.lstrip().startswith("fix:")]
    assert fix.rstrip().endswith("watch `vllm:num_preemptions_total`.")
    table = out[out.index("requests "):].splitlines()[:5]
    _fits("\n".join(table), 160)
    assert rc == 0  # the README's first command: analyze reports, `diagnose` (or --fail-on) gates


def test_cli_json_no_html_and_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rc = main(["analyze", "--example", "startup-kv-too-small", "--json", "--no-html", "--fail-on", "never"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["report"] is None and not (tmp_path / "vllmlog-report.html").exists()
    assert doc["servers"][0]["ready"] is False
    assert doc["verdict"] == "down" and doc["findings"][0]["severity"] == "critical"
    assert main(["analyze", "--example", "startup-kv-too-small", "--no-html"]) == 0  # analyze reports by default
    assert main(["analyze", "--example", "startup-kv-too-small", "--no-html", "--fail-on", "warning"]) == 1
    assert main(["analyze", "--example", "startup-kv-too-small", "--no-html", "--fail-on", "critical"]) == 1
    assert "exit status 1: a finding at or above --fail-on critical" in capsys.readouterr().out
    assert main(["analyze", "--example", "kv-pressure", "--no-html", "--fail-on", "error"]) == 0
    capsys.readouterr()
    assert main(["analyze", "--example", "list"]) == 0
    assert "kv-pressure" in capsys.readouterr().out.split()
    assert main(["analyze", "--example", "no-such-example"]) == 2
    assert main(["analyze", str(tmp_path / "missing.log")]) == 2
    assert main(["analyze", "--example", "healthy", "--fail-on", "sometimes"]) == 2
    assert main(["analyze"]) == 2
    err = capsys.readouterr().err
    assert "error:" in err


def test_cli_output_path_and_privacy_flags(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.html"
    main(["analyze", str(INJECTION), "--year", "2026", "-o", str(out), "--mask-ips", "--fail-on", "never"])
    text = out.read_text()
    assert "SECRET-PROMPT-TEXT" not in text and "10.11.12.13" not in text
    capsys.readouterr()
    main(["analyze", str(INJECTION), "--year", "2026", "-o", str(out), "--show-prompts", "--fail-on", "never", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["report"] == str(out)
    assert "<script>window.__pwned" not in out.read_text()


def test_real_log_prompts_never_reach_any_output() -> None:
    """08 logs at DEBUG with JSON bodies, prompts and token ids; 01 logs every streamed output delta."""
    import html as html_mod
    import re

    from vllmlog.export.html import render_report

    for name in ("08-debug-level-light-load.log", "01-startup-and-light-load.log"):
        path = CORPUS / "vllm-cpu" / name
        raw = path.read_text(errors="replace")
        snippets = {m.group(1)[:30] for m in re.finditer(
            r"""(?:"prompt":"|"content":"|prompt: '|output: '|output: ")([^"'\\]{25,})""", raw)}
        snippets = {s for s in snippets if s.strip() and len(set(s)) > 5}
        assert len(snippets) >= 5, name
        a = analyze([str(path)], year=2026)
        outputs = [json.dumps(a.to_dict()), _render(a, top=20, evidence_lines=20), render_report(a)]
        for out in outputs:
            leaked = [s for s in snippets if s in out or html_mod.escape(s) in out]
            assert not leaked, (name, leaked[:3])
