"""CI smoke run of a plain install: the main commands on every corpus log, in a venv built with
``pip install .`` and NO extras — so a runtime import of a test-only package (numpy, duckdb, …) fails CI.

Run by ``.ci/run`` with the fresh venv's python: ``VENV/bin/python .ci/smoke_plain_install.py``.
Every command must exit with one of its documented codes (0; 1 findings; 3 input not read in full)
and never print a Python traceback.
"""

from __future__ import annotations

import os
import subprocess
from concurrent.futures import ThreadPoolExecutor
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"
BIN = Path(sys.executable).parent / "vllmlog"
TEST_ONLY = ("numpy", "duckdb", "pyarrow", "pytest", "hypothesis", "websocket", "pythonjsonlogger", "opentelemetry.sdk")


def main() -> int:
    for mod in TEST_ONLY:  # the smoke run proves nothing if the venv has the test extras
        try:
            __import__(mod)
        except ImportError:
            continue
        print(f"smoke: {mod} is installed in this venv; build it with a plain `pip install .`", file=sys.stderr)
        return 2
    logs = sorted(str(p) for p in (DATA / "corpus").glob("*/*.log"))
    examples = sorted(str(p) for p in (ROOT / "src" / "vllmlog" / "examples").glob("*.log"))
    traced = DATA / "corpus" / "vllm-cpu-traced" / "T1-traced-light.log"
    proms = sorted(str(p) for p in (DATA / "metrics").glob("P2-metrics-*.prom"))[:3]
    failures: list[str] = []
    runs = 0
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)

        def run(args: list[str], ok: tuple[int, ...] = (0,)) -> None:
            nonlocal runs
            runs += 1
            r = subprocess.run([str(BIN), *args], capture_output=True, cwd=tmp, timeout=600)
            err = r.stderr.decode(errors="replace")
            if r.returncode not in ok or "Traceback (most recent call last)" in err:
                failures.append(f"vllmlog {' '.join(args)} → exit {r.returncode}\n{err[-1500:]}")

        per_log = []
        for i, log in enumerate(logs + examples):
            per_log += [(["analyze", log, "--year", "2026", "-o", str(out / f"r{i}.html")], (0, 3)),
                        (["diagnose", log, "--year", "2026"], (0, 1, 3)),
                        (["summary", log, "--year", "2026", "--by", "hour"], (0, 3)),
                        (["requests", log, "--year", "2026"], (0,)),
                        (["timeline", log, "--year", "2026"], (0,)),
                        (["capacity", log, "--year", "2026", "--target-rate", "10"], (0, 3))]
        with ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:  # subprocesses: threads suffice
            list(pool.map(lambda a: run(*a), per_log))
        everything = logs + examples
        run(["requests", *everything, "--year", "2026", "-o", str(out / "j.parquet")])
        run(["requests", *everything, "--year", "2026", "--csv", "-o", str(out / "j.csv")])
        run(["series", *everything, "--year", "2026", "-o", str(out / "s.parquet")])
        run(["parse", *everything, "--year", "2026", "-o", str(out / "e.jsonl")])
        run(["parse", *everything, "--year", "2026", "--stats"])
        run(["export", *everything, "--year", "2026", "--to", "loki", "-o", str(out / "loki.json")])
        run(["export", *everything, "--year", "2026", "-o", str(out / "events.ndjson")])
        run(["analyze", str(traced), "--traces", str(traced.with_name("T1-traced-light-traces.otlp.jsonl")),
             "--year", "2026", "-o", str(out / "t.html")], (0, 3))
        run(["scrape", "--file", *proms, "--fail-on", "critical"], (0, 1))
        run(["alerts", "--vllm-version", "0.10", "-o", str(out / "alerts.yml")])
        run(["alerts", "--from-log", logs[0], "--format", "k8s"])
        run(["dashboard", "--vllm-version", "0.32", "-o", str(out / "dash.json")])
        run(["simulate", "--scenario", "kv-pressure", "--format", "handbook", "--duration", "1m", "-o", str(out / "sim.log")])
        run(["analyze", str(out / "sim.log"), "--year", "2026", "-o", str(out / "sim.html")], (0, 3))
        # fleet: every corpus log as a replica (a directory walk), then a glob, on the local process pool
        run(["fleet", str(DATA / "corpus"), "--year", "2026", "-j", "2", "--out", str(out / "fleet")], (0, 3))
        run(["fleet", str(DATA / "fleet" / "*.log.gz"), "--json", "-j", "0", "--out", str(out / "fleet2")], (0, 3))
        run(["capacity", *everything, "--year", "2026", "--json", "--slo", "ttft_p95=1s,e2e_p95=30s"], (0, 3))
        run(["rules"])
        run(["kinds"])
        run(["--version"])
    took = time.monotonic() - t0
    print(f"smoke (plain install, no extras): {runs} commands on {len(logs) + len(examples)} logs in {took:.0f} s, "
          f"{len(failures)} failed")
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
