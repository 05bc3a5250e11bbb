"""One computation, every renderer: each corpus log and bundled example gives the same request totals,
rate, outcome ratios, latency percentiles, preemptions and Waiting > 0 time in ``analyze`` (library,
``--json``, terminal), ``summary`` (streaming, ``--json``, terminal), ``diagnose --json``, ``requests
--json`` and ``watch``'s live state; and the latency numbers follow ``vllm bench serve`` (successful
requests only, measured values never mixed with estimated ones)."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from vllmlog.analyze import analyze, example_names, example_path
from vllmlog.cli import main
from vllmlog.live.state import LiveState
from vllmlog.live.follow import Segment
from vllmlog.numbers import LATENCIES, MEASURED
from vllmlog.render import render_analysis
from vllmlog.summary import summarize_paths

from .conftest import DATA, corpus_logs

LOGS = corpus_logs() + [Path(example_path(n)) for n in example_names()]
TRACED = sorted((DATA / "corpus" / "vllm-cpu-traced").glob("*.log"))
CASES = [(p, None) for p in LOGS] + [(p, p.with_name(p.stem + "-traces.otlp.jsonl")) for p in TRACED]


def key_numbers(doc: dict) -> dict:
    """The numbers every command must agree on, from a ``numbers``/``summary`` document."""
    r = doc["requests"]
    out = {
        "total": r["total"], "by_status": r["by_status"], "finished": r["finished"],
        "rate": r["rate_per_s"], "error_rate": r["error_rate"], "abort_rate": r["abort_rate"],
        "preemptions": doc["preemptions"]["total"], "silent": doc["preemptions"]["silent"]["intervals"],
        "waiting_s": doc["waiting"]["time_above_0_s"], "http": doc["http"]["total"],
    }
    for m in LATENCIES:
        d = doc["latency"][m]
        out[m] = (d["count"], d["basis"], d["p50"], d["p99"], d["max"])
    return out


def _cli(argv: list[str], capsys) -> tuple[int, str]:
    code = main(argv)
    out, _err = capsys.readouterr()
    return code, out


def _watch(log: Path) -> LiveState:
    st = LiveState(str(log), year=2026)
    lines = log.read_text(encoding="utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for i in range(0, len(lines), 500):
        st.feed([Segment(0, list(enumerate(lines[i:i + 500], i + 1)))])
    st.end_of_input()
    return st


@pytest.mark.parametrize("log, traces", CASES, ids=lambda p: p.name + "+traces" if p and "otlp" in p.name else (p.name if p else ""))
def test_every_command_shows_the_same_numbers(log: Path, traces: Path | None, capsys) -> None:
    tr = [str(traces)] if traces else None
    targs = ["--traces", str(traces)] if traces else []
    a = analyze([str(log)], year=2026, traces=tr)
    want = key_numbers(a.numbers)
    if traces:
        assert want["ttft_s"][1] == "measured" and a.numbers["latency"]["ttft_s"]["sources"].get("traced")
    # the analysis' own summary and the streaming summary (journeys folded as they complete, none kept)
    assert key_numbers(a.summary) == want
    assert key_numbers(summarize_paths(str(log), year=2026, traces=tr)) == want
    # the compact RED/USE view is a selection of the same numbers
    ru = a.red_use
    assert ru["requests"]["total"] == want["total"] and ru["requests"]["rate_per_s"] == want["rate"]
    assert ru["use"]["preemptions"] == want["preemptions"]
    assert ru["use"]["waiting"].get("time_above_0_s", 0) == (want["waiting_s"] or 0)
    for m in ("queue_s", "ttft_s", "tpot_s", "e2e_s"):
        d = ru["durations"][m]
        assert (d["count"], d["basis"], d["p50"], d["p99"], d["max"]) == want[m]
    # CLI JSON documents
    code, out = _cli(["summary", str(log), "--year", "2026", "--json", *targs], capsys)
    assert code in (0, 3) and key_numbers(json.loads(out)) == want
    code, out = _cli(["analyze", str(log), "--year", "2026", "--json", "--no-html", "--fail-on", "never", *targs], capsys)
    doc = json.loads(out)
    assert key_numbers(doc["summary"]) == want and key_numbers(doc["numbers"]) == want
    code, out = _cli(["diagnose", str(log), "--year", "2026", "--json", "--fail-on", "never", *targs], capsys)
    assert key_numbers(json.loads(out)["numbers"]) == want
    # the requests table: one row per request, the same outcomes, and the latency numbers recomputed
    # from its rows with numpy (successful requests, measured values only unless all are estimated)
    code, out = _cli(["requests", str(log), "--year", "2026", "--json", *targs], capsys)
    rows = json.loads(out)
    assert len(rows) == want["total"]
    assert {k: v for k, v in Counter(r["status"] for r in rows).items()} == {k: v for k, v in want["by_status"].items() if v}
    for m in LATENCIES:
        ok = [r for r in rows if r["status"] == "success" and r[m] is not None
              and not (m == "tpot_s" and r["output_tokens"] is not None and r["output_tokens"] <= 1)]
        meas = [r[m] for r in ok if r["sources"].get(m, "derived") in MEASURED]
        vals = meas or [r[m] for r in ok]
        n, basis, p50, p99, mx = want[m]
        assert n == len(vals), m
        if vals:
            assert basis == ("measured" if meas else "estimated")
            assert (p50, p99, mx) == (float(np.percentile(vals, 50)), float(np.percentile(vals, 99)), max(vals)), m
    if traces:
        return  # watch takes traces live (OTLP receiver), not from a file
    # watch: the same pipeline fed in pieces
    st = _watch(log)
    got = Counter()
    for (_model, status), c in st.requests.items():
        got[status] += c
    assert {k: v for k, v in got.items() if v} == {k: v for k, v in want["by_status"].items() if v}
    if want["preemptions"] is not None:
        assert sum(st.preemptions.values()) == want["preemptions"]


def _text(render, width: int = 100) -> str:
    con = Console(width=width, record=True, force_terminal=False, color_system=None)
    render(con)
    return con.export_text()


def _rate_str(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}/s"


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_terminal_outputs_print_the_same_numbers(log: Path, capsys) -> None:
    a = analyze([str(log)], year=2026)
    n = a.numbers
    term = _text(lambda con: render_analysis(a, con))
    code, summ = _cli(["summary", str(log), "--year", "2026"], capsys)
    total = n["requests"]["total"]
    if total:
        rate = _rate_str(n["requests"]["rate_per_s"])
        for out in (term, summ):
            assert (f"{total:,} requests" if total != 1 else "1 request") in out
            if n["requests"]["rate_per_s"] is not None:
                assert rate in out, (rate, out)
    pre = n["preemptions"]
    if pre["total"] is None:
        for out in (term, summ):
            assert "preemptions: not logged" in out.lower()
            assert not re.search(r"preemptions:? 0\b", out, re.I)
    if pre["silent"]["inferred"]:
        for out in (term, summ):
            assert "silent" in out.lower()


# ----------------------------------------------------------------------------- vllm bench serve conventions
HANDBOOK = [DATA / "journeys" / "handbook-small.log", Path(__file__).parent / "golden" / "01_handbook_journey" / "input.log",
            DATA / "heldout" / "17-handbook-timeouts.log", DATA / "heldout" / "18-handbook-slow-decode.log"]
_FIN = re.compile(r"Request (\S+) finished\. Status: SUCCESS\. Total tokens: (\d+), Total latency: ([\d.]+)s, "
                  r"TTFT: ([\d.]+)s, TPOT: ([\d.]+)s")


@pytest.mark.parametrize("log", HANDBOOK, ids=lambda p: p.parent.name + "/" + p.name)
def test_handbook_percentiles_are_numpy_over_successful_logged_values(log: Path) -> None:
    """TTFT/TPOT/e2e percentiles = numpy over the successful requests' logged values (the log's own
    finish lines), whatever the aborted, cancelled and unfinished requests' estimated times are."""
    text = log.read_text()
    prompt = {m.group(1): int(m.group(2)) for m in re.finditer(r"Prefill started for (\S+)\. Input tokens: (\d+)", text)}
    ttft, e2e, tpot = [], [], []
    for m in _FIN.finditer(text):
        e2e.append(float(m.group(3)))
        ttft.append(float(m.group(4)))
        out_tokens = int(m.group(2)) - prompt.get(m.group(1), 0)
        if out_tokens > 1:
            tpot.append(float(m.group(5)))
    d = analyze([str(log)], year=2026).numbers["latency"]
    for name, vals in (("ttft_s", ttft), ("e2e_s", e2e), ("tpot_s", tpot)):
        assert d[name]["count"] == len(vals), name
        assert d[name]["basis"] == "measured" and set(d[name]["sources"]) == {"logged"}
        for p in (50, 90, 95, 99):
            assert d[name][f"p{p}"] == float(np.percentile(vals, p)), (name, p)
        assert d[name]["mean"] == pytest.approx(float(np.mean(vals)), rel=1e-12)


