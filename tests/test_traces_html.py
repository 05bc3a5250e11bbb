"""The HTML report's start-up waterfall and client-vs-server sections, opened in real headless Chromium:
traced (T1's loading spans) and logged (a GPU start-up that died capturing CUDA graphs) waterfalls, bars
drawn to scale, the phase that took the time, client − server per request equal to the numbers, escaping."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from vllmlog.analyze import analyze
from vllmlog.export.html import write_report
from vllmlog.startup import startups

from .chromium import Chromium, Page
from .conftest import DATA
from .test_traces import T1, TRACED, _log_id

GPU_FAIL = DATA / "heldout" / "01-v1-cudagraph-capture-oom.log"


def _open(browser: Chromium, a, tmp_path: Path, name: str) -> Page:  # type: ignore[no-untyped-def]
    out = tmp_path / name
    write_report(a, str(out))
    page = browser.open(out.as_uri())
    page.wait_for("document.readyState === 'complete'")
    return page


def _track_ratio(page: Page, gantt: str, label: str) -> float:
    """The width of the bar labelled ``label`` as a fraction of its track (what a reader sees)."""
    return page.eval(f"(() => {{ const r = Array.from(document.querySelectorAll('{gantt} .grow')).find(x => "
                     f"x.querySelector('.glabel').textContent === {label!r}); const t = r.querySelector('.gtrack')"
                     ".getBoundingClientRect(), s = r.querySelector('.seg').getBoundingClientRect();"
                     " return s.width / t.width; })()")


def test_traced_waterfall_and_client_vs_server(browser: Chromium, tmp_path: Path) -> None:
    a = analyze([str(T1[0])], year=2026, traces=[str(T1[1])], client=str(TRACED / "T1-client-truth.csv"))
    page = _open(browser, a, tmp_path, "t1.html")
    assert page.errors() == []
    (s,) = startups(a.run)
    w = s.waterfall
    # one bar per loading span, nested by time, coloured by phase; the section says its source
    assert page.eval("document.querySelector('#startup .startup').dataset.source") == "traced"
    assert page.eval("document.querySelectorAll('#startup-0 .grow:not(.gaxis)').length") == len(w.steps) == 13
    labels = page.eval("Array.from(document.querySelectorAll('#startup-0 .grow:not(.gaxis) .glabel')).map(x => x.textContent)")
    assert labels[0] == "Overall Loading" and "Warmup (CPU)" in labels and "Allocate KV cache" in labels
    assert "What took the time: compile / warm-up" in page.eval("document.querySelector('#startup .startup-slowest').textContent")
    warm = next(st for st in w.steps if st.name == "Warmup (CPU)")
    ratio = _track_ratio(page, "#startup-0", "Warmup (CPU)")
    # drawn to scale: the warm-up bar is its share of the axis (the axis ends at a round tick ≥ the total)
    assert 0.5 < ratio < 0.62 and ratio == pytest.approx(warm.duration_s / w.total_s, rel=0.15)
    phases = page.eval("Array.from(document.querySelectorAll('#startup table.startup-phases tbody tr'))"
                       ".map(r => [r.cells[0].textContent, r.cells[3].textContent])")
    assert dict(phases)["compile / warm-up"] == "traced" and {p for _, p in phases} == {"traced"}
    # client vs server: one row per matched request, overhead = client − server (the traced span)
    assert page.eval("!!document.querySelector('nav a[href=\"#client\"]')")
    page.eval("document.getElementById('client').scrollIntoView()")
    rows = page.eval("Array.from(document.querySelectorAll('#client-table tbody tr')).map(r => Array.from(r.cells)"
                     ".map(c => c.getAttribute('data-v') === null ? c.textContent : c.getAttribute('data-v')))")
    truth = {_log_id(r): r for r in csv.DictReader((TRACED / "T1-client-truth.csv").open())}
    js = {j.request_id: j for j in a.run.journeys}
    assert len(rows) == 60
    for rid, status, c_ttft, s_ttft, src1, o_ttft, c_e2e, s_e2e, src2, o_e2e in rows:
        j = js[rid]
        t = truth[rid]
        assert status == "success" and src1 == src2 == "traced"
        assert float(c_e2e) == float(t["latency_s"]) and float(s_e2e) == j.e2e_s
        assert float(o_e2e) == pytest.approx(float(t["latency_s"]) - j.e2e_s, abs=1e-9)
        if t["ttft_s"]:
            assert float(o_ttft) == pytest.approx(float(t["ttft_s"]) - j.ttft_s, abs=1e-9)
        else:
            assert c_ttft == "" and o_ttft == ""
    # sortable: TTFT overhead descending puts the largest first
    for _ in range(2):
        page.eval("document.querySelectorAll('#client-table thead th')[5].click()")
    top = page.eval("document.querySelector('#client-table tbody tr').cells[5].getAttribute('data-v')")
    assert float(top) == max(float(r[5]) for r in rows if r[5])
    text = page.eval("document.querySelector('#client .client-overhead').textContent")
    assert "TTFT overhead (client − server): median" in text and "over 49 requests" in text
    page.screenshot(tmp_path / "report-t1-startup.png", "#startup")


def test_logged_waterfall_of_a_failed_gpu_startup(browser: Chromium, tmp_path: Path) -> None:
    a = analyze([str(GPU_FAIL)], year=2026)
    page = _open(browser, a, tmp_path, "gpu.html")
    assert page.errors() == []
    assert page.eval("document.querySelector('#startup .startup').dataset.source") == "logged"
    assert page.eval("document.getElementById('client')") is None  # no --client, no section
    stuck = page.eval("document.querySelector('#startup .startup-stuck').textContent")
    assert "still in compile / warm-up" in stuck
    bad = page.eval("Array.from(document.querySelectorAll('#startup-0 .grow.bad .glabel')).map(x => x.textContent)")
    assert bad == ["compile / warm-up"]
    srcs = page.eval("Array.from(document.querySelectorAll('#startup table.startup-phases tbody tr'))"
                     ".map(r => r.cells[0].textContent + '|' + r.cells[3].textContent)")
    assert "weights|logged" in srcs and "compile / warm-up|logged" in srcs and "process start|estimated" in srcs
    (s,) = startups(a.run)
    axis_end = float(page.eval("Array.from(document.querySelectorAll('#startup-0 .gaxis .tick')).pop().textContent")
                     .split()[0])
    weights = next(p for p in s.phases if p.name == "weights")
    r = _track_ratio(page, "#startup-0", "weights")
    # the axis's last tick is at its right end or before it: the bar is at most its share of that tick
    assert weights.seconds / max(s.total_s, axis_end) * 0.9 < r <= weights.seconds / axis_end * 1.02


def test_startup_details_are_escaped(browser: Chromium, tmp_path: Path) -> None:
    log = tmp_path / "evil.log"
    lines = GPU_FAIL.read_text().splitlines(keepends=True)
    evil = "<img src=x onerror=\"document.title='pwned'\">"
    log.write_text("".join(x.replace("Starting to load model meta-llama/Llama-3.1-8B-Instruct",
                                      f"Starting to load model {evil}") for x in lines))
    a = analyze([str(log)], year=2026)
    assert any(evil in p.detail for p in startups(a.run)[0].phases)
    page = _open(browser, a, tmp_path, "evil.html")
    assert page.eval("document.querySelectorAll('#startup img').length") == 0
    assert page.eval("document.title") != "pwned"
    assert "<img src=x" in page.eval("document.querySelector('#startup table.startup-phases').textContent")


def test_traced_startup_stuck_is_drawn_with_the_logs_open_phase(browser: Chromium, tmp_path: Path) -> None:
    from .test_startup import test_traced_startup_stuck_after_its_last_span as build

    build(tmp_path)  # writes t.jsonl and stuck.log
    a = analyze([str(tmp_path / "stuck.log")], year=2026, traces=[str(tmp_path / "t.jsonl")])
    page = _open(browser, a, tmp_path, "stuck.html")
    assert page.errors() == []
    assert page.eval("document.querySelector('#startup .startup').dataset.source") == "traced"
    bad = page.eval("Array.from(document.querySelectorAll('#startup-0 .grow.bad .glabel')).map(x => x.textContent)")
    assert bad == ["compile / warm-up (from the log)"]
    assert "still in compile / warm-up" in page.eval("document.querySelector('#startup .startup-stuck').textContent")
    # the open phase takes most of the axis (9 min of a 9.2 min start-up)
    assert _track_ratio(page, "#startup-0", "compile / warm-up (from the log)") > 0.9
