"""`vllmlog diagnose` / `rules` / `rule` / `timeline`: JSON shape, exit codes, human output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllmlog.cli import main

from .conftest import CORPUS

HANG = str(next((CORPUS / "vllm-cpu-faults").glob("P2-*.log")))
HEALTHY = str(next((CORPUS / "incidents").glob("43-*.log")))
PORT = str(next((CORPUS / "vllm-cpu").glob("06e-*.log")))


def test_diagnose_json_shape_and_order(capsys) -> None:
    rc = main(["diagnose", HANG, "--json", "--year", "2026"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert set(doc) == {"incidents", "findings", "verdict", "summary", "numbers", "coverage"}
    inc = doc["incidents"][0]
    assert inc["category"] == "engine_hang" and inc["impact"] == "stalled" and inc["cause"]["code"] == "E401"
    assert doc["verdict"]["status"] == "failing" and doc["verdict"]["checks"]
    f = doc["findings"][0]
    assert f["code"] == "E401" and f["category"] == "engine_hang" and f["severity"] == "error"
    for key in ("rule", "title", "message", "evidence", "root_cause", "remediation", "first_seen", "last_seen", "count",
                "file", "process"):
        assert key in f
    assert all(set(e) == {"file", "line", "text"} and e["text"] for e in f["evidence"])
    order = ["critical", "error", "warning", "info"]
    ranks = [order.index(x["severity"]) for x in doc["incidents"]]
    assert ranks == sorted(ranks)
    # findings in incident order, each incident's cause first, then the notes outside any incident
    ids = [x["incident"] for x in doc["findings"]]
    seen = [i for n, i in enumerate(ids) if i is not None and i not in ids[:n]]
    assert seen == [x["id"] for x in doc["incidents"] if x["findings"]][:len(seen)]
    assert all(i is None for i in ids[ids.index(None):]) if None in ids else True
    for x in doc["incidents"]:
        if x["cause"]:
            assert next(f for f in doc["findings"] if f["incident"] == x["id"])["code"] == x["cause"]["code"]
    assert doc["summary"]["verdict"] == "failing" and doc["summary"]["top"]["code"] == "E401"


def test_exit_codes(capsys) -> None:
    assert main(["diagnose", HEALTHY, "--year", "2026"]) == 0
    assert main(["diagnose", PORT, "--year", "2026"]) == 1
    assert main(["diagnose", HANG, "--year", "2026", "--fail-on", "critical"]) == 0
    assert main(["diagnose", HANG, "--year", "2026", "--fail-on", "never"]) == 0
    assert main(["diagnose", HANG, "--fail-on", "loud"]) == 2
    assert main(["diagnose", "/nonexistent/x.log"]) == 2
    capsys.readouterr()


def test_bad_config_is_usage_error(tmp_path: Path, capsys) -> None:
    p = tmp_path / "c.toml"
    p.write_text("[thresholds]\nbogus = 1\n")
    assert main(["diagnose", HEALTHY, "--config", str(p)]) == 2
    assert "bogus" in capsys.readouterr().err


def test_human_output(capsys) -> None:
    main(["diagnose", HANG, "--year", "2026"])
    out = capsys.readouterr().out
    assert "verdict: FAILING" in out and "E401" in out and "fix:" in out and "774" in out
    main(["diagnose", HEALTHY, "--year", "2026"])
    assert "No problems found" in capsys.readouterr().out


def test_rules_and_rule(capsys) -> None:
    assert main(["rules", "--json"]) == 0
    rules = json.loads(capsys.readouterr().out)
    assert {r["code"] for r in rules} >= {"S101", "K202", "Q301", "E401", "D501", "R604"}
    assert main(["rule", "K202"]) == 0
    out = capsys.readouterr().out
    assert "What it detects" in out and "How to fix" in out and "[rules.K202]" in out
    assert main(["rule", "NOPE"]) == 2


def test_timeline_cli(capsys) -> None:
    assert main(["timeline", HANG, "--year", "2026", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    kinds = {e["kind"] for e in doc["entries"]}
    assert {"lifecycle", "metric", "finding"} <= kinds
    assert main(["timeline", HANG, "--year", "2026", "--finding", "E401", "--window", "2m", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    ts = [e["ts"] for e in doc["entries"]]
    assert ts and min(ts) >= "2026-11-30T03:40:36" and max(ts) <= "2026-11-30T03:42:36"
    assert main(["timeline", HANG, "--finding", "Z999"]) == 2
    assert main(["timeline", HANG, "--around", "xx:yy"]) == 2
    assert main(["timeline", HANG, "--year", "2026", "--around", "03:42:20", "--window", "30s"]) == 0
    out = capsys.readouterr().out
    assert "03:42:22" in out


@pytest.mark.parametrize("args", [["diagnose", "--help"], ["timeline", "--help"], ["rules", "--help"]])
def test_help(args, capsys) -> None:
    assert main(args) == 0