def test_estimated_values_are_never_mixed_in(tmp_path: Path) -> None:
    """Three aborted requests with estimated arrival → first step times (12 s, 0 s, 5 s at 1-second
    resolution) beside successful requests with logged TTFTs: the TTFT p99 is the logged one's, and the
    aborted requests' times form their own time-to-abort distribution."""
    lines = []
    t = 0
    for i, ttft in enumerate((0.41, 0.52, 0.97, 0.33)):
        lines += [f"INFO 11-30 10:00:{t:02d} scheduler.py:456] Added request ok_{i} to waiting queue. Queue size: 1",
                  f"INFO 11-30 10:00:{t:02d} model_runner.py:312] Decode step 1 for ok_{i}. Batch size: 1, KV cache usage: 5%",
                  f"INFO 11-30 10:00:{t + 1:02d} scheduler.py:612] Request ok_{i} finished. Status: SUCCESS. Total tokens: 30, "
                  f"Total latency: 1.500s, TTFT: {ttft:.3f}s, TPOT: 0.0400s"]
        t += 2
    for i, wait in enumerate((12, 0, 5)):
        lines += [f"INFO 11-30 10:01:{t:02d} scheduler.py:456] Added request ab_{i} to waiting queue. Queue size: 1",
                  f"INFO 11-30 10:01:{t + wait:02d} model_runner.py:312] Decode step 1 for ab_{i}. Batch size: 1, KV cache usage: 5%",
                  f"ERROR 11-30 10:01:{t + wait + 1:02d} scheduler.py:620] Request ab_{i} finished. Status: ERROR. Reason: Client disconnected."]
        t += 14
    p = tmp_path / "mixed.log"
    p.write_text("\n".join(lines) + "\n")
    n = analyze([str(p)], year=2026).numbers
    ttft = n["latency"]["ttft_s"]
    assert ttft["count"] == 4 and ttft["basis"] == "measured"
    assert ttft["p99"] == float(np.percentile([0.41, 0.52, 0.97, 0.33], 99)) < 1
    assert ttft["excluded"]["not_successful"] == 3
    assert n["requests"]["aborted"] == 3 and n["requests"]["abort_rate"] == pytest.approx(3 / 7)
    tta = n["time_to_abort_s"]
    assert tta["count"] == 3 and tta["basis"] == "estimated" and tta["resolution_s"] == 1.0
    assert n["slo"]["ttft"] == {"met": 4, "total": 4, "attainment": 1.0, "basis": "measured"}


