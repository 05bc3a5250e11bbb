"""Issue 15, judged attack 1: a fuzz campaign of >= 1 M lines through ``parse``, ``analyze`` and ``watch``.

The fuzzed file is ``bench_fuzz_watch.write_fuzz``'s (corpus lines with 309–5,000-digit numbers, 1e999, nan, invalid
UTF-8, NUL/CR, Rich markup, cut lines, random Unicode, a 1 MB line of a pattern's own literals every ``--big-every``
lines). Judged, and printed as PASS/FAIL:

* crashes: a traceback on stderr, an exit code other than 0 or 3 (3 = INCOMPLETE, the fuzzed input is), a dead watcher;
* lines lost: ``parse --stats``' "N lines accounted for", ``analyze --json``'s ``coverage.inputs[].lines`` and
  ``watch``'s ``vllmlog_watch_lines_read_total`` / ``sum(vllmlog_log_lines_total)`` against the file's physical lines;
* exporter stall: ``/metrics`` scraped every 0.25 s while ``watch`` follows the growing file (max latency, > 1 s count).

Runs the installed ``vllmlog`` (``python -m vllmlog`` of this interpreter: run it with the venv you installed into).

    python bench/attack_fuzz.py [--lines 1000000] [--big-every 50000] [--exporter process thread]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_fuzz_watch as bfw  # noqa: E402


def run(*args: str) -> tuple[int, str, str, float]:
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "vllmlog", *args], capture_output=True, timeout=7200)
    return (r.returncode, r.stdout.decode("utf-8", "replace"), r.stderr.decode("utf-8", "replace"),
            time.monotonic() - t0)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=15)
    ap.add_argument("--big-every", type=int, default=50_000)
    ap.add_argument("--rate", type=int, default=20_000)
    ap.add_argument("--limit", type=float, default=1800.0)
    ap.add_argument("--exporter", nargs="+", default=["process"])
    ap.add_argument("--skip-batch", action="store_true", help="watch only")
    a = ap.parse_args()
    bad = 0
    with tempfile.TemporaryDirectory() as d:
        fuzz = Path(d) / "fuzz.log"
        n = bfw.write_fuzz(fuzz, a.lines, a.seed, a.big_every)
        data = fuzz.read_bytes()
        physical = data.count(b"\n") + (0 if data.endswith(b"\n") else 1)
        huge = len(re.findall(rb"\d{309,}", data))
        mb = sum(1 for ln in data.split(b"\n") if len(ln) >= 1_000_000)
        del data
        print(f"## attack 1: fuzz, {physical:,} physical lines ({fuzz.stat().st_size / 1e6:.0f} MB), {huge:,} numbers of "
              f"309+ digits, {mb} lines of 1 MB, seed {a.seed} ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
              f"{os.cpu_count()} CPUs)\n", flush=True)
        if not a.skip_batch:
            rc, out, err, dt = run("parse", str(fuzz), "--stats")
            m = re.search(r"\(([\d,]+) lines accounted for", out)
            got = int(m[1].replace(",", "")) if m else None
            ok = rc in (0, 3) and "Traceback" not in err and got == physical
            bad += not ok
            print(f"{verdict(ok)} parse --stats: exit {rc}, lines accounted {got} of {physical}, {dt:.0f} s "
                  f"{err.strip()[-300:] if 'Traceback' in err else ''}", flush=True)
            rc, out, err, dt = run("analyze", str(fuzz), "--json", "--no-html")
            try:
                got = sum(i["lines"] for i in json.loads(out)["coverage"]["inputs"])
            except (ValueError, KeyError, TypeError):
                got = None
            ok = rc in (0, 3) and "Traceback" not in err and got == physical
            bad += not ok
            print(f"{verdict(ok)} analyze --json: exit {rc}, lines {got} of {physical}, {dt:.0f} s "
                  f"{err.strip()[-300:] if 'Traceback' in err else ''}", flush=True)
        bfw._cli = lambda *args, timeout=3600: run(*args)[::2]  # the installed package, not src/ by path
        for mode in a.exporter:
            r = bfw.watch_run(fuzz, physical, a.rate, a.limit, mode)
            ok = (r["alive"] and not r["traceback"] and r["lines_read"] == physical and r["lines_counted"] == physical
                  and not r["stage_errors"] and r["over_1s"] == 0)
            bad += not ok
            print(f"{verdict(ok)} watch --exporter {mode}: alive {r['alive']}, traceback {r['traceback']}, lines read "
                  f"{r['lines_read']} / counted {r['lines_counted']} of {physical}, stage errors {r['stage_errors']}, "
                  f"{r['scrapes']} scrapes every 0.25 s, max {r['max_s'] * 1e3:.0f} ms, {r['over_1s']} over 1 s, "
                  f"{r['elapsed_s']:.0f} s (load {os.getloadavg()[0]:.1f})", flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
