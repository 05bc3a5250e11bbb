"""The scoreboard: every labelled corpus log is diagnosed with the labelled category as the top finding
(first after sorting by severity, then time), with the labelled evidence lines; healthy controls stay clean."""

from __future__ import annotations

import json

import pytest

from vllmlog.diagnose import diagnose
from vllmlog.rules import Severity
from vllmlog.run import load

from .conftest import CORPUS

INCIDENTS = sorted((CORPUS / "incidents").glob("*.json"))

#: vllm-cpu-faults: category from Pn-truth.json; the signature lines every diagnosis must show.
FAULT_LINES = {
    "P1": ("engine_core_exited_unexpectedly", "output_handler_failed", "engine_dead_error", "worker_parent_exited"),
    "P2": ("shm_broadcast_warnings",),
    "P3": (),
    "P4": ("died_or_killed", "engine_core_failed_to_start", "engine_core_init_failed", "runtime_error_lines"),
    "P5": ("died_or_killed", "engine_core_fatal", "engine_dead_error", "runtime_error_lines"),
}
#: vllm-cpu: expected top category (06a: memory shortage at start-up → startup_oom, see S103's docstring).
CPU = {
    "02": {"queue_backlog"}, "03": {"kv_cache_pressure_preemption"}, "04": {"client_abort"},
    "05": {"bad_request_params", "request_too_long"}, "05b": {"bad_request_params", "request_too_long"},
    "06a": {"startup_oom"}, "06b": {"kv_cache_capacity_error"}, "06c": {"model_load_failure"},
    "06d": {"config_error"}, "06e": {"config_error"},
    "00": None, "01": None, "07a": None, "07b": None, "08": None,
}


def _top(path):
    fs = diagnose(load(str(path), year=2026))
    return fs, (fs[0] if fs else None)


def _lines(sig) -> list[int]:
    out = []
    items = sig if isinstance(sig, list) else [sig]
    for x in items:
        if isinstance(x, dict) and isinstance(x.get("line_no"), int):
            out.append(x["line_no"])
    return out


@pytest.mark.parametrize("label", INCIDENTS, ids=lambda p: p.stem)
def test_incident(label) -> None:
    d = json.loads(label.read_text())
    fs, top = _top(label.with_suffix(".log"))
    if d["category"] == "healthy":
        assert [f.code for f in fs if f.severity >= Severity.WARNING] == []
        return
    assert top is not None and top.category == d["category"], [(f.code, f.category, f.severity.label) for f in fs]
    assert top.severity >= Severity.WARNING
    got = {e.line for e in top.evidence}
    assert set(d["evidence_line_numbers"]) <= got, sorted(set(d["evidence_line_numbers"]) - got)
    assert len(top.evidence) <= 24


@pytest.mark.parametrize("name", sorted(FAULT_LINES))
def test_fault(name) -> None:
    truth = json.loads((CORPUS / "vllm-cpu-faults" / f"{name}-truth.json").read_text())
    log = next((CORPUS / "vllm-cpu-faults").glob(f"{name}-*.log"))
    fs, top = _top(log)
    assert top is not None and top.category == truth["category"], [(f.code, f.category, f.severity.label) for f in fs]
    assert top.severity >= Severity.WARNING
    want = [n for key in FAULT_LINES[name] for n in _lines(truth["signature_lines"][key])]
    got = {e.line for e in top.evidence}
    assert set(want) <= got, sorted(set(want) - got)


@pytest.mark.parametrize("key", sorted(CPU))
def test_vllm_cpu(key) -> None:
    log = next(p for p in (CORPUS / "vllm-cpu").glob(f"{key}-*.log"))
    fs, top = _top(log)
    if CPU[key] is None:
        assert [f.code for f in fs if f.severity >= Severity.WARNING] == [], [f.message for f in fs]
    else:
        assert top is not None and top.category in CPU[key], [(f.code, f.category, f.severity.label) for f in fs]
        assert top.severity >= Severity.WARNING


def test_shutdown_noise_is_not_an_incident() -> None:
    """01 ends with SIGTERM: an EngineDeadError traceback during graceful shutdown is not engine_dead."""
    fs, _ = _top(next((CORPUS / "vllm-cpu").glob("01-*.log")))
    assert not [f for f in fs if f.category == "engine_dead"]


def test_consequences_demoted() -> None:
    """P2: the client aborts during the hang are folded under the hang, below its severity."""
    fs, top = _top(next((CORPUS / "vllm-cpu-faults").glob("P2-*.log")))
    aborts = [f for f in fs if f.category == "client_abort"]
    assert top.code == "E401"
    assert all(f.caused_by == "E401" and f.severity < top.severity for f in aborts)


def test_multi_file_names_file_and_process() -> None:
    a = next((CORPUS / "vllm-cpu-faults").glob("P1-*.log"))
    b = next((CORPUS / "vllm-cpu").glob("06e-*.log"))
    fs = diagnose(load([str(a), str(b)], year=2026))
    by_file = {f.file: f for f in fs if f.severity >= Severity.CRITICAL}
    assert {str(a), str(b)} <= set(by_file)
    assert by_file[str(a)].category == "engine_dead" and by_file[str(a)].process == "APIServer pid=2466"
    assert by_file[str(b)].category == "config_error"
    assert all(e.file == str(a) for e in by_file[str(a)].evidence)