def test_all_estimated_block_says_so_and_resolution_is_stated() -> None:
    """01: chat requests' TTFT only from 1-second timestamps → an estimated block, shown as ``< 1 s``."""
    from .conftest import CORPUS

    a = analyze([str(CORPUS / "vllm-cpu" / "01-startup-and-light-load.log")], year=2026)
    ttft = a.numbers["latency"]["ttft_s"]
    assert ttft["basis"] == "estimated" and ttft["resolution_s"] == 1.0 and ttft["count"] == 17
    out = _text(lambda con: render_analysis(a, con))
    assert "< 1 s" in out and "0.0ms" not in out and "0ms" not in out
    assert "estimated" in out


def test_rate_is_arrivals_over_the_arrival_window() -> None:
    """240 requests arriving over 26 s of 1-second timestamps (kv-pressure) → 240 / 27 s, not 240 / 64 s
    (the log's length, which includes start-up) — the client's own send rate was 240 / 25.9 s."""
    n = analyze([example_path("kv-pressure")]).numbers
    r = n["requests"]["rate"]
    assert r["arrivals"] == 240 and r["window_s"] == 27.0
    assert n["requests"]["rate_per_s"] == pytest.approx(240 / 27)
    assert math.isclose(n["throughput"]["requests_per_s"], n["requests"]["rate_per_s"])
