"""Held-out scoreboard: synthetic incident logs written from the vLLM format reference, not the corpus
(``tests/data/heldout/make_heldout.py``). Top finding's category = label, evidence hits a labelled line,
healthy controls have nothing at warning or above, every line is accounted for by an event.

Cases the diagnosis gets wrong today are ``xfail(strict=True)`` with the reason, so a fix forces
removing the mark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllmlog.diagnose import diagnose
from vllmlog.rules import Severity
from vllmlog.run import load

HELDOUT = Path(__file__).parent / "data" / "heldout"
LABELS = sorted(HELDOUT.glob("[0-9][0-9]-*.json"))

#: case stem → what the diagnosis gets wrong (strict xfail).
XFAIL: dict[str, str] = {
}


def _params():
    for p in LABELS:
        marks = [pytest.mark.xfail(strict=True, reason=XFAIL[p.stem])] if p.stem in XFAIL else []
        yield pytest.param(p, id=p.stem, marks=marks)


def test_cases_present() -> None:
    assert len(LABELS) >= 8


@pytest.mark.parametrize("label", list(_params()))
def test_heldout(label: Path) -> None:
    d = json.loads(label.read_text())
    run = load(str(label.with_suffix(".log")), year=2026)
    fs = diagnose(run)
    summary = [(f.code, f.category, f.severity.label, sorted(e.line for e in f.evidence)[:6]) for f in fs]
    if d["category"] == "healthy":
        assert [f.code for f in fs if f.severity >= Severity.WARNING] == [], summary
    else:
        top = fs[0] if fs else None
        assert top is not None and top.category == d["category"], summary
        assert top.severity >= Severity.WARNING, summary
        got = {e.line for e in top.evidence}
        assert got & set(d["evidence_line_numbers"]), (sorted(got), d["evidence_line_numbers"])


@pytest.mark.parametrize("label", LABELS, ids=lambda p: p.stem)
def test_heldout_lines_accounted(label: Path) -> None:
    run = load(str(label.with_suffix(".log")), year=2026)
    assert run.parse_stats.lines_in_events == run.parse_stats.lines
