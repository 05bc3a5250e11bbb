"""The answer on screen, at 80, 100 and 160 columns: no line wider than the console, the whole fix of
every printed finding, the end of every evidence line (where vLLM puts the numbers), wrapped prose
with a hanging indent; piped output (a soft-wrapping console) never hard-wrapped; tables that keep
their key columns."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.console import Console

from vllmlog.analyze import analyze, example_names, example_path
from vllmlog.cli import main
from vllmlog.redact import DEFAULT as RD
from vllmlog.render import render_analysis, short_evidence
from vllmlog.textview import elide_middle, hanging

from .conftest import CORPUS

WIDTHS = (80, 100, 160)
LOGS = [Path(example_path(n)) for n in example_names()] + [
    CORPUS / "vllm-cpu" / "03-kv-cache-pressure-preemption.log",
    CORPUS / "vllm-cpu-faults" / "P1-engine-dead-kill9.log",
    CORPUS / "vllm-cpu-faults" / "P2-engine-hang-sigstop.log",
    CORPUS / "incidents" / "14-v0-1000-concurrent-preemption-thrash.log",
    CORPUS / "incidents" / "19-v1-single-runaway-blocks-waiting.log",
]


def _render(a, width: int, soft: bool = False) -> str:
    con = Console(width=width, record=True, force_terminal=False, color_system=None, soft_wrap=soft)
    render_analysis(a, con, top=3)
    return con.export_text()


def _flat(s: str) -> str:
    return " ".join(s.replace("│", " ").split())


@pytest.fixture(scope="module")
def analyses():
    return {p.name: analyze([str(p)], year=2026) for p in LOGS}


def _shown(a) -> list[dict]:
    """What the terminal prints: the incidents (fix = their fixes joined, evidence), or the findings before them."""
    if a.incidents is None:
        return a.views()[:3]
    return [{"fix": "; ".join(i["fixes"]) + "." if i["fixes"] else "", "evidence": i["evidence"]}
            for i in a.incidents if i["severity"] != "info"][:3]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_whole_fix_and_evidence_numbers_fit_the_width(analyses, log: Path, width: int) -> None:
    a = analyses[log.name]
    out = _render(a, width)
    too_wide = [ln for ln in out.splitlines() if len(ln) > width]
    assert not too_wide, too_wide
    flat = _flat(out)
    for f in _shown(a):
        if f["fix"]:
            fix = " ".join(str(f["fix"]).split())
            assert fix in flat, (width, fix)  # the whole fix, never cut
        for e in f["evidence"][:2]:
            text = _flat(short_evidence(e, RD))
            tail = text[-25:].strip()
            assert tail in flat, (width, tail)  # the end of the line, which carries the numbers
            nums = re.findall(r"\d[\d.,]*%?", text[-60:])
            assert all(n in flat for n in nums), (width, nums)


@pytest.mark.parametrize("width", WIDTHS)
def test_wrapped_prose_has_a_hanging_indent(analyses, width: int) -> None:
    out = _render(analyses["kv-pressure.log"], width)
    lines = out.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("  fix: "))
    j = i + 1
    while j < len(lines) and lines[j].startswith("    ") and not lines[j].startswith("    │"):
        j += 1
    if width < 160:
        assert j > i + 1, lines[i:i + 3]  # the fix wraps, and its continuation lines are indented under it
    assert all(ln.startswith("    ") for ln in lines[i + 1:j])


def test_piped_output_is_not_hard_wrapped(analyses) -> None:
    a = analyses["kv-pressure.log"]
    out = _render(a, 100, soft=True)
    fix = " ".join(str(_shown(a)[0]["fix"]).split())
    assert any(fix in ln for ln in out.splitlines())  # one line: grep finds the whole fix


def test_elide_middle_keeps_both_ends() -> None:
    line = ("Engine 000: Avg prompt throughput: 606.0 tokens/s, Avg generation throughput: 2196.7 tokens/s, "
            "Running: 7 reqs, Waiting: 9 reqs, CPU KV cache usage: 100.0%")
    for w in (40, 60, 80, 100):
        s = elide_middle(line, w)
        assert len(s) <= w and s.startswith("Engine") and "…" in s
        assert s.endswith("KV cache usage: 100.0%")
    assert elide_middle(line, 200) == line
    out = elide_middle(line, 90)
    assert "Running: 7 reqs, Waiting: 9 reqs, CPU KV cache usage: 100.0%" in out
    for w in (30, 50, 80):
        lines = hanging(line * 3, w, first="  │ ", indent="  │     ", max_lines=2)
        assert len(lines) <= 2 and all(len(x) <= w for x in lines) and lines[-1].endswith("100.0%")


@pytest.mark.parametrize("width", WIDTHS)
def test_tables_keep_their_key_columns(width: int, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    assert main(["rules"]) == 0
    out = capsys.readouterr().out
    codes = [ln.split()[0] for ln in out.splitlines() if re.match(r"^\s*[A-Z]\d{3}\b", ln)]
    assert len(codes) >= 20 and "K202" in codes, out[:500]  # the code column is never squeezed out
    assert all(len(ln) <= width for ln in out.splitlines())
    hb = str(Path(__file__).parent / "data" / "journeys" / "handbook-small.log")
    assert main(["summary", hb, "--year", "2026", "--by", "hour"]) == 0
    out = capsys.readouterr().out
    digest = out[out.index("Digest"):].splitlines()
    assert re.search(r"2026-11-30 10:00", out) and all(len(ln) <= width for ln in digest)  # dates kept, fits
    assert main(["requests", str(CORPUS / "vllm-cpu" / "04-client-aborts.log"), "--year", "2026"]) == 0
    out = capsys.readouterr().out
    ids = re.findall(r"(?:chat)?cmpl-client-\d{4}-[0-9a-f]{8}", out)
    assert len(ids) == 80  # request ids are never wrapped mid-string
    assert all(len(ln) <= width for ln in out.splitlines() if "cmpl-" in ln or ln.startswith("request "))
