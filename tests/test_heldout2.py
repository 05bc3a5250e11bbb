"""Second held-out scoreboard (``tests/data/heldout2/make_heldout2.py``): harder input shapes — two
replicas, API-server + worker logs, a restart inside one file, 0.32 JSON logging, kubectl + ANSI, a
multi-hour idle log, a handbook queue that drains. Same checks as ``test_heldout.py``: top finding's
category = label, evidence hits a labelled line (of any input), healthy controls have nothing at warning
or above, every line of every input is accounted for by an event.

Cases the diagnosis gets wrong today are ``xfail(strict=True)`` with the reason."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllmlog.diagnose import diagnose
from vllmlog.rules import Severity
from vllmlog.run import load

HELDOUT = Path(__file__).parent / "data" / "heldout2"
LABELS = sorted(HELDOUT.glob("[0-9][0-9]-*.json"))

#: case stem → what the diagnosis gets wrong (strict xfail).
XFAIL: dict[str, str] = {
}


def _inputs(label: Path, d: dict) -> list[str]:
    return [str(HELDOUT / n) for n in d.get("inputs", [label.with_suffix(".log").name])]


def _params():
    for p in LABELS:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[p.stem])] if p.stem in XFAIL else []
        yield pytest.param(p, id=p.stem, marks=marks)


def test_cases_present() -> None:
    assert len(LABELS) >= 10


@pytest.mark.parametrize("label", list(_params()))
def test_heldout2(label: Path) -> None:
    d = json.loads(label.read_text())
    paths = _inputs(label, d)
    run = load(paths if len(paths) > 1 else paths[0], year=2026)
    fs = diagnose(run)
    summary = [(f.code, f.category, f.severity.label, Path(f.file).name,
                sorted(e.line for e in f.evidence)[:6]) for f in fs]
    if d["category"] == "healthy":
        assert [f.code for f in fs if f.severity >= Severity.WARNING] == [], summary
    else:
        top = fs[0] if fs else None
        assert top is not None and top.category == d["category"], summary
        assert top.severity >= Severity.WARNING, summary
        want = {(label.with_suffix(".log").name, n) for n in d["evidence_line_numbers"]}
        want |= {(f, n) for f, ns in d.get("evidence_by_file", {}).items() for n in ns}
        got = {(Path(e.file).name, e.line) for e in top.evidence}
        assert got & want, (sorted(got), sorted(want))


@pytest.mark.parametrize("label", LABELS, ids=lambda p: p.stem)
def test_heldout2_lines_accounted(label: Path) -> None:
    d = json.loads(label.read_text())
    paths = _inputs(label, d)
    run = load(paths, year=2026)
    assert run.parse_stats.lines_in_events == run.parse_stats.lines


def _diag(stem: str):
    d = json.loads((HELDOUT / f"{stem}.json").read_text())
    return diagnose(load(_inputs(HELDOUT / f"{stem}.json", d), year=2026))


def test_replica_finding_names_the_failing_replica() -> None:
    fs = _diag("01-v1-two-replicas-one-oom")
    assert fs[0].file.endswith("01-v1-two-replicas-one-oom.log")
    assert not [f for f in fs if f.file.endswith("replica-a.log") and f.severity >= Severity.WARNING]


def test_restart_reports_the_first_run() -> None:
    fs = _diag("03-v1-restart-after-oom")
    assert (fs[0].category, fs[0].server) == ("runtime_oom", 0)


def test_rpc_timeouts_join_the_stall() -> None:
    """The execute_model RPC timeouts logged while stats show the stall are one hang, citing them."""
    fs = [f for f in _diag("06-v1-rpc-execute-model-timeout") if f.category == "engine_hang"]
    assert len(fs) == 1 and any("RPC call to execute_model timed out" in e.text for e in fs[0].evidence)
