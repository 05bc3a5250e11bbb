"""diagnose(): evidence are real lines, summary/verdict, consequence folding, config switches."""

from __future__ import annotations

import re

import pytest

from vllmlog.diagnose import run_diagnosis
from vllmlog.diagnose import at_or_above, diagnose, report, summarize
from vllmlog.rules import Severity
from vllmlog.rules.config import config_from_dict
from vllmlog.run import load

from .conftest import CORPUS, corpus_logs

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


@pytest.mark.parametrize("path", corpus_logs(), ids=lambda p: p.name)
def test_evidence_lines_are_real(path) -> None:
    """Every evidence line's text is the file's line with that number (ANSI/wrappers aside)."""
    raw = path.read_bytes().split(b"\n")
    for f in diagnose(load(str(path), year=2026)):
        assert f.file == str(path)
        assert 0 < len(f.evidence) <= 24
        for e in f.evidence:
            line = _ANSI.sub("", raw[e.line - 1].decode("utf-8", "replace")).rstrip("\r")
            text = e.text.strip()
            assert text and (text in line or line.strip() in text), (e.line, text[:80], line[:80])


def test_sorted_by_severity_then_time() -> None:
    fs = diagnose(load(str(next((CORPUS / "incidents").glob("19-*.log"))), year=2026))
    keys = [(-int(f.severity), f.first_seen) for f in fs]
    assert keys == sorted(keys)


def test_summary_and_report() -> None:
    run = load(str(next((CORPUS / "vllm-cpu").glob("06b-*.log"))), year=2026)
    doc = report(run)
    assert doc["summary"]["verdict"] == "down"
    assert doc["summary"]["top"]["category"] == "kv_cache_capacity_error"
    assert doc["summary"]["by_severity"]["critical"] >= 1
    assert summarize([])["verdict"] == "healthy"
    fs = diagnose(run)
    assert at_or_above(fs, Severity.CRITICAL) and not at_or_above([f for f in fs if f.severity < 3], Severity.CRITICAL)


def test_disable_rule() -> None:
    run = load(str(next((CORPUS / "incidents").glob("49-*.log"))), year=2026)
    assert any(f.code == "Q301" for f in diagnose(run))
    cfg = config_from_dict({"rules": {"disable": ["queue-backlog"]}})
    assert not any(f.code == "Q301" for f in diagnose(run, cfg))


def test_no_text_fill_for_watch() -> None:
    run = load(str(next((CORPUS / "vllm-cpu-faults").glob("P2-*.log"))), year=2026)
    fs = diagnose(run, fill_text=False)
    assert fs[0].code == "E401" and any(e.text == "" for e in fs[0].evidence)


def test_kernel_oom_report_confirms_kill() -> None:
    """A dmesg excerpt given with the log names the OOM killer in the finding."""
    d = CORPUS / "vllm-cpu-faults"
    fs = diagnose(load([str(next(d.glob("P5-*.log"))), str(d / "P5-dmesg-oom.txt")], year=2026))
    top = fs[0]
    assert top.category == "runtime_oom" and "OOM killer" in top.message
    assert any(e.file.endswith("P5-dmesg-oom.txt") for e in top.evidence)


def test_worker_log_explains_api_server_log() -> None:
    """API server log + worker log of one deployment: the worker's OOM is the cause, the engine death its consequence."""
    d = __import__("pathlib").Path(__file__).parent / "rules" / "variants" / "split"
    dg = run_diagnosis(load([str(d / "api.log"), str(d / "worker.log")], year=2026))
    fs = dg.findings
    top = fs[0]
    assert (top.code, top.category) == ("E405", "runtime_oom") and top.severity >= Severity.ERROR
    inc = dg.incidents[0]
    assert inc.severity == Severity.CRITICAL and inc.cause is top and inc.impact == "dead"
    assert top.file.endswith("worker.log") and top.process == "VllmWorker TP1 pid=443"
    dead = next(f for f in fs if f.category == "engine_dead")
    assert dead.caused_by == "E405" and dead.severity < Severity.CRITICAL and dead.file.endswith("api.log")


def test_replicas_do_not_explain_each_other() -> None:
    """Two full server logs (replicas): a hang in one does not demote the other's client aborts."""
    hang = next((CORPUS / "vllm-cpu-faults").glob("P2-*.log"))
    aborts = next((CORPUS / "vllm-cpu").glob("04-*.log"))
    fs = diagnose(load([str(hang), str(aborts)], year=2026))
    ab = next(f for f in fs if f.file == str(aborts) and f.category == "client_abort")
    assert ab.caused_by is None and ab.severity == Severity.WARNING


def test_worker_only_log_oom_while_api_server_serves_is_runtime() -> None:
    """A V1 worker log (no API-server line, never 'ready' by itself) whose CUDA OOM has no stage in its
    frames: the API server's log, given too, was serving at that time — a runtime OOM, not a start-up one."""
    d = __import__("pathlib").Path(__file__).parent / "rules" / "variants" / "split-v1"
    fs = diagnose(load([str(d / "api.log"), str(d / "worker.log")], year=2026))
    assert fs[0].category == "runtime_oom"
    assert not [f for f in fs if f.category == "startup_oom"], [(f.code, f.file) for f in fs]
    assert any(f.code == "E405" and f.file.endswith("worker.log") for f in fs)


def test_destroy_process_group_warning_is_no_nccl_failure(tmp_path) -> None:
    """A healthy log whose last line is torch's ``[W…] destroy_process_group() was not called`` warning."""
    src = __import__("pathlib").Path(__file__).parent / "data" / "heldout2" / "11-v1-multi-hour-idle-healthy.log"
    p = tmp_path / "healthy.log"
    p.write_text(src.read_text() + "[rank0]:[W1130 12:01:02.615225908 ProcessGroupNCCL.cpp:1476] Warning: WARNING: "
                 "destroy_process_group() was not called before program exit, which can leak resources.\n")
    fs = diagnose(load(str(p), year=2026))
    assert not [f.code for f in fs if f.severity >= Severity.WARNING], [(f.code, f.severity) for f in fs]


def test_start_timeout_then_restart_that_serves(tmp_path) -> None:
    """One file: the first start times out waiting for the engine core, the restart serves for hours. The
    failed start is still reported (the file's two starts make one server run when the first never got ready)."""
    d = __import__("pathlib").Path(__file__).parent / "data" / "heldout2"
    p = tmp_path / "restart.log"
    p.write_text((d / "08-v18-engine-ready-timeout.log").read_text() + (d / "11-v1-multi-hour-idle-healthy.log").read_text())
    fs = diagnose(load(str(p), year=2026))
    assert (fs[0].code, fs[0].category) == ("E404", "engine_hang") and fs[0].severity == Severity.CRITICAL
