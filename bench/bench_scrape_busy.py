"""Scrape latency of ``vllmlog watch`` while its parser is busy, as a ratio to the idle watcher in the same run.

For each ``--exporter`` mode (``thread``: /metrics served in the parsing process; ``process``: by a child process,
``live.scrapeproc``) a watcher follows a log; one client scrapes ``/metrics`` back to back for ``--seconds`` while
nothing is written (the idle baseline), then again while the log grows at ``--rate`` real vLLM 0.32 serving lines
per second mixed with issue 15's hostile lines (1 MB lines, 400-digit numbers, markup) and ``--hogs`` busy-loop
processes starve the CPU. Reported per mode: p50 / p99 / max scrape latency idle and busy, busy ÷ idle, scrapes over
1 s, late answers (the child served the previous snapshot), how far the watcher fell behind, and the machine's own
stall (the longest oversleep of a 10 ms sleep in another process meanwhile: latency up to it is the scheduler's).

    python bench/bench_scrape_busy.py [--seconds 15] [--rate 5000] [--hogs 0 8] [--modes thread process]

Loopback only; every loop is bounded in time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_exporter import _scrape, _text, hostile_lines, start_watch  # noqa: E402
from bench_watch import Writer, free_port, serving_lines  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


async def _series(port: int, seconds: float) -> tuple[list[float], int]:
    end = time.monotonic() + seconds
    lat: list[float] = []
    failed = 0
    while time.monotonic() < end:
        dt, ok = await _scrape(port)
        lat.append(dt)
        failed += not ok
    return lat, failed


def _q(lat: list[float], f: float) -> float:
    s = sorted(lat)
    return s[min(len(s) - 1, int(f * len(s)))] if s else float("nan")


def _final(port: int) -> dict[str, float]:
    out: dict[str, float] = {}
    for ln in asyncio.run(_text(port)).splitlines():
        if ln.startswith(("vllmlog_watch_exporter_late_scrapes_total", "vllmlog_watch_lines_read_total",
                          "vllmlog_watch_stale_scrapes_total")):
            out[ln.split("{")[0]] = float(ln.rsplit(" ", 1)[1])
    return out


def run(src: Path, mode: str, rate: int, seconds: float, hogs: int) -> dict:
    lines = serving_lines()
    bad = hostile_lines()
    step = len(lines) // len(bad)
    for k, b in enumerate(bad):
        lines.insert((k + 1) * step, b)
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "vllm.log"
        log.write_text("\n".join(lines[:200]) + "\n")
        port = free_port()
        p = start_watch(src, log, port, mode)
        hog_procs: list[subprocess.Popen] = []
        w = None
        try:
            time.sleep(1.0)
            idle, idle_failed = asyncio.run(_series(port, seconds))
            f0 = _final(port)
            hog_procs = [subprocess.Popen([sys.executable, "-c", f"import time\nend=time.time()+{seconds + 60}\n"
                                           "while time.time()<end: pass"]) for _ in range(hogs)]
            w = Writer(log, lines, rate)
            w.start()
            load0 = os.getloadavg()[0]
            probe = subprocess.Popen([sys.executable, "-c", "import sys, time\nsys.path.insert(0, sys.argv[1])\n"
                                      "from bench_exporter import _stalls\nout = []\n_stalls(float(sys.argv[2]), out)\n"
                                      "print(out[0])", str(Path(__file__).parent), str(seconds)],
                                     stdout=subprocess.PIPE, text=True)
            busy, busy_failed = asyncio.run(_series(port, seconds))
            stall = float(probe.communicate(timeout=seconds + 60)[0])
            load1 = os.getloadavg()[0]
            f1 = _final(port)
        finally:
            if w is not None:
                w.stop.set()
                w.join(5)
            for h in hog_procs:
                h.kill()
                h.wait()
            p.terminate()
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
    late = "vllmlog_watch_exporter_late_scrapes_total"
    return {"mode": mode, "hogs": hogs, "load": (load0, load1), "stall": stall,
            "idle": (len(idle), idle_failed, _q(idle, 0.5), _q(idle, 0.99), max(idle)),
            "busy": (len(busy), busy_failed, _q(busy, 0.5), _q(busy, 0.99), max(busy)),
            "over_1s": sum(x > 1.0 for x in busy),
            "late": (f1.get(late, 0.0) - f0.get(late, 0.0)) if late in f1 else None,
            "behind": (w.written if w else 0) - (f1.get("vllmlog_watch_lines_read_total", 0.0) - 200)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src")
    ap.add_argument("--rate", type=int, default=5000)
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--hogs", type=int, nargs="+", default=[0, 8])
    ap.add_argument("--modes", nargs="+", default=["thread", "process"])
    a = ap.parse_args()
    print(f"`python bench/bench_scrape_busy.py --seconds {a.seconds:g} --rate {a.rate} --hogs {' '.join(map(str, a.hogs))}` "
          f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs {platform.machine()}, "
          f"Python {platform.python_version()})\n")
    print("| exporter | hogs | load (busy start → end) | idle p50 / p99 / max (ms) | busy p50 / p99 / max (ms) "
          "| busy ÷ idle p50 / p99 / max | busy scrapes | > 1 s | late | failed | lines behind | machine stall (ms) |")
    print("|---|---:|---|---|---|---|---:|---:|---:|---:|---:|---:|")
    for h in a.hogs:
        for mode in a.modes:
            r = run(a.src, mode, a.rate, a.seconds, h)
            i, b = r["idle"], r["busy"]
            ms = lambda t: f"{t[2] * 1e3:.1f} / {t[3] * 1e3:.1f} / {t[4] * 1e3:.1f}"  # noqa: E731
            ratio = f"{b[2] / i[2]:.1f} / {b[3] / i[3]:.1f} / {b[4] / i[4]:.1f}"
            late = "–" if r["late"] is None else f"{r['late']:.0f}"
            print(f"| {mode} | {h} | {r['load'][0]:.1f} → {r['load'][1]:.1f} | {ms(i)} | {ms(b)} | {ratio} | {b[0]:,} "
                  f"| {r['over_1s']} | {late} | {i[1] + b[1]} | {r['behind']:,.0f} | {r['stall'] * 1e3:.0f} |", flush=True)


if __name__ == "__main__":
    main()
