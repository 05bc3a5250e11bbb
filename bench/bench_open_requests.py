"""Peak memory of ``analyze`` on logs of never-finished requests (issue 15: 3 M took 2.45 GB).

    PYTHONPATH=src python bench/bench_open_requests.py [--counts 10000,200000,600000,3000000] [--stage analyze]
                                                       [--ref-src OTHER_CHECKOUT/src]

Each log holds N requests that the engine accepted and that never end (``Added request …``, vLLM V1 at INFO
without ``--enable-log-outputs``: no finish line for completions). Each stage runs in a fresh child process;
the figure is the child's peak RSS (``ru_maxrss``) and its ratio to the smallest count of the same run (the
reference: a bounded analysis stays near 1× once N passes the in-flight cap, ``JourneyBuilder.max_open``).
``--ref-src`` runs the same logs with another checkout's ``src`` (e.g. the commit before a change) and prints
each figure beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

STAGES = {
    "load": "from vllmlog.run import load\nr = load(P)\nn = len(r.journeys); ev = r.journeys_evicted",
    "analyze": "from vllmlog.analyze import analyze\na = analyze(P)\nn = len(a.run.journeys); ev = a.run.journeys_evicted",
    "summary": "from vllmlog.summary import summarize_paths\nd = summarize_paths(P)\nn = 0; ev = d['requests'].get('evicted')",
}

CHILD = """
import json, resource, sys, time
P = sys.argv[1]
w0 = time.perf_counter()
{code}
r = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{"kept": n, "evicted": ev, "wall": time.perf_counter() - w0, "rss_mb": r.ru_maxrss / 1024}}))
"""


def write_log(path: str, n: int) -> None:
    """``n`` never-finished requests, one ``Added request`` line each (1-second timestamps)."""
    with open(path, "w") as f:
        for i in range(n):
            s = i // 50
            f.write(f"(APIServer pid=1) INFO 11-30 {s // 3600 % 24:02d}:{s // 60 % 60:02d}:{s % 60:02d} "
                    f"[async_llm.py:578] Added request cmpl-{i:08d}-a56e9542.\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--counts", default="10000,200000,600000,3000000")
    ap.add_argument("--stage", default="analyze", choices=sorted(STAGES))
    ap.add_argument("--ref-src", help="another checkout's src directory, run on the same logs")
    a = ap.parse_args()
    counts = [int(c) for c in a.counts.split(",")]
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    trees = [("this", here)] + ([("ref", os.path.abspath(a.ref_src))] if a.ref_src else [])
    first: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            p = os.path.join(tmp, f"open-{n}.log")
            write_log(p, n)
            for name, src in trees:
                env = dict(os.environ)
                env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
                out = subprocess.run([sys.executable, "-c", CHILD.format(code=STAGES[a.stage]), p], env=env,
                                     capture_output=True, text=True, check=True).stdout
                r = json.loads(out.strip().splitlines()[-1])
                ref = first.setdefault(name, r["rss_mb"])
                print(f"{name:4s} {a.stage:8s} {n:>10,} never-finished requests: peak RSS {r['rss_mb']:7.1f} MB "
                      f"({r['rss_mb'] / ref:4.2f}x its {counts[0]:,} reference), kept {r['kept']:,}, "
                      f"evicted {r['evicted']:,}, {r['wall']:.1f} s wall", flush=True)
            os.unlink(p)


if __name__ == "__main__":
    main()
