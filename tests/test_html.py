"""The HTML report as a person sees it: opened in real headless Chromium over the DevTools protocol.

Checks: no console errors or exceptions, every chart draws an SVG, injected markup in log lines
renders as text and never runs, redaction, size on a long log, and a screenshot
(saved as ``report-*.png`` under pytest's tmp dir; path printed with ``-s``).
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from vllmlog.analyze import Analysis, analyze, red_use
from vllmlog.export.html import render_report, write_report
from vllmlog.redact import Redactor
from vllmlog.run import load

from .conftest import DATA, require_tool

INJECTION = DATA / "analyze" / "injection.log"


class Chromium:
    """A headless Chromium driven over the DevTools protocol (one browser, one tab per page)."""

    def __init__(self, exe: str, profile: Path) -> None:
        import websocket  # websocket-client (test extra)

        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--disable-extensions", "--mute-audio", f"--user-data-dir={profile}", "--remote-debugging-port=0",
             "--remote-allow-origins=*", "--window-size=1280,1000", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.05)
        port, path = port_file.read_text().split("\n")[:2]
        self.ws = websocket.create_connection(f"ws://127.0.0.1:{port}{path}", timeout=60, suppress_origin=True)
        self.ids = itertools.count(1)
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        i = next(self.ids)
        msg: dict[str, Any] = {"id": i, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        self.ws.send(json.dumps(msg))
        while True:
            m = json.loads(self.ws.recv())
            if m.get("id") == i:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                return m.get("result", {})
            self.events.append(m)

    def wait_event(self, name: str, session: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        for m in self.events:
            if m.get("method") == name and m.get("sessionId") == session:
                return m
        while time.monotonic() < deadline:
            m = json.loads(self.ws.recv())
            self.events.append(m)
            if m.get("method") == name and m.get("sessionId") == session:
                return m
        raise TimeoutError(name)

    def open(self, url: str) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for dom in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{dom}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": 1280, "height": 900, "deviceScaleFactor": 1, "mobile": False}, session=session)
        self.send("Page.navigate", {"url": url}, session=session)
        self.wait_event("Page.loadEventFired", session, timeout=60)
        return Page(self, session)

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


class Page:
    def __init__(self, browser: Chromium, session: str) -> None:
        self.b = browser
        self.session = session

    def eval(self, expr: str) -> Any:
        r = self.b.send("Runtime.evaluate", {"expression": expr, "returnByValue": True, "awaitPromise": True},
                        session=self.session)
        if "exceptionDetails" in r:
            raise RuntimeError(r["exceptionDetails"])
        return r["result"].get("value")

    def wait_for(self, expr: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            v = self.eval(expr)
            if v:
                return v
            time.sleep(0.1)
        raise TimeoutError(expr)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries of this page."""
        out = []
        for m in self.b.events:
            if m.get("sessionId") != self.session:
                continue
            p = m.get("params", {})
            if m.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console: " + " ".join(str(a.get("value", a.get("description"))) for a in p.get("args", [])))
            elif m.get("method") == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails"))[:500])
            elif m.get("method") == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
                out.append("log: " + p["entry"].get("text", ""))
        return out

    def requests(self) -> list[str]:
        """URLs this page fetched (a self-contained report fetches nothing but itself)."""
        return [m["params"]["request"]["url"] for m in self.b.events
                if m.get("sessionId") == self.session and m.get("method") == "Network.requestWillBeSent"]

    def screenshot(self, path: Path) -> None:
        h = self.eval("Math.min(document.documentElement.scrollHeight, 6000)")
        self.b.send("Emulation.setDeviceMetricsOverride",
                    {"width": 1280, "height": int(h), "deviceScaleFactor": 1, "mobile": False}, session=self.session)
        time.sleep(0.5)  # responsive charts re-layout
        data = self.b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True},
                           session=self.session)["data"]
        path.write_bytes(base64.b64decode(data))
        keep = os.environ.get("VLLMLOG_TEST_ARTIFACTS")  # CI can upload the screenshots from here
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            (Path(keep) / path.name).write_bytes(path.read_bytes())


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    exe = require_tool("chromium")
    b = Chromium(exe, tmp_path_factory.mktemp("chromium-profile"))
    yield b
    b.close()


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


