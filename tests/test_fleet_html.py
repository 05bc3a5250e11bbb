"""The fleet HTML report in real headless Chromium: draws, links each replica's own report, escapes names."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllmlog.fleet import synth

from .chromium import Chromium

DATA = Path(__file__).parent / "data" / "fleet"
EVIL = "evil<img src=x onerror=window.__pwned=1>"
CHARTS_DONE = "document.body.getAttribute('data-charts-rendered') !== null"


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fleet_html")
    plan = synth.fleet_wide(str(DATA / "overload-queueing.log.gz"), str(DATA / "light-load.log.gz"), n=5, affected=3)
    synth.write_fleet(plan, str(root / "logs"))
    shutil.copy(root / "logs" / "replica-04.log", root / "logs" / f"{EVIL}.log")
    p = subprocess.run([sys.executable, "-m", "vllmlog", "fleet", str(root / "logs"), "--grid", "10", "-j", "0",
                        "--out", str(root / "out")], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    assert f"report: {root / 'out' / 'fleet-report.html'}" in p.stdout
    return root / "out" / "fleet-report.html"


def test_fleet_report_draws_and_escapes(browser: Chromium, report: Path) -> None:
    html = report.read_text(encoding="utf-8")
    assert EVIL not in html and "evil&lt;img" in html
    page = browser.open(report.as_uri())
    try:
        page.wait_for(CHARTS_DONE)
        assert page.eval("document.body.getAttribute('data-charts-rendered')") == "3"
        assert page.errors() == []
        assert page.eval("window.__pwned") is None
        assert EVIL in page.eval("document.body.textContent")
        # three heat-maps, one row per replica (6), each as wide as the fleet's grid
        assert page.eval("document.querySelectorAll('table.heat').length") == 3
        assert page.eval("document.querySelectorAll('table.heat')[0].rows.length") == 6
        assert page.eval("document.querySelectorAll('table.heat')[2].rows[0].cells.length") > 3
        assert "F1" in page.eval("document.getElementById('incidents').textContent")
        assert page.requests() == [] or all(u.startswith(("file:", "data:")) for u in page.requests())
        links = page.eval("Array.from(document.querySelectorAll('#replicas a')).map(a => a.getAttribute('href'))")
    finally:
        page.close()
    assert len(links) == 6
    for href in links:
        assert not href.startswith("/") and href.startswith("replicas/")
        assert (report.parent / href).is_file()
    # a replica's drill-down is analyze's own report of that replica
    target = next(h for h in links if "replica-00" in h)
    sub = browser.open((report.parent / target).as_uri())
    try:
        sub.wait_for(CHARTS_DONE)
        assert sub.errors() == []
        assert "replica-00" in sub.eval("document.title")
        assert int(sub.eval("document.body.getAttribute('data-charts-rendered')")) >= 2
    finally:
        sub.close()


def test_no_html(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    synth.write_fleet(synth.Plan([synth.Replica("a", str(DATA / "light-load.log.gz"))]), str(logs))
    p = subprocess.run([sys.executable, "-m", "vllmlog", "fleet", str(logs), "--no-html", "-j", "0",
                        "--out", str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(tmp_path / "o")) == ["rows"]
