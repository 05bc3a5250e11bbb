"""The HTML report as a person sees it: opened in real headless Chromium over the DevTools protocol.

Checks: no console errors or exceptions, every chart draws on its canvas, the time charts share one
x axis (zoom one, all follow), gaps in the data are gaps on the canvas, the KV axis is 0–100 %,
degenerate histograms draw a bar, injected markup in log lines renders as text and never runs
(and the page's CSP would stop an inline script that got in), redaction, size (no numpy: .ci/smoke_plain_install.py runs every command in a venv without extras), and
screenshots at 1400 px (saved as ``report-*.png`` under pytest's tmp dir, or under
``$VLLMLOG_TEST_ARTIFACTS``; path printed with ``-s``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from vllmlog.analyze import Analysis, analyze, red_use
from vllmlog.export.html import esc, render_report, write_report
from vllmlog.redact import Redactor
from vllmlog.run import load

from .chromium import Chromium, Page
from .conftest import DATA

INJECTION = DATA / "analyze" / "injection.log"


@pytest.fixture(scope="module")
def handbook_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A simulated handbook-format KV-pressure run: decode steps, stats, journeys with timings."""
    from vllmlog.simulate import build_config, simulate

    p = tmp_path_factory.mktemp("sim") / "kv-pressure-handbook.log"
    cfg = build_config("kv-pressure", fmt="handbook", seed=3, duration_s=90)
    with open(p, "w") as fp:
        simulate(cfg, fp)
    return p


@pytest.fixture(scope="module")
def handbook_analysis(handbook_log: Path) -> Analysis:
    return analyze([str(handbook_log)], year=2026)


CHARTS_DONE = "document.body.getAttribute('data-charts-rendered') !== null"
TIME_CHARTS = ("chart-kv", "chart-queue", "chart-throughput", "chart-requests")
# how many pixels of a chart's canvas (plot area) are close to a colour, in one column or the whole plot
PIXELS_LIKE = """((id, rgb, col) => {
  const u = vllmlogPlots.all.find(p => p.root.closest('.plot').id === id);
  const b = u.bbox, ctx = u.ctx;
  const x0 = col === undefined ? b.left : Math.round(u.valToPos(col, 'x', true));
  const img = ctx.getImageData(x0, b.top, col === undefined ? b.width : 1, b.height).data;
  let n = 0;
  for (let i = 0; i < img.length; i += 4) {
    if (Math.abs(img[i] - rgb[0]) < 40 && Math.abs(img[i + 1] - rgb[1]) < 40 && Math.abs(img[i + 2] - rgb[2]) < 40
        && img[i + 3] > 100) n++;
  }
  return n;
})"""
DRAG = """((sel, f0, f1) => {
  const o = document.querySelector(sel), r = o.getBoundingClientRect(), y = r.top + r.height / 2;
  const ev = (t, f, tgt) => tgt.dispatchEvent(new MouseEvent(t, {bubbles: true, cancelable: true, clientX: r.left + r.width * f,
      clientY: y, button: 0, buttons: t === 'mouseup' ? 0 : 1, movementX: 5, movementY: 0, view: window}));
  ev('mousedown', f0, o);
  for (const f of [f0 + 0.05, (f0 + f1) / 2, f1]) ev('mousemove', f, o);
  ev('mouseup', f1, document);
})(%r, %s, %s)"""
GREEN = [0x2C, 0xA0, 0x2C]  # "running" (charts.C)


def _plot(page: Page, cid: str, expr: str) -> Any:
    return page.eval(f"(u => {expr})(vllmlogPlots.all.find(p => p.root.closest('.plot').id === {json.dumps(cid)}))")


