"""Overhead of ``vllmlog watch``: CPU at a given line rate, whether it keeps up, memory, and alert latency.

Real vLLM 0.32 lines (the serving part of the corpus runs: request, stream-delta, access and stats
lines) are appended to a file at 1k / 10k / 100k lines/s while ``vllmlog watch`` follows it and
serves /metrics. We read the watcher's CPU time from /proc, its progress from its own
``vllmlog_watch_lines_read_total``, and its peak RSS.

Alert latency: the watcher follows a file holding the healthy part of a real crash log
(P1, EngineCore SIGKILLed); we append the crash lines and time until the alert JSON line appears on
the watcher's stdout — idle, and with background load.

    python bench/bench_watch.py                       # full run (~3 min), prints a markdown report
    python bench/bench_watch.py --rates 1000 --seconds 5 --latency-reps 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus"
TICK = os.sysconf("SC_CLK_TCK")


def serving_lines() -> list[str]:
    """The serving part (after start-up, before shutdown) of the real 0.32 load runs."""
    out: list[str] = []
    for name in ("01-startup-and-light-load", "02-overload-queueing", "03-kv-cache-pressure-preemption", "04-client-aborts"):
        lines = (CORPUS / "vllm-cpu" / f"{name}.log").read_text(encoding="utf-8").split("\n")
        a = next(i for i, t in enumerate(lines) if "Application startup complete" in t)
        b = next(i for i, t in enumerate(lines) if "Shutting down" in t)
        out += lines[a + 1 : b]
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_seconds(pid: int) -> float:
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK  # utime, stime


def peak_rss_mb(pid: int) -> float:
    for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
        if ln.startswith("VmHWM:"):
            return int(ln.split()[1]) / 1024
    return 0.0


def lines_read(port: int) -> int | None:
    try:
        text = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    except httpx.HTTPError:
        return None
    for ln in text.splitlines():
        if ln.startswith("vllmlog_watch_lines_read_total"):
            return int(float(ln.rsplit(" ", 1)[1]))
    return None


def start_watch(log: Path, port: int, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen(
        [sys.executable, "-m", "vllmlog", "watch", str(log), "--listen", f"127.0.0.1:{port}", "--instance", "bench", *extra],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
    )
    end = time.monotonic() + 60
    while lines_read(port) is None:
        if time.monotonic() > end or p.poll() is not None:
            raise SystemExit("watch did not start")
        time.sleep(0.05)
    return p


class Writer(threading.Thread):
    """Appends lines at ``rate`` per second (in 10 ms ticks) until stopped; ``inject`` adds lines once."""

    def __init__(self, path: Path, lines: list[str], rate: float) -> None:
        super().__init__(daemon=True)
        self.fh = open(path, "a", encoding="utf-8")  # noqa: SIM115
        self.lines, self.rate = lines, rate
        self.written = 0
        self.stop = threading.Event()
        self.injected: queue.Queue[tuple[list[str], threading.Event, list[float]]] = queue.Queue()

    def inject(self, lines: list[str]) -> float:
        """Write ``lines`` between two ticks and stop the background load (a crashed server stops
        serving); return the monotonic time they were flushed."""
        done, when = threading.Event(), []
        self.injected.put((lines, done, when))
        done.wait(10)
        return when[0]

    def run(self) -> None:
        t0 = time.monotonic()
        i = 0
        n = len(self.lines)
        while not self.stop.is_set():
            due = int((time.monotonic() - t0) * self.rate) - self.written
            if due > 0:
                chunk = [self.lines[(i + k) % n] for k in range(due)]
                i = (i + due) % n
                self.fh.write("\n".join(chunk) + "\n")
                self.written += due
            try:
                lines, done, when = self.injected.get_nowait()
                self.fh.write("".join(t + "\n" for t in lines))
                self.fh.flush()
                when.append(time.monotonic())
                self.written += len(lines)
                done.set()
                break
            except queue.Empty:
                pass
            self.fh.flush()
            time.sleep(0.01)
        self.fh.close()


def bench_rate(rate: int, seconds: float, lines: list[str]) -> dict[str, float]:
    """Write at ``rate`` for ``seconds``; CPU % over the window, and CPU µs per line until drained
    (the cost per line does not depend on other load on the machine; the % does)."""
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "server.log"
        log.touch()
        port = free_port()
        p = start_watch(log, port, "--no-stdout")
        try:
            time.sleep(1.0)  # let start-up CPU settle out of the window
            c0, t0 = cpu_seconds(p.pid), time.monotonic()
            w = Writer(log, lines, rate)
            w.start()
            time.sleep(seconds)
            c1, t1 = cpu_seconds(p.pid), time.monotonic()
            read_at_end = lines_read(port) or 0
            w.stop.set()
            w.join()
            written = w.written
            # drain: how long until everything written has been read
            d0 = time.monotonic()
            while (lines_read(port) or 0) < written and time.monotonic() - d0 < 300:
                time.sleep(0.2)
            drain = time.monotonic() - d0
            c2 = cpu_seconds(p.pid)
            time.sleep(1.0)  # idle cost after draining (polls, flush, diagnosis)
            c3 = cpu_seconds(p.pid)
            return {
                "rate": rate, "written": written, "cpu_pct": 100 * (c1 - c0) / (t1 - t0),
                "cpu_us_per_line": 1e6 * (c2 - c0) / max(1, written), "idle_cpu_pct": 100 * (c3 - c2),
                "lag_lines_at_end": written - read_at_end, "drain_s": drain,
                "achieved_lines_per_s": read_at_end / (t1 - t0), "peak_rss_mb": peak_rss_mb(p.pid),
            }
        finally:
            p.terminate()
            p.wait(10)


def bench_latency(bg_rate: int, reps: int, lines: list[str]) -> list[float]:
    crash_log = (CORPUS / "vllm-cpu-faults" / "P1-engine-dead-kill9.log").read_text(encoding="utf-8").split("\n")[:-1]
    k = next(i for i, t in enumerate(crash_log) if "engine core exited unexpectedly" in t)
    # background load: the same server's own serving lines (a mix of other runs would, rightly,
    # look like a different server still serving, and the crash would not be "the" engine dying)
    ready = next(i for i, t in enumerate(crash_log) if "Application startup complete" in t)
    lines = crash_log[ready + 1 : k]
    out: list[float] = []
    for _ in range(reps):
        with tempfile.TemporaryDirectory() as d:
            log = Path(d) / "server.log"
            log.write_text("".join(t + "\n" for t in crash_log[:k]), encoding="utf-8")
            port = free_port()
            p = start_watch(log, port)
            got: queue.Queue[float] = queue.Queue()

            def reader() -> None:
                for raw in iter(p.stdout.readline, b""):  # type: ignore[union-attr]
                    if b'"firing"' in raw:
                        got.put(time.monotonic())

            threading.Thread(target=reader, daemon=True).start()
            w = Writer(log, lines, bg_rate) if bg_rate else Writer(log, [], 0)
            try:
                while (lines_read(port) or 0) < k:
                    time.sleep(0.05)
                w.start()
                time.sleep(2.0)
                t_w = w.inject(crash_log[k:])
                out.append(got.get(timeout=30) - t_w)
            finally:
                w.stop.set()
                w.join()
                p.terminate()
                p.wait(10)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="1000,10000,100000")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--latency-reps", type=int, default=5)
    ap.add_argument("--latency-load", default="0,1000,10000")
    ap.add_argument("--json", help="also write the raw numbers here")
    a = ap.parse_args()
    lines = serving_lines()
    load0 = os.getloadavg()[0]
    rows = [bench_rate(int(r), a.seconds if int(r) < 50_000 else a.seconds / 2, lines) for r in a.rates.split(",")]
    if a.json:
        Path(a.json).write_text(json.dumps({"rates": rows}, indent=2))
    lat = {int(r): bench_latency(int(r), a.latency_reps, lines) for r in a.latency_load.split(",") if r} if a.latency_reps else {}
    load1 = os.getloadavg()[0]
    cpu = platform.processor() or platform.machine()
    print(f"## vllmlog watch overhead ({time.strftime('%Y-%m-%d')}, {os.cpu_count()} CPUs {cpu}, Python {platform.python_version()})\n")
    print(f"{len(lines)} distinct real vLLM 0.32 serving lines, cycled; {a.seconds:.0f} s per rate; "
          f"load average {load0:.1f} → {load1:.1f} (other work shared the machine).\n")
    print("| target lines/s | CPU % of one core (measured) | CPU µs per line | CPU % needed (µs/line × rate) | lines/s read | lag at end (lines) | drain after stop (s) | idle CPU % | peak RSS (MB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        need = r["cpu_us_per_line"] * r["rate"] / 1e4
        print(f"| {r['rate']:,} | {r['cpu_pct']:.1f} | {r['cpu_us_per_line']:.1f} | {need:.0f} | {r['achieved_lines_per_s']:,.0f} | "
              f"{r['lag_lines_at_end']:,} | {r['drain_s']:.1f} | {r['idle_cpu_pct']:.1f} | {r['peak_rss_mb']:.0f} |")
    print("\n| background load (lines/s) | alert latency, line written → alert on stdout (ms): each run | median |")
    print("|---:|---|---:|")
    for r, v in lat.items():
        v2 = sorted(v)
        if not v2:
            continue
        print(f"| {r:,} | {', '.join(f'{x * 1000:.0f}' for x in v)} | {v2[len(v2) // 2] * 1000:.0f} |")
    if a.json:
        Path(a.json).write_text(json.dumps({"rates": rows, "latency_s": lat, "loadavg": [load0, load1]}, indent=2))


if __name__ == "__main__":
    main()
