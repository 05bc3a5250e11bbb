#!/usr/bin/env python3
"""Lines/s of `vllmlog summary` (streaming journeys + series + summary) beside `vllmlog parse --stats`.

    python bench/bench_summary.py [LOG] [--lines 1000000] [--seed 1]

Without LOG a mixed handbook/V0/V1 log of ``--lines`` lines is generated with bench/make_log.py.
Runs the commands as subprocesses (the real CLI path) and reports wall time, lines/s and peak RSS
(``ru_maxrss`` of finished children: each row shows the largest peak so far).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _run(argv: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (kB) of one child process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
    dt = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime)
    return dt, cpu, r1.ru_maxrss


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("log", nargs="?")
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    tmp = None
    log = a.log
    if log is None:
        sys.path.insert(0, str(HERE))
        from make_log import generate  # type: ignore[import-not-found]

        tmp = tempfile.NamedTemporaryFile(suffix=".log", delete=False)
        generate(tmp, a.lines, a.seed)
        tmp.close()
        log = tmp.name
    lines = sum(1 for _ in open(log, "rb"))
    exe = [sys.executable, "-m", "vllmlog"]
    rows = []
    for name, argv in (
        ("parse --stats", exe + ["parse", log, "--stats", "--year", "2026"]),
        ("parse --jsonl", exe + ["parse", log, "--jsonl", "--year", "2026", "-o", os.devnull]),
        ("summary --json", exe + ["summary", log, "--json", "--year", "2026", "-o", os.devnull]),
    ):
        dt, cpu, rss = _run(argv)
        rows.append((name, dt, cpu, rss))
    print(f"{lines:,} lines, {os.path.getsize(log) / 1e6:.0f} MB")
    print(f"{'command':<16} {'wall s':>8} {'lines/s':>10} {'CPU s':>8} {'lines/CPU-s':>12} {'peak RSS':>10}")
    for name, dt, cpu, rss in rows:
        print(f"{name:<16} {dt:8.1f} {lines / dt:10,.0f} {cpu:8.1f} {lines / cpu:12,.0f} {rss / 1024:8.0f} MB")
    if tmp is not None:
        os.unlink(tmp.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