def test_report_renders_all_charts_without_console_errors(browser: Chromium, handbook_analysis: Analysis,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    a = handbook_analysis
    size = write_report(a, str(out))
    assert size < 1_500_000, size
    html = out.read_text()
    assert "<script src" not in html and "<link" not in html  # self-contained: nothing fetched
    page = browser.open(out.as_uri())
    page.wait_for(CHARTS_DONE)
    plots = page.eval("Array.from(document.querySelectorAll('div.plot')).map(d => d.id)")
    # this log has every kind of data: every chart is a real chart, none a placeholder
    assert set(plots) == set(TIME_CHARTS) | {"chart-dist-ttft_s", "chart-dist-tpot_s", "chart-dist-e2e_s"}, plots
    assert page.eval("document.body.getAttribute('data-charts-failed')") == "0"
    assert page.eval("document.body.getAttribute('data-charts-rendered')") == str(len(plots))
    # each chart drew on its canvas: many pixels that are not the white background
    for cid in plots:
        inked = _plot(page, cid, "(() => { const b = u.bbox; const d = u.ctx.getImageData(b.left, b.top, b.width, "
                                 "b.height).data; let n = 0; for (let i = 0; i < d.length; i += 4) "
                                 "if (d[i + 3] > 0 && (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200)) n++; return n; })()")
        assert inked > 300, (cid, inked)
    # the KV chart is 0–100 % whatever the data, and its lines are labelled with the diagnosis thresholds
    assert _plot(page, "chart-kv", "[u.scales.pct.min, u.scales.pct.max]") == [0, 100]
    labels = [t["label"] for t in json.loads(_data(html))["charts"]["chart-kv"]["thresholds"]]
    assert labels == ["caution 80 %", "critical 95 %"]
    # one time axis: every time chart has the same x range and the same plot left edge and width
    ranges = [_plot(page, c, "[u.scales.x.min, u.scales.x.max, u.bbox.left, u.bbox.width]") for c in TIME_CHARTS]
    assert all(r == ranges[0] for r in ranges), ranges
    # a person hovers a chart (the legend shows values) and drags to zoom: every time chart follows
    box = page.eval("(() => { const r = document.querySelector('#chart-queue .u-over').getBoundingClientRect();"
                    " return [r.left, r.top + window.scrollY, r.width, r.height]; })()")
    page.eval(f"window.scrollTo(0, {box[1] - 100})")
    top_y = box[1] - page.eval("window.scrollY")
    x0, y0, w, h = box[0], top_y, box[2], box[3]
    mouse = lambda typ, x, **kw: browser.send("Input.dispatchMouseEvent", {"type": typ, "x": x, "y": y0 + h / 2, **kw},
                                              session=page.session)
    mouse("mouseMoved", x0 + w * 0.5)
    page.wait_for("Array.from(document.querySelectorAll('#chart-queue .u-legend .u-value')).some(v => /\\d/.test(v.textContent))",
                  timeout=5)
    # the drag goes through the page's own mouse events: uPlot ignores moves without movementX while a
    # button is down (a Chrome quirk it works around), and the DevTools protocol's moves have none
    page.eval(DRAG % ("#chart-queue .u-over", 0.3, 0.6))
    page.wait_for(f"vllmlogPlots.time[0].scales.x.max - vllmlogPlots.time[0].scales.x.min < {0.5 * (ranges[0][1] - ranges[0][0])}",
                  timeout=5)
    zoomed = [_plot(page, c, "[u.scales.x.min, u.scales.x.max]") for c in TIME_CHARTS]
    assert all(z == zoomed[0] for z in zoomed) and zoomed[0] != ranges[0][:2], zoomed
    mouse("mouseMoved", x0 + w * 0.5)
    browser.send("Input.dispatchMouseEvent", {"type": "mousePressed", "x": x0 + w * 0.5, "y": y0 + h / 2, "button": "left",
                                              "clickCount": 2}, session=page.session)
    browser.send("Input.dispatchMouseEvent", {"type": "mouseReleased", "x": x0 + w * 0.5, "y": y0 + h / 2, "button": "left",
                                              "clickCount": 2}, session=page.session)
    page.wait_for(f"vllmlogPlots.time[2].scales.x.min === {ranges[0][0]}", timeout=5)  # double-click: all reset
    assert page.eval("document.getElementById('verdict').textContent").split(" ")[0].lower() in (
        "healthy", "degraded", "failing", "down", "incomplete", "unknown")
    # incident windows: listed with numbers, and drawn on every time chart (the strip above the plot)
    wins = json.loads(_data(html))["windows"]
    expected = [i for i in a.incidents if i.get("onset")] if a.incidents is not None else \
        [f for f in a.findings if f.get("first_seen")]
    assert len(wins) == len(expected) >= 1
    assert page.eval("document.querySelectorAll('.windows li').length") == len(wins)
    # the Gantt of the slowest requests has a legend and bars
    assert page.eval("document.querySelectorAll('#chart-waterfall .glegend .lg').length") >= 3
    assert page.eval("document.querySelectorAll('#chart-waterfall .seg').length") >= 30
    # requests table sorts and filters
    n_rows = page.eval("document.querySelectorAll('#req-table tbody tr').length")
    assert n_rows > 10
    page.eval("document.querySelectorAll('#req-table thead th')[6].click()")  # e2e ascending
    page.eval("document.querySelectorAll('#req-table thead th')[6].click()")  # e2e descending
    top = page.eval("Array.from(document.querySelectorAll('#req-table tbody tr')).slice(0, 5)"
                    ".map(r => parseFloat(r.children[6].getAttribute('data-v')))")
    assert top == sorted(top, reverse=True)
    first_id = page.eval("document.querySelector('#req-table tbody tr').children[0].textContent")
    page.eval(f"var f = document.getElementById('req-filter'); f.value = {json.dumps(first_id)};"
              "f.dispatchEvent(new Event('input'))")
    visible = page.eval("Array.from(document.querySelectorAll('#req-table tbody tr')).filter(r => r.style.display !== 'none').length")
    assert 1 <= visible < n_rows
    errors = page.errors()
    assert errors == [], errors
    assert [u for u in page.requests() if not u.startswith(("file:", "data:", "blob:"))] == []
    shot = tmp_path / "report-handbook.png"
    page.screenshot(shot)
    assert shot.stat().st_size > 50_000
    page.screenshot(tmp_path / "report-handbook-charts.png", "#charts")
    print(f"\nscreenshot: {shot}")


def _data(html: str) -> str:
    import re

    return re.search(r'id="vllmlog-data">(.*?)</script>', html, re.S).group(1)


def _trimmed(src: Path, dst: Path, start: str, end: str) -> Path:
    """``src`` without the lines stamped from ``start`` to ``end`` (HH:MM:SS, inclusive): a trimmed span."""
    import re

    keep = []
    for line in src.read_text().splitlines(keepends=True):
        m = re.search(r" (\d\d:\d\d:\d\d) ", line)
        if m and start <= m.group(1) <= end:
            continue
        keep.append(line)
    dst.write_text("".join(keep))
    return dst


def test_a_trimmed_span_is_a_gap_in_every_line(browser: Chromium, tmp_path: Path) -> None:
    """Metamorphic: cut 70 s of a real V1 log's lines; the stats lines stop drawing there and only there."""
    from vllmlog.export.charts import build_charts

    src = DATA / "corpus" / "incidents" / "49-v1-max-num-seqs-cap-waiting-grows.log"
    cut = _trimmed(src, tmp_path / "trimmed.log", "09:32:21", "09:33:11")
    whole, trimmed = analyze([str(src)], year=2026), analyze([str(cut)], year=2026)
    specs = {a: {f["id"]: f for f in build_charts(x)["over_time"] if isinstance(f, dict)} for a, x in
             (("whole", whole), ("trimmed", trimmed))}
    for cid in ("chart-kv", "chart-queue", "chart-throughput"):
        for s in specs["whole"][cid]["series"]:
            assert None not in s["y"], (cid, s["label"])
        for s in specs["trimmed"][cid]["series"]:
            gaps = [x for x, y in zip(s["x"], s["y"]) if y is None]
            assert len(gaps) == 1, (cid, s["label"], gaps)
    out = tmp_path / "trimmed.html"
    write_report(trimmed, str(out))
    page = browser.open(out.as_uri())
    page.wait_for(CHARTS_DONE)
    from vllmlog.export.charts import wall
    from datetime import datetime

    t_gap = wall(datetime(2026, 4, 10, 9, 32, 46))
    t_line = wall(datetime(2026, 4, 10, 9, 31, 46))
    # the running line (green) crosses the column before the cut and not the one inside it
    assert page.eval(f"{PIXELS_LIKE}('chart-queue', {GREEN}, {t_line})") > 0
    assert page.eval(f"{PIXELS_LIKE}('chart-queue', {GREEN}, {t_gap})") == 0
    assert page.errors() == []


def test_kv_axis_is_0_to_100_even_when_usage_is_tiny(browser: Chromium, tmp_path: Path) -> None:
    src = DATA / "corpus" / "vllm-cpu" / "02-overload-queueing.log"  # KV usage ≤ 0.3 %
    out = tmp_path / "overload.html"
    write_report(analyze([str(src)], year=2026), str(out))
    page = browser.open(out.as_uri())
    page.wait_for(CHARTS_DONE)
    assert _plot(page, "chart-kv", "[u.scales.pct.min, u.scales.pct.max]") == [0, 100]
    ticks = page.eval("Array.from(document.querySelectorAll('#chart-kv .u-axis')).map(a => a.textContent)")
    assert page.errors() == [], ticks
    page.screenshot(tmp_path / "report-overload-charts.png", "#charts")


def test_degenerate_histograms_draw_one_bar(browser: Chromium, handbook_analysis: Analysis, tmp_path: Path) -> None:
    """All values equal, and a single value: one visible bar centred on the value, its marker on it."""
    import dataclasses

    run = handbook_analysis.run
    ok = [j for j in run.journeys if j.status == "success" and j.ttft_s is not None]
    same = [dataclasses.replace(j, ttft_s=0.25, tpot_s=0.02, e2e_s=3.0) for j in ok[:40]]
    one = [dataclasses.replace(ok[0], ttft_s=0.25)]
    for name, js in (("equal", same), ("single", one)):
        r = dataclasses.replace(run, journeys=js)
        a = Analysis(run=r, red_use=red_use(r), summary=None, findings=[], timeline=[])
        out = tmp_path / f"hist-{name}.html"
        write_report(a, str(out))
        spec = json.loads(_data(out.read_text()))["charts"]["chart-dist-ttft_s"]
        assert spec["counts"] == [len(js)] and spec["edges"][0] < 0.25 < spec["edges"][1], spec
        page = browser.open(out.as_uri())
        page.wait_for(CHARTS_DONE)
        blue = [0x1F, 0x77, 0xB4]
        assert page.eval(f"{PIXELS_LIKE}('chart-dist-ttft_s', {blue}, 0.255)") > 20, name  # beside the p50 line
        assert page.eval(f"{PIXELS_LIKE}('chart-dist-ttft_s', {blue})") > 200, name
        assert page.errors() == []
        page.screenshot(tmp_path / f"report-hist-{name}.png", "#latency")


def test_timeline_collapses_repeats(handbook_analysis: Analysis) -> None:
    a = handbook_analysis
    html = render_report(a)
    section = html[html.index("<section id='timeline'>"):html.index("<section id='charts'>")]
    rows = section.count("<tr class='sev-")
    assert rows < len(a.timeline)
    assert "×20" in section  # twenty block-allocation failures: one row
    assert section.count("block allocation ") == 1


def test_injected_markup_in_log_lines_never_runs(browser: Chromium, tmp_path: Path) -> None:
    run = load([str(INJECTION)], year=2026)
    a = analyze([str(INJECTION)], run=run)
    # a finding and timeline entry carrying hostile evidence too (whatever the rules produce)
    evil = "<script>window.__pwned=6</script><img src=x onerror=\"window.__pwned=7\">"
    a.findings = (a.findings or []) + [{
        "code": "T001", "rule": "test", "severity": "error", "title": "title " + evil, "message": "msg " + evil,
        "evidence": [{"file": str(INJECTION), "line": 106, "text": evil}], "root_cause": evil, "remediation": evil,
        "first_seen": "2026-11-30T03:11:16"}]
    a.timeline = (a.timeline or []) + [{"ts": "2026-11-30T03:11:16", "severity": "error", "kind": "x", "title": evil}]
    out = tmp_path / "evil.html"
    # strongest case: prompts shown, so the <script> inside the prompt reaches the page
    write_report(a, str(out), redactor=Redactor(show_prompts=True))
    page = browser.open(out.as_uri())
    page.wait_for(CHARTS_DONE)
    assert page.eval("typeof window.__pwned") == "undefined"
    page.eval("document.querySelectorAll('details').forEach(d => d.open = true)")
    time.sleep(0.3)  # give any onerror handler a chance
    assert page.eval("typeof window.__pwned") == "undefined"
    # only our three script elements exist (data, uPlot, app); the markup shows as text
    assert page.eval("document.querySelectorAll('script').length") == 3
    assert page.eval("document.querySelectorAll('img').length") == 0
    # text, not elements (textContent: the tables' boxes are rendered only when scrolled near)
    text = page.eval("document.body.textContent")
    assert "<script>window.__pwned=1</script>" in text
    assert "window.__pwned=6" in text
    assert page.errors() == []


def test_csp_blocks_an_inline_script_that_got_in(browser: Chromium, tmp_path: Path) -> None:
    """Defence in depth: only the report's own two scripts (by hash) may run, whatever markup is added."""
    html = render_report(analyze([str(INJECTION)], year=2026))
    html = html.replace("<main>", "<main><script>window.__csp_broken = 1</script>"
                        "<img src='data:,x' onerror='window.__csp_broken = 2'>", 1)
    out = tmp_path / "csp.html"
    out.write_text(html)
    page = browser.open(out.as_uri())
    page.wait_for(CHARTS_DONE)
    time.sleep(0.3)
    assert page.eval("typeof window.__csp_broken") == "undefined"
    assert page.eval("document.body.getAttribute('data-charts-failed')") == "0"  # our scripts did run


def test_prompts_redacted_by_default_and_ips_masked(tmp_path: Path) -> None:
    a = analyze([str(INJECTION)], year=2026)
    html = render_report(a)
    assert "SECRET-PROMPT-TEXT" not in html and "SECRET-OUTPUT-TEXT" not in html
    assert "10.11.12.13" in html
    masked = render_report(a, redactor=Redactor(mask_ips=True))
    assert "10.11.12.13" not in masked and "127.0.0.1" not in masked
    shown = render_report(a, redactor=Redactor(show_prompts=True))
    assert "SECRET-PROMPT-TEXT" in shown or "SECRET-OUTPUT-TEXT" in shown or "cmpl-evil-0" in shown
    # raw markup never appears unescaped anywhere in the page
    for h in (html, shown):
        assert "<script>window.__pwned" not in h and "<img src=x" not in h


def test_report_stays_small_on_a_long_log(handbook_analysis: Analysis, tmp_path: Path) -> None:
    """Series are thinned to about max_points each and the requests table capped (worst first)."""
    a = handbook_analysis
    assert len(a.run.journeys) > 150 and len(a.run.series.decode) > 60
    out = tmp_path / "long.html"
    size = write_report(a, str(out), max_points=40, max_request_rows=100)
    assert size < 1_500_000, size
    html = out.read_text()
    assert html.count("<tr class='st-") == 100
    assert "Showing 100 of" in html
    data = json.loads(_data(html))
    for spec in data["charts"].values():
        for s in spec.get("series", []):
            if s.get("bars"):
                assert len(s["x"]) <= 400, (s["label"], len(s["x"]))  # bars: ≤ 400 buckets
            else:
                assert len(s["x"]) <= 40 + 2 * s["y"].count(None) + 4, (s["label"], len(s["x"]))


def test_small_report_size_and_vendored_library(tmp_path: Path) -> None:
    """A small log's report is far below 1.5 MB; the chart library in it is the npm file, byte for byte."""
    import hashlib
    from importlib import resources

    from vllmlog.analyze import example_path

    html = render_report(analyze([example_path("kv-pressure")]))
    assert len(html.encode()) < 1_500_000
    assets = resources.files("vllmlog.export") / "assets"
    rec = json.loads((assets / "vendor.json").read_text())["uplot"]
    assert rec["npm"] == "uplot" and rec["license"] == "MIT" and rec["version"]
    for name, f in rec["files"].items():
        assert hashlib.sha256((assets / name).read_bytes()).hexdigest() == f["sha256"], name
    lib = (assets / "uPlot.iife.min.js").read_text()
    assert lib in html and f"(v{rec['version']})" in lib
    assert "Permission is hereby granted" in html  # the MIT notice travels with the inlined copy


def test_report_sections_degrade_when_a_part_is_unavailable(tmp_path: Path) -> None:
    run = load([str(DATA / "corpus" / "vllm-cpu" / "06b-startup-fail-kv-cache-too-small.log")], year=2026)
    a = Analysis(run=run, red_use=red_use(run), summary=None, findings=None, timeline=None,
                 unavailable={"diagnosis": "not installed", "timeline": "not installed"})
    html = render_report(a)
    assert "Diagnosis unavailable" in html and "Timeline unavailable" in html
    assert "verdict-unknown" in html
    # charts without data say why instead of drawing empty axes
    assert "No charts over time" in html and "No request latencies" in html


@pytest.mark.parametrize("name", ["kv-pressure", "client-aborts", "healthy", "startup-kv-too-small"])
def test_screenshot_of_bundled_example(browser: Chromium, tmp_path: Path, name: str) -> None:
    from vllmlog.analyze import example_path

    out = tmp_path / f"{name}.html"
    write_report(analyze([example_path(name)]), str(out))
    page = browser.open(out.as_uri())
    page.wait_for(CHARTS_DONE)
    assert page.eval("document.body.getAttribute('data-charts-failed')") == "0"
    if name != "startup-kv-too-small":
        assert int(page.eval("document.body.getAttribute('data-charts-rendered')")) >= 3
    assert page.errors() == []
    shot = tmp_path / f"report-{name}.png"
    page.screenshot(shot)
    assert shot.stat().st_size > 30_000


def test_highlight_escapes_then_marks_once() -> None:
    from vllmlog.export.html import highlight, prose

    assert prose("use `--max-num-seqs <8>` & retry") == "use <code class='inline'>--max-num-seqs &lt;8&gt;</code> &amp; retry"

    out = highlight('ERROR <b x="1"> Error: KV cache failed & WARNING')
    assert out == ('<span class="lv lv-error">ERROR</span> &lt;b x=&quot;1&quot;&gt; <mark>Error</mark>: '
                   '<mark>KV cache</mark> <mark>failed</mark> &amp; <span class="lv lv-warning">WARNING</span>')


def test_incomplete_input_says_so_in_the_report(tmp_path: Path) -> None:
    """Every input test_coverage.py cannot read in full: the report's verdict is not healthy and the
    header lists what was not read."""
    from .test_coverage import INCOMPLETE_INPUTS

    for name, (make, _gap) in sorted(INCOMPLETE_INPUTS.items()):
        d = tmp_path / name
        d.mkdir()
        a = analyze([str(make(d))], year=2026)
        html = render_report(a)
        assert "class='verdict verdict-healthy'" not in html and "id='coverage'" in html, name
        for reason in a.coverage.reasons:
            assert esc(reason) in html, (name, reason)
    assert "id='coverage'" not in render_report(analyze([str(DATA / "corpus" / "vllm-cpu" / "01-startup-and-light-load.log")],
                                                         year=2026))
