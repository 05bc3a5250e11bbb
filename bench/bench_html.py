#!/usr/bin/env python3
"""How fast the HTML report of a big log opens in Chromium (not part of the unit tests).

    python bench/bench_html.py [--lines 5000000] [--repeat 5] [--dir /tmp/vllmlog-bench] [--out bench/html-results.md]

Writes the benchmark log once (``bench/make_log.py``, kept in --dir as ``mixed-N.log``, the file
``bench/run.py`` uses), runs ``vllmlog analyze -o report.html`` on it (timed, for the record), then opens
the report ``--repeat`` times in Debian's headless Chromium (the flags of tests/chromium.py, a fresh
profile) and reads, from the page itself:

* **charts drawn**: milliseconds from navigation start to the end of the report's script (every chart
  drawn, tables wired) — ``data-ready-ms``, ``performance.now()`` at that moment;
* **load event**: ``loadEventEnd`` − ``navigationStart``.

Reference in the same run: the same report with its three ``<script>`` elements removed (the same
HTML, tables and text, nothing drawn) — so the ratio says what the charts and scripts cost on top of
showing the page at all. The median of the repeats is reported with the spread; the load average is
recorded next to it (the machine is shared). Results go to --out as Markdown.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from make_log import generate  # noqa: E402
from tests.chromium import Chromium  # noqa: E402

READY = "document.body.getAttribute('data-charts-rendered') !== null"


def open_times(b: Chromium, path: Path, repeat: int, scripted: bool) -> list[tuple[float, float]]:
    """(charts drawn ms, load event ms) per repeat; a page without scripts has only the load event."""
    out = []
    for _ in range(repeat):
        page = b.open(path.resolve().as_uri())  # returns after the load event
        if scripted:
            page.wait_for(READY, timeout=120)
            ready = float(page.eval("document.body.getAttribute('data-ready-ms')"))
            assert page.eval("document.body.getAttribute('data-charts-failed')") == "0"
        else:
            ready = float("nan")
        load = float(page.eval("performance.timing.loadEventEnd - performance.timing.navigationStart"))
        out.append((ready, load))
        page.close()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=5_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/vllmlog-bench")
    ap.add_argument("--out", default=str(HERE / "html-results.md"))
    a = ap.parse_args()
    exe = shutil.which("chromium")
    if exe is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    Path(a.dir).mkdir(parents=True, exist_ok=True)
    log = Path(a.dir) / f"mixed-{a.lines}.log"
    if not log.exists():
        with open(log, "wb") as f:
            generate(f, a.lines)
    report = Path(a.dir) / f"report-{a.lines}.html"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "vllmlog", "analyze", "--year", "2026", "--fail-on", "never", "-o",
                    str(report), str(log)], check=True, stdout=subprocess.DEVNULL)
    analyze_s = time.monotonic() - t0
    html = report.read_text(encoding="utf-8")
    static = Path(a.dir) / f"report-{a.lines}-noscript.html"
    static.write_text(re.sub(r"<script\b[^>]*>.*?</script>", "", html, flags=re.S), encoding="utf-8")
    load_before = os.getloadavg()[0]
    profile = Path(tempfile.mkdtemp(prefix="vllmlog-bench-chromium-"))
    b = Chromium(exe, profile)
    try:
        open_times(b, report, 1, True)  # warm-up: the first page of a fresh browser pays its start-up
        rep = open_times(b, report, a.repeat, True)
        ref = open_times(b, static, a.repeat, False)
    finally:
        b.close()
        shutil.rmtree(profile, ignore_errors=True)
    load_after = os.getloadavg()[0]
    ready = [r for r, _ in rep]
    loads = [x for _, x in rep]
    ref_loads = [x for _, x in ref]
    med = statistics.median
    lines = sum(1 for _ in open(log, "rb"))
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout.strip()
    rows = [
        ("report: charts drawn (navigation → end of the report's script)", ready),
        ("report: load event", loads),
        ("reference: the same page without its scripts, load event", ref_loads),
    ]
    md = [
        f"# HTML report: opening a big log's report in Chromium ({dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC)",
        "",
        f"`python bench/bench_html.py --lines {a.lines} --repeat {a.repeat}` on {platform.node() or 'this machine'} "
        f"({os.cpu_count()} cores, Python {platform.python_version()}, {version}); load average "
        f"{load_before:.2f} before, {load_after:.2f} after.",
        "",
        f"Log: `bench/make_log.py`, {lines:,} lines, {log.stat().st_size / 1e6:.0f} MB. "
        f"`vllmlog analyze -o report.html`: {analyze_s:.1f} s wall (whole process). "
        f"Report: {report.stat().st_size / 1e6:.2f} MB "
        f"(no-script reference: {static.stat().st_size / 1e6:.2f} MB).",
        "",
        "| what | median | min | max |",
        "|---|---:|---:|---:|",
    ]
    for label, xs in rows:
        md.append(f"| {label} | {med(xs):,.0f} ms | {min(xs):,.0f} ms | {max(xs):,.0f} ms |")
    md += ["", f"Ratio, charts drawn / reference load event (medians): **{med(ready) / med(ref_loads):.2f}×**. "
           f"Target: the report opens (charts drawn) in under 3 s: **{'met' if med(ready) < 3000 else 'NOT met'}** "
           f"({med(ready) / 1000:.2f} s).", ""]
    Path(a.out).write_text("\n".join(md))
    print("\n".join(md))
    return 0


if __name__ == "__main__":
    sys.exit(main())
