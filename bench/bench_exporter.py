"""The exporter under hostile and busy clients: 300 idle half-open connections and 32 concurrent scrapers.

``vllmlog watch`` follows a file that grows at ``--rate`` real vLLM 0.32 serving lines per second while
``--idle`` connections (each sent half a request line, then nothing) stay open and ``--scrapers`` clients
scrape ``/metrics`` back to back for ``--seconds``. Optional ``--hogs`` busy-loop processes put the
machine under load (load average ~ hogs + 2 on this 2-core VM), as other work did when an earlier run saw
3 of 424 scrapes take over 1 s at load 11. Reported: scrape latency (p50/p99/max, count over 1 s),
failed scrapes, and the watcher's thread count (from /proc) with the idle sockets open.

Loopback only; every loop is bounded in time.

    python bench/bench_exporter.py                                # one run, markdown row
    python bench/bench_exporter.py --hogs 0 8 --src /path/to/other/src   # compare another tree
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_watch import Writer, free_port, serving_lines  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def threads_of(pid: int) -> int:
    for ln in Path(f"/proc/{pid}/status").read_text().splitlines():
        if ln.startswith("Threads:"):
            return int(ln.split()[1])
    return 0


def start_watch(src: Path, log: Path, port: int, mode: str | None = None) -> subprocess.Popen:
    """``vllmlog watch`` from ``src`` on ``log``, serving on ``port`` (``mode``: its ``--exporter``, else the
    default); returns once it answers a scrape."""
    env = {**os.environ, "PYTHONPATH": str(src), "PYTHONUNBUFFERED": "1"}
    p = subprocess.Popen([sys.executable, "-m", "vllmlog", "watch", str(log), "--listen", f"127.0.0.1:{port}",
                          "--instance", "bench", "--no-stdout"] + (["--exporter", mode] if mode else []),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    end = time.monotonic() + 60
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
                if s.recv(12).startswith(b"HTTP/1"):
                    return p
        except OSError:
            pass
        if time.monotonic() > end or p.poll() is not None:
            raise SystemExit("watch did not start")
        time.sleep(0.1)


async def _scrape(port: int) -> tuple[float, bool]:
    t0 = time.monotonic()
    try:
        r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 10)
        w.write(b"GET /metrics HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")
        data = await asyncio.wait_for(r.read(), 10)
        w.close()
        ok = data.startswith(b"HTTP/1.") and b" 200 " in data[:16] and b"vllmlog_watch_lines_read_total" in data
    except (OSError, asyncio.TimeoutError):
        ok = False
    return time.monotonic() - t0, ok


async def _text(port: int) -> str:
    r, w = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
    w.write(b"GET /metrics HTTP/1.0\r\n\r\n")
    data = await asyncio.wait_for(r.read(), 30)
    w.close()
    return data.decode(errors="replace")


async def _load(port: int, scrapers: int, seconds: float, pid: int) -> tuple[list[float], int, int]:
    end = time.monotonic() + seconds
    lat: list[float] = []
    failed = 0
    peak_threads = 0

    async def one() -> None:
        nonlocal failed
        while time.monotonic() < end:
            dt, ok = await _scrape(port)
            lat.append(dt)
            failed += not ok

    async def watch_threads() -> None:
        nonlocal peak_threads
        while time.monotonic() < end:
            peak_threads = max(peak_threads, threads_of(pid))
            await asyncio.sleep(0.2)

    await asyncio.gather(*(one() for _ in range(scrapers)), watch_threads())
    return lat, failed, peak_threads


def _stalls(seconds: float, out: list[float]) -> None:
    """The longest oversleep of a 10 ms sleep in a separate process: how long the machine itself made a
    runnable process wait (scrape latency above it is ours)."""
    end = time.monotonic() + seconds
    worst = 0.0
    while time.monotonic() < end:
        t = time.monotonic()
        time.sleep(0.01)
        worst = max(worst, time.monotonic() - t - 0.01)
    out.append(worst)


def hostile_lines() -> list[str]:
    """What issue 15's attacker writes: a 1 MB line of the old catastrophic 'logprobs' shape, a stats line with a
    400-digit number and 1e999, hostile markup; each once per cycle of the serving lines."""
    env = "(APIServer pid=31488) {} 11-30 03:00:00 [{}] {}"
    return [env.format("WARNING", "serving_chat.py:1", "logprobs " * 116_000 + "must be"),
            env.format("INFO", "loggers.py:123", f"Engine 000: Avg prompt throughput: {'9' * 400}.0 tokens/s, Avg "
                       f"generation throughput: 1e999 tokens/s, Running: {'9' * 400} reqs, Waiting: 0 reqs, GPU KV "
                       "cache usage: 1.0%, Prefix cache hit rate: 0.0%"),
            env.format("ERROR", "serving.py:1", "[/] [link=https://evil.example]x[/link] " + "x" * 200_000)]


def run(src: Path, rate: int, idle: int, scrapers: int, seconds: float, hogs: int, hostile: bool = False) -> dict:
    lines = serving_lines()
    if hostile:
        bad = hostile_lines()
        step = len(lines) // len(bad)
        for k, b in enumerate(bad):
            lines.insert((k + 1) * step, b)
    hog_procs = [subprocess.Popen([sys.executable, "-c", f"import time\nend=time.time()+{seconds + 40}\n"
                                   "while time.time()<end: pass"]) for _ in range(hogs)]
    try:
        with tempfile.TemporaryDirectory() as d:
            log = Path(d) / "vllm.log"
            log.write_text("\n".join(lines[:200]) + "\n")
            port = free_port()
            p = start_watch(src, log, port)
            w = Writer(log, lines, rate)
            w.start()
            socks = []
            try:
                base_threads = threads_of(p.pid)
                for _ in range(idle):
                    s = socket.create_connection(("127.0.0.1", port), timeout=5)
                    s.sendall(b"GET /metr")
                    socks.append(s)
                time.sleep(0.5)
                idle_threads = threads_of(p.pid)
                load0 = os.getloadavg()[0]
                probe = subprocess.Popen([sys.executable, "-c", "import sys, time\nsys.path.insert(0, sys.argv[1])\n"
                                          "from bench_exporter import _stalls\nout = []\n_stalls(float(sys.argv[2]), out)\n"
                                          "print(out[0])", str(Path(__file__).parent), str(seconds)],
                                         stdout=subprocess.PIPE, text=True)
                lat, failed, peak = asyncio.run(_load(port, scrapers, seconds, p.pid))
                stall = float(probe.communicate(timeout=seconds + 30)[0])
                load1 = os.getloadavg()[0]
                alive = p.poll() is None
                final = {}
                for ln in asyncio.run(_text(port)).splitlines():
                    if ln.startswith(("vllmlog_watch_stale_scrapes_total", "vllmlog_watch_lines_read_total")):
                        final[ln.split("{")[0]] = float(ln.rsplit(" ", 1)[1])
            finally:
                for s in socks:
                    s.close()
                w.stop.set()
                w.join(5)
                p.terminate()
                try:
                    p.wait(30)
                except subprocess.TimeoutExpired:  # a starved machine: do not let one run stop the bench
                    p.kill()
                    p.wait(10)
    finally:
        for h in hog_procs:
            h.kill()
            h.wait()
    lat.sort()
    q = lambda f: lat[min(len(lat) - 1, int(f * len(lat)))] if lat else float("nan")  # noqa: E731
    return {"src": str(src), "rate": rate, "idle": idle, "scrapers": scrapers, "hogs": hogs, "n": len(lat),
            "failed": failed, "p50": q(0.5), "p99": q(0.99), "max": lat[-1] if lat else float("nan"),
            "over_1s": sum(x > 1.0 for x in lat), "base_threads": base_threads, "idle_threads": idle_threads,
            "peak_threads": peak, "load": (load0, load1), "alive": alive,
            "stall": stall, "stale": final.get("vllmlog_watch_stale_scrapes_total", float("nan")),
            "lines_behind": w.written - final.get("vllmlog_watch_lines_read_total", float("nan"))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", type=Path, default=ROOT / "src", help="the vllmlog source tree to run (PYTHONPATH)")
    ap.add_argument("--rate", type=int, default=5000, help="background log lines per second")
    ap.add_argument("--idle", type=int, default=300)
    ap.add_argument("--scrapers", type=int, default=32)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--hogs", type=int, nargs="+", default=[0, 8])
    ap.add_argument("--hostile", action="store_true", help="mix 1 MB adversarial lines, 400-digit numbers and markup in")
    a = ap.parse_args()
    print(f"## exporter: {a.idle} idle half-open connections + {a.scrapers} concurrent scrapers, "
          f"{a.rate:,} lines/s{' with hostile lines' if a.hostile else ''} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} CPUs "
          f"{platform.machine()}, Python {platform.python_version()}; src {a.src})\n")
    print("| CPU hogs | load avg (start → end) | scrapes | failed | p50 (ms) | p99 (ms) | max (ms) | > 1 s "
          "| worst stall of a 10 ms sleep in another process (ms) | stale (state busy > 0.5 s) | watcher threads: before idle / with idle / peak under scrapes | lines behind at end "
          "| watcher alive |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    for h in a.hogs:
        r = run(a.src, a.rate, a.idle, a.scrapers, a.seconds, h, a.hostile)
        print(f"| {h} | {r['load'][0]:.1f} → {r['load'][1]:.1f} | {r['n']:,} | {r['failed']} | {1e3 * r['p50']:.0f} "
              f"| {1e3 * r['p99']:.0f} | {1e3 * r['max']:.0f} | {r['over_1s']} "
              f"| {1e3 * r['stall']:.0f} | {r['stale']:.0f} | {r['base_threads']} / {r['idle_threads']} / {r['peak_threads']} "
              f"| {r['lines_behind']:,.0f} | {'yes' if r['alive'] else 'NO'} |",
              flush=True)


if __name__ == "__main__":
    main()
