"""CPU cost of the analysis pipeline (events → journeys/series/counters) beside parsing alone.

    PYTHONPATH=src python bench/bench_pipeline.py LOG [--what parse,load,summary,analyze]

Each stage runs in a fresh child process; CPU seconds (user+sys, ``resource.getrusage``) are the
figure to compare on a shared machine, wall seconds are printed for reference, peak RSS is the
child's ``ru_maxrss``. ``pipeline`` = load − parse: what ``Pipeline.feed``/``finish`` add.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

STAGES = {
    "parse": "from vllmlog.reader import iter_batches\nfor _ in iter_batches(P): pass",
    "load": "from vllmlog.run import load\nload(P)",
    "summary": "from vllmlog.summary import summarize_paths\nsummarize_paths(P)",
    "analyze": "from vllmlog.analyze import analyze\nanalyze(P)",
}

CHILD = """
import json, resource, sys, time
P = sys.argv[1:]
r0 = resource.getrusage(resource.RUSAGE_SELF); w0 = time.perf_counter()
{code}
r1 = resource.getrusage(resource.RUSAGE_SELF); w1 = time.perf_counter()
print(json.dumps({{"cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime), "wall": w1 - w0,
                  "rss_mb": r1.ru_maxrss / 1024}}))
"""


def lines_of(paths: list[str]) -> int:
    n = 0
    for p in paths:
        with open(p, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                n += chunk.count(b"\n")
    return n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="+")
    ap.add_argument("--what", default="parse,load,summary")
    ap.add_argument("--repeat", type=int, default=1, help="runs per stage; the lowest CPU time is kept")
    a = ap.parse_args()
    n = lines_of(a.logs)
    res: dict[str, dict[str, float]] = {}
    for stage in a.what.split(","):
        best = None
        for _ in range(a.repeat):
            out = subprocess.run([sys.executable, "-c", CHILD.format(code=STAGES[stage]), *a.logs],
                                 check=True, capture_output=True, text=True, env=os.environ).stdout
            r = json.loads(out.strip().splitlines()[-1])
            if best is None or r["cpu"] < best["cpu"]:
                best = r
        res[stage] = best  # type: ignore[assignment]
        print(f"{stage:8s} {n:>10,} lines  CPU {best['cpu']:7.2f} s  {n / best['cpu']:>9,.0f} lines/CPU-s"
              f"  wall {best['wall']:7.2f} s  peak RSS {best['rss_mb']:.0f} MB", flush=True)
    if "parse" in res and "load" in res:
        d = res["load"]["cpu"] - res["parse"]["cpu"]
        print(f"pipeline (load − parse): {d:.2f} CPU s = {d / n * 1e6:.2f} µs/line")


if __name__ == "__main__":
    main()