def test_report_renders_all_charts_without_console_errors(browser: Chromium, handbook_analysis: Analysis,
                                                          tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    a = handbook_analysis
    size = write_report(a, str(out))
    assert size < 10_000_000
    html = out.read_text()
    assert "<script src" not in html and "<link" not in html  # self-contained: nothing fetched
    page = browser.open(out.as_uri())
    page.wait_for(CHARTS_DONE)
    plots = page.eval("Array.from(document.querySelectorAll('div.plot')).map(d => d.id)")
    # this log has every kind of data: all nine charts are real charts, none a placeholder
    assert set(plots) >= {"chart-decode", "chart-queue", "chart-requests", "chart-dist-ttft_s", "chart-dist-tpot_s",
                          "chart-dist-e2e_s", "chart-waterfall"}, plots
    assert page.eval("document.body.getAttribute('data-charts-failed')") == "0"
    assert page.eval("document.body.getAttribute('data-charts-rendered')") == str(len(plots))
    # each chart drew an SVG with at least one trace
    drawn = page.eval("Array.from(document.querySelectorAll('div.plot')).map(d => "
                      "[d.id, d.querySelectorAll('svg.main-svg').length, d.querySelectorAll('.trace, .bars .point').length])")
    for cid, svgs, traces in drawn:
        assert svgs >= 1 and traces >= 1, (cid, svgs, traces)
    # the decode chart is the handbook's batch size + KV usage line chart, interactive (zoom/hover modebar)
    names = page.eval("document.getElementById('chart-decode').data.map(t => t.name)")
    assert any("batch size" in n for n in names) and any("KV-cache" in n for n in names)
    assert page.eval("!!document.querySelector('#chart-decode .modebar')")
    # a person hovers a chart (tooltip appears) and drags to zoom (x range changes)
    box = page.eval("(() => { const r = document.querySelector('#chart-queue .nsewdrag').getBoundingClientRect();"
                    " window.scrollTo(0, 0); return [r.left, r.top + window.scrollY, r.width, r.height]; })()")
    page.eval(f"window.scrollTo(0, {box[1] - 100})")
    top_y = box[1] - page.eval("window.scrollY")
    x0, y0, w, h = box[0], top_y, box[2], box[3]
    mouse = lambda typ, x, **kw: browser.send("Input.dispatchMouseEvent", {"type": typ, "x": x, "y": y0 + h / 2, **kw},
                                              session=page.session)
    mouse("mouseMoved", x0 + w * 0.5)
    page.wait_for("document.querySelectorAll('#chart-queue .hoverlayer .hovertext, #chart-queue .hoverlayer .legend')"
                  ".length > 0", timeout=5)
    mouse("mousePressed", x0 + w * 0.3, button="left", clickCount=1)
    for f in (0.35, 0.45, 0.55, 0.6):
        mouse("mouseMoved", x0 + w * f, button="left", buttons=1)
    mouse("mouseReleased", x0 + w * 0.6, button="left", clickCount=1)
    page.wait_for("document.getElementById('chart-queue').layout.xaxis.autorange === false", timeout=5)
    assert page.eval("document.getElementById('verdict').textContent") in ("healthy", "degraded", "failing", "unknown")
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
    print(f"\nscreenshot: {shot}")


def test_injected_markup_in_log_lines_never_runs(browser: Chromium, tmp_path: Path) -> None:
    run = load([str(INJECTION)], year=2026)
    a = analyze([str(INJECTION)], run=run)
    # a finding and timeline entry carrying hostile evidence too (whatever the rules produce)
    evil = "<script>window.__pwned=6</script><img src=x onerror=\"window.__pwned=7\">"
    a.findings = (a.findings or []) + [{
        "code": "T001", "rule": "test", "severity": "error", "title": "title " + evil, "message": "msg " + evil,
        "evidence": [{"file": str(INJECTION), "line": 106, "text": evil}], "root_cause": evil, "remediation": evil}]
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
    # only our three script elements exist (data, plotly, app); the markup shows as text
    assert page.eval("document.querySelectorAll('script').length") == 3
    assert page.eval("document.querySelectorAll('img').length") == 0
    text = page.eval("document.body.innerText")
    assert "<script>window.__pwned=1</script>" in text
    assert "window.__pwned=6" in text
    assert page.errors() == []


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
    """Charts are downsampled to max_points per trace and the requests table capped (worst first), so
    the page stays small whatever the log's length (a 3-million-line log gives ~6 MB)."""
    import re

    a = handbook_analysis
    assert len(a.run.journeys) > 150 and len(a.run.series.decode) > 60
    out = tmp_path / "long.html"
    size = write_report(a, str(out), max_points=40, max_request_rows=100)
    assert size < 6_000_000, size
    html = out.read_text()
    assert html.count("<tr class='st-") == 100
    assert "Showing 100 of" in html
    data = json.loads(re.search(r'id="vllmlog-data">(.*?)</script>', html, re.S).group(1))
    for fig in data["figures"].values():
        for tr in fig["data"]:
            assert len(tr["x"]) <= 400, (tr["name"], len(tr["x"]))  # bars: ≤ 400 buckets
            if tr.get("mode") == "lines":
                assert len(tr["x"]) <= 40, (tr["name"], len(tr["x"]))


def test_report_sections_degrade_when_a_part_is_unavailable(tmp_path: Path) -> None:
    run = load([str(DATA / "corpus" / "vllm-cpu" / "06b-startup-fail-kv-cache-too-small.log")], year=2026)
    a = Analysis(run=run, red_use=red_use(run), summary=None, findings=None, timeline=None,
                 unavailable={"diagnosis": "not installed", "timeline": "not installed"})
    html = render_report(a)
    assert "Diagnosis unavailable" in html and "Timeline unavailable" in html
    assert "verdict-unknown" in html
    # charts without data say why instead of drawing empty axes
    assert "No charts over time" in html and "No request latencies" in html


def test_screenshot_of_bundled_example(browser: Chromium, tmp_path: Path) -> None:
    from vllmlog.analyze import example_path

    out = tmp_path / "kv.html"
    write_report(analyze([example_path("kv-pressure")]), str(out))
    page = browser.open(out.as_uri())
    page.wait_for(CHARTS_DONE)
    assert page.eval("document.body.getAttribute('data-charts-failed')") == "0"
    assert int(page.eval("document.body.getAttribute('data-charts-rendered')")) >= 3
    assert page.errors() == []
    shot = tmp_path / "report-kv-pressure.png"
    page.screenshot(shot)
    assert shot.stat().st_size > 30_000


def test_highlight_escapes_then_marks_once() -> None:
    from vllmlog.export.html import highlight, prose

    assert prose("use `--max-num-seqs <8>` & retry") == "use <code class='inline'>--max-num-seqs &lt;8&gt;</code> &amp; retry"

    out = highlight('ERROR <b x="1"> Error: KV cache failed & WARNING')
    assert out == ('<span class="lv lv-error">ERROR</span> &lt;b x=&quot;1&quot;&gt; <mark>Error</mark>: '
                   '<mark>KV cache</mark> <mark>failed</mark> &amp; <span class="lv lv-warning">WARNING</span>')
